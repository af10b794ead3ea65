"""`affinec.testing`, the public API for testing a pass: it passes a pass that keeps
the result and names the one that does not."""

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.spec import ConvSpec
from affinec.testing import (
    assert_equivalent,
    conv_specs,
    kernel_configs,
    tile_sizes,
)
from strategies import examples


@dataclass(frozen=True)
class SwapMulOperands(ModulePass):
    """Keeps the result: a * b is b * a."""

    name = "test-swap-mul-operands"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for mul in [o for o in op.walk() if isinstance(o, arith.MulfOp)]:
            mul.operands = [mul.rhs, mul.lhs]


@dataclass(frozen=True)
class MulIntoAdd(ModulePass):
    """Breaks it: every product becomes a sum."""

    name = "test-mul-into-add"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for mul in [o for o in op.walk() if isinstance(o, arith.MulfOp)]:
            add = arith.AddfOp(mul.lhs, mul.rhs)
            mul.parent_block().insert_op_before(add, mul)  # pyright: ignore
            mul.result.replace_all_uses_with(add.result)
            mul.parent_block().erase_op(mul)  # pyright: ignore


@settings(max_examples=examples(8))
@given(conv_specs())
def test_a_pass_that_keeps_the_result_passes(spec):
    assert_equivalent(["affinec-tile-split-sink", SwapMulOperands()], spec)


def test_a_pass_that_changes_the_result_is_named():
    spec = ConvSpec(1, 2, 4, 4, 2, 3, 3)
    with pytest.raises(AssertionError, match="pass 'test-mul-into-add' changed"):
        assert_equivalent(MulIntoAdd(), spec)


@settings(max_examples=examples(4))
@given(
    conv_specs(max_channels=8).flatmap(lambda s: tile_sizes(s).map(lambda t: (s, t)))
)
def test_tile_sizes_are_legal_tilings(case):
    spec, tiles = case
    sizes = ",".join(map(str, tiles))
    assert_equivalent(f"affine-loop-tile{{tile-sizes={sizes}}}", spec)


SMALL_F16 = ConvSpec(1, 16, 6, 6, 16, 3, 3, padding=1, layout="nhwc",
                     filter_layout="rsck", dtype="f16")  # fmt: skip


@settings(max_examples=examples(3))
@given(kernel_configs(SMALL_F16))
def test_kernel_configs_come_from_the_tuners_space(config):
    from affinec.tuning.space import search_space

    assert config in search_space(SMALL_F16).configs
