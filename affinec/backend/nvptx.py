"""LLVM's NVPTX target as the emitter drives it: the triple, PTX ISA 8.0 (`+ptx80`:
new enough for sm_90, old enough for CUDA 13.0's driver and ptxas), the target
machine of each architecture (`FAST_CODEGEN` passed to LLVM once), the
architectures and instructions a module may ask for (`checked_arch`,
`check_features`), compiling LLVM IR text to PTX (`llvm_ir_to_ptx`, optimized at
`-O3` by default) and checking the `.version` it got (`check_ptx_version`).
"""

from __future__ import annotations

import os
import re
from functools import cache

import llvmlite.binding as llvm_binding
from xdsl.dialects.builtin import ModuleOp

from affinec.backend.emitter_errors import EmitterError
from affinec.dialects import nvvm
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH, chip

TRIPLE = "nvptx64-nvidia-cuda"
PTX_FEATURES = "+ptx80"
"""PTX ISA 8.0: new enough for sm_90, old enough for CUDA 13.0's driver and ptxas."""
MAX_PTX_MAJOR = 8

FAST_CODEGEN = "AFFINEC_FAST_CODEGEN"
"""The environment variable that, set to 1 before the first compilation of a process,
makes NVPTX's code generation skip straight-line strength reduction: on the unrolled
tensor-core kernels that pass takes 0.17-0.25 s of a 0.3 s code generation (its cost
grows with the unrolled loop body), and without it the PTX differs (1-7 % more SASS
instructions, ptxas 13.0). Off by default: what it costs the kernels is for a GPU run
to measure (`scripts/gpu_session.sh codegen`)."""


def check_features(module: ModuleOp, arch: str) -> None:
    """Refuse an instruction `arch` lacks, at its op, before LLVM sees it (LLVM
    stops the whole process on an intrinsic its target cannot select)."""
    target = chip(arch)
    for op in module.walk():
        feature = nvvm.required_feature(op)
        if feature is not None and not target.has(feature):
            needs = "sm_90a" if feature == "wgmma" else "sm_90 or sm_90a"
            raise EmitterError(
                op, f"needs {needs} ({feature}); the PTX is being made for {arch}"
            )


def checked_arch(arch: str) -> str:
    """`arch`, one of the architectures affinec knows; an `EmitterError` if not."""
    if arch not in ARCHS:
        raise EmitterError(
            None,
            f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHS)})",
        )
    return arch


@cache
def _codegen_options() -> bool:
    """Pass `FAST_CODEGEN`'s choice to LLVM, once; whether it skips the pass. LLVM's
    pass gate is process-wide and read when a context first runs a pass, which is
    why each module is parsed into a context of its own."""
    fast = os.environ.get(FAST_CODEGEN, "") == "1"
    if fast:
        llvm_binding.set_option("affinec", "-opt-disable=slsr")
    return fast


@cache
def target_machine(arch: str, opt_level: int = 3) -> llvm_binding.TargetMachine:
    """NVPTX's target machine for `arch` at `opt_level`, made once."""
    _codegen_options()
    llvm_binding.initialize_all_targets()
    llvm_binding.initialize_all_asmprinters()
    target = llvm_binding.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=PTX_FEATURES, opt=opt_level)


def llvm_ir_to_ptx(text: str, arch: str = DEFAULT_ARCH, opt_level: int = 3) -> str:
    """Optimize LLVM IR text at `opt_level` and compile it to PTX for `arch`."""
    if opt_level not in (0, 1, 2, 3):
        raise EmitterError(None, f"opt-level must be 0, 1, 2 or 3, got {opt_level!r}")
    tm = target_machine(checked_arch(arch), opt_level)
    # The module's own context (see `_codegen_options`), disposed right after the
    # module: left to the garbage collector, the two may go in either order, and a
    # module disposed after its context crashes LLVM.
    context = llvm_binding.create_context()
    try:
        parsed = llvm_binding.parse_assembly(text, context)
    except RuntimeError as e:
        context.close()
        raise EmitterError(None, f"LLVM rejected the IR: {e}") from None
    try:
        try:
            parsed.verify()
        except RuntimeError as e:
            raise EmitterError(None, f"LLVM rejected the IR: {e}") from None
        parsed.triple = TRIPLE
        parsed.data_layout = str(tm.target_data)
        if opt_level:
            pto = llvm_binding.create_pipeline_tuning_options(opt_level)
            pb = llvm_binding.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(parsed, pb)
        ptx = tm.emit_assembly(parsed)
    finally:
        parsed.close()
        context.close()
    check_ptx_version(ptx)
    return ptx


def check_ptx_version(ptx: str) -> tuple[int, int]:
    """The PTX ISA version of `ptx`; an `EmitterError` above 8.x (CUDA 13.0's limit)."""
    match = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.MULTILINE)
    if match is None:
        raise EmitterError(None, "the PTX has no .version directive")
    version = (int(match[1]), int(match[2]))
    if version[0] > MAX_PTX_MAJOR:
        raise EmitterError(
            None,
            f"PTX ISA {version[0]}.{version[1]} is newer than the drivers accept "
            f"(at most {MAX_PTX_MAJOR}.x)",
        )
    return version


__all__ = [
    "FAST_CODEGEN",
    "MAX_PTX_MAJOR",
    "PTX_FEATURES",
    "TRIPLE",
    "check_features",
    "check_ptx_version",
    "checked_arch",
    "llvm_ir_to_ptx",
    "target_machine",
]
