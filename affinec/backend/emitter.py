"""From the llvm + nvvm level to LLVM IR text and to PTX.

LLVM IR comes from xDSL's llvm backend (`xdsl.backend.llvm.convert_op`) for every op it
handles right. This module walks the module and the functions itself, to fix what that
backend gets wrong for GPU code: it emits a GEP on a pointer outside address space 0
as a cast to a typed pointer in address space 0 (invalid), drops the alignment of
globals and knows no kernels. So here: GEPs are built directly on opaque pointers of
any address space, globals keep their alignment, kernels (`nvvm.kernel`) get the
`ptx_kernel` calling convention and their `nvvm.maxntid` and `nvvm.minctasm`
`nvvm.annotations` entries, `llvm.noalias` arguments the `noalias` attribute, each
`nvvm` op becomes a call of its intrinsic (`op.intrinsic()`, with the operands and then
`op.immediates()` as i32 constants; an `nvvm.mma.sync` or `nvvm.ldmatrix` returns a
struct, read with `llvm.extractvalue`), and the ops xDSL's backend lacks
(`llvm.extractelement`, `llvm.addrspacecast`, `llvm.uitofp`, `llvm.fptosi`,
`llvm.fptoui`) their instructions, and MLIR's intrinsic ops (`llvm.intr.maximum`,
`minimum`, `maxnum`, `minnum`, `fma`, `smax`, `smin`, `umax`, `umin`) calls of their
intrinsics. Vectors such as `<2 x half>` and their `bitcast`
to i32 go through xDSL's backend as they are. Neither llvmlite nor xDSL's backend
knows LLVM's `bfloat`: `BFloatType` is it, and this module registers it for xDSL's
`bf16`.

PTX comes from llvmlite's NVPTX target: the module is optimized at `-O3` and compiled
for `sm_80` (default) or `sm_90` with PTX ISA 8.0 (`+ptx80`), a version CUDA 13.0's
driver and ptxas accept; `to_ptx` checks the `.version` it got. With
`AFFINEC_FAST_CODEGEN=1` in the environment, NVPTX's code generation skips its
straight-line strength reduction (see `FAST_CODEGEN`); with `AFFINEC_LEAN_CODEGEN=1`,
its code generation runs at level 2 (`LEAN_CODEGEN`). A shared LLVM library of
llvmlite's version compiles in place of llvmlite's own where the machine has a
release build of it or `AFFINEC_LIBLLVM` names one (`affinec.backend.shared_llvm`).

The parts: `llvm_walk` (the walk over the module: globals, declarations, bodies),
`llvm_instructions` (one op as LLVM instructions), `loop_metadata` (unroll metadata
on back edges), `llvm_bfloat` (`bfloat`), `nvptx` (the target: LLVM IR text to PTX)
and `emitter_errors` (`EmitterError`). This module puts them together and exports
their public names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from affinec.backend.emitter_errors import EmitterError
from affinec.backend.llvm_bfloat import BFloatType  # noqa: F401 (importable here too)
from affinec.backend.llvm_walk import (  # noqa: F401 (device_modules: importable here too)
    device_modules,
    llvm_module,
)
from affinec.backend.loop_metadata import complete_loop_metadata
from affinec.backend.nvptx import (  # noqa: F401 (FAST_CODEGEN ...: importable here too)
    FAST_CODEGEN,
    MAX_PTX_MAJOR,
    PTX_FEATURES,
    TRIPLE,
    check_features,
    check_ptx_version,
    checked_arch,
    llvm_ir_to_ptx,
    target_machine,
)
from affinec.hardware.chips import DEFAULT_ARCH


@dataclass(frozen=True)
class Emitted:
    """The PTX of a module, and the LLVM IR it was compiled from."""

    ptx: str
    llvm_ir: str
    """The unoptimized LLVM IR, as `to_llvm_ir` gives it."""
    arch: str


def to_llvm_ir(module: ModuleOp, arch: str = DEFAULT_ARCH) -> str:
    """The LLVM IR text of the module's kernels, with the NVPTX data layout."""
    check_features(module, checked_arch(arch))
    m = llvm_module(module)
    m.data_layout = str(target_machine(checked_arch(arch)).target_data)
    return complete_loop_metadata(str(m))


def emit(
    module: ModuleOp,
    arch: str = DEFAULT_ARCH,
    opt_level: int = 3,
    beside: Callable[[], None] | None = None,
    during: Callable[[], None] | None = None,
) -> Emitted:
    """The LLVM IR and PTX of the module's kernels. `beside` (the module's
    verifier) runs while LLVM optimizes (`llvm_ir_to_ptx`), and first where the
    LLVM IR cannot be made: its error is the one raised; `during` while LLVM
    writes the PTX (not where the LLVM IR cannot be made)."""
    try:
        text = to_llvm_ir(module, arch)
    except Exception:
        if beside is not None:
            beside()
        raise
    return Emitted(llvm_ir_to_ptx(text, arch, opt_level, beside, during), text, arch)


def to_ptx(module: ModuleOp, arch: str = DEFAULT_ARCH, opt_level: int = 3) -> str:
    """The PTX of the module's kernels (the module must be at the llvm + nvvm level)."""
    return emit(module, arch, opt_level).ptx


__all__ = [
    "Emitted",
    "EmitterError",
    "check_ptx_version",
    "emit",
    "llvm_ir_to_ptx",
    "llvm_module",
    "to_llvm_ir",
    "to_ptx",
]
