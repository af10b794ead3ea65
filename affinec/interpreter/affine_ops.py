"""affine ops (and `affinec.padded_load`) as Python.

Loops become `for` statements over `range`s whose bounds are computed once, on entry,
as MLIR's semantics say. `affine.parallel` runs its iterations in order, which is one
legal order; a pass that broke the independence of iterations is caught once bands
are mapped to threads, where threads interleave at barriers and races are reported
(a grid band holding thread bands runs as a launch: `mapped_ops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack

from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineMap

from affinec.dialects import affine
from affinec.dialects.affinec import BLOCK, THREAD, PaddedLoadOp, mapping_of
from affinec.interpreter import lanes, mapped_ops
from affinec.interpreter.affine_maps import (
    bound,
    folded,
    for_bounds,
    if_condition,
    map_ranges,
    map_results,
)
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.memref_ops import (
    emit_load,
    emit_store,
    emit_vector_access,
    memref_type,
    vector_width,
)
from affinec.interpreter.support import (
    InterpreterError,
    access_shape,
    maximumf,
    minimumf,
    numpy_dtype,
)
from affinec.ir.affine_exprs import grouped


@emits(affine.ApplyOp)
def _apply(op: affine.ApplyOp, w: FunctionWriter) -> None:
    (expr,) = map_results(w, op.map.data, op.mapOperands)
    w.line(f"{w.define(op.result)} = {expr}")


@emits(affine.MinOp, affine.MaxOp)
def _min_max(op: affine.MinOp | affine.MaxOp, w: FunctionWriter) -> None:
    fold = "min" if isinstance(op, affine.MinOp) else "max"
    w.line(f"{w.define(op.result)} = {bound(w, op.map.data, op.mapOperands, fold)}")


def _access(
    w: FunctionWriter,
    op: affine.LoadOp | affine.StoreOp | PaddedLoadOp,
    memref: SSAValue,
    m: AffineMap,
    indices: Sequence[SSAValue],
):
    shape = access_shape(memref_type(op, memref), w[memref])
    return map_results(w, m, indices), map_ranges(w, m, indices), shape


@emits(affine.LoadOp)
def _load(op: affine.LoadOp, w: FunctionWriter) -> None:
    exprs, ranges, shape = _access(w, op, op.memref, op.map.data, op.indices)
    emit_load(w, op, w[op.memref], exprs, ranges, shape)


@emits(PaddedLoadOp)
def _padded_load(op: PaddedLoadOp, w: FunctionWriter) -> None:
    exprs, ranges, shape = _access(w, op, op.memref, op.map.data, op.indices)
    emit_load(
        w, op, w[op.memref], exprs, ranges, shape, padded=True, in_bounds=op.in_bounds
    )


@emits(affine.StoreOp)
def _store(op: affine.StoreOp, w: FunctionWriter) -> None:
    exprs, ranges, shape = _access(w, op, op.memref, op.map.data, op.indices)
    emit_store(w, op, w[op.value], w[op.memref], exprs, ranges, shape)


@emits(affine.VectorLoadOp)
def _vector_load(op: affine.VectorLoadOp, w: FunctionWriter) -> None:
    exprs, ranges, shape = _access(w, op, op.memref, op.map.data, op.indices)
    width = vector_width(op, op.result)
    emit_vector_access(w, op, w[op.memref], exprs, ranges, shape, width)


@emits(affine.VectorStoreOp)
def _vector_store(op: affine.VectorStoreOp, w: FunctionWriter) -> None:
    exprs, ranges, shape = _access(w, op, op.memref, op.map.data, op.indices)
    width = vector_width(op, op.value)
    emit_vector_access(
        w, op, w[op.memref], exprs, ranges, shape, width, value=w[op.value]
    )


def _yielded(w: FunctionWriter, term: Operation | None, op: Operation) -> list[str]:
    if not isinstance(term, affine.YieldOp):
        raise InterpreterError("its region must end in affine.yield", op)
    return w.names(term.arguments)


@emits(affine.ForOp)
def _for(op: affine.ForOp, w: FunctionWriter) -> None:
    bounds = for_bounds(op, w)
    iv = w.define(op.induction_variable)
    carried = [w.define(a) for a in op.iter_args]
    w.assign(carried, w.names(op.inits))
    with w.for_range(iv, bounds):
        term = w.emit_block(op.body.block)
        w.assign(carried, _yielded(w, term, op))
    for result, value in zip(op.results, carried, strict=True):
        w.alias(result, value)


def _combine(w: FunctionWriter, kind: str, acc: str, value: str) -> str:
    match kind:
        case "addf" | "addi":
            return f"{acc} + {value}"
        case "mulf" | "muli":
            return f"{acc} * {value}"
        case "maximumf":
            return f"{w.global_(maximumf, 'maximumf')}({acc}, {value})"
        case "minimumf":
            return f"{w.global_(minimumf, 'minimumf')}({acc}, {value})"
    raise InterpreterError(f"unknown reduction {kind}")


@emits(affine.ParallelOp)
def _parallel(op: affine.ParallelOp, w: FunctionWriter) -> None:
    if mapping_of(op) == THREAD:
        mapped_ops.emit_thread_band(op, w)
        return
    if mapped_ops.is_thread_mapped_grid(op):
        mapped_ops.emit_thread_mapped_grid(op, w)
        return
    if mapping_of(op) == BLOCK and w.gpu_context is not None:
        # A block band beside thread bands: one legal distribution is all of its
        # iterations on thread 0 (the barriers around it order the rest).
        with w.indented(f"if {w.gpu_context}.ids[3] == 0:"):
            _loops(op, w)
        return
    if not lanes.emit_band(op, w):
        _loops(op, w)


def _loops(op: affine.ParallelOp, w: FunctionWriter) -> None:
    lower_map, upper_map = op.lowerBoundsMap.data, op.upperBoundsMap.data
    lowers = grouped(
        map_results(w, lower_map, op.lower_bound_operands), op.lower_groups
    )
    uppers = grouped(
        map_results(w, upper_map, op.upper_bound_operands), op.upper_groups
    )

    accumulators = []
    for result, kind in zip(op.results, op.reduction_kinds, strict=True):
        acc = w.define(result)
        if kind not in affine.REDUCTION_IDENTITY:
            raise InterpreterError(
                f"the interpreter does not perform reduction '{kind}'", op
            )
        start = affine.REDUCTION_IDENTITY[kind]
        identity = numpy_dtype(result.type).type(start)
        w.line(f"{acc} = {w.global_(identity, 'identity')}")
        accumulators.append((acc, kind))

    # Bounds are evaluated once, before any iteration, like MLIR's.
    bounds = []
    for k, (lower, upper) in enumerate(zip(lowers, uppers, strict=True)):
        lo_name, hi_name = w.fresh(f"lb{k}"), w.fresh(f"ub{k}")
        w.line(f"{lo_name} = {folded(lower, 'max')}")
        w.line(f"{hi_name} = {folded(upper, 'min')}")
        bounds.append((lo_name, hi_name))

    with ExitStack() as loops:
        for iv, (lo_name, hi_name), step in zip(
            op.induction_variables, bounds, op.step_values, strict=True
        ):
            step_text = f", {step}" if step != 1 else ""
            bounds = f"{lo_name}, {hi_name}{step_text}"
            loops.enter_context(w.for_range(w.define(iv), bounds))
        term = w.emit_block(op.body.block)
        for (acc, kind), value in zip(accumulators, _yielded(w, term, op), strict=True):
            w.line(f"{acc} = {_combine(w, kind, acc, value)}")


@emits(affine.IfOp)
def _if(op: affine.IfOp, w: FunctionWriter) -> None:
    condition = if_condition(op, w)
    results = [w.define(r) for r in op.results]
    with w.indented(f"if {condition}:"):
        term = w.emit_block(op.then_region.block)
        w.assign(results, _yielded(w, term, op))
    if op.else_region.blocks:
        with w.indented("else:"):
            term = w.emit_block(op.else_region.block)
            w.assign(results, _yielded(w, term, op))
