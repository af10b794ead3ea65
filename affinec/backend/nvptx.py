"""LLVM's NVPTX target as the emitter drives it: the triple, PTX ISA 8.0 (`+ptx80`:
new enough for sm_90, old enough for CUDA 13.0's driver and ptxas), the target
machine of each architecture (`FAST_CODEGEN` passed to LLVM once), the
architectures and instructions a module may ask for (`checked_arch`,
`check_features`), compiling LLVM IR text to PTX (`llvm_ir_to_ptx`, optimized at
`-O3` by default; through a shared LLVM library of llvmlite's version, the
machine's release build or the one `AFFINEC_LIBLLVM` names, where there is one:
`affinec.backend.shared_llvm`) and checking
the `.version` it got (`check_ptx_version`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

import llvmlite.binding as llvm_binding
from xdsl.dialects.builtin import ModuleOp

from affinec.backend.emitter_errors import EmitterError
from affinec.backend.shared_llvm import LIBLLVM, library_path, shared_llvm
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

LEAN_CODEGEN = "AFFINEC_LEAN_CODEGEN"
"""The environment variable that, set to 1, makes NVPTX's code generation run at
LLVM's level 2 where the module's optimization stays at `opt_level` (3): the IR
passes NVPTX runs before instruction selection then tidy up with EarlyCSE where
level 3 runs GVN, twice (a tenth to a quarter of a tensor-core kernel's code
generation). The PTX differs on some kernels (on others it is the same), so off
by default: what it costs the kernels is for a GPU run to measure
(`scripts/gpu_codegen_check.sh`). Read at each compilation; combines with
`FAST_CODEGEN`."""


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


def codegen_level(opt_level: int) -> int:
    """The level of NVPTX's code generation for a module optimized at `opt_level`:
    the same, or at most 2 where `LEAN_CODEGEN` is set to 1."""
    if os.environ.get(LEAN_CODEGEN, "") == "1":
        return min(opt_level, 2)
    return opt_level


def llvm_ir_to_ptx(
    text: str,
    arch: str = DEFAULT_ARCH,
    opt_level: int = 3,
    beside: Callable[[], None] | None = None,
    during: Callable[[], None] | None = None,
) -> str:
    """Optimize LLVM IR text at `opt_level` and compile it to PTX for `arch` (at
    `codegen_level(opt_level)`).

    `beside`, where given, is called while LLVM parses and optimizes the module in
    a thread of its own (LLVM's work does not hold Python's lock: the two share
    two cores): what it raises is raised instead of any error of LLVM's, and code
    generation starts only once it has returned (the verifier of the module the
    text came from, whose error comes first and which may not be passed by LLVM
    code generation that could stop the process). `during`, where given, is
    called while LLVM writes the PTX in a thread of its own (the caller's own
    work after the PTX, which does not need it): what it raises is raised once
    the PTX is written, after any error of LLVM's."""
    if opt_level not in (0, 1, 2, 3):
        raise EmitterError(None, f"opt-level must be 0, 1, 2 or 3, got {opt_level!r}")
    if (path := library_path()) is not None:
        return _shared_llvm_to_ptx(
            path, text, checked_arch(arch), opt_level, beside, during
        )
    tm = target_machine(checked_arch(arch), codegen_level(opt_level))
    # The module's own context (see `_codegen_options`), disposed right after the
    # module: left to the garbage collector, the two may go in either order, and a
    # module disposed after its context crashes LLVM.
    context = llvm_binding.create_context()
    parsed: llvm_binding.ModuleRef | None = None

    def optimize(optimizing: threading.Event) -> None:
        nonlocal parsed
        try:
            parsed = llvm_binding.parse_assembly(text, context)
            parsed.verify()
        except RuntimeError as e:
            raise EmitterError(None, f"LLVM rejected the IR: {e}") from None
        parsed.triple = TRIPLE
        parsed.data_layout = str(tm.target_data)
        if opt_level:
            pto = llvm_binding.create_pipeline_tuning_options(opt_level)
            pb = llvm_binding.create_pass_builder(tm, pto)
            manager = pb.getModulePassManager()
            optimizing.set()
            manager.run(parsed, pb)

    def write(writing: threading.Event) -> str:
        assert parsed is not None
        writing.set()
        return tm.emit_assembly(parsed)

    def close() -> None:
        if parsed is not None:
            parsed.close()
        context.close()

    return _optimized_then_written(optimize, write, close, beside, during)


def _shared_llvm_to_ptx(
    path: str,
    text: str,
    arch: str,
    opt_level: int,
    beside: Callable[[], None] | None,
    during: Callable[[], None] | None = None,
) -> str:
    """`llvm_ir_to_ptx` through the shared LLVM library at `path` (`LIBLLVM`)."""
    llvm = shared_llvm(path, _codegen_options())
    level = codegen_level(opt_level)
    handle = None

    def optimize(optimizing: threading.Event) -> None:
        nonlocal handle
        optimizing.set()
        handle = llvm.optimized(text, TRIPLE, arch, PTX_FEATURES, opt_level, level)

    def write(writing: threading.Event) -> str:
        assert handle is not None
        writing.set()
        return llvm.emit(handle, TRIPLE, arch, PTX_FEATURES, level)

    def close() -> None:
        if handle is not None:
            handle.close()

    return _optimized_then_written(optimize, write, close, beside, during)


def _optimized_then_written(
    optimize: Callable[[threading.Event], None],
    write: Callable[[threading.Event], str],
    close: Callable[[], None],
    beside: Callable[[], None] | None,
    during: Callable[[], None] | None,
) -> str:
    """LLVM's two stages, whichever LLVM runs them: `optimize` with `beside` run
    beside it, then `write` (the PTX) with `during`; `close` (LLVM's module and
    context) whatever happens, and the PTX's version checked. Each stage sets the
    event it is given just before its long call into LLVM (see `_overlapped`)."""
    optimizing, writing = threading.Event(), threading.Event()
    written: list[str] = []
    try:
        if beside is None:
            optimize(optimizing)
        else:
            _beside(lambda: optimize(optimizing), beside, optimizing)
        _while(lambda: written.append(write(writing)), during, writing)
    finally:
        close()
    check_ptx_version(written[0])
    return written[0]


def _beside(
    work: Callable[[], None],
    beside: Callable[[], None],
    in_llvm: threading.Event | None = None,
) -> None:
    """`work` in a thread of its own while `beside` runs here; `beside`'s exception
    first, then `work`'s. `in_llvm`: see `_overlapped`."""
    _overlapped(work, beside, "affinec-llvm", work_error_first=False, in_llvm=in_llvm)


def _while(
    work: Callable[[], None],
    during: Callable[[], None] | None,
    in_llvm: threading.Event | None = None,
) -> None:
    """`work` (LLVM writing the PTX), and `during` here while it runs in a thread of
    its own; `work`'s exception first, then `during`'s. `in_llvm`: see
    `_overlapped`."""
    if during is None:
        work()
    else:
        _overlapped(
            work, during, "affinec-llvm-ptx", work_error_first=True, in_llvm=in_llvm
        )


def _overlapped(
    work: Callable[[], None],
    here: Callable[[], None],
    name: str,
    *,
    work_error_first: bool,
    in_llvm: threading.Event | None = None,
) -> None:
    """`work` in a thread named `name` while `here` runs in this one, both finished
    before it returns; where both raise, `work`'s exception or `here`'s as asked.

    Where `work` sets `in_llvm` just before its long call into LLVM (which does
    not hold Python's lock), `here` waits for it (or for `work` to end): a thread
    that starts while this one runs Python waits for the lock for as long as
    Python's switch interval (5 ms) at each step of its own Python, before LLVM
    has begun, where started first it reaches LLVM at once."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as e:  # raised here, in the caller's thread
            failed.append(e)
        finally:
            if in_llvm is not None:
                in_llvm.set()

    thread = threading.Thread(target=run, name=name, daemon=True)
    with _short_switch_interval():
        thread.start()
        if in_llvm is not None:
            in_llvm.wait()
        try:
            here()
        except BaseException:
            thread.join()
            if failed and work_error_first:
                raise failed[0] from None
            raise
        thread.join()
    if failed:
        raise failed[0]


_overlaps = 0
"""How many overlaps run now (compiles in several threads), the interval they
found kept in `_interval_before`, under `_overlaps_lock`."""
_interval_before = 0.0
_overlaps_lock = threading.Lock()


@contextmanager
def _short_switch_interval() -> Iterator[None]:
    """Python's switch interval `OVERLAP_SWITCH_INTERVAL_S` at most while any
    overlap runs, the one before restored when the last ends: each of LLVM's calls
    returns to Python (ctypes, llvmlite) and waits for the lock while the caller's
    thread runs Python, up to a switch interval each time."""
    global _overlaps, _interval_before
    with _overlaps_lock:
        if _overlaps == 0:
            _interval_before = sys.getswitchinterval()
            sys.setswitchinterval(min(_interval_before, OVERLAP_SWITCH_INTERVAL_S))
        _overlaps += 1
    try:
        yield
    finally:
        with _overlaps_lock:
            _overlaps -= 1
            if _overlaps == 0:
                sys.setswitchinterval(_interval_before)


OVERLAP_SWITCH_INTERVAL_S = 0.001
"""Python's switch interval while LLVM's thread and the caller's overlap (its
default is 5 ms): `config_for`'s five f16 kernels compile 7 % faster, median 247
-> 230 ms (`benchmarks/compile_ab.py`, 5 interleaved rounds, 2-core machine,
2026-12-07)."""


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
    "LEAN_CODEGEN",
    "LIBLLVM",
    "MAX_PTX_MAJOR",
    "PTX_FEATURES",
    "TRIPLE",
    "check_features",
    "check_ptx_version",
    "checked_arch",
    "codegen_level",
    "llvm_ir_to_ptx",
    "target_machine",
]
