"""The framework of the nvvm lowering: `KernelConverter` walks a kernel `gpu.func`
block by block in dominance order into a fresh `llvm.func`, calling the converter
registered for each op (`CONVERTERS`); `check_convertible` refuses, before anything
is rewritten, a kernel with an op or type no converter handles."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.dialects import llvm, memref
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    UnitAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import gpu
from affinec.dialects.affinec import (
    LAUNCH,
    OVERLAY,
    SHARED_ALIGNMENTS,
    SHARED_OFFSETS,
    shared_alignments,
)
from affinec.dialects.llvm import GEPOp
from affinec.dialects.nvgpu import (
    TENSOR_MAP_ALIGNMENT,
    TENSOR_MAP_BYTES,
    TensorMapDescriptorType,
)
from affinec.dialects.nvvm import BYVAL, GRID_CONSTANT, KERNEL, MAXNTID, MINCTASM
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.cfg import reachable_blocks, reverse_post_order
from affinec.ir.constants import constant, integer_attr
from affinec.ir.op_table import OpTable
from affinec.ir.shared_memory_layout import (
    SHARED_ALIGNMENT,
    lay_out_shared,
    layout_bytes,
    layout_error,
)
from affinec.transforms.nvvm.address_parts import AddressParts

GLOBAL_ADDRESS_SPACE = 1
SHARED_ADDRESS_SPACE = gpu.WORKGROUP_ADDRESS_SPACE
DYNAMIC_SHARED_PREFIX = "__dynamic_shared_"

Converter = Callable[[Operation, "KernelConverter"], Sequence[SSAValue] | None]

CONVERTERS: OpTable[Converter] = OpTable("nvvm converter")
"""One converter per op kind, registered by the tables beside this module
(`arith_to_llvm`, `memref_to_llvm`, `cf_to_llvm`, `gpu_to_nvvm`, `math_to_llvm`,
`vector_to_llvm`)."""

converts = CONVERTERS.register


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
        if op not in CONVERTERS:
            hint = ""
            if op.dialect_name() in ("scf", "affine"):
                hint = " (run lower-affine and convert-scf-to-cf first)"
            elif op.dialect_name() == "nvgpu":
                hint = " (run convert-nvgpu-to-nvvm first)"
            raise PassError(op, f"convert-gpu-to-nvvm cannot lower '{op.name}'{hint}")
        for v in (*op.operands, *op.results):
            _check_type(op, v.type)
        if isinstance(op, memref.AllocaOp) and op.dynamic_sizes:
            raise PassError(op, "dynamic allocations are not supported")


def _check_type(op: Operation, t: Attribute) -> None:
    if isinstance(t, MemRefType):
        # a bare pointer keeps no sizes: every stride must be static, which leaves
        # the outermost size (a dynamic batch) free
        if any(s < 0 for s in t.get_shape()[1:]):
            raise PassError(
                op, f"only the outermost size of a memref may be dynamic, got {t}"
            )
        if not isinstance(t.layout, NoneAttr):
            raise PassError(op, f"only row-major (identity layout) memrefs: {t}")


def _argument_attributes(func: gpu.FuncOp) -> list[DictionaryAttr]:
    """The kernel's own argument attributes (a by-value parameter's `llvm.byval` and
    `llvm.align`, which MLIR's pass drops and affinec keeps), `nvvm.grid_constant` on a
    kernel's by-value parameters that it does not store to (the kernel reads them
    where the launch put them, with no local copy; MLIR has no way to say so at the
    gpu level), and `llvm.noalias` on the buffers of a
    kernel with a launch record, whose launches affinec's runtime makes (it refuses
    an output that aliases an input); nothing more on others, as MLIR's pass, since
    another launcher may pass aliasing buffers."""
    recorded = LAUNCH in func.attributes
    out = []
    for k, a in enumerate(func.arguments):
        attrs = func.argument_attributes(k)
        if isinstance(a.type, TensorMapDescriptorType):
            # a CUtensorMap, passed by value (128 bytes, 64-byte aligned)
            attrs["llvm.align"] = IntegerAttr(TENSOR_MAP_ALIGNMENT, i64)
            attrs[BYVAL] = llvm.LLVMArrayType(TENSOR_MAP_BYTES, IntegerType(8))
        if recorded and isinstance(a.type, MemRefType):
            attrs["llvm.noalias"] = UnitAttr()
        if BYVAL in attrs and func.kernel is not None and not _written(a):
            attrs[GRID_CONSTANT] = UnitAttr()
        out.append(DictionaryAttr(attrs))
    return out


def _written(arg: SSAValue) -> bool:
    """Whether the kernel stores through the by-value argument `arg` itself (then it
    needs its own copy: a grid constant is read-only)."""
    return any(
        isinstance(use.operation, llvm.StoreOp) and use.index == 1 for use in arg.uses
    )


class KernelConverter:
    """Translates one kernel `gpu.func` into an `llvm.func` (plus its globals)."""

    def __init__(self, func: gpu.FuncOp, index_bitwidth: int):
        self.func = func
        self.index_type = IntegerType(index_bitwidth)
        self.values: dict[SSAValue, SSAValue] = {}
        self._vector_types: dict[VectorType, Attribute] = {}
        self._row_types: dict[VectorType, Attribute] = {}
        self.blocks: dict[Block, Block] = {}
        self.globals: list[Operation] = []
        self.entry_ops: list[Operation] = []
        """Ops that must sit at the top of the entry block (allocas, addresses)."""
        self.current: Block | None = None
        self.addresses = AddressParts(func, index_bitwidth)
        """What the kernel's index values are made of (`address_parts`), asked as
        each access's address is written."""

    # -- types --------------------------------------------------------------------------

    def type(self, t: Attribute) -> Attribute:
        if isinstance(t, IndexType):
            return self.index_type
        if isinstance(t, TensorMapDescriptorType):
            return llvm.LLVMPointerType()
        if isinstance(t, MemRefType):
            return llvm.LLVMPointerType(_space(t))
        if isinstance(t, VectorType):
            # Made once a type: a vector's (its shape's arrays built and verified
            # anew) cost more than the rest of a vector op's conversion.
            known = self._vector_types.get(t)
            if known is None:
                known = self._vector_types[t] = self._vector_type(t)
            return known
        return t

    def row_type(self, t: VectorType) -> Attribute:
        """The lowered type of a 1-D row of `t` (its innermost dimension)."""
        known = self._row_types.get(t)
        if known is None:
            row = VectorType(t.get_element_type(), [t.get_shape()[-1]])
            known = self._row_types[t] = self.type(row)
        return known

    def _vector_type(self, t: VectorType) -> Attribute:
        # n-D vectors are LLVM arrays of their innermost 1-D vectors (as MLIR).
        shape = t.get_shape()
        lowered: Attribute = VectorType(self.type(t.get_element_type()), [shape[-1]])
        for d in reversed(shape[:-1]):
            lowered = llvm.LLVMArrayType(d, lowered)
        return lowered

    # -- building -----------------------------------------------------------------------

    def emit(self, op: Operation) -> SSAValue | None:
        assert self.current is not None
        self.current.add_op(op)
        return op.results[0] if op.results else None

    def v(self, old: SSAValue) -> SSAValue:
        return self.values[old]

    def int_constant(self, value: int, t: Attribute | None = None) -> SSAValue:
        t = t or self.index_type
        return self.emit(constant(llvm.ConstantOp, integer_attr(value, t), t))

    # -- the walk -----------------------------------------------------------------------

    def convert(self) -> list[Operation]:
        func = self.func
        # Unreachable blocks never run: left out, with any values they use.
        old_blocks = reachable_blocks(func.body)
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
        offsets = dynamic_shared_offsets(func)
        for k, arg in enumerate(func.workgroup_args):
            if offsets:
                self.values[arg] = self._dynamic_shared_buffer(arg, offsets[k])
            else:
                self.values[arg] = self._shared_buffer(arg, k)
        if offsets:
            self.globals.append(
                llvm.GlobalOp(
                    llvm.LLVMArrayType(0, IntegerType(8)),
                    self._dynamic_name,
                    "external",
                    addr_space=SHARED_ADDRESS_SPACE,
                    alignment=max([SHARED_ALIGNMENT, *shared_alignments(func)]),
                )
            )
        for b in reverse_post_order(func.body):
            self.current = self.blocks[b]
            for op in b.ops:
                convert = CONVERTERS.lookup(op)
                assert convert is not None
                results = convert(op, self)
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
            other_props={"arg_attrs": ArrayAttr(_argument_attributes(func))},
        )
        # As MLIR's pass: the kernel stays a `gpu.kernel` (gpu.launch_func requires
        # it) and becomes an `nvvm.kernel`; its known sizes are kept.
        new_func.attributes[gpu.KERNEL] = UnitAttr()
        new_func.attributes[KERNEL] = UnitAttr()
        if func.block_size is not None:
            new_func.attributes[MAXNTID] = DenseArrayBase.from_list(
                i32, func.block_size
            )
            new_func.attributes[MINCTASM] = IntegerAttr(1, i32)
        for name in ("known_block_size", "known_grid_size"):
            if (size := func.properties.get(name)) is not None:
                new_func.attributes[f"gpu.{name}"] = size
        if LAUNCH in func.attributes:
            new_func.attributes[LAUNCH] = func.attributes[LAUNCH]
        return [*self.globals, new_func]

    @property
    def _dynamic_name(self) -> str:
        return f"{DYNAMIC_SHARED_PREFIX}{self.func.sym_name.data}"

    def _dynamic_shared_buffer(self, arg: SSAValue, offset: int) -> SSAValue:
        """The buffer at byte `offset` of dynamic shared memory: a getelementptr of
        its own element type (offsets are multiples of 16 bytes, so of any element)."""
        t = arg.type
        assert isinstance(t, MemRefType)
        element = self.type(t.get_element_type())
        base = llvm.AddressOfOp(
            self._dynamic_name, llvm.LLVMPointerType(IntAttr(SHARED_ADDRESS_SPACE))
        )
        address = GEPOp(
            base,
            [offset // element_size(t.get_element_type())],
            pointee_type=element,
            result_type=llvm.LLVMPointerType(IntAttr(SHARED_ADDRESS_SPACE)),
            inbounds=True,
        )
        address.result.name_hint = arg.name_hint
        self.entry_ops += [base, address]
        return address.result

    def _shared_buffer(self, arg: SSAValue, k: int) -> SSAValue:
        t = arg.type
        assert isinstance(t, MemRefType)
        name = f"__shared_{self.func.sym_name.data}_{k}"
        count = math.prod(t.get_shape())
        alignments = shared_alignments(self.func)
        self.globals.append(
            llvm.GlobalOp(
                llvm.LLVMArrayType(count, t.get_element_type()),
                name,
                "internal",
                addr_space=SHARED_ADDRESS_SPACE,
                alignment=alignments[k] if alignments else SHARED_ALIGNMENT,
            )
        )
        address = llvm.AddressOfOp(
            name, llvm.LLVMPointerType(IntAttr(SHARED_ADDRESS_SPACE))
        )
        address.result.name_hint = arg.name_hint
        self.entry_ops.append(address)
        return address.result


def dynamic_shared_offsets(func: gpu.FuncOp) -> list[int]:
    """Byte offsets of the kernel's workgroup buffers in dynamic shared memory; empty
    when they are static. The offsets `affinec-plan-shared-memory` recorded
    (`SHARED_OFFSETS`), checked; for a kernel nothing planned, the same rule
    (`lay_out_shared`) applied here."""
    types: list[MemRefType] = []
    for arg in func.workgroup_args:
        assert isinstance(arg.type, MemRefType)
        types.append(arg.type)
    marked = func.attributes.get(OVERLAY)
    overlays = set(marked.get_values()) if isinstance(marked, DenseArrayBase) else set()
    planned = func.attributes.get(SHARED_OFFSETS)
    alignments = shared_alignments(func)
    if bad := [a for a in alignments if a <= 0 or a & (a - 1)]:
        raise PassError(
            func, f"{SHARED_ALIGNMENTS} must be powers of two bytes, got {bad[0]}"
        )
    if alignments and len(alignments) != len(types):
        raise PassError(
            func,
            f"{len(alignments)} {SHARED_ALIGNMENTS} for {len(types)} workgroup buffers",
        )
    if planned is None:
        return lay_out_shared(
            types, overlays, chip_of(func).static_shared_per_block, alignments
        )
    offsets = list(planned.get_values()) if isinstance(planned, DenseArrayBase) else []
    if not isinstance(planned, DenseArrayBase) or (
        why := layout_error(types, offsets, overlays, alignments)
    ):
        raise PassError(
            func,
            f"its {SHARED_OFFSETS} do not lay out its workgroup "
            f"buffers: {why if isinstance(planned, DenseArrayBase) else 'not an array<i64>'}",
        )
    return offsets  # pyright: ignore[reportReturnType]


def dynamic_shared_bytes(func: gpu.FuncOp) -> int:
    """Bytes of dynamic shared memory the kernel's launches must give (0: none)."""
    offsets = dynamic_shared_offsets(func)
    if not offsets:
        return 0
    return layout_bytes([a.type for a in func.workgroup_args], offsets)  # pyright: ignore[reportArgumentType]


def _space(t: MemRefType) -> IntAttr | NoneAttr:
    space = t.memory_space
    if isinstance(space, IntegerAttr) and space.value.data:
        return IntAttr(space.value.data)
    return IntAttr(GLOBAL_ADDRESS_SPACE)
