"""The nvvm level's ops for a block in lockstep (`lockstep`): pointers, registers
and the tensor-core intrinsics, as `convert-nvgpu-to-nvvm` leaves a kernel.

A thread's value here is a pointer `(buffer, offset)`, an i32 register, a
`vector<2xf16>` or an `llvm.struct` of registers; over a block's threads they are

    pointer             (buffer, offsets)     the flat buffer once, an offset a lane
    i32, f32            (lanes,)              int64 for integers (`lane_scalars`)
    vector<2xf16>       (lanes, 2)            lanes first, as every vector
    struct of N regs    (lanes, N)            `llvm.extractvalue` takes a column

`nvvm.ldmatrix` and `nvvm.mma.sync` run once per warp through the same
`warps.ldmatrix` and `warps.mma` the coroutines use, their registers packed and
unpacked as `warp_ops` packs them (a register's low half is the lower column);
`nvvm.cp.async` starts one record for all its lanes (`async_copies.start_lane_run`).
Hopper's `nvvm.wgmma.mma_async` runs once per warpgroup through the same
`warpgroups.wgmma_registers` the coroutines' rendezvous uses (its descriptors
checked the same for the warpgroup's threads, its registers (lanes, N/2)), and
its commit and wait groups once per warpgroup; the fences are nothing to run, as
thread by thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import VectorType
from xdsl.ir import Operation, SSAValue

from affinec.dialects import nvvm
from affinec.dialects.affinec import ElementPointerOp
from affinec.dialects.affinec_wgmma import FenceProxyAsyncSharedOp
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.interpreter import async_copies
from affinec.interpreter.lockstep_runtime import (
    ldmatrix_warps,
    pointer_offsets,
    whole_warpgroups,
)
from affinec.interpreter.memref_ops import flat_pointer
from affinec.interpreter.support import InterpreterError, tuple_text
from affinec.interpreter.vector_ops import layout_of
from affinec.interpreter.warp_ops import bf16
from affinec.interpreter.warpgroups import commit_wgmma, wait_wgmma, wgmma_registers
from affinec.interpreter.warps import mma, whole_warps

# -- what the generated code calls ----------------------------------------------------------


def lane_pointer(op: Operation, array, indices: tuple) -> tuple[Any, np.ndarray]:
    """`flat_pointer` for a block's threads: the buffer flattened once, each lane's
    row-major offset (unchecked, like a `getelementptr`)."""
    buffer, _ = flat_pointer(op, array, (0,) * len(indices))
    offset = np.zeros((), np.int64)
    for index, dim in zip(indices, array.shape, strict=True):
        offset = offset * dim + np.asarray(index, np.int64)
    return buffer, offset


def ldmatrix_registers(op: nvvm.LdMatrixOp, pointer, lanes: np.ndarray, state):
    """`nvvm.ldmatrix` for a block's threads (whole warps, in order): each lane's
    registers, (lanes,) for one tile, (lanes, tiles) for more, as int64."""
    whole_warps(op, lanes)
    offsets = pointer_offsets(pointer, len(lanes))
    tiles = ldmatrix_warps(
        op, op.tiles, op.is_transposed, pointer[0], offsets, lanes, state
    )
    out = np.ascontiguousarray(tiles).view(np.int32)[..., 0].astype(np.int64)
    return out[:, 0] if op.tiles == 1 else out


def mma_registers(op: nvvm.MmaOp, a, b, c, lanes: np.ndarray) -> np.ndarray:
    """`nvvm.mma.sync` for a block's threads (whole warps, in order): `a`, `b`, `c`
    each lane's registers (one array a register), the result (lanes, 4)."""
    whole_warps(op, lanes)
    kind, n = op.kind, len(lanes)
    fragments = (
        _unpacked(kind.operands, a, n).reshape((n, *kind.a_fragment)),
        _unpacked(kind.operands, b, n).reshape((n, *kind.b_fragment)),
        np.stack([np.broadcast_to(r, (n,)) for r in c], axis=1)
        .astype(np.float32)
        .reshape((n, *kind.c_fragment)),
    )
    return mma(kind, *fragments).reshape(n, -1)


def wgmma_lanes(
    op: nvvm.WgmmaMmaAsyncOp, a, b, registers, lanes: np.ndarray, state
) -> np.ndarray:
    """`nvvm.wgmma.mma_async` for a block's threads (whole warpgroups, in order):
    each warpgroup's as `warpgroups.nvvm_wgmma` runs it, from its threads'
    descriptors (one for all, or one a lane) and accumulator registers (a struct:
    (lanes, N/2), or one for all); the result registers (lanes, N/2)."""
    whole_warpgroups(op, lanes)
    n = len(lanes)
    a, b = (np.broadcast_to(np.asarray(x), (n,)) for x in (a, b))
    c = np.broadcast_to(np.asarray(registers), (n, op.n // 2))
    out = None
    for first in range(0, n, WARPGROUP_SIZE):
        group = slice(first, first + WARPGROUP_SIZE)
        if (a[group] != a[first]).any() or (b[group] != b[first]).any():
            raise InterpreterError(
                "the threads of the warpgroup give different descriptors", op
            )
        c_group = c[group] if op.accumulates else None
        d = wgmma_registers(op, a[first], b[first], c_group, state, int(lanes[first]))
        if out is None:
            out = np.empty((n, *d.shape[1:]), d.dtype)
        out[group] = d
    assert out is not None  # whole warpgroups: at least one
    return out


def wgmma_group_lanes(op: Operation, lanes: np.ndarray, state, pending) -> None:
    """`nvvm.wgmma.commit.group` (`pending` None) or `wait.group pending` for a
    block's threads: once for each of its warpgroups, in order."""
    whole_warpgroups(op, lanes)
    for first in range(0, len(lanes), WARPGROUP_SIZE):
        if pending is None:
            commit_wgmma(state, int(lanes[first]))
        else:
            wait_wgmma(state, int(lanes[first]), pending)


def _unpacked(operands: str, registers, n: int) -> np.ndarray:
    """The elements of A's or B's registers, (lanes, registers, elements)."""
    if operands == "f16":
        return np.stack([np.broadcast_to(r, (n, 2)) for r in registers], axis=1).astype(
            np.float16
        )
    element = np.dtype(np.float32) if operands == "tf32" else bf16()
    packed = np.stack([np.broadcast_to(r, (n,)) for r in registers], axis=1)
    return packed.astype(np.int32).view(element)


def bitcast_lanes(value, n: int, source: tuple, target: tuple) -> np.ndarray:
    """`vector_ops.bitcast` for each lane: (lanes, ...) reinterpreted."""
    (src_dtype, src_shape), (dst_dtype, dst_shape) = source, target
    shape = (n, *(src_shape or ()))
    raw = np.ascontiguousarray(np.broadcast_to(value, shape).astype(src_dtype))
    out = raw.view(dst_dtype).reshape((n, *(dst_shape or ())))
    return out.astype(np.int64) if dst_dtype.kind == "i" else out


def with_column(container, shape: tuple[int, ...], k: int, value) -> np.ndarray:
    """`llvm.insertvalue` for each lane: a copy (lanes first, `shape`) with member
    `k` set."""
    out = np.array(np.broadcast_to(np.asarray(container), shape))
    out[:, k] = value
    return out


def element_type(t):
    """The scalar type of a vector's or an llvm aggregate's members (`t` itself
    for a scalar)."""
    if isinstance(t, llvm.LLVMStructType):
        t = t.types.data[0]
    elif isinstance(t, llvm.LLVMArrayType):
        t = t.type
    return t.get_element_type() if isinstance(t, VectorType) else t


def aggregate_shape(t) -> tuple[int, ...]:
    """An aggregate's shape after the lanes: a struct of N scalars (N,), an array
    of N vectors of W (N, W)."""
    if isinstance(t, llvm.LLVMStructType):
        return (len(t.types.data),)
    if isinstance(t, llvm.LLVMArrayType):
        inner = t.type
        width = tuple(inner.get_shape()) if isinstance(inner, VectorType) else ()
        return (t.size.data, *width)
    raise InterpreterError(f"no lockstep form of {t}")


def start_pointer_copies(
    ctx, threads: np.ndarray, op: nvvm.CpAsyncOp, dst, src, valid_bytes
) -> None:
    """`nvvm.cp.async` for `threads`: `async_copies.start_lane_run` in elements of
    the buffers (as `_cp_async_bytes` converts a thread's bytes)."""
    itemsize = dst[0].dtype.itemsize
    valid = None
    if valid_bytes is not None:
        valid_bytes = np.broadcast_to(np.asarray(valid_bytes, np.int64), threads.shape)
        if (bad := valid_bytes % itemsize != 0).any():
            k = int(np.argmax(bad))
            ctx.block.thread = int(threads[k])
            raise InterpreterError(
                f"{int(valid_bytes[k])} source bytes is not a whole number of "
                f"{dst[0].dtype} elements",
                op,
            )
        valid = valid_bytes // itemsize
    n = len(threads)
    async_copies.start_lane_run(
        ctx,
        threads,
        op,
        dst[0],
        pointer_offsets(dst, n),
        src[0],
        pointer_offsets(src, n),
        op.bytes // itemsize,
        valid,
    )


# -- writing them ---------------------------------------------------------------------------


def _element_pointer(kw, op: ElementPointerOp) -> None:
    w = kw.w
    if not kw.kernel_plan.differ(op.indices):
        w.emit_op(op)
        return
    fn = w.global_(lane_pointer, "lane_pointer")
    index = tuple_text(w.names(op.indices))
    w.line(f"{w.define(op.result)} = {fn}({w.op_ref(op)}, {w[op.memref]}, {index})")


def _ldmatrix(kw, op: nvvm.LdMatrixOp) -> None:
    w = kw.w
    fn = w.global_(ldmatrix_registers, "ldmatrix_registers")
    w.line(
        f"{w.define(op.res)} = {fn}({w.op_ref(op)}, {w[op.ptr]}, {kw.lane}, "
        f"{kw.ctx}.block)"
    )


def _mma(kw, op: nvvm.MmaOp) -> None:
    w = kw.w
    fn = w.global_(mma_registers, "mma_registers")
    groups = [tuple_text(w.names(g)) for g in (op.operandA, op.operandB, op.operandC)]
    w.line(f"{w.define(op.res)} = {fn}({w.op_ref(op)}, {', '.join(groups)}, {kw.lane})")


def _aggregate(kw, op: Operation) -> None:
    w = kw.w
    if not kw.kernel_plan.differ(op.operands):
        w.emit_op(op)
        return
    match op:
        case llvm.ExtractValueOp():
            (k,) = op.position.iter_values()
            w.line(f"{w.define(op.res)} = {w[op.container]}[:, {k}]")
        case llvm.InsertValueOp():
            (k,) = op.position.iter_values()
            fn = w.global_(with_column, "with_column")
            shape = f"({kw.count},) + {aggregate_shape(op.res.type)}"
            w.line(
                f"{w.define(op.res)} = {fn}({w[op.container]}, {shape}, {k}, "
                f"{w[op.value]})"
            )
        case llvm.BitcastOp():
            layouts = w.global_(
                (layout_of(op, op.arg.type), layout_of(op, op.result.type)), "layouts"
            )
            fn = w.global_(bitcast_lanes, "bitcast_lanes")
            w.line(f"{w.define(op.result)} = {fn}({w[op.arg]}, {kw.count}, *{layouts})")


def _cp_async(kw, op: nvvm.CpAsyncOp) -> None:
    w = kw.w
    size = "None" if op.cpSize is None else w[op.cpSize]
    fn = w.global_(start_pointer_copies, "pointer_copies")
    w.line(
        f"{fn}({kw.ctx}, {kw.lane}, {w.op_ref(op)}, {w[op.dst]}, {w[op.src]}, {size})"
    )


def _wgmma(kw, op: nvvm.WgmmaMmaAsyncOp) -> None:
    w = kw.w
    fn = w.global_(wgmma_lanes, "wgmma_lanes")
    a, b, c = w.names((op.descriptorA, op.descriptorB, op.inouts))
    w.line(
        f"{w.define(op.res)} = {fn}({w.op_ref(op)}, {a}, {b}, {c}, {kw.lane}, "
        f"{kw.ctx}.block)"
    )


def _wgmma_group(
    kw, op: nvvm.WgmmaGroupSyncAlignedOp | nvvm.WgmmaWaitGroupSyncOp
) -> None:
    w = kw.w
    fn = w.global_(wgmma_group_lanes, "wgmma_group_lanes")
    pending = op.group.value.data if isinstance(op, nvvm.WgmmaWaitGroupSyncOp) else None
    w.line(f"{fn}({w.op_ref(op)}, {kw.lane}, {kw.ctx}.block, {pending})")


def _commit(kw, op: nvvm.CpAsyncCommitGroupOp) -> None:
    kw.w.line(f"{kw.w.global_(async_copies.create_group, 'create_group')}({kw.ctx})")


def _wait(kw, op: nvvm.CpAsyncWaitGroupOp) -> None:
    wait = kw.w.global_(async_copies.wait_groups, "wait_groups")
    kw.w.line(f"{wait}({kw.ctx}, {op.groups})")


NVVM_EMITTERS = {
    ElementPointerOp: _element_pointer,
    nvvm.LdMatrixOp: _ldmatrix,
    nvvm.MmaOp: _mma,
    llvm.ExtractValueOp: _aggregate,
    llvm.InsertValueOp: _aggregate,
    llvm.BitcastOp: _aggregate,
    nvvm.CpAsyncOp: _cp_async,
    nvvm.CpAsyncCommitGroupOp: _commit,
    nvvm.CpAsyncWaitGroupOp: _wait,
    nvvm.WgmmaMmaAsyncOp: _wgmma,
    nvvm.WgmmaGroupSyncAlignedOp: _wgmma_group,
    nvvm.WgmmaWaitGroupSyncOp: _wgmma_group,
}
"""The nvvm level's ops written for a block's threads (`lockstep._EMITTERS`)."""


def takes(op: Operation, plan, divergent: bool) -> bool | None:
    """Whether the nvvm-level `op` runs in lockstep, recording in `plan` what
    differs between threads; None for an op of another level."""
    match op:
        case ElementPointerOp():
            if op.memref not in plan.shared | plan.arrays:
                return False
            if plan.differ(op.indices):
                plan.varying.add(op.result)
            return True
        case nvvm.LdMatrixOp() | nvvm.MmaOp():
            if divergent:
                return False
            plan.varying.update(op.results)
            return True
        case llvm.ExtractValueOp() | llvm.InsertValueOp():
            if len(tuple(op.position.iter_values())) != 1:
                return False
            aggregate = op.container.type
            if (
                isinstance(aggregate, llvm.LLVMStructType)
                and len({str(t) for t in aggregate.types.data}) != 1
            ):
                return False  # members of several types have no array form
            if plan.differ(op.operands):
                plan.varying.update(op.results)
            return True
        case llvm.BitcastOp():
            if isinstance(op.arg.type, llvm.LLVMPointerType):
                return False
            if plan.differ(op.operands):
                plan.varying.update(op.results)
            return True
        case nvvm.CpAsyncOp():
            return _pointer_into(op.dst, plan.shared) and _pointer_into(
                op.src, plan.arrays
            )
        case nvvm.CpAsyncCommitGroupOp() | nvvm.CpAsyncWaitGroupOp():
            return not divergent
        case nvvm.WgmmaMmaAsyncOp():
            # the warpgroup's together, its threads' registers an array a lane
            if divergent:
                return False
            plan.varying.add(op.res)
            return True
        case nvvm.WgmmaGroupSyncAlignedOp() | nvvm.WgmmaWaitGroupSyncOp():
            return not divergent
        case nvvm.WgmmaFenceAlignedOp() | FenceProxyAsyncSharedOp():
            return True  # nothing to run: as thread by thread, a `pass`
    return None


def _pointer_into(pointer: SSAValue, buffers: set[SSAValue]) -> bool:
    """Whether `pointer` points into one of `buffers`: an element of one of them
    (the nvvm level's memrefs) or one of them (the llvm level's pointers)."""
    owner = pointer.owner
    if isinstance(owner, ElementPointerOp):
        return owner.memref in buffers
    return pointer in buffers
