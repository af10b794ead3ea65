"""The planned IRDL check (`affinec.base.irdl_verify`) gives xDSL's verdict on every op.

The ops are those of the fuzzer's seeds (every level of every route, the Hopper
ones included) and variants of each built by hand the way a broken pass would
leave them: an operand too few or too many, an operand or a result of another
type, a result more, a property or an attribute dropped or replaced by another op's,
a region dropped or its entry block given another argument. For each, the plan and
xDSL's `OpDef.verify` must both accept or both reject; and where the plan rejects,
the error the user sees is xDSL's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from random import Random

import pytest
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, i1, i32
from xdsl.ir import Operation
from xdsl.irdl import IRDLOperation
from xdsl.irdl.operations import OpDef
from xdsl.utils.exceptions import VerifyException

from affinec.base import irdl_verify
from affinec.base.locating_parser import parse_module
from affinec.ir.context import make_context
from fuzzing import seeds


@functools.cache
def _texts() -> tuple[str, ...]:
    """The seeds that bring an op name the earlier ones lack (parsing all of them
    takes ten seconds; these hold every kind of op the seeds do)."""
    names: set[str] = set()
    texts = []
    for seed in seeds():
        found = set(re.findall(r"\b[a-z_]+\.[a-z_.]+\b", seed.text))
        if not found <= names:
            names |= found
            texts.append(seed.text)
    return tuple(texts)


@functools.cache
def _modules() -> tuple[ModuleOp, ...]:
    ctx = make_context()
    return tuple(parse_module(ctx, text) for text in _texts())


def _small(op: Operation) -> bool:
    return sum(1 for _ in op.walk()) <= 40


def _variant(op: Operation, rnd: Random, pool: list[Operation]) -> Operation:
    """A copy of `op` with one thing changed (or none)."""
    operands = list(op.operands)
    result_types = [r.type for r in op.results]
    properties = dict(op.properties)
    attributes = dict(op.attributes)
    regions = [r.clone() for r in op.regions]
    other = rnd.choice(pool)
    match rnd.randrange(10):
        case 0 if operands:
            operands.pop(rnd.randrange(len(operands)))
        case 1 if other.operands:
            operands.append(rnd.choice(other.operands))
        case 2 if operands and other.operands:
            operands[rnd.randrange(len(operands))] = rnd.choice(other.operands)
        case 3 if result_types:
            result_types[rnd.randrange(len(result_types))] = rnd.choice(
                [i1, i32, IndexType(), *[r.type for r in other.results]]
            )
        case 4:
            result_types.append(rnd.choice([i32, IndexType()]))
        case 5 if properties:
            properties.pop(rnd.choice(sorted(properties)))
        case 6 if properties and (other.properties or other.attributes):
            name = rnd.choice(sorted(properties))
            properties[name] = rnd.choice(
                [*other.properties.values(), *other.attributes.values()]
            )
        case 7 if attributes:
            name = rnd.choice(sorted(attributes))
            attributes[name] = rnd.choice(
                [IntegerAttr(3, i32), *other.attributes.values()]
            )
        case 8 if regions:
            regions.pop()
        case 9 if regions and regions[0].blocks:
            block = regions[0].blocks.first
            assert block is not None
            block.insert_arg(rnd.choice([i32, IndexType()]), len(block.args))
        case _:
            pass
    return type(op).create(
        operands=operands,
        result_types=result_types,
        properties=properties,
        attributes=attributes,
        regions=regions,
    )


def _verdict(check, op_def: OpDef, op: Operation) -> str | None:
    try:
        check(op_def, op)
    except Exception as e:  # noqa: BLE001 - any error is a verdict here
        return f"{type(e).__name__}: {e}"
    return None


def _ops() -> Iterator[Operation]:
    for module in _modules():
        yield from (op for op in module.walk() if isinstance(op, IRDLOperation))


def test_the_plan_and_xdsl_agree_on_every_op_and_its_variants() -> None:
    rnd = Random(0)
    ops = list(_ops())
    small = [op for op in ops if _small(op)]
    planned: set[type] = set()
    rejected = accepted = 0
    seen: dict[type, int] = {}
    for op in ops:
        op_def = type(op).get_irdl_definition()
        plan = irdl_verify.plan_of(op_def)
        if plan is None:
            continue
        planned.add(type(op))
        seen[type(op)] = seen.get(type(op), 0) + 1
        if not _small(op) or seen[type(op)] > 40:
            continue
        for _ in range(4):
            variant = _variant(op, rnd, small)
            xdsl = _verdict(irdl_verify._xdsl_verify, op_def, variant)
            ours = _verdict(plan.check, op_def, variant)
            assert (ours is None) == (xdsl is None), (op.name, ours, xdsl, variant)
            if xdsl is None:
                accepted += 1
            else:
                rejected += 1
                # and what the user sees is xDSL's error, word for word
                assert _verdict(irdl_verify.planned_verify, op_def, variant) == xdsl
            variant.drop_all_references()
    # the comparison is not vacuous: many kinds of ops, both verdicts many times
    assert len(planned) >= 60, len(planned)
    assert rejected >= 300 and accepted >= 300, (rejected, accepted)


def test_xdsl_verify_is_planned_once_installed() -> None:
    assert OpDef.verify is irdl_verify.planned_verify
    # the first op of the first module (parsed alone: the others take seconds)
    module = parse_module(make_context(), _texts()[0])
    op = next(op for op in module.walk() if isinstance(op, IRDLOperation))
    irdl_verify.planned_verify(type(op).get_irdl_definition(), op)


@pytest.mark.parametrize("count", [0, 2])
def test_a_wrong_operand_count_is_xdsls_error(count: int) -> None:
    """An op of a planned definition with the wrong number of operands gets xDSL's
    message (`Expected 1 operand, but got ...`)."""
    from xdsl.dialects import arith

    value = arith.ConstantOp(IntegerAttr(1, IndexType())).result
    op = arith.IndexCastOp.create(operands=[value] * count, result_types=[i32])
    assert irdl_verify.plan_of(arith.IndexCastOp.get_irdl_definition()) is not None
    with pytest.raises(VerifyException, match=f"Expected 1 operand, but got {count}"):
        op.verify()


def test_constraint_contexts_are_made_as_xdsls_dataclass_makes_them() -> None:
    """The contexts' constructor (`irdl_verify._context_init`) gives what xDSL's
    dataclass gives: fresh empty dicts, or the ones passed, by position or name."""
    from xdsl.irdl.constraints import InferenceContext, VerificationContext

    assert VerificationContext.__init__ is irdl_verify._context_init
    assert InferenceContext.__init__ is irdl_verify._context_init
    a, b = VerificationContext(), VerificationContext()
    assert a == b and a._variables is not b._variables
    assert (a._variables, a._range_variables, a._int_variables) == ({}, {}, {})
    given = {"T": i32}
    c = VerificationContext(given, _int_variables={"n": 2})
    assert c._variables is given and c._int_variables == {"n": 2}
    assert c._range_variables == {}
    assert c.set_attr_variable("U", i1) and c.get_variable("U") == i1
    with pytest.raises(VerifyException, match="expected from variable 'T'"):
        c.set_attr_variable("T", i1)
