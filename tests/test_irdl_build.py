"""The planned IRDL builder (`affinec.base.irdl_build`) builds what xDSL builds.

Every op the compiler builds on three routes (a small f32 convolution, a
tensor-core f16 one, Hopper's wgmma product) is built by the plan and again by
xDSL's `irdl_op_init` from the same arguments, and the two compared: operands,
result types, properties and attributes (in order), successors, regions. Wrong
arguments get xDSL's error, word for word.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import xdsl.irdl.operations as irdl_operations
from xdsl.dialects import arith, cf, llvm, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, i32
from xdsl.ir import Block, Operation, Region
from xdsl.irdl import IRDLOperation

from affinec.base import irdl_build
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.compiler import compile_to_ptx


def _described(op: Operation) -> tuple:
    return (
        type(op),
        tuple(op.operands),
        tuple(r.type for r in op.results),
        tuple(op.properties.items()),
        tuple(op.attributes.items()),
        tuple(op.successors),
        len(op.regions),
        op.location,
        sorted(vars(op)),  # the same fields set on the op
        [(use.operation is op, use.index) for use in op._operand_uses],
    )


@contextmanager
def _compared() -> Iterator[dict[str, int]]:
    """Within: every op built through the plan is also built by xDSL's builder
    (regions as fresh empty ones) and the two compared; counts per op name."""
    built: dict[str, int] = {}

    def checking(self: IRDLOperation, op_def, **arguments) -> None:
        regions = arguments["regions"]
        planned = all(type(r) is Region for r in regions)
        irdl_build.planned_op_init(self, op_def, **arguments)
        if not planned:
            return
        twin = type(self).__new__(type(self))
        irdl_build._xdsl_op_init(
            twin, op_def, **(arguments | {"regions": [Region() for _ in regions]})
        )
        try:
            assert _described(self) == _described(twin), op_def.name
        finally:
            twin.drop_all_references()  # its uses of the operands
        built[op_def.name] = built.get(op_def.name, 0) + 1

    irdl_operations.irdl_op_init = checking  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield built
    finally:
        irdl_build.install()


def test_the_plan_builds_what_xdsl_builds_on_three_routes() -> None:
    with _compared() as built:
        compile_to_ptx(ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1), arch="sm_80")
        compile_to_ptx(ConvSpec(1, 16, 8, 8, 32, 3, 3, padding=1, dtype="f16"))
        compile_to_ptx(MatmulSpec(128, 128, 64, "f16"), arch="sm_90a", wgmma=True)
    # not vacuous: many kinds of ops, thousands of them
    assert len(built) >= 60, sorted(built)
    assert sum(built.values()) >= 2000, sum(built.values())
    for name in ("arith.addi", "llvm.getelementptr", "llvm.br", "llvm.cond_br"):
        assert name in built, name


def test_irdl_op_init_is_planned_once_installed() -> None:
    assert irdl_operations.irdl_op_init is irdl_build.planned_op_init


def _value(type_=None):
    return arith.ConstantOp(IntegerAttr(1, type_ or IndexType())).result


def _error(build) -> str:
    with pytest.raises(Exception) as info:
        build()
    return f"{type(info.value).__name__}: {info.value}"


@pytest.mark.parametrize(
    "build",
    [
        # an operand too few, too many, None where one is needed
        lambda: arith.AddiOp.build(operands=[_value()], result_types=[IndexType()]),
        lambda: arith.IndexCastOp.build(
            operands=[_value(), _value()], result_types=[i32]
        ),
        lambda: arith.IndexCastOp.build(operands=[None], result_types=[i32]),
        # a sequence of two for a single operand
        lambda: arith.IndexCastOp.build(
            operands=[[_value(), _value()]], result_types=[i32]
        ),
        # an op of two results as an operand
        lambda: arith.IndexCastOp.build(
            operands=[scf.IfOp(_value(i32), [i32, i32], [], [])], result_types=[i32]
        ),
        # a result type missing
        lambda: arith.IndexCastOp.build(operands=[_value()], result_types=[]),
        # two successors for one
        lambda: cf.BranchOp.build(successors=[[Block(), Block()]], operands=[[]]),
        # an operand that is neither a value nor an op
        lambda: llvm.AddOp.build(operands=[3, _value(i32)], result_types=[i32]),
    ],
)
def test_wrong_arguments_get_xdsls_error(build) -> None:
    ours = _error(build)
    irdl_operations.irdl_op_init = irdl_build._xdsl_op_init  # pyright: ignore[reportAttributeAccessIssue]
    try:
        xdsl = _error(build)
    finally:
        irdl_build.install()
    assert ours == xdsl


def test_ops_built_in_an_implicit_builder_join_its_block() -> None:
    """xDSL's implicit builders put another `__post_init__` in front of
    `Operation`'s while they run (it inserts each op into their block): the plan,
    made before, does not step over it."""
    from xdsl.builder import ImplicitBuilder

    value = _value()
    arith.AddiOp(value, value)  # the plan of the class made outside a builder
    block = Block()
    with ImplicitBuilder(block):
        inside = arith.AddiOp(value, value)
    assert list(block.ops) == [inside]
    outside = arith.AddiOp(value, value)
    assert outside.parent is None
