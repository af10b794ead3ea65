"""nvgpu ops as nvvm ops, in place, at the gpu level: the work of
`convert-nvgpu-to-nvvm`.

Each nvgpu op becomes the nvvm op of its PTX instruction, on pointers and registers,
with the conversions around it that MLIR's lowering makes: a memref operand becomes
`affinec.element_pointer`, an n-D vector fragment is taken apart (`vector.extract`,
`llvm.bitcast` to i32 where the registers hold bf16 or tf32) and put together
(`llvm.extractvalue` of the result struct, `vector.insert` into a `ub.poison`):

    %a = nvgpu.ldmatrix %sa[%i, %j] {numTiles = 4 : i32, transpose = false}
        : memref<16x16xf16, 3> -> vector<4x2xf16>

becomes

    %ptr = affinec.element_pointer %sa[%i, %j] : memref<16x16xf16, 3> -> !llvm.ptr<3>
    %ldm = nvvm.ldmatrix %ptr {num = 4 : i32, layout = #nvvm.mma_layout<row>}
        : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
    %reg = llvm.extractvalue %ldm[0] : !llvm.struct<(i32, i32, i32, i32)>
    %reg_1 = llvm.bitcast %reg : i32 to vector<2xf16>
    ...
    %frag = ub.poison : vector<4x2xf16>
    %frag_1 = vector.insert %reg_1, %frag [0] : vector<2xf16> into vector<4x2xf16>
    ...
    %a = vector.insert %reg_7, %frag_3 [3] : vector<2xf16> into vector<4x2xf16>

`LOWERINGS` holds one function per nvgpu op: it returns the ops replacing the op and
the values replacing its results. Async tokens disappear: a copy's token may only feed
`device_async_create_group` and a group's only `device_async_wait`
(`check_lowerable` refuses others before anything is rewritten).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, llvm, ub, vector
from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    IntegerAttr,
    MemRefType,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import nvgpu, nvvm
from affinec.dialects.affinec import ElementPointerOp
from affinec.ir.op_table import OpTable

Lowered = tuple[list[Operation], list[SSAValue]]

LOWERINGS: OpTable[Callable[[Operation], Lowered]] = OpTable("nvgpu lowering")
lowers = LOWERINGS.register


def check_lowerable(op: Operation) -> None:
    """Refuse (before rewriting) an async token used by anything but the ops that
    this lowering rewrites with it."""
    if isinstance(op, nvgpu.DeviceAsyncCopyOp | nvgpu.DeviceAsyncCreateGroupOp):
        allowed = (
            nvgpu.DeviceAsyncCreateGroupOp
            if isinstance(op, nvgpu.DeviceAsyncCopyOp)
            else nvgpu.DeviceAsyncWaitOp
        )
        for use in op.asyncToken.uses:
            if not isinstance(use.operation, allowed):
                raise PassError(
                    use.operation,
                    f"uses the async token of '{op.name}': convert-nvgpu-to-nvvm "
                    f"lowers tokens only as operands of '{allowed.name}' (a wait "
                    "waits for numGroups, whichever group its token names)",
                )


_NAMES = {
    "affinec.element_pointer": "ptr",
    "nvvm.ldmatrix": "ldm",
    "nvvm.mma.sync": "mma",
    "llvm.extractvalue": "reg",
    "llvm.bitcast": "reg",
    "vector.extract": "reg",
    "vector.insert": "frag",
    "ub.poison": "frag",
    "arith.index_cast": "bytes",
    "arith.muli": "bytes",
    "arith.constant": "bytes",
}


def name_intermediates(ops: Sequence[Operation], results: Sequence[SSAValue]) -> None:
    """Name the values a lowering makes after what they are (`%ptr`, `%ldm`, `%reg`,
    `%frag`), leaving the op's replacements to take over its results' names."""
    for op in ops:
        for value in op.results:
            if value not in results and value.name_hint is None:
                value.name_hint = _NAMES.get(op.name)


def _extract_value(aggregate: SSAValue, k: int, t) -> llvm.ExtractValueOp:
    return llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [k]), aggregate, t)


def assemble(t: VectorType, parts: Sequence[tuple[Sequence[int], SSAValue]]) -> Lowered:
    """The n-D vector of type `t` made of `parts` ((position, value) each), inserted
    into a `ub.poison`."""
    poison = ub.PoisonOp(t)
    ops: list[Operation] = [poison]
    value = poison.result
    for position, part in parts:
        insert = vector.InsertOp(part, value, list(position))
        ops.append(insert)
        value = insert.result
    return ops, [value]


@lowers(nvgpu.LdMatrixOp)
def _ldmatrix(op: nvgpu.LdMatrixOp) -> Lowered:
    t = op.res.type
    assert isinstance(t, VectorType)
    pointer = ElementPointerOp(op.srcMemref, op.indices)
    load = nvvm.LdMatrixOp(pointer, op.num_tiles, op.is_transposed)
    ops: list[Operation] = [pointer, load]
    register = VectorType(t.get_element_type(), [2])
    parts = []
    for k in range(op.num_tiles):
        word = load.res
        if op.num_tiles > 1:
            extract = _extract_value(load.res, k, i32)
            ops.append(extract)
            word = extract.res
        cast = llvm.BitcastOp(word, register)
        ops.append(cast)
        parts.append(((k,), cast.result))
    built, results = assemble(t, parts)
    return ops + built, results


def _registers(kind: nvgpu.MmaKind, fragment: SSAValue) -> Lowered:
    """The 32-bit registers of an A or B fragment, as `nvvm.mma.sync` takes them."""
    t = fragment.type
    assert isinstance(t, VectorType)
    registers, per_register = t.get_shape()
    ops: list[Operation] = []
    values = []
    for r in range(registers):
        if kind.operands == "tf32":
            extract = vector.ExtractOp(fragment, [r, 0], Float32Type())
        else:
            row = VectorType(t.get_element_type(), [per_register])
            extract = vector.ExtractOp(fragment, [r], row)
        ops.append(extract)
        value = extract.result
        if kind.operands != "f16":
            cast = llvm.BitcastOp(value, i32)
            ops.append(cast)
            value = cast.result
        values.append(value)
    return ops, values


@lowers(nvgpu.MmaSyncOp)
def _mma_sync(op: nvgpu.MmaSyncOp) -> Lowered:
    kind = op.kind
    ops_a, a = _registers(kind, op.matrixA)
    ops_b, b = _registers(kind, op.matrixB)
    registers, per_register = kind.c_fragment
    positions = [(r, e) for r in range(registers) for e in range(per_register)]
    ops_c = [vector.ExtractOp(op.matrixC, list(p), Float32Type()) for p in positions]
    mma = nvvm.MmaOp(kind, a, b, [x.result for x in ops_c])
    ops: list[Operation] = [*ops_a, *ops_b, *ops_c, mma]
    parts = []
    for k, position in enumerate(positions):
        extract = _extract_value(mma.res, k, Float32Type())
        ops.append(extract)
        parts.append((position, extract.res))
    t = op.res.type
    assert isinstance(t, VectorType)
    built, results = assemble(t, parts)
    return ops + built, results


@lowers(nvgpu.DeviceAsyncCopyOp)
def _device_async_copy(op: nvgpu.DeviceAsyncCopyOp) -> Lowered:
    dst = ElementPointerOp(op.dst, op.dstIndices)
    src = ElementPointerOp(op.src, op.srcIndices)
    ops: list[Operation] = [dst, src]
    valid_bytes = None
    if op.srcElements is not None:
        t = op.dst.type
        assert isinstance(t, MemRefType)
        count = arith.IndexCastOp(op.srcElements, i32)
        size = arith.ConstantOp(IntegerAttr(element_size(t.get_element_type()), i32))
        valid = arith.MuliOp(count, size)
        ops += [count, size, valid]
        valid_bytes = valid.result
    ops.append(nvvm.CpAsyncOp(dst, src, op.bytes, op.bypassL1 is not None, valid_bytes))
    return ops, []


@lowers(nvgpu.DeviceAsyncCreateGroupOp)
def _create_group(op: nvgpu.DeviceAsyncCreateGroupOp) -> Lowered:
    return [nvvm.CpAsyncCommitGroupOp()], []


@lowers(nvgpu.DeviceAsyncWaitOp)
def _wait(op: nvgpu.DeviceAsyncWaitOp) -> Lowered:
    return [nvvm.CpAsyncWaitGroupOp(op.groups)], []


__all__ = ["LOWERINGS", "assemble", "check_lowerable", "name_intermediates"]
