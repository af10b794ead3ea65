"""A kernel's arith, index, memref, cf and gpu ops as xDSL's llvm dialect plus nvvm.

The work behind `convert-gpu-to-nvvm`. The kernel is translated in one walk, block by
block in dominance order, into a fresh `llvm.func`: one small converter per op kind
(`@converts`), each building llvm ops from already converted operands. Conventions:

- `index` is an integer of the pass's `index-bitwidth` (64 by default, as MLIR);
- a memref is a bare pointer to its first element, in its memory space: kernel
  arguments are global memory (address space 1, marked `noalias`: the runtime refuses
  an output that aliases an input), workgroup attributions become internal shared
  globals (address space 3, aligned to 16 bytes), `memref.alloca` an `llvm.alloca` in
  the entry block (so SROA can turn it into registers). Shapes are static and the
  layout row-major: an access is one `getelementptr inbounds` at the linearized
  offset;
- gpu ids read NVVM special registers (`nvvm.read.ptx.sreg.tid.x`, i32, zero-extended
  to `index`), `gpu.barrier` is `nvvm.barrier0`;
- the kernel is marked `nvvm.kernel`, with `nvvm.maxntid` from its known block size,
  and keeps its launch record; a loop's back edge keeps `affinec.unroll`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects import arith, cf, llvm, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from affinec.diagnostics import PassError
from affinec.dialects import gpu, nvvm
from affinec.dialects.affinec import LAUNCH, UNROLL
from affinec.dialects.nvvm import KERNEL, MAXNTID
from affinec.dtypes import element_size

GLOBAL_ADDRESS_SPACE = 1
SHARED_ADDRESS_SPACE = gpu.WORKGROUP_ADDRESS_SPACE
SHARED_ALIGNMENT = 16

Converter = Callable[[Operation, "KernelConverter"], Sequence[SSAValue] | None]
_CONVERTERS: dict[type[Operation], Converter] = {}


def converts(*types: type[Operation]) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for t in types:
            _CONVERTERS[t] = fn
        return fn

    return register


def check_convertible(func: gpu.FuncOp) -> None:
    """Refuse (before rewriting) a kernel with an op or type this lowering lacks."""
    if func.kernel is None:
        raise PassError(func, "only kernels can be lowered (this gpu.func is not one)")
    if func.private_args:
        raise PassError(func, "private attributions are not supported")
    for arg in (*func.arguments, *func.workgroup_args):
        _check_type(func, arg.type)
    for op in func.body.walk():
        if op is func:
            continue
        if type(op) not in _CONVERTERS:
            hint = ""
            if op.dialect_name() in ("scf", "affine"):
                hint = " (run lower-affine and convert-scf-to-cf first)"
            raise PassError(op, f"convert-gpu-to-nvvm cannot lower '{op.name}'{hint}")
        for v in (*op.operands, *op.results):
            _check_type(op, v.type)
        if isinstance(op, memref.AllocaOp) and op.dynamic_sizes:
            raise PassError(op, "dynamic allocations are not supported")


def _check_type(op: Operation, t: Attribute) -> None:
    if isinstance(t, MemRefType):
        if any(s < 0 for s in t.get_shape()):
            raise PassError(op, f"dynamic shapes are not supported: {t}")
        if not isinstance(t.layout, NoneAttr):
            raise PassError(op, f"only row-major (identity layout) memrefs: {t}")


class KernelConverter:
    """Translates one kernel `gpu.func` into an `llvm.func` (plus its globals)."""

    def __init__(self, func: gpu.FuncOp, index_bitwidth: int):
        self.func = func
        self.index_type = IntegerType(index_bitwidth)
        self.values: dict[SSAValue, SSAValue] = {}
        self.blocks: dict[Block, Block] = {}
        self.globals: list[Operation] = []
        self.entry_ops: list[Operation] = []
        """Ops that must sit at the top of the entry block (allocas, addresses)."""
        self.current: Block | None = None

    # -- types --------------------------------------------------------------------------

    def type(self, t: Attribute) -> Attribute:
        if isinstance(t, IndexType):
            return self.index_type
        if isinstance(t, MemRefType):
            return llvm.LLVMPointerType(_space(t))
        return t

    # -- building -----------------------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue | None:
        assert self.current is not None
        self.current.add_op(op)
        return op.results[0] if op.results else None

    def v(self, old: SSAValue) -> SSAValue:
        return self.values[old]

    def int_constant(self, value: int, t: Attribute | None = None) -> SSAValue:
        t = t or self.index_type
        return self.emit(llvm.ConstantOp(IntegerAttr(value, t), t))  # pyright: ignore

    # -- the walk -----------------------------------------------------------------------

    def convert(self) -> list[Operation]:
        func = self.func
        old_blocks = list(func.body.blocks)
        inputs = [self.type(a.type) for a in func.arguments]
        entry = Block(arg_types=inputs)
        self.blocks[old_blocks[0]] = entry
        for old, new in zip(func.arguments, entry.args, strict=True):
            new.name_hint = old.name_hint
            self.values[old] = new
        for b in old_blocks[1:]:
            nb = Block(arg_types=[self.type(a.type) for a in b.args])
            for old, new in zip(b.args, nb.args, strict=True):
                new.name_hint = old.name_hint
                self.values[old] = new
            self.blocks[b] = nb
        self.current = entry
        for k, arg in enumerate(func.workgroup_args):
            self.values[arg] = self._shared_buffer(arg, k)
        for b in _dominance_order(old_blocks):
            self.current = self.blocks[b]
            for op in b.ops:
                results = _CONVERTERS[type(op)](op, self)
                for old, new in zip(op.results, results or (), strict=True):
                    if old.name_hint and not new.name_hint:
                        new.name_hint = old.name_hint
                    self.values[old] = new
        # Allocas and shared addresses first in the entry block: SROA only promotes
        # allocas there, and every block may use the addresses.
        first = entry.first_op
        for op in self.entry_ops:
            if first is None:
                entry.add_op(op)
            else:
                entry.insert_op_before(op, first)
        region = Region([self.blocks[b] for b in old_blocks])
        new_func = llvm.FuncOp(
            func.sym_name.data,
            llvm.LLVMFunctionType(inputs, llvm.LLVMVoidType()),
            linkage=llvm.LinkageAttr("external"),
            body=region,
            other_props={
                "arg_attrs": ArrayAttr(
                    [
                        DictionaryAttr({"llvm.noalias": UnitAttr()})
                        if isinstance(a.type, MemRefType)
                        else DictionaryAttr({})
                        for a in func.arguments
                    ]
                )
            },
        )
        new_func.attributes[KERNEL] = UnitAttr()
        if func.block_size is not None:
            new_func.attributes[MAXNTID] = DenseArrayBase.from_list(
                i32, func.block_size
            )
        if LAUNCH in func.attributes:
            new_func.attributes[LAUNCH] = func.attributes[LAUNCH]
        return [*self.globals, new_func]

    def _shared_buffer(self, arg: SSAValue, k: int) -> SSAValue:
        t = arg.type
        assert isinstance(t, MemRefType)
        name = f"__shared_{self.func.sym_name.data}_{k}"
        count = math.prod(t.get_shape())
        self.globals.append(
            llvm.GlobalOp(
                llvm.LLVMArrayType(count, t.get_element_type()),
                name,
                "internal",
                addr_space=SHARED_ADDRESS_SPACE,
                alignment=SHARED_ALIGNMENT,
            )
        )
        address = llvm.AddressOfOp(
            name, llvm.LLVMPointerType(IntAttr(SHARED_ADDRESS_SPACE))
        )
        address.result.name_hint = arg.name_hint
        self.entry_ops.append(address)
        return address.result


def _space(t: MemRefType) -> IntAttr | NoneAttr:
    space = t.memory_space
    if isinstance(space, IntegerAttr) and space.value.data:
        return IntAttr(space.value.data)
    return IntAttr(GLOBAL_ADDRESS_SPACE)


def _dominance_order(blocks: list[Block]) -> list[Block]:
    """Reverse post-order from the entry: a block's dominators come before it."""
    seen: set[Block] = set()
    order: list[Block] = []

    def visit(b: Block) -> None:
        seen.add(b)
        term = b.last_op
        for s in term.successors if term is not None else ():
            if s not in seen:
                visit(s)
        order.append(b)

    visit(blocks[0])
    order.reverse()
    return order + [b for b in blocks if b not in seen]


# --------------------------------------------------------------------------------------
# arith
# --------------------------------------------------------------------------------------

_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}


@converts(*_BINARY)
def _binary(op: Operation, c: KernelConverter):
    lhs, rhs = (c.v(v) for v in op.operands)
    return [c.emit(_BINARY[type(op)](lhs, rhs))]


_FLOAT_INTRINSICS = {
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    arith.MaxnumfOp: "llvm.maxnum",
    arith.MinnumfOp: "llvm.minnum",
}


@converts(*_FLOAT_INTRINSICS)
def _float_intrinsic(op: Operation, c: KernelConverter):
    t = op.results[0].type
    name = f"{_FLOAT_INTRINSICS[type(op)]}.{_type_suffix(t)}"
    args = [c.v(v) for v in op.operands]
    return [c.emit(llvm.CallIntrinsicOp(name, args, [t]))]


def _type_suffix(t: Attribute) -> str:
    bits = getattr(t, "bitwidth", None)
    return f"f{bits}"


@converts(arith.NegfOp)
def _negf(op: arith.NegfOp, c: KernelConverter):
    return [c.emit(llvm.FNegOp(c.v(op.operand)))]


@converts(arith.ConstantOp)
def _constant(op: arith.ConstantOp, c: KernelConverter):
    value = op.value
    t = c.type(op.result.type)
    if isinstance(value, IntegerAttr):
        attr = IntegerAttr(value.value.data, t)  # pyright: ignore[reportArgumentType]
    elif isinstance(value, FloatAttr):
        attr = value
    else:
        raise PassError(op, f"cannot lower the constant {value}")
    return [c.emit(llvm.ConstantOp(attr, t))]


@converts(arith.CmpiOp)
def _cmpi(op: arith.CmpiOp, c: KernelConverter):
    # arith's and llvm's predicate enums are in the same order (MLIR's).
    return [c.emit(llvm.ICmpOp(c.v(op.lhs), c.v(op.rhs), op.predicate))]


@converts(arith.CmpfOp)
def _cmpf(op: arith.CmpfOp, c: KernelConverter):
    return [c.emit(llvm.FCmpOp(c.v(op.lhs), c.v(op.rhs), op.predicate))]


@converts(arith.SelectOp)
def _select(op: arith.SelectOp, c: KernelConverter):
    return [c.emit(llvm.SelectOp(c.v(op.cond), c.v(op.lhs), c.v(op.rhs)))]


@converts(arith.MinSIOp, arith.MaxSIOp, arith.MinUIOp, arith.MaxUIOp)
def _min_max(op: Operation, c: KernelConverter):
    predicate = {
        arith.MinSIOp: "slt",
        arith.MaxSIOp: "sgt",
        arith.MinUIOp: "ult",
        arith.MaxUIOp: "ugt",
    }[type(op)]  # pyright: ignore[reportArgumentType]
    lhs, rhs = (c.v(v) for v in op.operands)
    flag = llvm.ICmpPredicateFlag(predicate).to_int()
    test = c.emit(llvm.ICmpOp(lhs, rhs, IntegerAttr(flag, 64)))
    assert test is not None
    return [c.emit(llvm.SelectOp(test, lhs, rhs))]


@converts(arith.ExtFOp)
def _extf(op: arith.ExtFOp, c: KernelConverter):
    return [c.emit(llvm.FPExtOp(c.v(op.input), op.result.type))]


@converts(arith.TruncFOp)
def _truncf(op: arith.TruncFOp, c: KernelConverter):
    return [c.emit(llvm.FPTruncOp(c.v(op.input), op.result.type))]


@converts(arith.SIToFPOp)
def _sitofp(op: arith.SIToFPOp, c: KernelConverter):
    return [c.emit(llvm.SIToFPOp(c.v(op.input), op.result.type))]


@converts(arith.IndexCastOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp)
def _int_cast(op: Operation, c: KernelConverter):
    (value,) = (c.v(v) for v in op.operands)
    source, target = value.type, c.type(op.results[0].type)
    assert isinstance(source, IntegerType) and isinstance(target, IntegerType)
    a, b = source.width.data, target.width.data
    if a == b:
        return [value]
    if a > b:
        return [c.emit(llvm.TruncOp(value, target))]
    if isinstance(op, arith.ExtUIOp):
        return [c.emit(llvm.ZExtOp(value, target))]
    return [c.emit(llvm.SExtOp(value, target))]


# --------------------------------------------------------------------------------------
# memref
# --------------------------------------------------------------------------------------


def _address(
    c: KernelConverter, ref: SSAValue, indices: Sequence[SSAValue]
) -> SSAValue:
    t = ref.type
    assert isinstance(t, MemRefType)
    base = c.v(ref)
    shape = t.get_shape()
    if not indices:
        return base
    offset: SSAValue | None = None
    for k, index in enumerate(indices):
        stride = math.prod(shape[k + 1 :])
        term = c.v(index)
        if stride != 1:
            term = c.emit(llvm.MulOp(term, c.int_constant(stride)))
        offset = term if offset is None else c.emit(llvm.AddOp(offset, term))
    assert offset is not None
    gep = llvm.GEPOp(
        base,
        [llvm.GEP_USE_SSA_VAL],
        t.get_element_type(),
        ssa_indices=[offset],
        result_type=base.type,  # pyright: ignore[reportArgumentType]
        inbounds=True,
    )
    return c.emit(gep)  # pyright: ignore[reportReturnType]


@converts(memref.LoadOp)
def _load(op: memref.LoadOp, c: KernelConverter):
    ptr = _address(c, op.memref, op.indices)
    t = op.res.type
    return [c.emit(llvm.LoadOp(ptr, t, alignment=element_size(t)))]


@converts(memref.StoreOp)
def _store(op: memref.StoreOp, c: KernelConverter):
    ptr = _address(c, op.memref, op.indices)
    t = op.value.type
    c.emit(llvm.StoreOp(c.v(op.value), ptr, alignment=element_size(t)))
    return []


@converts(memref.AllocaOp)
def _alloca(op: memref.AllocaOp, c: KernelConverter):
    t = op.memref.type
    assert isinstance(t, MemRefType)
    count = llvm.ConstantOp(IntegerAttr(math.prod(t.get_shape()), 64), IntegerType(64))
    element = t.get_element_type()
    alloca = llvm.AllocaOp(count, element, alignment=max(element_size(element), 4))
    c.entry_ops += [count, alloca]
    return [alloca.res]


@converts(memref.DeallocOp)
def _dealloc(op: Operation, c: KernelConverter):
    return []


# --------------------------------------------------------------------------------------
# cf, gpu
# --------------------------------------------------------------------------------------


@converts(cf.BranchOp)
def _br(op: cf.BranchOp, c: KernelConverter):
    br = llvm.BrOp(c.blocks[op.successor], *(c.v(a) for a in op.arguments))
    if UNROLL in op.attributes:
        br.attributes[UNROLL] = UnitAttr()
    c.emit(br)
    return []


@converts(cf.ConditionalBranchOp)
def _cond_br(op: cf.ConditionalBranchOp, c: KernelConverter):
    c.emit(
        llvm.CondBrOp(
            c.v(op.cond),
            c.blocks[op.then_block],
            [c.v(a) for a in op.then_arguments],
            c.blocks[op.else_block],
            [c.v(a) for a in op.else_arguments],
        )
    )
    return []


@converts(gpu.ReturnOp)
def _return(op: gpu.ReturnOp, c: KernelConverter):
    c.emit(llvm.ReturnOp())
    return []


@converts(gpu.ThreadIdOp, gpu.BlockIdOp, gpu.BlockDimOp, gpu.GridDimOp)
def _id(op: gpu.ThreadIdOp, c: KernelConverter):
    kind = {
        gpu.ThreadIdOp: "thread_id",
        gpu.BlockIdOp: "block_id",
        gpu.BlockDimOp: "block_dim",
        gpu.GridDimOp: "grid_dim",
    }[type(op)]
    register = c.emit(nvvm.SPECIAL_REGISTERS[(kind, op.dim)]())
    assert register is not None
    if c.index_type.width.data == 32:
        return [register]
    return [c.emit(llvm.ZExtOp(register, c.index_type, non_neg=UnitAttr()))]


@converts(gpu.BarrierOp)
def _barrier(op: gpu.BarrierOp, c: KernelConverter):
    c.emit(nvvm.BarrierOp())
    return []
