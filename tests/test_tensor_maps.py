"""The rules of a tiled TMA descriptor, checked on the host before the driver sees
it: each broken rule is refused with what to change."""

from __future__ import annotations

import numpy as np
import pytest

from affinec.base.locating_parser import parse_module
from affinec.hardware.tensor_maps import TensorMapError, TiledTensorMap
from affinec.interpreter import Interpreter, InterpreterError
from affinec.ir.context import make_context
from affinec.tools.hopper_matmul import matmul_module

F16 = np.dtype(np.float16)


def test_a_row_major_f16_matrix_with_a_128_byte_box_is_a_tensor_map():
    spec = TiledTensorMap.of(F16, (256, 512), (1024, 2), (64, 64), swizzle=128)
    assert spec.box == (64, 64) and spec.swizzle == 128


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": np.dtype(np.int8)}, "f16, bf16 or f32"),
        ({"shape": (2,) * 6, "strides": (16,) * 5 + (2,), "box": (1,) * 6}, "1 to 5"),
        ({"strides": (1024, 4)}, "innermost dimension must be contiguous"),
        ({"strides": (1000, 2)}, "dimension 0 is 1000 bytes apart"),
        ({"box": (512, 64)}, "box sizes from 1 to 256"),
        ({"box": (64, 4)}, "8 bytes, not a multiple of 16"),
        ({"box": (64, 128)}, "more than its 128-byte swizzle"),
        ({"swizzle": 256}, "0, 32, 64 or 128"),
    ],
)
def test_each_rule_is_refused_with_its_reason(kwargs, message):
    given = {
        "dtype": F16,
        "shape": (256, 512),
        "strides": (1024, 2),
        "box": (64, 64),
        "swizzle": 128,
    } | kwargs
    with pytest.raises(TensorMapError, match=message):
        TiledTensorMap.of(**given)


def test_an_unaligned_address_is_refused_before_the_driver():
    spec = TiledTensorMap.of(F16, (256, 512), (1024, 2), (64, 64), swizzle=128)
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        spec.encode(0x1008)


def test_the_interpreter_refuses_a_tensor_the_driver_would():
    module = parse_module(make_context(), matmul_module(64, 64, 64, 1))
    b = np.zeros((64, 64), np.float16)
    out = np.zeros((64, 64), np.float32)
    with pytest.raises(
        InterpreterError, match="innermost dimension must be contiguous"
    ):
        Interpreter(module).run("matmul", np.zeros((64, 64), np.float16).T, b, out)
