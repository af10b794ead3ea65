"""`affinec-sink`: move the block-level loop below the reduction's tile loops.

Loop interchange, as the reference design does before shared-memory promotion: the
block-level `affine.parallel` that runs the reduction moves below the tile loops of the
reduction band (the `affine.for` loops `affine-loop-tile` marked `{affinec.tile}`), so
that each iteration of those loops is a step in which the whole block works on one
tile of the reduction, and promotion can copy that tile's footprint in between.

    affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
      affine.for %c0 = 0 to 4 {
        affine.for %c1 = 0 to 2 {
          ... %acc[%n1, %k1] ...
        }
      } {affinec.tile}
    } {affinec.mapping = "block"}

becomes

    affine.for %c0 = 0 to 4 {
      affine.parallel (%n1, %k1) = (0, 0) to (1, 16) {
        affine.for %c1 = 0 to 2 {
          ... %acc[%n1, %k1] ...
        }
      } {affinec.mapping = "block"}
    } {affinec.tile}

A block loop whose body holds several loop nests (the peeled last tile of
`affine-loop-tile{separate=true}`) is first distributed over them, one block loop per
nest. Block loops without `affine.for` in their body (zeroing, write-back) stay.

Options:
- `depth`: how many loops to move below; default: the leading `{affinec.tile}` loops
  of each nest (none marked, nothing moves). `depth=6` on ResNet-50's first layer
  moves the block loop below all six reduction loops, the reference design's listing.

The move is checked first: the body must be only loop nests (run `affinec-split`
first), the loops moved above must carry no values and have bounds that do not use
the block loop's variables, and no iteration of the block loop may touch memory that
another writes: the only dependence carried across the moved loops is each
iteration's accumulation into its own element, which the interchange keeps, order of
summation included. Otherwise the pass refuses, naming the op.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import TILE
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import (
    body_ops,
    is_defined_inside,
    map_slots,
    perfect_band,
    refuse_unsupported,
    sink_blocker,
)
from affinec.transforms.affine.distribution import distribute_parallel, sink_parallel
from affinec.transforms.mapped_bands import block_loops


@dataclass(frozen=True)
class AffinecSinkPass(ModulePass):
    """Interchange each block loop with the reduction's tile loops inside it."""

    name = "affinec-sink"

    depth: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        if self.depth is not None and self.depth <= 0:
            raise PassError(op, f"depth={self.depth}: the depth must be positive")
        work = []
        for loop in block_loops(op, self.name):
            depths = self._depths(loop)
            if any(depths):
                work.append((loop, depths))
        for loop, depths in work:
            for part, depth in zip(distribute_parallel(loop), depths, strict=True):
                if depth:
                    sink_parallel(part, depth)

    def _depths(self, op: affine.ParallelOp) -> list[int]:
        """How deep each statement of the block loop's body sinks; checks legality."""
        statements = body_ops(op.body.block)
        if not any(isinstance(s, affine.ForOp) for s in statements):
            return []
        if stray := [s for s in statements if not isinstance(s, affine.ForOp)]:
            raise PassError(
                op,
                f"cannot be sunk: its body holds '{stray[0].name}' beside its loop "
                "nests (run affinec-split first, which moves the accumulator's "
                "initialization and write-back into loops of their own)",
            )
        if len(statements) > 1 and (
            carrier := next((s for s in statements if s.results), None)
        ):
            raise PassError(
                carrier,
                "passes values out of its loop nest, so the block loop cannot be "
                "distributed over its loop nests to sink them",
            )
        depths = []
        for nest in statements:
            assert isinstance(nest, affine.ForOp)
            band = perfect_band(nest)
            if self.depth is None:
                depth = 0
                while depth < len(band) and TILE in band[depth].attributes:
                    depth += 1
            elif self.depth > len(band):
                raise PassError(
                    op,
                    f"depth={self.depth} but its body is a perfect nest of only "
                    f"{len(band)} loops",
                )
            else:
                depth = self.depth
            for loop in band[:depth]:
                if loop.inits:
                    raise PassError(
                        loop,
                        "carries values (iter_args), so the block loop cannot move "
                        f"below it (depth={depth})",
                    )
                for slot in map_slots(loop):
                    if any(is_defined_inside(v, op) for v in slot.operands):
                        raise PassError(
                            loop,
                            "has bounds that use the block loop's induction variables, "
                            f"so the block loop cannot move below it (depth={depth})",
                        )
            depths.append(depth)
        if any(depths) and (reason := sink_blocker(op)) is not None:
            raise PassError(op, f"cannot be sunk below the reduction loops: {reason}")
        return depths
