"""xDSL's vector dialect with MLIR's checks that xDSL's verifiers lack: of
`vector.extract`'s and `vector.insert`'s static positions, each within its
dimension or -1 (poison), and of the shapes `vector.broadcast` takes.

    %e = vector.extract %v[7] : f32 from vector<4xf32>   // refused: 7 >= 4

Without it the module verified, the interpreter stopped at the op with numpy's
IndexError, and LLVM's `extractelement` past the vector gave poison, silently.
`Vector` is xDSL's dialect (the same ops); affinec's context registers it, and with
it the check (`OP_CHECKS`).
"""

from __future__ import annotations

from xdsl.dialects import vector as xdsl_vector
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Dialect, Operation

from affinec.base.diagnostics import OP_CHECKS

POISON = -1
"""A static position that reads or writes no element (MLIR's `poison`)."""


def _static_positions(op: Operation) -> str | None:
    """MLIR's message for the first static position outside its dimension."""
    assert isinstance(op, xdsl_vector.ExtractOp | xdsl_vector.InsertOp)
    extract = isinstance(op, xdsl_vector.ExtractOp)
    vector = (op.vector if extract else op.dest).type
    assert isinstance(vector, VectorType)
    positions = op.static_position.get_values()  # perhaps fewer than the dims
    shape = vector.get_shape()
    for k, (position, size) in enumerate(zip(positions, shape, strict=False)):
        if position in (xdsl_vector.DYNAMIC_INDEX, POISON):
            continue
        if not 0 <= position < size:
            which = (
                "vector dimension or poison (-1)"
                if extract
                else "dest vector dimension"
            )
            return (
                f"expected position attribute #{k + 1} to be a non-negative integer "
                f"smaller than the corresponding {which}"
            )
    return None


def _broadcastable(op: Operation) -> str | None:
    """MLIR's check of `vector.broadcast` (xDSL's checks the element type only): a
    scalar, or a vector whose dimensions, aligned at the end with the result's,
    are each 1 or the result's."""
    assert isinstance(op, xdsl_vector.BroadcastOp)
    source, result = op.source.type, op.vector.type
    if not isinstance(source, VectorType):
        return None
    shape, wide = source.get_shape(), result.get_shape()
    if len(shape) > len(wide):
        return "source rank higher than destination rank"
    for size, target in zip(shape, wide[len(wide) - len(shape) :], strict=True):
        if size not in (1, target):
            return f"dimension mismatch ({size} vs. {target})"
    return None


OP_CHECKS[xdsl_vector.BroadcastOp] = _broadcastable
OP_CHECKS[xdsl_vector.ExtractOp] = _static_positions
OP_CHECKS[xdsl_vector.InsertOp] = _static_positions

Vector = Dialect(
    "vector",
    list(xdsl_vector.Vector.operations),
    list(xdsl_vector.Vector.attributes),
)
