"""Functions and control flow: func, scf and cf.

Structured ops become Python's own `for`/`if`/`while`. A region of several blocks
(after `convert-scf-to-cf`) becomes a dispatch loop, `while True:` over `if block ==
k:` arms, with branches assigning the target's block arguments and setting `block`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from xdsl.dialects import cf, func, llvm, scf
from xdsl.ir import Block, Operation, Region, SSAValue

from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.support import InterpreterError
from affinec.ir.cfg import reachable_blocks

# -- functions ----------------------------------------------------------------------------


def write_body(
    w: FunctionWriter, region: Region, on_return: type[Operation] = func.ReturnOp
) -> None:
    """Emit a function body; its entry block's arguments must already be defined."""
    if len(region.blocks) == 1:
        term = w.emit_block(region.block)
        _emit_exit(w, term, on_return)
        return
    write_cfg(w, region, on_return)


def _emit_exit(w: FunctionWriter, term: Operation | None, on_return: type) -> None:
    if isinstance(term, on_return):
        values = w.names(term.operands)
        w.line(f"return ({', '.join(values)}{',' * (len(values) == 1)})")
    elif term is not None:
        raise InterpreterError("unexpected terminator here", term)
    else:
        w.line("return ()")


def write_cfg(w: FunctionWriter, region: Region, on_return: type[Operation]) -> None:
    """A multi-block region as a dispatch loop over its blocks (those that can
    run: an unreachable one may even use values before their definition)."""
    blocks = reachable_blocks(region)
    index = {b: k for k, b in enumerate(blocks)}
    for b in blocks[1:]:
        for arg in b.args:
            w.define(arg)
    state = w.fresh("block")
    w.line(f"{state} = 0")

    def jump(source: int, target: Block, args) -> None:
        w.assign(w.names(target.args), w.names(args))
        if index[target] <= source:  # a backward branch: the only way to loop
            w.tick()
        w.line(f"{state} = {index[target]}")
        w.line("continue")

    def arm(k: int) -> None:
        term = w.emit_block(blocks[k])
        if term is None:
            _emit_exit(w, term, on_return)
            return
        with w.at(term):
            _emit_terminator(w, k, term, jump, on_return)

    def dispatch(lo: int, hi: int) -> None:
        """The arms of blocks[lo:hi], found by bisection: a chain of `elif`s made
        each turn of an inner loop test every block before its own."""
        if hi - lo == 1:
            arm(lo)
            return
        if hi - lo <= _DISPATCH_CHAIN:
            for k in range(lo, hi):
                keyword = "if" if k == lo else "elif"
                test = "else:" if k == hi - 1 else f"{keyword} {state} == {k}:"
                with w.indented(test):
                    arm(k)
            return
        middle = (lo + hi) // 2
        with w.indented(f"if {state} < {middle}:"):
            dispatch(lo, middle)
        with w.indented("else:"):
            dispatch(middle, hi)

    with w.indented("while True:"):
        dispatch(0, len(blocks))


_DISPATCH_CHAIN = 4
"""Up to this many blocks, the dispatch loop tests them one after the other."""


def _emit_terminator(
    w: FunctionWriter,
    k: int,
    term: Operation,
    jump: Callable[[int, Block, Sequence[SSAValue]], None],
    on_return: type[Operation],
) -> None:
    """A block's terminator in the dispatch loop: a branch, or the exit."""
    match term:
        case cf.BranchOp() | llvm.BrOp():
            jump(k, term.successor, term.arguments)
        case cf.ConditionalBranchOp() | llvm.CondBrOp():
            with w.indented(f"if {w[term.cond]}:"):
                jump(k, term.then_block, term.then_arguments)
            with w.indented("else:"):
                jump(k, term.else_block, term.else_arguments)
        case _:
            _emit_exit(w, term, on_return)


@emits(func.CallOp)
def _call(op: func.CallOp, w: FunctionWriter) -> None:
    callee = function_global(op.callee.root_reference.data)
    results = [w.define(r) for r in op.results]
    call = f"{callee}({', '.join(w.names(op.arguments))})"
    if results:
        w.line(f"{', '.join(results)}, = {call}")
    else:
        w.line(call)


def function_global(sym_name: str) -> str:
    """The namespace name under which the function `@sym_name` is compiled."""
    return "fn_" + re.sub(r"\W", "_", sym_name)


# -- scf ----------------------------------------------------------------------------------


def _yielded(w: FunctionWriter, term: Operation | None, op: Operation) -> list[str]:
    if not isinstance(term, scf.YieldOp):
        raise InterpreterError("its region must end in scf.yield", op)
    return w.names(term.arguments)


@emits(scf.ForOp)
def _for(op: scf.ForOp, w: FunctionWriter) -> None:
    block = op.body.block
    iv = w.define(block.args[0])
    carried = [w.define(a) for a in block.args[1:]]
    w.assign(carried, w.names(op.iter_args))
    with w.for_range(iv, f"{w[op.lb]}, {w[op.ub]}, {w[op.step]}"):
        term = w.emit_block(block)
        w.assign(carried, _yielded(w, term, op))
    for result, value in zip(op.results, carried, strict=True):
        w.alias(result, value)


@emits(scf.IfOp)
def _if(op: scf.IfOp, w: FunctionWriter) -> None:
    results = [w.define(r) for r in op.output]
    with w.indented(f"if {w[op.cond]}:"):
        term = w.emit_block(op.true_region.block)
        if results:
            w.assign(results, _yielded(w, term, op))
    if op.false_region.blocks:
        with w.indented("else:"):
            term = w.emit_block(op.false_region.block)
            if results:
                w.assign(results, _yielded(w, term, op))


@emits(scf.ParallelOp)
def _parallel(op: scf.ParallelOp, w: FunctionWriter) -> None:
    block = op.body.block
    accumulators = [w.define(r) for r in op.res]
    w.assign(accumulators, w.names(op.initVals))
    with ExitStack() as loops:
        for iv, lb, ub, step in zip(
            block.args, op.lowerBound, op.upperBound, op.step, strict=True
        ):
            bounds = f"{w[lb]}, {w[ub]}, {w[step]}"
            loops.enter_context(w.for_range(w.define(iv), bounds))
        reduce = w.emit_block(block)
        if not isinstance(reduce, scf.ReduceOp):
            raise InterpreterError("its body must end in scf.reduce", op)
        for acc, value, region in zip(
            accumulators, reduce.args, reduce.reductions, strict=True
        ):
            lhs, rhs = region.block.args
            w.alias(lhs, acc)
            w.alias(rhs, w[value])
            term = w.emit_block(region.block)
            if not isinstance(term, scf.ReduceReturnOp):
                raise InterpreterError("malformed scf.reduce region", op)
            w.line(f"{acc} = {w[term.result]}")


@emits(scf.WhileOp)
def _while(op: scf.WhileOp, w: FunctionWriter) -> None:
    before, after = op.before_region.block, op.after_region.block
    carried = [w.define(a) for a in before.args]
    w.assign(carried, w.names(op.arguments))
    results = [w.define(r) for r in op.res]
    after_args = [w.define(a) for a in after.args]
    with w.while_true():
        cond = w.emit_block(before)
        if not isinstance(cond, scf.ConditionOp):
            raise InterpreterError("'before' must end in scf.condition", op)
        forwarded = w.names(cond.arguments)
        with w.indented(f"if not {w[cond.cond]}:"):
            w.assign(results, forwarded)
            w.line("break")
        w.assign(after_args, forwarded)
        term = w.emit_block(after)
        w.assign(carried, _yielded(w, term, op))
