"""`affinec-canonicalize`: the clean-ups that make affine IR read like the reference
design's listings (MLIR's affine canonicalization patterns and
`affine-simplify-structures`, for our dialect).

- Maps: constants and `affine.apply` results are composed into their users' maps,
  repeated operands merged, unused ones dropped, expressions simplified
  (`%i0 * 16 + %i1 * 1 + 0` reads `%i0 * 16 + %i1`), `affine.if` conditions divided
  through by their coefficients' gcd.
- Bounds: `min`/`max` results that never decide a bound over the operands' ranges
  are dropped (`min(16, %i0 * -16 + 112)` with `%i0` in [0, 6] is `16`).
- Loops: an `affine.for` that runs once is replaced by its body, its variable by the
  lower bound; one that never runs disappears. `affine.parallel` dimensions of
  extent 1 stay: they are part of the grid's and the block's shape.
- Conditions: an `affine.if` decided by its operands' ranges is replaced by the
  branch that runs.
- Dead `affine.apply`/`min`/`max` are erased.

    affine.for %c0 = 0 to 4 {
      affine.for %r0 = 0 to 1 {
        affine.for %r1 = 0 to 7 {
          %a = affine.load %in[%c0, %r0 * 7 + %r1] : memref<4x7xf32>
        }
      } {affinec.tile}
    } {affinec.tile}

becomes

    affine.for %c0 = 0 to 4 {
      affine.for %r1 = 0 to 7 {
        %a = affine.load %in[%c0, %r1] : memref<4x7xf32>
      }
    } {affinec.tile}

Nothing here touches arithmetic on data, so results stay bit-identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.dialects import affine
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.affine.canonicalization import (
    erase_dead_index_ops,
    fold_constant_if,
    promote_single_iteration,
)
from affinec.transforms.affine.rewriting import rewrite_maps, simplify_bounds


def simplify_maps_and_bounds(module: ModuleOp) -> bool:
    """Compose and simplify every map, drop redundant bound results."""
    changed = False
    for op in module.walk():
        changed |= rewrite_maps(op)
        changed |= simplify_bounds(op)
    return changed


def remove_trivial_control_flow(module: ModuleOp) -> bool:
    """Promote one loop that runs once (or never) or fold one decided `affine.if`."""
    for op in module.walk():
        if isinstance(op, affine.ForOp) and promote_single_iteration(op):
            return True
        if isinstance(op, affine.IfOp) and fold_constant_if(op):
            return True
    return False


@dataclass(frozen=True)
class AffinecCanonicalizePass(ModulePass):
    """Simplify maps and bounds, remove single-iteration loops and decided conditions."""

    name = "affinec-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        changed = True
        while changed:
            changed = simplify_maps_and_bounds(op)
            while remove_trivial_control_flow(op):
                changed = True
            changed |= erase_dead_index_ops(op)
