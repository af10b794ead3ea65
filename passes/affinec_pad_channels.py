"""`affinec-pad-channels`: the channel loop of a naive contraction padded with zeros
to a multiple of `multiple` (`affinec/transforms/affine/pad_reduction.py`).

    affine.for %c = 0 to 3 {                      affine.for %c = 0 to 4 {
      %b = affine.load %w[%r, %s, %c, %k]   =>      %b = affinec.padded_load %w[%r, %s, %c, %k]

For ResNet-50's first layer with its 3 input channels: padded to 4, a pixel's
channels are 8 bytes of f16 and a stride-2 window's rows start on 16 bytes, so the
tensor cores take it as they take the 4-channel layer (`affinec-coalesce-reduction`,
`affinec-mma-sync`). The result is unchanged: the added products are 0 × 0.

Runs on the naive level (before `affine-loop-tile`), and needs the module's spec
(`affinec.spec`) to know which reduction loop is the channels'.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects.affinec import required_spec
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.pad_reduction import (
    channel_depth,
    channel_loop,
    pad_loop,
)
from affinec.transforms.mapped_bands import naive_parallels


@dataclass(frozen=True)
class AffinecPadChannels(ModulePass):
    """Pad the channel reduction loop to a multiple of `multiple` with zeros."""

    name = "affinec-pad-channels"

    multiple: int = 4
    """The channel count is rounded up to a multiple of this (1: no change)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        if not 1 <= self.multiple <= 64:
            raise PassError(
                op, f"multiple must be between 1 and 64, got {self.multiple}"
            )
        spec = required_spec(op, self.name)
        depth = channel_depth(spec)
        if depth is None:
            raise PassError(op, f"a {spec.kind} has no channel reduction to pad")
        bands = naive_parallels(
            op, "affinec-pad-channels runs on the naive IR, before affine-loop-tile"
        )
        if not bands:
            raise PassError(op, "expected the naive affine.parallel of a contraction")
        loops = [channel_loop(band, depth) for band in bands]
        for loop in loops:
            pad_loop(loop, self.multiple)
