"""`lower-affine`: every affine op (and `affinec.padded_load`) to scf, arith, memref.

MLIR's pass of the same name, complete where xDSL's handles only constant-bound
`affine.for`: bounds with `max`/`min` groups, operands and symbols, any step;
`affine.if` with an else branch and results; `affine.apply`/`min`/`max`; unmapped
`affine.parallel` (a nest of `scf.for` carrying its reductions); loads and stores;
padded loads (an `scf.if` reading zero out of bounds). `floordiv`, `ceildiv` and `mod`
keep affine semantics for negative values (`affinec/affine_lowering.py`).

    affine.for %i = max affine_map<(d0) -> (0, d0 - 2)>(%t) to 8 step 2 {
      %v = affinec.padded_load %A[%i - 1] : memref<8xf32>
    }

becomes

    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %0 = arith.subi %t, %c2 : index
    %1 = arith.maxsi %c0, %0 : index
    %c8 = arith.constant 8 : index
    scf.for %i = %1 to %c8 step %c2 {
      %c1 = arith.constant 1 : index
      %2 = arith.subi %i, %c1 : index
      %3 = arith.cmpi ult, %2, %c8 : index
      %v = scf.if %3 -> (f32) { ... memref.load %A[%2] ... } else { ... 0.0 ... }
    }

Mapped bands must go to the GPU first (`affinec-convert-parallel-to-gpu`).

Differences from MLIR's pass, on MLIR's inputs: an `affine.parallel` becomes a nest
of `scf.for` carrying its reductions in order (MLIR: `scf.parallel` with
`scf.reduce`), one of the orders the parallel loop allows; the reductions lowered
are those affinec interprets (`addf`, `mulf`, `maximumf`, `minimumf`, `addi`,
`muli`), others are refused. `affine.prefetch` becomes `memref.prefetch`, as in
MLIR; `affine.dma_start`/`dma_wait` are refused (MLIR makes memref ops affinec's
pipeline does not use). A semi-affine map is lowered
as MLIR lowers it, its symbolic divisors assumed positive.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.lowering import check_lowerable, lower_op
from affinec.transforms.affine.unrolling import check_unrolling

_LOWERED = (
    affine.ApplyOp,
    affine.DelinearizeIndexOp,
    affine.DmaStartOp,
    affine.DmaWaitOp,
    affine.ForOp,
    affine.IfOp,
    affine.LinearizeIndexOp,
    affine.LoadOp,
    affine.MaxOp,
    affine.MinOp,
    affine.ParallelOp,
    affine.PrefetchOp,
    affine.StoreOp,
    affine.VectorLoadOp,
    affine.VectorStoreOp,
    PaddedLoadOp,
)


@dataclass(frozen=True)
class LowerAffine(ModulePass):
    """Lower affine ops (any bounds, if, min/max/apply, padded loads) to scf and arith."""

    name = "lower-affine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        check_unrolling(op)
        todo = [o for o in op.walk() if isinstance(o, _LOWERED)]
        for o in todo:
            check_lowerable(o)
        known = {}
        constants = {}  # index constants, used again in their block (`cse` follows)
        for o in todo:
            lower_op(o, known, constants)
