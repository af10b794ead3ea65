"""`affine-loop-normalize`: lower bound 0 and step 1 for every affine loop (MLIR's
pass of the same name), so that `affine-loop-tile`, which takes only simple loops,
can take them.

    affine.for %i = 2 to 11 step 3 {
      %a = affine.load %A[%i] : memref<16xf32>
    }

becomes

    affine.for %i = 0 to 3 {
      %a = affine.load %A[%i * 3 + 2] : memref<16xf32>
    }

The new variable is composed into the maps of its users; a user without an affine
map gets an `affine.apply` at the top of the body. `affine.parallel` bands are
normalized dimension by dimension. A loop whose lower bound is a `max` of several
results is left as it is (its trip count is not affine).

Difference from MLIR's pass: MLIR puts an `affine.apply` of the new variable at the
top of the body and uses it; this pass composes the expression into its users' maps
(an `affine.apply` only for a user without one). The values are the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.dialects import affine
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.affine.canonicalization import normalize_loop


@dataclass(frozen=True)
class AffineLoopNormalizePass(ModulePass):
    """Rewrite affine.for and affine.parallel to lower bound 0 and step 1."""

    name = "affine-loop-normalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        loops = [
            o for o in op.walk() if isinstance(o, affine.ForOp | affine.ParallelOp)
        ]
        for loop in loops:
            normalize_loop(loop)
