"""`convert-gpu-to-nvvm` makes llvm's binary ops from the first one's result type,
properties and attributes (`arith_to_llvm._binary_op`) and its constants through
`affinec.ir.constants`: the module it leaves is the one the ops' constructors
make, op for op."""

from __future__ import annotations

import pytest
from xdsl.context import Context
from xdsl.dialects import llvm
from xdsl.dialects.builtin import f16, f32, i32, i64
from xdsl.ir import Block

from affinec.base.spec import ConvSpec
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.transforms.nvvm import arith_to_llvm

SPECS = [
    ConvSpec(1, 64, 16, 16, 64, 3, 3, padding=1, dtype="f16"),
    ConvSpec(2, 8, 6, 6, 8, 3, 3, padding=1),
]


def _converted(spec) -> str:
    passes = default_passes(config_for(spec))
    k = next(i for i, p in enumerate(passes) if p.name == "convert-gpu-to-nvvm")
    module = build(spec)
    Pipeline(passes[:k]).run(module, verify_each=False)
    passes[k].apply(Context(), module)
    return str(module)


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_the_module_is_the_one_the_constructors_make(spec, monkeypatch) -> None:
    made = _converted(spec)
    made_again = _converted(spec)  # every binary op from a remembered one
    monkeypatch.setattr(arith_to_llvm, "_binary_op", lambda cls, a, b: cls(a, b))
    monkeypatch.setattr(arith_to_llvm, "integer_attr", arith_to_llvm.IntegerAttr)
    monkeypatch.setattr(arith_to_llvm, "constant", lambda cls, value, t: cls(value, t))
    by_constructors = _converted(spec)
    assert made == made_again == by_constructors


@pytest.mark.parametrize(
    "cls", [llvm.AddOp, llvm.UDivOp, llvm.OrOp, llvm.URemOp, llvm.FAddOp]
)
def test_a_binary_op_is_its_constructors(cls) -> None:
    block = Block(arg_types=[i32, i32, i64, i64, f16, f16, f32, f32])
    pairs = [block.args[k : k + 2] for k in (0, 2, 4, 6)]
    pairs = pairs[2:] if cls is llvm.FAddOp else pairs[:2]
    for a, b in pairs * 2:
        made = arith_to_llvm._binary_op(cls, a, b)
        plain = cls(a, b)  # pyright: ignore[reportCallIssue]
        assert type(made) is cls
        assert list(made.operands) == [a, b]
        assert made.result_types == plain.result_types
        assert made.properties == plain.properties
        assert made.attributes == plain.attributes
        assert made.properties is not plain.properties
