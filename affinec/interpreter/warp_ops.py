"""`ldmatrix` and `mma.sync` at both levels: nvgpu's (memrefs, n-D vector fragments)
and nvvm's (pointers, i32 and `vector<2xf16>` registers, struct results).

Each lane yields a `warps.WarpCollective`; the warp's function converts the 32 lanes'
operands to what `warps.ldmatrix` and `warps.mma` take, and their results back to what
each lane's IR expects:

    nvgpu.ldmatrix   lane: (memref, indices)   -> vector<N x 2 x T>  (numpy (N, 2))
    nvvm.ldmatrix    lane: (buffer, offset)     -> i32, or a struct of N i32 (tuple)
    nvgpu.mma.sync   lane: (A, B, C) vectors    -> D, vector<2x2xf32> (numpy (2, 2))
    nvvm.mma.sync    lane: registers of A, B, C -> struct of 4 f32 (tuple)

A 32-bit register holding two 16-bit elements has the element of the lower column in
its low half, as PTX (little-endian) packs them.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from affinec.base.dtypes import numpy_dtype
from affinec.dialects import nvgpu, nvvm
from affinec.dialects.nvgpu import WARP_SIZE, MmaKind
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.memref_ops import checked_pointer
from affinec.interpreter.support import InterpreterError
from affinec.interpreter.warps import WarpCollective, ldmatrix, mma
from affinec.ir.mma_layouts import LDMATRIX_ROWS


def _yield_collective(w: FunctionWriter, op: Operation, execute, operands: str):
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(execute, execute.__name__)
    w.line(
        f"{w.define(op.results[0])} = yield {collective}({w.op_ref(op)}, {fn}, "
        f"{operands})"
    )


# -- ldmatrix ------------------------------------------------------------------------------


def _nvgpu_ldmatrix(op: nvgpu.LdMatrixOp, lanes: list, state, base: int) -> list:
    used = op.num_tiles * LDMATRIX_ROWS
    rows = [
        checked_pointer(op, array, indices) if lane < used else None
        for lane, (array, indices) in enumerate(lanes)
    ]
    out = ldmatrix(op, rows, op.num_tiles, op.is_transposed, state, base)
    return list(out)


@emits(nvgpu.LdMatrixOp)
def _ldmatrix(op: nvgpu.LdMatrixOp, w: FunctionWriter) -> None:
    indices = ", ".join(w.names(op.indices))
    comma = "," * (len(op.indices) == 1)
    _yield_collective(
        w, op, _nvgpu_ldmatrix, f"({w[op.srcMemref]}, ({indices}{comma}))"
    )


def _nvvm_ldmatrix(op: nvvm.LdMatrixOp, lanes: list, state, base: int) -> list:
    rows = [pointer for (pointer,) in lanes]
    out = ldmatrix(op, rows, op.tiles, op.is_transposed, state, base)
    registers = np.ascontiguousarray(out).view(np.int32)[..., 0]
    if op.tiles == 1:
        return [int(r[0]) for r in registers]
    return [tuple(int(x) for x in r) for r in registers]


@emits(nvvm.LdMatrixOp)
def _nvvm_ldmatrix_emitter(op: nvvm.LdMatrixOp, w: FunctionWriter) -> None:
    _yield_collective(w, op, _nvvm_ldmatrix, f"({w[op.ptr]},)")


# -- mma.sync ------------------------------------------------------------------------------


def _nvgpu_mma(op: nvgpu.MmaSyncOp, lanes: list, state, base: int) -> list:
    a, b, c = (np.stack([lane[k] for lane in lanes]) for k in range(3))
    return list(mma(op.kind, a, b, c))


@emits(nvgpu.MmaSyncOp)
def _mma_sync(op: nvgpu.MmaSyncOp, w: FunctionWriter) -> None:
    operands = ", ".join(w.names((op.matrixA, op.matrixB, op.matrixC)))
    _yield_collective(w, op, _nvgpu_mma, f"({operands})")


def _registers(kind: MmaKind, lanes: list, k: int, shape: tuple[int, int]):
    """Operand `k` (A or B) of every lane, unpacked from its registers."""
    if kind.operands == "f16":
        values = np.array([np.stack(lane[k]) for lane in lanes], np.float16)
    else:
        element = np.dtype(np.float32) if kind.operands == "tf32" else bf16()
        packed = np.array([lane[k] for lane in lanes], np.int64).astype(np.int32)
        values = packed.view(element)
    return values.reshape((WARP_SIZE, *shape))


def bf16() -> np.dtype:
    from xdsl.dialects.builtin import BFloat16Type

    return numpy_dtype(BFloat16Type())


def _nvvm_mma(op: nvvm.MmaOp, lanes: list, state, base: int) -> list:
    kind = op.kind
    a = _registers(kind, lanes, 0, kind.a_fragment)
    b = _registers(kind, lanes, 1, kind.b_fragment)
    c = np.array([lane[2] for lane in lanes], np.float32)
    c = c.reshape((WARP_SIZE, *kind.c_fragment))
    d = mma(kind, a, b, c)
    return [tuple(lane.reshape(-1)) for lane in d]


@emits(nvvm.MmaOp)
def _nvvm_mma_emitter(op: nvvm.MmaOp, w: FunctionWriter) -> None:
    groups = [
        f"({', '.join(w.names(g))},)" for g in (op.operandA, op.operandB, op.operandC)
    ]
    _yield_collective(w, op, _nvvm_mma, f"({', '.join(groups)})")
