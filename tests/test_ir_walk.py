"""The one-generator walks (`affinec.base.ir_walk`) give what xDSL's walks give.

The same ops in the same order from every op, region and block of a kernel at
three levels (affine, after lowering, llvm + nvvm), in every direction; and the
same ops, and the same IR after, where the walk's user changes the IR as it goes
(erases the op it was given, puts an op after it or into its regions, erases the
op after it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, Region

from affinec.base import ir_walk
from affinec.base.spec import ConvSpec
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build

SPEC = ConvSpec(1, 16, 8, 8, 32, 3, 3, padding=1, dtype="f16")


def _module(passes: int) -> ModuleOp:
    module = build(SPEC)
    Pipeline(default_passes(config_for(SPEC))[:passes]).run(module)
    return module


@contextmanager
def _xdsl_walks() -> Iterator[None]:
    ir_walk.uninstall()
    try:
        yield
    finally:
        ir_walk.install()


def _every_walk(module: ModuleOp) -> list[tuple[str, list[Operation]]]:
    """What each op's, region's and block's walk gives, each way round."""
    out = []
    for op in list(module.walk()):
        nodes = [op, *op.regions, *(b for r in op.regions for b in r.blocks)]
        for node in nodes:
            for reverse in (False, True):
                for region_first in (False, True):
                    walked = list(node.walk(reverse=reverse, region_first=region_first))
                    out.append((type(node).__name__, walked))
    return out


@pytest.mark.parametrize("passes", [4, 16, 30])
def test_the_walks_give_xdsls_ops_in_xdsls_order(passes: int) -> None:
    module = _module(passes)
    ours = _every_walk(module)
    with _xdsl_walks():
        xdsl = _every_walk(module)
    assert len(ours) == len(xdsl) > 150
    for (kind, a), (_, b) in zip(ours, xdsl, strict=True):
        assert len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True)), kind


def _constant() -> Operation:
    return arith.ConstantOp(IntegerAttr(7, IndexType()))


def _erase_given(op: Operation) -> None:
    if isinstance(op, arith.ConstantOp) and not op.result.uses:
        op.detach()
        op.erase()


def _insert_after(op: Operation) -> None:
    if op.parent is not None and not isinstance(op, ModuleOp):
        op.parent.insert_op_after(_constant(), op)


def _insert_into(op: Operation) -> None:
    for region in op.regions:
        block = region.blocks.first
        if block is not None and block.first_op is not None:
            block.insert_op_before(_constant(), block.first_op)


def _erase_next(op: Operation) -> None:
    following = op.next_op
    if isinstance(following, arith.ConstantOp) and not following.result.uses:
        following.detach()
        following.erase()


def _changing_walk(
    module: ModuleOp, change: Callable[[Operation], None]
) -> tuple[list[str], str]:
    module = module.clone()
    seen = []
    for op in module.walk():
        seen.append(op.name)
        change(op)
    return seen, str(module)


@pytest.mark.parametrize(
    "change", [_erase_given, _insert_after, _insert_into, _erase_next]
)
def test_a_walk_that_changes_the_ir_sees_what_xdsls_sees(change) -> None:
    module = _module(16)
    module.body.block.add_op(_constant())  # an unused constant at the top too
    ours = _changing_walk(module, change)
    with _xdsl_walks():
        xdsl = _changing_walk(module, change)
    assert ours == xdsl
    assert len(ours[0]) > 100


def test_the_walks_are_installed() -> None:
    assert Operation.walk is ir_walk.operation_walk
    assert Region.walk is ir_walk.region_walk
    assert Block.walk is ir_walk.block_walk
