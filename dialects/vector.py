"""xDSL's vector dialect with MLIR's checks that xDSL's verifiers lack: of
`vector.extract`'s and `vector.insert`'s static positions, each within its
dimension or -1 (poison), of `vector.extract`'s result type, of the shapes
`vector.broadcast` takes, and of the ranks `vector.load`/`vector.store` move.

    %e = vector.extract %v[7] : f32 from vector<4xf32>   // refused: 7 >= 4

Without it the module verified, the interpreter stopped at the op with numpy's
IndexError, and LLVM's `extractelement` past the vector gave poison, silently.
`Vector` is xDSL's dialect; affinec's context registers it from here, and with it
the checks (`OP_CHECKS`).
"""

from __future__ import annotations

from xdsl.dialects import vector as xdsl_vector
from xdsl.dialects.builtin import MemRefType, VectorType
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


def _extract_checks(op: Operation) -> str | None:
    """The positions in range, then MLIR's check of the result's type: the vector's
    dimensions after those the positions index (xDSL's checks the rank and the
    element type only)."""
    assert isinstance(op, xdsl_vector.ExtractOp)
    if (message := _static_positions(op)) is not None:
        return message
    vector = op.vector.type
    assert isinstance(vector, VectorType)
    rest = vector.get_shape()[len(op.static_position.get_values()) :]
    expected = VectorType(vector.element_type, rest) if rest else vector.element_type
    if op.result.type != expected:
        return (
            f"inferred type(s) '{expected}' are incompatible with return type(s) of "
            f"operation '{op.result.type}'"
        )
    return None


def _vector_fits_memref(op: Operation) -> str | None:
    """MLIR's check of `vector.load`/`vector.store`: the vector's rank at most the
    memref's (its dimensions are the memref's innermost)."""
    assert isinstance(op, xdsl_vector.LoadOp | xdsl_vector.StoreOp)
    load = isinstance(op, xdsl_vector.LoadOp)
    vector = (op.result if load else op.vector).type
    memref = op.base.type
    assert isinstance(vector, VectorType) and isinstance(memref, MemRefType)
    if vector.get_num_dims() <= memref.get_num_dims():
        return None
    if load:
        return "destination memref has lower rank than the result vector"
    return "source memref has lower rank than the vector to store"


OP_CHECKS[xdsl_vector.BroadcastOp] = _broadcastable
OP_CHECKS[xdsl_vector.ExtractOp] = _extract_checks
OP_CHECKS[xdsl_vector.LoadOp] = _vector_fits_memref
OP_CHECKS[xdsl_vector.StoreOp] = _vector_fits_memref
OP_CHECKS[xdsl_vector.InsertOp] = _static_positions

Vector: Dialect = xdsl_vector.Vector
