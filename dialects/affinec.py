"""affinec's own ops and attribute names.

`affinec.padded_load` is the reference design's `affine.padded.load`: an affine load
whose out-of-bounds accesses read zero, so zero padding of a convolution needs no
pre-padded copy of its input:

    %a = affinec.padded_load %in[%n, %c, %oh * 2 + %r - 3, %ow * 2 + %s - 3]
        : memref<1x4x224x224xf16>

Attribute names that passes read and write:

- `affinec.mapping` on an `affine.parallel`: `"grid"` (one iteration per GPU block) or
  `"block"` (one iteration per thread of a block), set by tiling.
- `affinec.spec` on the module: the spec the frontend built it from, so a checker can
  rebuild the float64 reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType
from xdsl.ir import Dialect, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from affinec.dialects.affine import (
    parse_memref_access,
    print_memref_access,
    verify_memref_access,
)

MAPPING = "affinec.mapping"
"""Attribute on `affine.parallel`: which level of the GPU its iterations map to."""

GRID = "grid"
BLOCK = "block"
MAPPING_LEVELS = (GRID, BLOCK)

SPEC = "affinec.spec"
"""Module attribute recording the spec (a dictionary) the frontend built it from."""


def mapping_of(op: Operation) -> str | None:
    """The GPU level an `affine.parallel` is mapped to, if any."""
    attr = op.attributes.get(MAPPING)
    return attr.data if attr is not None else None  # pyright: ignore


@irdl_op_definition
class PaddedLoadOp(IRDLOperation):
    """An `affine.load` that reads zero wherever the access falls outside the memref."""

    name = "affinec.padded_load"

    T: ClassVar = VarConstraint("T", AnyAttr())
    memref = operand_def(MemRefType.constr(T))
    indices = var_operand_def(IndexType)
    result = result_def(T)
    map = prop_def(AffineMapAttr)

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
    def parse(cls, parser: Parser) -> PaddedLoadOp:
        memref, m, indices, _ = parse_memref_access(parser)
        return cls(memref, indices, m)

    def print(self, printer: Printer):
        printer.print_string(" ")
        print_memref_access(printer, self.memref, self.map.data, self.indices)


Affinec = Dialect("affinec", [PaddedLoadOp], [])
