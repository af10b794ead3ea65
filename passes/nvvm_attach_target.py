"""`nvvm-attach-target`: say which chip the kernels are compiled for.

MLIR's pass of this name attaches `#nvvm.target<O = .., chip = .., features = ..>` to
the `gpu.module`s whose names match `module`. Ours does the same and also records it
on the builtin module as `affinec.target`, so that the passes before outlining (which
plan shared memory, the copies and the tensor-core route against the chip's limits,
`affinec.hardware.chips`) read it too; `gpu-kernel-outlining` copies it onto the kernel's
`gpu.module`. `compile_to_ptx` sets it from its `arch`. A module with no target is
planned for sm_80.

    builtin.module {                 builtin.module attributes {affinec.target =
      ...                              #nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">} {
    }                                  ...

Differences from MLIR: only the options `module`, `chip`, `features` and `O`; a chip
affinec does not know is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects import gpu
from affinec.dialects.nvvm_target import TARGET, target_attr
from affinec.hardware.chips import CHIPS


@dataclass(frozen=True)
class NvvmAttachTarget(ModulePass):
    """Attach `#nvvm.target` to the module and its matching `gpu.module`s."""

    name = "nvvm-attach-target"

    module: str = ".*"
    """A regular expression: the `gpu.module`s (by name) to attach the target to."""
    chip: str = "sm_80"
    """The architecture: sm_80, sm_86, sm_89, sm_90 or sm_90a."""
    features: str = "+ptx80"
    """PTX features (the PTX ISA version)."""
    O: int = 3  # noqa: E741, N815 (MLIR's option name)
    """LLVM's optimization level."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.chip not in CHIPS:
            raise PassError(
                op,
                f"unknown chip '{self.chip}' (expected one of {', '.join(CHIPS)})",
            )
        if not 0 <= self.O <= 3:
            raise PassError(op, f"O must be between 0 and 3, got {self.O}")
        try:
            pattern = re.compile(self.module)
        except re.error as e:
            raise PassError(op, f"module is not a regular expression: {e}") from None
        target = target_attr(self.chip, self.features, self.O)
        op.attributes[TARGET] = target
        for m in op.walk():
            if isinstance(m, gpu.ModuleOp) and pattern.fullmatch(m.sym_name.data):
                m.properties["targets"] = ArrayAttr([target])
