"""The types of nvgpu's Hopper ops, as MLIR's: barrier groups, TMA descriptors, and
warpgroup matrix descriptors and accumulators.

    !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 4>
    !nvgpu.mbarrier.token
    !nvgpu.tensormap.descriptor<tensor = memref<64x64xf16, 3>, swizzle = swizzle_128b,
                                l2promo = none, oob = zero, interleave = none>
    !nvgpu.tensormap.descriptor<tensor = memref<1x8x8x64xf16, 3>, ...,
                                traversal = [1, 2, 2, 1]>   // affinec's: every 2nd
    !nvgpu.warpgroup.descriptor<tensor = memref<64x64xf16, 3>>
    !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>

In an op's custom form MLIR prints these without their name (`: <tensor = ...>`);
`parse_type_of` reads both forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    Float32Type,
    IntAttr,
    MemRefType,
    StringAttr,
    VectorType,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition, param_def
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.gpu_common import AddressSpace, AddressSpaceAttr
from affinec.dialects.nvgpu_common import SHARED_MEMORY_SPACE, memory_space_of
from affinec.hardware.chips import CHIPS
from affinec.hardware.wgmma_layouts import SWIZZLE_SPANS, is_wgmma_n

T = TypeVar("T", bound=ParametrizedAttribute)

MAX_BARRIERS = max(c.max_shared_per_block for c in CHIPS.values()) // 8
"""The most barriers a group may have: as many as fit the largest block's shared
memory (sm_90's 227 KiB), 8 bytes each."""

MAX_ELEMENT_STRIDE = 8
"""The largest traversal stride (element stride) of a tensor map."""

TENSOR_MAP_BYTES = 128
"""A TMA descriptor (CUtensorMap) is 128 bytes, passed to a kernel by value..."""
TENSOR_MAP_ALIGNMENT = 64
"""...64-byte aligned."""


def parse_type_of(parser: Parser, cls: type[T]) -> T:
    """A `cls` type, written in full (`!nvgpu.mbarrier.group<...>`, or an alias) or
    as MLIR prints it inside an op (`<...>`)."""
    pos = parser.pos
    if parser._current_token.text == "<":  # pyright: ignore[reportPrivateUsage]
        return cls.new(cls.parse_parameters(parser))
    t = parser.parse_type()
    if not isinstance(t, cls):
        parser.raise_error(f"expected !{cls.name}, got {t}", pos, parser.pos)
    return t


def _parse_options(
    parser: AttrParser, parse_value: dict[str, object], required: Sequence[str]
) -> dict[str, Attribute]:
    """`<key = value, ...>` with the keys of `parse_value` (each a function reading
    its value); every key of `required` present."""
    given: dict[str, Attribute] = {}
    parser.parse_punctuation("<")

    def option() -> None:
        pos = parser.pos
        key = parser.parse_identifier()
        if key not in parse_value or key in given:
            parser.raise_error(f"unexpected or repeated option '{key}'", pos)
        parser.parse_punctuation("=")
        given[key] = parse_value[key]()  # pyright: ignore[reportCallIssue]

    parser.parse_comma_separated_list(parser.Delimiter.NONE, option)
    parser.parse_punctuation(">")
    for key in required:
        if key not in given:
            parser.raise_error(f"missing option '{key}'")
    return given


@irdl_attr_definition
class MBarrierGroupType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>,
    num_barriers = N>`: N 64-bit barriers in shared memory (N = 1 when absent)."""

    name = "nvgpu.mbarrier.group"

    memorySpace: Attribute = param_def()
    num_barriers: IntAttr = param_def()

    def __init__(self, num_barriers: int = 1, memory_space: Attribute | None = None):
        space = memory_space or AddressSpaceAttr(AddressSpace.WORKGROUP)
        super().__init__(space, IntAttr(num_barriers))

    @property
    def count(self) -> int:
        return self.num_barriers.data

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        given = _parse_options(
            parser,
            {
                "memorySpace": parser.parse_attribute,
                "num_barriers": lambda: IntAttr(parser.parse_integer()),
            },
            ("memorySpace",),
        )
        return (given["memorySpace"], given.get("num_barriers", IntAttr(1)))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<memorySpace = ")
        printer.print_attribute(self.memorySpace)
        if self.count != 1:
            printer.print_string(f", num_barriers = {self.count}")
        printer.print_string(">")

    def verify(self) -> None:
        if not 1 <= self.count <= MAX_BARRIERS:
            raise VerifyException(
                f"a barrier group has 1 to {MAX_BARRIERS} barriers (8 bytes of a "
                f"block's shared memory each), got {self.count}"
            )
        space = self.memorySpace
        if space != AddressSpaceAttr(AddressSpace.WORKGROUP):
            raise VerifyException(
                f"barriers live in shared memory (#gpu.address_space<workgroup>), "
                f"got {space}"
            )


@irdl_attr_definition
class MBarrierTokenType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.mbarrier.token`: the phase a thread arrived in."""

    name = "nvgpu.mbarrier.token"


_SWIZZLES = tuple(SWIZZLE_SPANS)
_L2_PROMOTIONS = ("none", "l2promo_64b", "l2promo_128b", "l2promo_256b")
_OOB_FILLS = ("zero", "nan")
_INTERLEAVES = ("none", "interleave_16b", "interleave_32b")


@irdl_attr_definition
class TensorMapDescriptorType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.tensormap.descriptor<tensor = memref<...>, swizzle = ..., l2promo =
    ..., oob = ..., interleave = ...>`: a TMA descriptor (CUtensorMap) whose box is
    the shared memref `tensor`; the global tensor it reads is known at run time.

    affinec's `traversal = [...]` (left out where all 1, MLIR's form) are the
    descriptor's element strides, outermost first: the box takes every s-th
    element of the global tensor along a dimension of stride s, `tensor` its
    extents as it lands (the driver's box spans s times as many)."""

    name = "nvgpu.tensormap.descriptor"

    tensor: MemRefType = param_def()
    swizzle: StringAttr = param_def()
    l2promo: StringAttr = param_def()
    oob: StringAttr = param_def()
    interleave: StringAttr = param_def()
    traversal: ArrayAttr[IntAttr] = param_def()

    def __init__(
        self,
        tensor: MemRefType,
        swizzle: str = "none",
        l2promo: str = "none",
        oob: str = "zero",
        interleave: str = "none",
        traversal: Sequence[int] = (),
    ):
        strides = tuple(traversal) or (1,) * tensor.get_num_dims()
        super().__init__(
            tensor,
            *(StringAttr(s) for s in (swizzle, l2promo, oob, interleave)),
            ArrayAttr([IntAttr(k) for k in strides]),
        )

    @property
    def swizzle_span(self) -> int:
        return SWIZZLE_SPANS[self.swizzle.data]

    @property
    def element_strides(self) -> tuple[int, ...]:
        """The traversal strides, outermost first."""
        return tuple(k.data for k in self.traversal)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def keyword(kind: str, choices: Sequence[str]):
            def parse() -> StringAttr:
                pos = parser.pos
                word = parser.parse_identifier()
                if word not in choices:
                    # MLIR's words, which name the enum's C++ type
                    parser.raise_error(
                        f"expected ::mlir::nvgpu::{kind} to be one of: "
                        f"{', '.join(choices)}",
                        pos,
                    )
                return StringAttr(word)

            return parse

        def strides() -> ArrayAttr[IntAttr]:
            values = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, parser.parse_integer
            )
            return ArrayAttr([IntAttr(k) for k in values])

        options = {
            "tensor": parser.parse_type,
            "swizzle": keyword("TensorMapSwizzleKind", _SWIZZLES),
            "l2promo": keyword("TensorMapL2PromoKind", _L2_PROMOTIONS),
            "oob": keyword("TensorMapOOBKind", _OOB_FILLS),
            "interleave": keyword("TensorMapInterleaveKind", _INTERLEAVES),
            "traversal": strides,
        }
        required = tuple(options)[:-1]
        given = _parse_options(parser, options, required)
        tensor = given["tensor"]
        if "traversal" not in given and isinstance(tensor, MemRefType):
            given["traversal"] = ArrayAttr([IntAttr(1)] * tensor.get_num_dims())
        return tuple(given[k] for k in options)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<tensor = ")
        printer.print_attribute(self.tensor)
        for key in ("swizzle", "l2promo", "oob", "interleave"):
            printer.print_string(f", {key} = {getattr(self, key).data}")
        if any(k != 1 for k in self.element_strides):
            printer.print_string(f", traversal = {list(self.element_strides)}")
        printer.print_string(">")

    def verify(self) -> None:
        t = self.tensor
        if memory_space_of(t) != SHARED_MEMORY_SPACE:
            raise VerifyException(
                f"a tensor map's box is a shared memref (memory space "
                f"{SHARED_MEMORY_SPACE}), got {t}"
            )
        if any(d <= 0 for d in t.get_shape()) or not 1 <= t.get_num_dims() <= 5:
            raise VerifyException(
                f"a tensor map's box has 1 to 5 static dimensions, got {t}"
            )
        for key, choices in (
            ("swizzle", _SWIZZLES),
            ("l2promo", _L2_PROMOTIONS),
            ("oob", _OOB_FILLS),
            ("interleave", _INTERLEAVES),
        ):
            if getattr(self, key).data not in choices:
                raise VerifyException(f"{key} must be one of {', '.join(choices)}")
        strides = self.element_strides
        if len(strides) != t.get_num_dims() or not all(
            1 <= k <= MAX_ELEMENT_STRIDE for k in strides
        ):
            raise VerifyException(
                f"traversal strides from 1 to {MAX_ELEMENT_STRIDE}, one a dimension "
                f"of the box, got {list(strides)} for {t}"
            )
        if strides[-1] != 1:
            raise VerifyException(
                "the innermost dimension is traversed with a stride of 1 (no "
                f"interleave), got {strides[-1]}"
            )


@irdl_attr_definition
class WarpgroupMatrixDescriptorType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.warpgroup.descriptor<tensor = memref<...>>`: a `wgmma` operand in
    shared memory, described by a 64-bit matrix descriptor."""

    name = "nvgpu.warpgroup.descriptor"

    tensor: MemRefType = param_def()

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        given = _parse_options(parser, {"tensor": parser.parse_type}, ("tensor",))
        return (given["tensor"],)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<tensor = ")
        printer.print_attribute(self.tensor)
        printer.print_string(">")


@irdl_attr_definition
class WarpgroupAccumulatorType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.warpgroup.accumulator<fragmented = vector<MxNxf32>>`: an M × N f32
    accumulator held by the 128 threads of a warpgroup, M/64 fragments of N/2
    registers a thread."""

    name = "nvgpu.warpgroup.accumulator"

    fragmented: VectorType = param_def()

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        given = _parse_options(
            parser, {"fragmented": parser.parse_type}, ("fragmented",)
        )
        return (given["fragmented"],)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<fragmented = ")
        printer.print_attribute(self.fragmented)
        printer.print_string(">")

    @property
    def shape(self) -> tuple[int, int]:
        m, n = self.fragmented.get_shape()
        return m, n

    def verify(self) -> None:
        v = self.fragmented
        if v.get_num_dims() != 2 or not isinstance(v.get_element_type(), Float32Type):
            raise VerifyException(f"an accumulator is a 2-D vector of f32, got {v}")
        m, n = v.get_shape()
        if m % 64 or not is_wgmma_n(n):
            raise VerifyException(
                f"an accumulator is M x N with M a multiple of 64 and N one of 8, "
                f"16, ..., 256, got {m}x{n}"
            )
