"""Grid- and thread-mapped `affine.parallel`: blocks and threads before the gpu level.

Once `affinec-map-threads` has run, a grid band means what a `gpu.launch` means: its
body is run by every thread of every block, and a thread band inside it
(`{affinec.mapping = "thread"}`, one iteration per thread) runs its body once, for
the iteration of the running thread's id. So such a grid band is interpreted the way
a launch is (`gpu_ops.run_grid`): one block per grid iteration, the block's threads
as coroutines meeting at `gpu.barrier`, buffers in memory space 3 allocated once per
block and race-checked, any other buffer allocated at grid level one per thread.
That makes the thread mapping, the private buffers and the barriers checkable before
the conversion to `gpu.launch`: a missing barrier is a data race here already.

A block band beside thread bands (a copy not yet shared out, next to a warp-mapped
compute band) runs all of its iterations on thread 0: one legal distribution, whose
results the barriers around it publish. A grid band whose phases are all still
block-mapped runs as a plain loop nest (one legal order of its iterations); a
`gpu.barrier` in it does nothing.
"""

from __future__ import annotations

import math

from xdsl.dialects import memref
from xdsl.ir import Operation
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr

from affinec.dialects import affine, gpu
from affinec.dialects.affinec import GRID, THREAD, mapping_of
from affinec.interpreter.affine_maps import map_results
from affinec.interpreter.codegen import FunctionWriter
from affinec.interpreter.gpu_ops import run_grid
from affinec.interpreter.lockstep import start_lockstep_block
from affinec.interpreter.lockstep_plan import plan_mapped_grid
from affinec.interpreter.support import (
    InterpreterError,
    memref_shape,
    numpy_dtype,
)


def is_thread_mapped_grid(op: affine.ParallelOp) -> bool:
    """A grid band whose body holds thread bands (so it runs as a launch)."""
    return mapping_of(op) == GRID and any(
        isinstance(inner, affine.ParallelOp) and mapping_of(inner) == THREAD
        for inner in op.walk()
    )


def emit_thread_mapped_grid(op: affine.ParallelOp, w: FunctionWriter) -> None:
    extents, lowers, steps = _grid_band(op, w)
    threads = _block_size(op)
    body = op.body.block
    shared = [
        o
        for o in body.ops
        if isinstance(o, memref.AllocOp | memref.AllocaOp)
        and gpu.memory_space(o.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
    ]
    for inner in op.walk():
        if (
            isinstance(inner, memref.AllocOp | memref.AllocaOp)
            and inner not in shared
            and gpu.memory_space(inner.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
        ):
            raise InterpreterError(
                "a shared buffer must be allocated directly in the grid band's body",
                inner,
            )
    kernel, ctx = w.fresh("block"), w.fresh("gpu")
    params = [w.define(a.memref) for a in shared]
    outer = w.gpu_context
    plan = None
    if w.program.lockstep:
        plan = plan_mapped_grid(op, [a.memref for a in shared])
    with w.indented(f"def {kernel}({', '.join([ctx, *params])}):"):
        w.gpu_context = ctx
        linear = f"{ctx}.ids[0]"
        for k, iv in enumerate(op.induction_variables):
            stride = math.prod(extents[k + 1 :])
            index = linear if stride == 1 else f"{linear} // {stride}"
            if k > 0:
                index = f"({index}) % {extents[k]}"
            w.line(f"{w.define(iv)} = {lowers[k]} + {steps[k]} * ({index})")
        ops = [o for o in body.ops if o not in shared]
        if plan is not None:
            start_lockstep_block(w, plan, ctx).block_of(ops)
        else:
            for inner in ops:
                if not isinstance(inner, affine.YieldOp):
                    w.emit_op(inner)
    w.gpu_context = outer
    workgroup = [
        (
            a.memref.name_hint or f"shared{k}",
            memref_shape(a.memref.type),  # pyright: ignore[reportArgumentType]
            numpy_dtype(a.memref.type.get_element_type()),  # pyright: ignore
        )
        for k, a in enumerate(shared)
    ]
    name = repr(f"{_function_name(op)} (grid band)")
    w.line(
        f"{w.global_(run_grid, 'run_grid')}({kernel}, {name}, "
        f"({' * '.join(map(str, extents))}, 1, 1), ({threads}, 1, 1), (), "
        f"{w.global_(workgroup, 'workgroup')}, {w.program.budget_name}, "
        f"{plan is not None})"
    )


def emit_thread_band(op: affine.ParallelOp, w: FunctionWriter) -> None:
    """The running thread's one iteration of a thread band."""
    if w.gpu_context is None:
        raise InterpreterError("a thread-mapped band outside a grid-mapped one", op)
    extents, _, _ = _constant_band(op, "thread")
    linear = f"{w.gpu_context}.ids[3]"
    for k, iv in enumerate(op.induction_variables):
        stride = math.prod(extents[k + 1 :])
        index = linear if stride == 1 else f"{linear} // {stride}"
        if k > 0:
            index = f"({index}) % {extents[k]}"
        w.line(f"{w.define(iv)} = {index}")
    w.emit_block(op.body.block)


def _grid_band(op: affine.ParallelOp, w: FunctionWriter) -> tuple[list, list, list]:
    """A grid band's extents, lower bounds and steps. The outermost extent may be
    known only at run time (a dynamic batch, `to (symbol(%n), ...)`): it is then
    the name of a local computed here."""
    lower, upper = op.lowerBoundsMap.data, op.upperBoundsMap.data
    n = len(op.induction_variables)
    if (
        lower.num_dims + lower.num_symbols
        or len(lower.results) != n
        or len(upper.results) != n
        or not _uses_operands(upper.results[0])
        or any(_uses_operands(e) for e in upper.results[1:])
    ):
        return _constant_band(op, "grid")
    lowers = [e.eval([], []) for e in lower.results]
    steps = list(op.step_values)
    outer = AffineMap(upper.num_dims, upper.num_symbols, upper.results[:1])
    (bound,) = map_results(w, outer, op.upper_bound_operands)
    first = w.fresh("grid_extent")
    w.line(f"{first} = max(0, -(-(({bound}) - {lowers[0]}) // {steps[0]}))")
    extents: list = [first]
    for e, lo, step in zip(upper.results[1:], lowers[1:], steps[1:], strict=True):
        extents.append(max(0, -(-(e.eval([], []) - lo) // step)))
    return extents, lowers, steps


def _uses_operands(e: AffineExpr) -> bool:
    return any(isinstance(x, AffineDimExpr | AffineSymExpr) for x in e.dfs())


def _constant_band(op: affine.ParallelOp, what: str) -> tuple[list, list, list]:
    lower, upper = op.lowerBoundsMap.data, op.upperBoundsMap.data
    if (
        lower.num_dims + lower.num_symbols
        or upper.num_dims + upper.num_symbols
        or len(lower.results) != len(op.induction_variables)
        or len(upper.results) != len(op.induction_variables)
    ):
        raise InterpreterError(
            f"a {what}-mapped band with threads inside must have constant bounds", op
        )
    lowers = [e.eval([], []) for e in lower.results]
    uppers = [e.eval([], []) for e in upper.results]
    steps = list(op.step_values)
    extents = [
        max(0, -(-(u - lo) // s))
        for lo, u, s in zip(lowers, uppers, steps, strict=True)
    ]
    if what == "thread" and (any(lowers) or any(s != 1 for s in steps)):
        raise InterpreterError("a thread band runs from 0, step 1", op)
    return extents, lowers, steps


def _block_size(grid: affine.ParallelOp) -> int:
    sizes = {
        math.prod(_constant_band(inner, "thread")[0])
        for inner in grid.walk()
        if isinstance(inner, affine.ParallelOp) and mapping_of(inner) == THREAD
    }
    if len(sizes) != 1:
        raise InterpreterError(
            f"its thread bands have different sizes {sorted(sizes)}", grid
        )
    return sizes.pop()


def _function_name(op: Operation) -> str:
    parent = op.parent_op()
    while parent is not None and "sym_name" not in parent.properties:
        parent = parent.parent_op()
    return parent.properties["sym_name"].data if parent is not None else "?"  # pyright: ignore


__all__ = ["emit_thread_band", "emit_thread_mapped_grid", "is_thread_mapped_grid"]
