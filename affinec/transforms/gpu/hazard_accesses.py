"""What one access of shared memory touches, as the hazard check
(`shared_memory_hazards`) summarizes it: the elements it covers from its address
(`access_run`), the `affine.if` branches it runs under (`guards_between`)."""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Operation

from affinec.base.element_types import element_size
from affinec.dialects import affine, nvgpu
from affinec.ir.affine_exprs import Interval
from affinec.transforms.gpu.bands import is_shared


def guards_between(op: Operation, leaf: Operation) -> list[tuple[affine.IfOp, bool]]:
    """The `affine.if` ops between `leaf` and `op`, with the branch `op` is in."""
    guards = []
    child, parent = op, op.parent_op()
    while child is not leaf and parent is not None:
        if isinstance(parent, affine.IfOp):
            guards.append((parent, child.parent_region() is parent.then_region))
        child, parent = parent, parent.parent_op()
    return guards


def access_run(op: Operation) -> int:
    """Elements an access touches from its address along the innermost dimension:
    a vector's, or a row of 16 bytes for each lane of ldmatrix."""
    if isinstance(op, nvgpu.LdMatrixOp):
        t = op.srcMemref.type
        assert isinstance(t, MemRefType)
        return 16 // element_size(t.get_element_type())
    vectors = [
        v.type for v in (*op.results, *op.operands) if isinstance(v.type, VectorType)
    ]
    return vectors[0].element_count() if vectors else 1


def known_point(r: Interval | None) -> int | None:
    """The one value an interval holds, or None where it holds several."""
    return r[0] if r is not None and r[0] == r[1] else None


def touches_shared(op: Operation) -> bool:
    """Whether an operand of `op` is a buffer in shared memory."""
    return any(is_shared(v) for v in op.operands)
