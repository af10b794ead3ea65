"""Output targets of `affinec-opt -t NAME`, beyond xDSL's own (`mlir`, ...).

    affinec-opt conv.mlir -p affinec-default -t ptx                 # PTX for sm_80
    affinec-opt conv.mlir -p affinec-default -t 'ptx{arch=sm_90}'
    affinec-opt conv.mlir -p affinec-default -t llvm                # LLVM IR

Both need the module at the llvm + nvvm level (after `convert-gpu-to-nvvm`).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from affinec.hardware.chips import ARCHS


@dataclass(frozen=True)
class PtxTarget(Target):
    """PTX from llvmlite's NVPTX backend (optimized at `opt-level`), for `arch`: by
    default the chip the module was planned for (`nvvm-attach-target`), else sm_80."""

    name = "ptx"

    arch: str = ""
    opt_level: int = 3

    def __post_init__(self) -> None:
        if self.arch:
            _check_arch(self.arch)
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt-level must be 0, 1, 2 or 3, got {self.opt_level}")

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from affinec.backend.emitter import to_ptx

        output.write(to_ptx(module, _arch_for(module, self.arch), self.opt_level))


@dataclass(frozen=True)
class LlvmTarget(Target):
    """The kernels' LLVM IR, before LLVM optimizes it."""

    name = "llvm"

    arch: str = ""
    """By default the chip the module was planned for, else sm_80."""

    def __post_init__(self) -> None:
        if self.arch:
            _check_arch(self.arch)

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from affinec.backend.emitter import to_llvm_ir

        output.write(to_llvm_ir(module, _arch_for(module, self.arch)))


def _arch_for(module: ModuleOp, arch: str) -> str:
    """`arch`, or the chip of the module's kernels; the two must agree (the passes
    planned shared memory for the module's chip)."""
    from affinec.backend.emitter import EmitterError
    from affinec.dialects.gpu_module import ModuleOp as GpuModuleOp
    from affinec.dialects.nvvm_target import chip_name_of

    kernels = [m for m in module.walk() if isinstance(m, GpuModuleOp)]
    planned = {chip_name_of(m) for m in kernels} or {chip_name_of(module)}
    targeted = any(m.targets is not None for m in kernels)
    if arch and targeted and planned != {arch}:
        raise EmitterError(
            kernels[0],
            f"the kernels were planned for {', '.join(sorted(planned))} "
            f"(#nvvm.target), not {arch}",
        )
    chosen = arch or (planned.pop() if len(planned) == 1 else "sm_80")
    if chosen not in ARCHS:
        raise EmitterError(
            kernels[0] if kernels else None,
            f"cannot emit for {chosen}, the chip of the module's #nvvm.target: the "
            f"emitter takes {', '.join(ARCHS)}",
        )
    return chosen


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got '{arch}'")


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    """Target classes by name (xDSL's `-t` factories)."""
    return {"ptx": lambda: PtxTarget, "llvm": lambda: LlvmTarget}
