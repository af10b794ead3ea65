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


@dataclass(frozen=True)
class PtxTarget(Target):
    """PTX from llvmlite's NVPTX backend (optimized at `opt-level`)."""

    name = "ptx"

    arch: str = "sm_80"
    opt_level: int = 3

    def __post_init__(self) -> None:
        _check_arch(self.arch)
        if self.opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt-level must be 0, 1, 2 or 3, got {self.opt_level}")

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from affinec.emitter import to_ptx

        output.write(to_ptx(module, self.arch, self.opt_level))


@dataclass(frozen=True)
class LlvmTarget(Target):
    """The kernels' LLVM IR, before LLVM optimizes it."""

    name = "llvm"

    arch: str = "sm_80"

    def __post_init__(self) -> None:
        _check_arch(self.arch)

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from affinec.emitter import to_llvm_ir

        output.write(to_llvm_ir(module, self.arch))


def _check_arch(arch: str) -> None:
    from affinec.emitter import ARCHS

    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got '{arch}'")


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    """Target classes by name (xDSL's `-t` factories)."""
    return {"ptx": lambda: PtxTarget, "llvm": lambda: LlvmTarget}
