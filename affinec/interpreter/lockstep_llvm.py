"""The llvm level in lockstep: a kernel `llvm.func` (after `convert-gpu-to-nvvm`)
running a block's threads at once (`lockstep`), its loops and branches found
again by `cfg_structure`.

A pointer over the block's threads is `(buffer, offsets)`, as one thread's is
`(buffer, offset)`: `getelementptr` adds to the offsets as it adds to an offset
(its ordinary emitter takes arrays), and a load or a store reads the buffer the
pointer's root says:

    shared   (a global of the gpu.module)    `SharedArray.read_lanes`/`write_lanes`
    private  (`llvm.alloca`)                 one buffer a thread, (threads, size)
    global   (a kernel argument)             the host's flat array

Integers are int64 arrays (`lane_scalars`' semantics, as arith's), floats
numpy's arrays, vectors (lanes, width), the intrinsics of nvvm as in
`lockstep_nvvm`. Every access is checked as the thread-by-thread emitters
check it, with the same message, at the lane that fails first.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation

from affinec.dialects import nvvm
from affinec.dialects.affinec import ElementPointerOp
from affinec.dialects.llvm import AddrSpaceCastOp, ExtractElementOp
from affinec.interpreter import lane_scalars
from affinec.interpreter.llvm_ops import INT_BINARY as LLVM_INT_BINARY
from affinec.interpreter.llvm_ops import (
    INTRINSICS,
    dynamic_global,
    misaligned,
    out_of_bounds,
    special_register,
)
from affinec.interpreter.lockstep_runtime import pointer_offsets
from affinec.interpreter.shared_memory import SharedArray
from affinec.interpreter.support import (
    CMPI_PREDICATES,
    LANEWISE,
    InterpreterError,
    numpy_dtype,
    poisoned,
)

# -- what the generated code calls ----------------------------------------------------------


def _elements(ctx, op: Operation, pointer, threads: np.ndarray, width: int, rows):
    """Where an access of `width` elements (0: one) at each lane's pointer lands:
    (buffer, index, owners, row), the index (lanes,) or (lanes, width), each lane's
    offset checked inside the buffer and, for a vector, aligned; `row` indexes a
    private buffer's threads (`rows`: the lanes' thread numbers), None for others."""
    buffer = pointer[0]
    private = isinstance(buffer, np.ndarray) and buffer.ndim == 2
    size = buffer.shape[-1] if private else len(buffer)
    offsets = pointer_offsets(pointer, len(threads))
    n = max(width, 1)
    if width and (bad := offsets % width != 0).any():
        k = int(np.argmax(bad))
        ctx.block.thread = int(threads[k])
        verb = "load" if isinstance(op, llvm.LoadOp) else "store"
        raise InterpreterError(misaligned(verb, width, int(offsets[k])), op)
    if (bad := (offsets < 0) | (offsets + n > size)).any():
        k = int(np.argmax(bad))
        ctx.block.thread = int(threads[k])
        last = int(offsets[k]) + n - 1 if width else int(offsets[k])
        raise InterpreterError(out_of_bounds(last, size), op)
    if not width:
        return buffer, offsets, threads, rows if private else None
    run = offsets[:, None] + np.arange(width)
    row = np.asarray(rows)[:, None] if private else None
    return buffer, run, np.repeat(threads, width), row


def load_lanes(ctx, op: Operation, pointer, threads: np.ndarray, width: int, rows):
    """`llvm.load` for `threads`: one element a lane (`width` 0) or a vector of
    `width`; `rows` the lanes' rows of a private buffer (their thread numbers)."""
    buffer, index, owners, row = _elements(ctx, op, pointer, threads, width, rows)
    if isinstance(buffer, SharedArray):
        values = buffer.read_lanes(index.reshape(-1), owners).reshape(index.shape)
    elif row is not None:
        values = buffer[row, index]
    else:
        values = buffer[index]
    return values.astype(np.int64) if values.dtype.kind in "iub" else values


def store_lanes(ctx, op: Operation, pointer, value, threads: np.ndarray, width, rows):
    """`llvm.store` for `threads` (see `load_lanes`): where every lane writes one
    element of global memory, the last lane's value stays, as thread by thread."""
    buffer, index, owners, row = _elements(ctx, op, pointer, threads, width, rows)
    values = np.broadcast_to(value, index.shape)
    if isinstance(buffer, SharedArray):
        buffer.write_lanes(index.reshape(-1), values.reshape(-1), owners)
    elif row is not None:
        buffer[row, index] = values
    else:
        buffer[index] = values


def with_element(vector, n: int, index: int, value) -> np.ndarray:
    """`llvm.insertelement` for each lane."""
    out = np.array(np.broadcast_to(vector, (n, np.shape(vector)[-1])))
    out[:, index] = value
    return out


# -- which ops ----------------------------------------------------------------------------


def takes(op: Operation, plan, divergent: bool) -> bool | None:
    """Whether the llvm-level `op` runs in lockstep, recording in `plan` what
    differs between threads and which pointers are shared, private or global;
    None for an op of another level."""
    match op:
        case nvvm.SpecialRegisterOp():
            register = special_register(op)
            if register is None:
                return False
            if register[0] == "thread_id":
                plan.varying.add(op.res)
            return True
        case nvvm.BarrierOp():
            return not divergent
        case llvm.AddressOfOp():
            plan.shared.add(op.result)
            return True
        case llvm.GEPOp():
            base = op.ptr
            kinds = [s for s in (plan.shared, plan.private, plan.arrays) if base in s]
            owner = base.owner
            dynamic = isinstance(owner, llvm.AddressOfOp) and dynamic_global(owner)
            if not kinds and not dynamic:
                return False
            (kinds[0] if kinds else plan.shared).add(op.result)
            if plan.differ(op.operands):
                plan.varying.add(op.result)
            return True
        case llvm.AllocaOp():
            if divergent:
                return False
            plan.private.add(op.res)
            plan.varying.add(op.res)
            return True
        case llvm.LoadOp() | llvm.StoreOp():
            t = (
                op.dereferenced_value if isinstance(op, llvm.LoadOp) else op.value
            ).type
            if isinstance(t, VectorType) and t.get_num_dims() != 1:
                return False
            if not any(op.ptr in s for s in (plan.shared, plan.private, plan.arrays)):
                return False
            if isinstance(op, llvm.LoadOp) and (
                op.ptr not in plan.arrays or plan.differ((op.ptr,))
            ):
                plan.varying.add(op.dereferenced_value)
            return True
        case AddrSpaceCastOp():
            for s in (plan.shared, plan.private, plan.arrays):
                if op.arg in s:
                    s.add(op.res)
            if op.arg in plan.varying:
                plan.varying.add(op.res)
            return True
        case ExtractElementOp() | llvm.InsertElementOp():
            index = op.position if isinstance(op, ExtractElementOp) else op.index
            if plan.differ((index,)):
                return False
            if plan.differ(op.operands):
                plan.varying.add(op.results[0])
            return True
        case llvm.PtrToIntOp():
            # a shared address: of a global's element (the llvm level) or of a
            # shared memref's (`affinec.element_pointer`, the nvvm level)
            owner = op.input.owner
            into_shared = op.input in plan.shared or (
                isinstance(owner, ElementPointerOp) and owner.memref in plan.shared
            )
            if not into_shared:
                return False
            if plan.differ(op.operands):
                plan.varying.add(op.output)
            return True
        case llvm.ReturnOp():
            return True
    if type(op) in _LANE_INTEGER_OPS or isinstance(op, _FLOAT_OPS):
        if plan.differ(op.operands):
            plan.varying.update(op.results)
        return True
    if isinstance(op, llvm.CallIntrinsicOp):
        fn = INTRINSICS.get(op.intrin.data.rsplit(".", 1)[0])
        if fn is None or fn not in LANEWISE:
            return False
        if plan.differ(op.args):
            plan.varying.update(op.results)
        return True
    return None


# -- writing them ---------------------------------------------------------------------------


def _alloca(kw, op: llvm.AllocaOp) -> None:
    w = kw.w
    element, count = op.elem_type, 1
    if isinstance(element, llvm.LLVMArrayType):
        count, element = element.size.data, element.type
    dtype = w.global_(numpy_dtype(element), "dtype")
    fresh = w.global_(poisoned, "poisoned")
    w.line(
        f"{w.define(op.res)} = ({fresh}(({kw.count}, {count} * {w[op.size]}), "
        f"{dtype}), 0)"
    )


def _width(t) -> int:
    return t.get_shape()[0] if isinstance(t, VectorType) else 0


def _load(kw, op: llvm.LoadOp) -> None:
    w, plan = kw.w, kw.kernel_plan
    if op.ptr in plan.arrays and not plan.differ((op.ptr,)):
        w.emit_op(op)  # one element of global memory, read once for every thread
        return
    fn = w.global_(load_lanes, "load_lanes")
    width = _width(op.dereferenced_value.type)
    w.line(
        f"{w.define(op.dereferenced_value)} = {fn}({kw.ctx}, {w.op_ref(op)}, "
        f"{w[op.ptr]}, {kw.lane}, {width}, {kw.lane})"
    )


def _store(kw, op: llvm.StoreOp) -> None:
    w, plan = kw.w, kw.kernel_plan
    if op.ptr in plan.arrays and not plan.differ((op.ptr, op.value)):
        w.emit_op(op)
        return
    fn = w.global_(store_lanes, "store_lanes")
    width = _width(op.value.type)
    w.line(
        f"{fn}({kw.ctx}, {w.op_ref(op)}, {w[op.ptr]}, {w[op.value]}, {kw.lane}, "
        f"{width}, {kw.lane})"
    )


def _vector_element(kw, op: Operation) -> None:
    w = kw.w
    if not kw.kernel_plan.differ(op.operands):
        w.emit_op(op)
        return
    if isinstance(op, ExtractElementOp):
        w.line(f"{w.define(op.res)} = {w[op.vector]}[:, {w[op.position]}]")
        return
    fn = w.global_(with_element, "with_element")
    w.line(
        f"{w.define(op.res)} = {fn}({w[op.vector]}, {kw.count}, {w[op.index]}, "
        f"{w[op.value]})"
    )


def _integer(kw, op: Operation) -> None:
    w = kw.w
    if not kw.kernel_plan.differ(op.operands):
        w.emit_op(op)
        return
    result = op.results[0]
    names = w.names(op.operands)
    match op:
        case llvm.ICmpOp():
            predicate = CMPI_PREDICATES[op.predicate.value.data]
            lane_scalars.emit_compare(w, predicate, result, op.lhs, *names)
        case llvm.SelectOp():
            where = w.global_(np.where, "where")
            w.line(f"{w.define(result)} = {where}({names[0]}, {names[1]}, {names[2]})")
        case llvm.SExtOp() | llvm.TruncOp() | llvm.ZExtOp():
            signed = not isinstance(op, llvm.ZExtOp)
            lane_scalars.emit_cast(w, result, op.operands[0], signed)
        case _:
            lane_scalars.emit_binary(w, LLVM_INT_BINARY[type(op)], result, *names)


_LANE_INTEGER_OPS = {
    *LLVM_INT_BINARY,
    llvm.ICmpOp,
    llvm.SelectOp,
    llvm.SExtOp,
    llvm.TruncOp,
    llvm.ZExtOp,
}
_FLOAT_OPS = (
    llvm.FAddOp,
    llvm.FSubOp,
    llvm.FMulOp,
    llvm.FDivOp,
    llvm.FNegOp,
    llvm.FPExtOp,
    llvm.FPTruncOp,
)
"""Float ops whose ordinary emitters take arrays over lanes as they take one
thread's values (`LaneWriter` writes them so)."""


def _intrinsic(kw, op: llvm.CallIntrinsicOp) -> None:
    w = kw.w
    if not kw.kernel_plan.differ(op.args):
        w.emit_op(op)
        return
    fn = INTRINSICS[op.intrin.data.rsplit(".", 1)[0]]
    fn = LANEWISE.get(fn, fn)
    assert op.ress is not None
    args = ", ".join(w.names(op.args))
    w.line(f"{w.define(op.ress)} = {w.global_(fn, fn.__name__)}({args})")


LLVM_EMITTERS = {
    llvm.AllocaOp: _alloca,
    llvm.LoadOp: _load,
    llvm.StoreOp: _store,
    ExtractElementOp: _vector_element,
    llvm.InsertElementOp: _vector_element,
    llvm.CallIntrinsicOp: _intrinsic,
    **dict.fromkeys(_LANE_INTEGER_OPS, _integer),
}
"""The llvm level's ops written for a block's threads (`lockstep._EMITTERS`, which
writes `nvvm.barrier0` as it writes `gpu.barrier`);
`getelementptr`, `addressof`, casts and `ptrtoint` by their ordinary emitters, which
take offsets over the lanes."""
