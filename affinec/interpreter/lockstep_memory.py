"""Memory accesses of a block in lockstep (`lockstep`): affine and memref loads
and stores, scalar and vector, of shared memory (`SharedArray.read_lanes` and
`write_lanes`, with their race records), of the buffers private to each thread
and of global memory, each lane's indices checked where the loop bounds do not
prove them inside."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, VectorType
from xdsl.ir import Operation

from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.interpreter.affine_maps import (
    map_ranges,
    map_results,
)
from affinec.interpreter.lanes import (
    LaneWriter,
    check_lanes,
)
from affinec.interpreter.lockstep_plan import (
    VectorAccess,
    vector_operands,
)
from affinec.interpreter.lockstep_runtime import (
    gather_runs,
    run_positions,
    scatter_runs,
)
from affinec.interpreter.memref_ops import named_indices, proven_inside
from affinec.interpreter.support import (
    access_shape,
    shape_text,
    tuple_text,
)
from affinec.ir import ranges

Access = affine.LoadOp | PaddedLoadOp | affine.StoreOp | memref.LoadOp | memref.StoreOp


def access(kw: Any, op: Access) -> None:
    w, plan = kw.w, kw.kernel_plan
    if op.memref in plan.arrays and not plan.differ((*op.operands, *op.results)):
        w.emit_op(op)  # the same element for every thread: read or written once
        return
    if op.memref in plan.arrays and not isinstance(op, memref.LoadOp | memref.StoreOp):
        LaneWriter.op(kw, op)  # a gather or a scatter, as a band's lanes do
        return
    t = op.memref.type
    assert isinstance(t, MemRefType)
    shape = access_shape(t, w[op.memref])
    names = _checked_indices(kw, op, shape)
    index = tuple_text(names)
    array = w[op.memref]
    store = isinstance(op, affine.StoreOp | memref.StoreOp)
    if op.memref in plan.arrays:  # a memref.load or store of global memory
        if not store:
            w.line(f"{w.define(op.results[0])} = {array}[{index}]")
        elif plan.differ(op.indices):
            w.line(f"{array}[{index}] = {w[op.value]}")
        else:  # every thread writes the one element: the last one's value stays
            w.line(f"{array}[{index}] = {w[op.value]}[-1]")
        return
    if op.memref in plan.private:
        full = ", ".join([kw.lane, *names])
        if store:
            w.line(f"{array}[{full}] = {w[op.value]}")
        else:
            w.line(f"{w.define(op.results[0])} = {array}[{full}]")
        return
    position = w.fresh("position")
    w.line(f"{position} = {_row_major(names, shape)}")
    if store:
        w.line(f"{array}.write_lanes({position}, {w[op.value]}, {kw.lane})")
    else:
        w.line(f"{w.define(op.results[0])} = {array}.read_lanes({position}, {kw.lane})")


def _checked_indices(kw: Any, op: Operation, shape: Sequence[Any]) -> list:
    """The names of an access's indices (an affine map's results, or SSA indices),
    each lane's checked inside `shape` where the loop bounds do not prove it."""
    w = kw.w
    indices = op.indices  # pyright: ignore[reportAttributeAccessIssue]
    if hasattr(op, "map"):
        m = op.map.data  # pyright: ignore[reportAttributeAccessIssue]
        names = named_indices(w, map_results(w, m, indices))
        known = map_ranges(w, m, indices)
    else:
        names = w.names(indices)
        known = [ranges.value_range(v, w.ranges) for v in indices]
    dims = tuple(
        k
        for k, (r, dim) in enumerate(zip(known, shape, strict=True))
        if not proven_inside(r, dim)
    )
    if dims:
        check = w.global_(check_lanes, "check_lanes")
        index = tuple_text(names)
        w.line(f"{check}({w.op_ref(op)}, {shape_text(shape)}, {index}, {dims})")
    return names


def _row_major(names: Sequence[str], shape: Sequence[Any]) -> str:
    """The row-major position of the element at `names` in `shape`."""
    text = names[0] if names else "0"
    for name, dim in zip(names[1:], shape[1:], strict=True):
        text = f"({text}) * {dim} + {name}"
    return text


def vector_access(kw: Any, op: VectorAccess) -> None:
    w, plan = kw.w, kw.kernel_plan
    buffer, value, store = vector_operands(op)
    if buffer in plan.arrays and not plan.differ((*op.operands, *op.results)):
        w.emit_op(op)  # one run for every thread: read or written once
        return
    t = buffer.type
    assert isinstance(t, MemRefType) and isinstance(value.type, VectorType)
    width = value.type.get_shape()[0]
    shape = access_shape(t, w[buffer])
    names = _checked_indices(kw, op, shape)
    check = w.global_(check_lanes, "check_lanes")
    last = tuple_text([*names[:-1], f"{names[-1]} + {width - 1}"])
    last_dim = len(names) - 1
    w.line(f"{check}({w.op_ref(op)}, {shape_text(shape)}, {last}, ({last_dim},))")
    array = w[buffer]
    if buffer in plan.arrays:
        if not store:
            gather = w.global_(gather_runs, "gather_runs")
            w.line(
                f"{w.define(value)} = {gather}({array}, {tuple_text(names)}, {width})"
            )
            return
        values = w[value]
        uniform = (
            not plan.varies(op.map.data, op.indices)
            if isinstance(op, affine.VectorStoreOp)
            else not plan.differ(op.indices)
        )
        if uniform:
            # every thread writes the one run: the last one's values stay
            w.line(
                f"{array}[{tuple_text([*names[:-1], f'slice({names[-1]}, {names[-1]} + {width})'])}] = {values}[-1]"
            )
            return
        scatter = w.global_(scatter_runs, "scatter_runs")
        w.line(f"{scatter}({array}, {tuple_text(names)}, {width}, {values})")
        return
    position = w.fresh("position")
    runs = w.global_(run_positions, "run_positions")
    w.line(f"{position} = {runs}({_row_major(names, shape)}, {kw.count}, {width})")
    threads = f"{w.global_(np.repeat, 'repeat')}({kw.lane}, {width})"
    if store:
        values = f"{w.global_(np.broadcast_to, 'broadcast_to')}({w[value]}, ({kw.count}, {width}))"
        w.line(f"{array}.write_lanes({position}, {values}.reshape(-1), {threads})")
    else:
        w.line(
            f"{w.define(value)} = {array}.read_lanes({position}, "
            f"{threads}).reshape({kw.count}, {width})"
        )
