"""xDSL's memref dialect with MLIR's custom syntax for `memref.cast`, which xDSL's
op lacks:

    %u = memref.cast %a : memref<64x64xf16> to memref<*xf16>

`MemRef` is xDSL's dialect with this `CastOp` in place of xDSL's (same name,
operands and result); affinec's context registers it.
"""

from __future__ import annotations

from xdsl.dialects import memref as xdsl_memref
from xdsl.dialects.builtin import MemRefType, UnrankedMemRefType
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    base,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect


@irdl_op_definition
class CastOp(IRDLOperation):
    """`memref.cast`: the same buffer as another memref type (to or from unranked,
    a static size made dynamic or back)."""

    name = "memref.cast"

    source = operand_def(base(MemRefType) | base(UnrankedMemRefType))
    dest = result_def(base(MemRefType) | base(UnrankedMemRefType))

    traits = traits_def(NoMemoryEffect())
    assembly_format = "$source attr-dict `:` type($source) `to` type($dest)"


MemRef = Dialect(
    "memref",
    [
        CastOp if op is xdsl_memref.CastOp else op
        for op in xdsl_memref.MemRef.operations
    ],
    list(xdsl_memref.MemRef.attributes),
)
