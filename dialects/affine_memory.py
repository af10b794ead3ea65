"""The affine ops that access memory through a map of their indices: `affine.load`,
`affine.store`, `affine.vector_load`, `affine.vector_store`, `affine.prefetch`,
`affine.dma_start` and `affine.dma_wait`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from xdsl.dialects.builtin import (
    AffineMapAttr,
    BoolAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    VectorType,
    i1,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.affine_syntax import (
    parse_indexed,
    parse_memref_access,
    parse_memref_type,
    print_indexed,
    print_memref_access,
)
from affinec.dialects.affine_validity import (
    verify_index_operands,
    verify_map_operands,
    verify_memref_access,
)
from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.memref import parse_prefetch_hints, prefetch_hints_text

# --------------------------------------------------------------------------------------
# affine.load, affine.store
# --------------------------------------------------------------------------------------


class AffineLoadBase(IRDLOperation):
    """A load through an affine map of its index operands: `affine.load` and
    `affinec.padded_load` differ only in what an out-of-bounds access reads."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    result = result_def(T)
    map = prop_def(AffineMapAttr)

    traits = traits_def(AccessesOperands(reads=("memref",)))

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
    ):
        assert isinstance(memref.type, MemRefType)
        if m is None:
            m = AffineMap.identity(memref.type.get_num_dims())
        super().__init__(
            operands=[memref, indices],
            properties={"map": AffineMapAttr(m)},
            result_types=[memref.type.get_element_type()],
        )

    def verify_(self) -> None:
        verify_memref_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser):
        memref, m, indices, _, attrs = parse_memref_access(parser)
        op = cls(memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )


@irdl_op_definition
class LoadOp(AffineLoadBase):
    """`%v = affine.load %A[%i, %j + 1] : memref<8x8xf32>`."""

    name = "affine.load"


@irdl_op_definition
class StoreOp(IRDLOperation):
    """`affine.store %v, %A[%i, %j + 1] : memref<8x8xf32>`."""

    name = "affine.store"

    T: ClassVar = VarConstraint("T", AnyAttr())
    value = operand_def(T)
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)

    traits = traits_def(AccessesOperands(writes=("memref",)))

    def __init__(
        self,
        value: SSAValue,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
    ):
        assert isinstance(memref.type, MemRefType)
        if m is None:
            m = AffineMap.identity(memref.type.get_num_dims())
        super().__init__(
            operands=[value, memref, indices],
            properties={"map": AffineMapAttr(m)},
        )

    def verify_(self) -> None:
        verify_memref_access(self, self.memref, self.map.data, self.indices)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        unresolved_value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, m, indices, memref_type, attrs = parse_memref_access(parser)
        value = parser.resolve_operand(unresolved_value, memref_type.get_element_type())
        op = cls(value, memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )


# --------------------------------------------------------------------------------------
# affine.vector_load, affine.vector_store, affine.prefetch
# --------------------------------------------------------------------------------------


def _verify_vector_access(
    op: Operation, memref: SSAValue, vector: Attribute, m: AffineMap, indices
) -> None:
    verify_memref_access(op, memref, m, indices)
    assert isinstance(memref.type, MemRefType)
    if not isinstance(vector, VectorType) or (
        vector.get_element_type() != memref.type.get_element_type()
    ):
        raise VerifyException(
            "requires memref and vector types of the same elemental type"
        )


def _parse_vector_type(parser: Parser) -> VectorType:
    parser.parse_punctuation(",")
    pos = parser.pos
    t = parser.parse_type()
    if not isinstance(t, VectorType):
        parser.raise_error(f"expected a vector type, got {t}", pos)
    return t


@irdl_op_definition
class VectorLoadOp(IRDLOperation):
    """`%v = affine.vector_load %A[%i, %j * 8] : memref<64x64xf32>, vector<8xf32>`:
    a vector of consecutive elements from an affine index (a 16-byte copy when 4 f32).
    """

    name = "affine.vector_load"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    result = result_def(VectorType)
    map = prop_def(AffineMapAttr)

    traits = traits_def(AccessesOperands(reads=("memref",)))

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
        result_type: VectorType,
    ):
        super().__init__(
            operands=[memref, indices],
            properties={"map": AffineMapAttr(m)},
            result_types=[result_type],
        )

    def verify_(self) -> None:
        _verify_vector_access(
            self, self.memref, self.result.type, self.map.data, self.indices
        )

    @classmethod
    def parse(cls, parser: Parser) -> VectorLoadOp:
        memref, m, indices, _, attrs = parse_memref_access(parser)
        op = cls(memref, indices, m, _parse_vector_type(parser))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )
        printer.print_string(", ")
        printer.print_attribute(self.result.type)


@irdl_op_definition
class VectorStoreOp(IRDLOperation):
    """`affine.vector_store %v, %A[%i, %j * 8] : memref<64x64xf32>, vector<8xf32>`."""

    name = "affine.vector_store"

    value = operand_def(VectorType)
    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    map = prop_def(AffineMapAttr)

    traits = traits_def(AccessesOperands(writes=("memref",)))

    def __init__(
        self,
        value: SSAValue,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
    ):
        super().__init__(
            operands=[value, memref, indices], properties={"map": AffineMapAttr(m)}
        )

    def verify_(self) -> None:
        _verify_vector_access(
            self, self.memref, self.value.type, self.map.data, self.indices
        )

    @classmethod
    def parse(cls, parser: Parser) -> VectorStoreOp:
        unresolved_value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        memref, m, indices, _, attrs = parse_memref_access(parser)
        vector = _parse_vector_type(parser)
        op = cls(parser.resolve_operand(unresolved_value, vector), memref, indices, m)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        printer.print_ssa_value(self.value)
        printer.print_string(", ")
        print_memref_access(
            printer, self.memref, self.map.data, self.indices, self.attributes
        )
        printer.print_string(", ")
        printer.print_attribute(self.value.type)


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """`affine.prefetch %A[%i, %j + 1], read, locality<3>, data : memref<...>`: a hint
    that the element will be read (or written) soon."""

    name = "affine.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType)
    isWrite = prop_def(IntegerAttr[Annotated[IntegerType, i1]])
    localityHint = prop_def(IntegerAttr[Annotated[IntegerType, i32]])
    isDataCache = prop_def(IntegerAttr[Annotated[IntegerType, i1]])
    map = prop_def(AffineMapAttr)

    def __init__(
        self,
        memref: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap,
        *,
        is_write: bool,
        locality: int,
        is_data_cache: bool,
    ):
        super().__init__(
            operands=[memref, indices],
            properties={
                "map": AffineMapAttr(m),
                "isWrite": BoolAttr.from_bool(is_write),
                "localityHint": IntegerAttr(locality, i32),
                "isDataCache": BoolAttr.from_bool(is_data_cache),
            },
        )

    def verify_(self) -> None:
        m = self.map.data
        assert isinstance(self.memref.type, MemRefType)
        if len(m.results) != self.memref.type.get_num_dims():
            raise VerifyException(
                "affine.prefetch affine map num results must equal memref rank"
            )
        verify_map_operands(self, m, self.indices)
        if not 0 <= self.localityHint.value.data <= 3:
            raise VerifyException("locality hint must be between 0 and 3")
        verify_index_operands(self, self.indices, "index")

    @classmethod
    def parse(cls, parser: Parser) -> PrefetchOp:
        unresolved, m, indices = parse_indexed(parser)
        hints = parse_prefetch_hints(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        memref = parser.resolve_operand(unresolved, parse_memref_type(parser))
        op = cls(memref, indices, m, **hints)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_indexed(printer, self.memref, self.map.data, self.indices)
        printer.print_string(prefetch_hints_text(self))
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.memref.type)


# --------------------------------------------------------------------------------------
# affine.dma_start, affine.dma_wait
# --------------------------------------------------------------------------------------


def _map_attr(op: Operation, name: str) -> AffineMap:
    attr = op.attributes.get(name)
    if not isinstance(attr, AffineMapAttr):
        raise VerifyException(f"requires an affine map attribute '{name}'")
    return attr.data


def _map_size(m: AffineMap) -> int:
    return m.num_dims + m.num_symbols


@irdl_op_definition
class DmaStartOp(IRDLOperation):
    """`affine.dma_start %src[%i, 0], %dst[%i, 0], %tag[0], %n [, %stride, %per]
    : memref<..>, memref<.., 2>, memref<1xi32>`: start copying `%n` elements between
    memory spaces (every `%stride` elements a run of `%per`), signalling `%tag`.

    As in MLIR, the operands are one list (source, its indices, destination, its
    indices, tag, its indices, the count, the optional stride pair) cut by the maps
    `src_map`, `dst_map` and `tag_map`, which are attributes."""

    name = "affine.dma_start"

    arguments = var_operand_def()

    def __init__(
        self,
        src: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        dst: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        tag: tuple[SSAValue, AffineMap, Sequence[SSAValue]],
        num_elements: SSAValue,
        stride: tuple[SSAValue, SSAValue] | None = None,
    ):
        operands = [
            *(v for memref, _, indices in (src, dst, tag) for v in (memref, *indices)),
            num_elements,
            *(stride or ()),
        ]
        super().__init__(
            operands=[operands],
            attributes={
                "src_map": AffineMapAttr(src[1]),
                "dst_map": AffineMapAttr(dst[1]),
                "tag_map": AffineMapAttr(tag[1]),
            },
        )

    def _parts(self) -> list[tuple[SSAValue, AffineMap, Sequence[SSAValue]]]:
        """(memref, map, indices) of the source, destination and tag."""
        parts, k = [], 0
        for name in ("src_map", "dst_map", "tag_map"):
            m = _map_attr(self, name)
            parts.append(
                (self.arguments[k], m, self.arguments[k + 1 : k + 1 + _map_size(m)])
            )
            k += 1 + _map_size(m)
        return parts

    def _count_index(self) -> int:
        """Where the element count is among the operands."""
        sizes = [
            _map_size(_map_attr(self, n)) for n in ("src_map", "dst_map", "tag_map")
        ]
        return 3 + sum(sizes)

    @property
    def num_elements(self) -> SSAValue:
        return self.arguments[self._count_index()]

    def verify_(self) -> None:
        expected = self._count_index() + 1
        if len(self.arguments) not in (expected, expected + 2):
            raise VerifyException(
                f"expected {expected} operands, or {expected + 2} with a stride"
            )
        (src, sm, si), (dst, dm, di), (tag, tm, ti) = self._parts()
        for what, short, memref, m, indices in (
            ("source", "src", src, sm, si),
            ("destination", "dst", dst, dm, di),
            ("tag", "tag", tag, tm, ti),
        ):
            if not isinstance(memref.type, MemRefType):
                raise VerifyException(f"expected DMA {what} to be of memref type")
            if len(m.results) != memref.type.get_num_dims():
                raise VerifyException(f"{what} map results must equal the memref rank")
            verify_index_operands(self, indices, f"{short} index")
        assert isinstance(src.type, MemRefType) and isinstance(dst.type, MemRefType)
        assert isinstance(tag.type, MemRefType)
        if src.type.memory_space == dst.type.memory_space:
            raise VerifyException("DMA should be between different memory spaces")
        if not isinstance(tag.type.get_element_type(), IntegerType):
            raise VerifyException("expected tag to be of integer type")
        if any(
            not isinstance(v.type, IndexType) for v in self.arguments[expected - 1 :]
        ):
            raise VerifyException("the count and stride operands must be of index type")

    @classmethod
    def parse(cls, parser: Parser) -> DmaStartOp:
        accesses = []
        for _ in range(3):
            accesses.append(parse_indexed(parser))
            parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        stride = None
        if parser.parse_optional_punctuation(",") is not None:
            first = parser.parse_operand(IndexType())
            parser.parse_punctuation(",")
            stride = (first, parser.parse_operand(IndexType()))
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        types = [parse_memref_type(parser)]
        for _ in range(2):
            parser.parse_punctuation(",")
            types.append(parse_memref_type(parser))
        src, dst, tag = (
            (parser.resolve_operand(u, t), m, indices)
            for (u, m, indices), t in zip(accesses, types, strict=True)
        )
        op = cls(src, dst, tag, num, stride)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        parts = self._parts()
        for memref, m, indices in parts:
            printer.print_string(" ")
            print_indexed(printer, memref, m, indices)
            printer.print_string(",")
        printer.print_string(" ")
        printer.print_list(
            self.arguments[self._count_index() :], printer.print_ssa_value
        )
        attrs = {
            k: v
            for k, v in self.attributes.items()
            if k not in ("src_map", "dst_map", "tag_map")
        }
        printer.print_op_attributes(attrs)
        printer.print_string(" : ")
        printer.print_list([p[0].type for p in parts], printer.print_attribute)


@irdl_op_definition
class DmaWaitOp(IRDLOperation):
    """`affine.dma_wait %tag[0], %n : memref<1xi32>`: wait for the DMA of `%tag`."""

    name = "affine.dma_wait"

    arguments = var_operand_def()

    def __init__(
        self, tag: SSAValue, m: AffineMap, indices: Sequence[SSAValue], num: SSAValue
    ):
        super().__init__(
            operands=[[tag, *indices, num]],
            attributes={"tag_map": AffineMapAttr(m)},
        )

    def verify_(self) -> None:
        m = _map_attr(self, "tag_map")
        if len(self.arguments) != 2 + _map_size(m):
            raise VerifyException(f"expected {2 + _map_size(m)} operands")
        tag = self.arguments[0]
        if not isinstance(tag.type, MemRefType):
            raise VerifyException("expected DMA tag to be of memref type")
        if len(m.results) != tag.type.get_num_dims():
            raise VerifyException("tag map results must equal the memref rank")
        verify_index_operands(self, self.arguments[1:-1], "index")
        if not isinstance(self.arguments[-1].type, IndexType):
            raise VerifyException("the element count must be of index type")

    @classmethod
    def parse(cls, parser: Parser) -> DmaWaitOp:
        unresolved, m, indices = parse_indexed(parser)
        parser.parse_punctuation(",")
        num = parser.parse_operand(IndexType())
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        tag = parser.resolve_operand(unresolved, parse_memref_type(parser))
        op = cls(tag, m, indices, num)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        printer.print_string(" ")
        m = _map_attr(self, "tag_map")
        print_indexed(printer, self.arguments[0], m, self.arguments[1:-1])
        printer.print_string(", ")
        printer.print_ssa_value(self.arguments[-1])
        attrs = {k: v for k, v in self.attributes.items() if k != "tag_map"}
        printer.print_op_attributes(attrs)
        printer.print_string(" : ")
        printer.print_attribute(self.arguments[0].type)
