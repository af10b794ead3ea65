"""The accumulators of `wgmma` tied to the `wgmma.wait_group 0` that completes
them (`accumulator_allocas`, `fence_accumulators`).

A `wgmma` run is inline PTX whose outputs are the accumulator's registers; the
kernel keeps them in a private buffer (an `llvm.alloca`), which LLVM turns into
values. Nothing ties those values to the later `wgmma.wait_group 0` after which the
hardware has written them: LLVM may compute with them above the wait (InstCombine
folds a conversion of a loop's exit value into the loop's exit block, before a
wait that follows the loop), and where it does, ptxas finds non-wgmma instructions
reading a wgmma's accumulator in flight and serializes every `wgmma` of the
kernel (its warning C7514). So, after a `wgmma.wait_group 0` of its own (one that
does not end a step: a step's wait is followed by the stores of its run's
results), each accumulator buffer's values pass through an empty inline statement
with side effects, each output tied to its input: what reads them after the wait
reads the statement's outputs, which LLVM keeps after the wait. The statement
writes no instruction; ptxas sees the same registers.
"""

from __future__ import annotations

import llvmlite.ir as ir
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.ir import Operation, SSAValue

from affinec.dialects import nvvm

_RUNS = (nvvm.WgmmaMmaAsyncOp, nvvm.WgmmaRegistersRunOp)


def accumulator_allocas(function: llvm.FuncOp) -> list[llvm.AllocaOp]:
    """The function's `llvm.alloca`s into which a `wgmma` run's results are
    stored (`llvm.extractvalue` of the run, `llvm.store` through a GEP of the
    buffer), in the order of the function."""
    found: dict[llvm.AllocaOp, None] = {}
    for op in function.walk():
        if not isinstance(op, _RUNS):
            continue
        for use in op.results[0].uses:
            element = use.operation
            if not isinstance(element, llvm.ExtractValueOp):
                continue
            for store in element.res.uses:
                if isinstance(store.operation, llvm.StoreOp) and store.index == 0:
                    buffer = _buffer(store.operation.ptr)
                    if buffer is not None:
                        found[buffer] = None
    return list(found)


def _buffer(pointer: SSAValue) -> llvm.AllocaOp | None:
    owner = pointer.owner
    while isinstance(owner, llvm.GEPOp):
        owner = owner.ptr.owner
    return owner if isinstance(owner, llvm.AllocaOp) else None


def completes_accumulators(op: Operation) -> bool:
    """Whether `op` is a `wgmma.wait_group 0` of its own: all groups done, and not
    the wait of a step (which follows its `wgmma.commit_group`)."""
    if not isinstance(op, nvvm.WgmmaWaitGroupSyncOp) or op.group.value.data != 0:
        return False
    return not isinstance(op.prev_op, nvvm.WgmmaGroupSyncAlignedOp)


def fence_accumulators(
    buffers: list[llvm.AllocaOp],
    builder: ir.IRBuilder,
    values: dict[SSAValue, ir.Value],
) -> None:
    """Each buffer's values loaded, passed through one empty inline statement with
    side effects (outputs tied to inputs) and stored back, at the builder's place.
    A buffer not yet defined there (not in the entry block) or whose length is not
    a constant is left alone."""
    for buffer in buffers:
        pointer, size = values.get(buffer.res), values.get(buffer.size)
        if pointer is None or not isinstance(size, ir.Constant):
            continue
        count = int(size.constant)  # pyright: ignore[reportArgumentType]
        element = convert_type(buffer.elem_type)
        if count <= 0 or not isinstance(element, ir.FloatType):
            continue
        opaque = getattr(pointer.type, "is_opaque", True)
        slots = [
            builder.gep(
                pointer,
                [ir.Constant(ir.IntType(64), k)],
                inbounds=True,
                source_etype=element if opaque else None,
            )
            for k in range(count)
        ]
        loaded = [builder.load(slot, typ=element if opaque else None) for slot in slots]
        constraints = ",".join(["=f"] * count + [str(k) for k in range(count)])
        fenced = builder.asm(
            ir.FunctionType(ir.LiteralStructType([element] * count), [element] * count),
            "",
            constraints,
            loaded,
            side_effect=True,
        )
        for k, slot in enumerate(slots):
            builder.store(builder.extract_value(fenced, k), slot)


__all__ = ["accumulator_allocas", "completes_accumulators", "fence_accumulators"]
