"""LLVM's `bfloat` type, which neither llvmlite nor xDSL's LLVM backend knows:
`BFloatType` is it (its constants written `0xR` and the 16 bits, rounded as the
interpreter rounds), and importing this module registers it as the LLVM type of
xDSL's `bf16` for xDSL's `convert_type`.
"""

from __future__ import annotations

import numpy as np
from llvmlite.ir.types import _BaseFloatType
from xdsl.backend.llvm import convert_type as xdsl_convert_type
from xdsl.dialects.builtin import BFloat16Type


class BFloatType(_BaseFloatType):
    """LLVM's `bfloat`, which llvmlite lacks (constants are written `0xR` and the
    16 bits)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value) -> str:
        from affinec.base.dtypes import round_to_bfloat16

        # Rounded once, as the interpreter rounds a float64 to bf16.
        bits = int(np.asarray(round_to_bfloat16(value)).view(np.uint16))
        return f"0xR{bits:04X}"


BFloatType._create_instance()
# xDSL 0.74's LLVM backend has no converter for bf16: register ours.
xdsl_convert_type._TYPE_CONVERTERS.setdefault(  # pyright: ignore[reportPrivateUsage]
    BFloat16Type, lambda _: BFloatType()
)

__all__ = ["BFloatType"]
