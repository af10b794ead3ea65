"""`affinec-coalesce-reduction`: coalesce a compute band's two innermost reduction
loops into one where the shared tiles it reads hold their iterations contiguously
(a filter row's columns x a pixel's channels in NHWC), collapsing those tiles' last
two dimensions to match: the k of `affinec-mma-sync` for convolutions with fewer
channels than one MMA's k. `affinec/transforms/affine/coalescing.py` shows the loops
and tiles before and after.

Runs on the promoted level (after `affine-data-copy-generate`, before or after
`affine-pipeline-data-transfer`). Bands whose tiles are not indexed so are left
alone; the order of summation is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.coalescing import coalesce, plan_coalescings
from affinec.transforms.mapped_bands import grid_loops


@dataclass(frozen=True)
class AffinecCoalesceReduction(ModulePass):
    """Coalesce each compute band's column and channel loops over collapsed tiles."""

    name = "affinec-coalesce-reduction"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        plans = [p for g in grid_loops(op, self.name) for p in plan_coalescings(g)]
        for plan in plans:
            coalesce(plan)
