"""xDSL's check of an op against its IRDL definition, planned once per definition.

`OpDef.verify` works out on every call, for each of an op's four kinds of
constructs (operands, results, regions, successors), which of the definitions are
variadic and how the op's constructs split between them. Verifying after every
pass, as `affinec-opt`, `check=True` and the tests do, spent much of its time there
(a profile of the tensor-core tests: of 58 seconds in `OpDef.verify`, 29 in the
bookkeeping of operand and result lists and 5 in counting successors).

Most definitions have at most one variadic operand and one variadic result, and
for those the split is fixed by the counts alone (the variadic one takes what the
others leave). `install` puts in front of `OpDef.verify` a check that goes straight
through that plan: the same constraints, verified in the same order and with one
constraint context, as xDSL's own. Any op the plan would reject, and every op of a
definition the plan does not cover (several variadic operands or results, sizes
given by an attribute, variadic regions or successors), is handed to xDSL's
verifier, so every error is xDSL's, word for word. `tests/test_irdl_verify.py`
compares both on every kind of op the pipelines make and on broken variants of
each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl.constraints import (
    InferenceContext,
    RangeConstraint,
    VerificationContext,
)
from xdsl.irdl.operations import (
    AttrSizedSegments,
    OpDef,
    OperandOrResultDef,
    OptAttributeDef,
    OptionalDef,
    OptPropertyDef,
    SingleBlockRegionDef,
    VariadicDef,
)
from xdsl.utils.exceptions import VerifyException

_xdsl_verify: Callable[[OpDef, Operation], None] = OpDef.verify
"""xDSL's own `OpDef.verify`: the reference, and the source of every error."""


@dataclass(frozen=True)
class _Slots:
    """The operands (or results) of a definition with at most one variadic one:
    each definition's constraint, and which one is variadic (it takes what the
    others leave, as xDSL splits them when no attribute gives the sizes)."""

    constraints: tuple[RangeConstraint, ...]
    variadic: int | None
    optional: bool
    """Whether the variadic definition is optional (it takes none or one)."""

    def check(self, values: Sequence[SSAValue], context: VerificationContext) -> None:
        extra = len(values) - len(self.constraints)
        if self.variadic is None:
            if extra:
                raise VerifyException("count")
            for constraint, value in zip(self.constraints, values, strict=True):
                constraint.verify((value.type,), context)
            return
        if extra < -1 or (self.optional and extra > 0):
            raise VerifyException("count")
        start = 0
        for k, constraint in enumerate(self.constraints):
            size = 1 + extra if k == self.variadic else 1
            constraint.verify(
                tuple(v.type for v in values[start : start + size]), context
            )
            start += size


def _slots(defs: Sequence[tuple[str, OperandOrResultDef]]) -> _Slots | None:
    variadic = [k for k, (_, d) in enumerate(defs) if isinstance(d, VariadicDef)]
    if len(variadic) > 1:
        return None
    return _Slots(
        tuple(d.constr for _, d in defs),  # pyright: ignore[reportAttributeAccessIssue]
        variadic[0] if variadic else None,
        bool(variadic) and isinstance(defs[variadic[0]][1], OptionalDef),
    )


@dataclass(frozen=True)
class _Plan:
    """What each position of an op of one definition must satisfy."""

    operands: _Slots
    results: _Slots
    regions: tuple[tuple[bool, RangeConstraint], ...]
    """Per region: whether it must have one block, and its entry block's arguments."""
    successors: int

    def check(self, op_def: OpDef, op: Operation) -> None:
        """What `OpDef.verify` checks, in its order; raises on the first failure
        (with a message of no importance: the caller asks xDSL for the error)."""
        context = VerificationContext()
        self.operands.check(op.operands, context)
        self.results.check(op.results, context)
        regions = op.regions
        if len(regions) != len(self.regions):
            raise VerifyException("count")
        for (single_block, entry_args), region in zip(
            self.regions, regions, strict=True
        ):
            if single_block and len(region.blocks) != 1:
                raise VerifyException("blocks")
            entry = region.first_block
            if entry is not None:
                entry_args.verify(entry.arg_types, context)
        if len(op.successors) != self.successors:
            raise VerifyException("count")
        properties = op.properties
        for name, attr_def in op_def.properties.items():
            if name not in properties:
                if isinstance(attr_def, OptPropertyDef):
                    continue
                raise VerifyException("property")
            attr_def.constr.verify(properties[name], context)
        for name in properties:
            if name not in op_def.properties:
                raise VerifyException("property")
        attributes = op.attributes
        for name, attr_def in op_def.attributes.items():
            if name not in attributes:
                if isinstance(attr_def, OptAttributeDef):
                    continue
                raise VerifyException("attribute")
            attr_def.constr.verify(attributes[name], context)
        for trait in op_def.traits:
            trait.verify(op)


def plan_of(op_def: OpDef) -> _Plan | None:
    """The plan of `op_def`, or None when its variadic constructs need xDSL's
    general split (several variadic operands or results, sizes given by an
    attribute, variadic regions or successors)."""
    if any(isinstance(o, AttrSizedSegments) for o in op_def.options):
        return None
    if any(
        isinstance(d, VariadicDef)
        for defs in (op_def.regions, op_def.successors)
        for _, d in defs
    ):
        return None
    operands, results = _slots(op_def.operands), _slots(op_def.results)
    if operands is None or results is None:
        return None
    return _Plan(
        operands,
        results,
        tuple(
            (isinstance(d, SingleBlockRegionDef), d.entry_args)
            for _, d in op_def.regions
        ),
        len(op_def.successors),
    )


_PLANS: dict[int, tuple[OpDef, _Plan | None]] = {}
"""Each definition's plan, by the definition's identity (kept alive with it, so
that an identity is never another definition's)."""


def planned_verify(op_def: OpDef, op: Operation) -> None:
    """`OpDef.verify`, through the definition's plan when it has one."""
    key = id(op_def)
    if key not in _PLANS:
        _PLANS[key] = (op_def, plan_of(op_def))
    plan = _PLANS[key][1]
    if plan is None:
        _xdsl_verify(op_def, op)
        return
    try:
        plan.check(op_def, op)
    except Exception:
        # xDSL's own error (and xDSL's verdict, should the two ever disagree)
        _xdsl_verify(op_def, op)


_xdsl_context_inits = (InferenceContext.__init__, VerificationContext.__init__)
"""xDSL's own constructors of the two contexts (the dataclasses')."""

_NOT_GIVEN: Any = object()


def _context_init(
    self: InferenceContext,
    _variables: dict[str, Attribute] = _NOT_GIVEN,
    _range_variables: dict[str, tuple[Attribute, ...]] = _NOT_GIVEN,
    _int_variables: dict[str, int] = _NOT_GIVEN,
) -> None:
    """The constructor of xDSL's constraint contexts, with empty dicts made as
    `{}`: xDSL's dataclass makes them with `dict[K, V]()`, and calling a
    subscripted builtin raises, formats and swallows an AttributeError (setting
    `__orig_class__` on the dict) -- three times a context, and a context is
    made for every op verified and every attribute built (some 15,000 a
    kernel's compile)."""
    self._variables = {} if _variables is _NOT_GIVEN else _variables
    self._range_variables = {} if _range_variables is _NOT_GIVEN else _range_variables
    self._int_variables = {} if _int_variables is _NOT_GIVEN else _int_variables


def install() -> None:
    """Verify IRDL ops through their plans from now on, and make constraint
    contexts without xDSL's dict factories (idempotent)."""
    OpDef.verify = planned_verify  # pyright: ignore[reportAttributeAccessIssue]
    InferenceContext.__init__ = _context_init  # pyright: ignore[reportAttributeAccessIssue]
    VerificationContext.__init__ = _context_init  # pyright: ignore[reportAttributeAccessIssue]
