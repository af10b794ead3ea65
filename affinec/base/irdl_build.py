"""xDSL's builder of IRDL ops (`irdl_op_init`), planned once per definition.

Every op a pass builds goes through `irdl_op_init`, which sorts the given
operands, result types, regions and successors against the op's definitions.
xDSL's version spends most of an op's construction on bookkeeping rather than on
the op: its lists and dicts are made as `list[T]()` and `dict[K, V]()`, and
calling a subscripted builtin tries to record `__orig_class__` on the new object,
which the builtin refuses with an AttributeError that is raised, formatted and
swallowed (ten times an op); and it asks whether each argument is a `Sequence`
and each definition variadic through ABC checks, for every op again. Together
about half of the 20-30 microseconds an op takes to build, and several percent
of a compile (a kernel builds some 1,500 ops on its way to LLVM).

`install` puts in front of `irdl_op_init` a builder that reads each definition's
kinds (single, variadic, optional) once, and each argument's kind once per Python
type. It builds exactly what xDSL builds (the same lists in the same order, the
same segment-size attributes, then what `Operation.__init__` and IRDL's
`__post_init__` do, without their setters' detaching of operands and successors an
op being built does not have, nor their checks of each definition's defaults op by
op: `_init_operation`, on classes that override neither); any op it is not sure of -- regions given as anything but `Region`s, an option it does not
know, any argument xDSL would refuse -- goes to xDSL's builder, so every error is
xDSL's, word for word. `tests/test_irdl_build.py` builds ops of every kind the
pipelines make both ways and compares them.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import xdsl.irdl.operations as irdl_operations
from xdsl.dialects.builtin import UNKNOWN_LOC, DenseArrayBase, i32
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue, Use
from xdsl.ir.core import SSAValues
from xdsl.irdl.operations import (
    AttrSizedOperandSegments,
    AttrSizedRegionSegments,
    AttrSizedResultSegments,
    AttrSizedSegments,
    AttrSizedSuccessorSegments,
    IRDLOperation,
    OpDef,
    OptionalDef,
    SameVariadicOperandSize,
    SameVariadicRegionSize,
    SameVariadicResultSize,
    SameVariadicSize,
    SameVariadicSuccessorSize,
    VariadicDef,
)

_xdsl_op_init: Callable[..., None] = irdl_operations.irdl_op_init
_IRDL_POST_INIT = IRDLOperation.__post_init__
_OPERATION_POST_INIT = Operation.__post_init__
"""xDSL's own builder: the reference, and the one that raises every error."""

_SINGLE, _VARIADIC, _OPTIONAL = 0, 1, 2

_OPERANDS, _RESULTS, _REGIONS, _SUCCESSORS = 0, 1, 2, 3

_SEGMENTS: tuple[tuple[type[AttrSizedSegments], int], ...] = (
    (AttrSizedOperandSegments, _OPERANDS),
    (AttrSizedResultSegments, _RESULTS),
    (AttrSizedRegionSegments, _REGIONS),
    (AttrSizedSuccessorSegments, _SUCCESSORS),
)
"""xDSL's segment-size options, in the order it tells them apart."""

_SAME_SIZES: tuple[tuple[type[SameVariadicSize], int], ...] = (
    (SameVariadicOperandSize, _OPERANDS),
    (SameVariadicResultSize, _RESULTS),
    (SameVariadicRegionSize, _REGIONS),
    (SameVariadicSuccessorSize, _SUCCESSORS),
)


def _kind(definition: object) -> int:
    if isinstance(definition, OptionalDef):
        return _OPTIONAL
    return _VARIADIC if isinstance(definition, VariadicDef) else _SINGLE


@dataclass(frozen=True)
class _Plan:
    """An op definition's constructs as kinds, and what its options ask for."""

    kinds: tuple[tuple[int, ...], ...]
    """Per construct (operands, results, regions, successors): each definition's
    kind."""
    segments: tuple[tuple[int, bool, str], ...]
    """The segment sizes to record: (construct, as a property, the name)."""
    same_sizes: tuple[tuple[int, tuple[int, ...]], ...]
    """Constructs whose variadic definitions must take as many values each:
    (construct, the positions of those definitions)."""
    plain: bool
    """Whether the class keeps `Operation.__init__`'s work and IRDL's
    `__post_init__` as they are, so that `_init_operation` and the defaults below
    may stand in for them (a tenth of an op's build)."""
    property_defaults: tuple[tuple[str, Attribute], ...]
    """The default of each property that has one and is not optional, as IRDL's
    `__post_init__` fills them in."""
    attribute_defaults: tuple[tuple[str, Attribute], ...]
    """The same of the attributes."""


def _plan_of(op_def: OpDef, op_class: type[IRDLOperation]) -> _Plan | None:
    """The plan of `op_def` (the definition of `op_class`), or None where an option is
    not one `_build` knows."""
    kinds = tuple(
        tuple(_kind(d) for _, d in defs)
        for defs in (op_def.operands, op_def.results, op_def.regions, op_def.successors)
    )
    segments: list[tuple[int, bool, str]] = []
    same_sizes: list[tuple[int, tuple[int, ...]]] = []
    for option in op_def.options:
        if isinstance(option, AttrSizedSegments):
            known = [(c, k) for c, k in _SEGMENTS if isinstance(option, c)]
            if not known:
                return None
            cls, construct = known[0]
            segments.append((construct, option.as_property, cls.attribute_name))
        elif isinstance(option, SameVariadicSize):
            known = [k for c, k in _SAME_SIZES if isinstance(option, c)]
            if not known:
                return None
            variadic = tuple(
                k for k, kind in enumerate(kinds[known[0]]) if kind != _SINGLE
            )
            same_sizes.append((known[0], variadic))
    return _Plan(
        kinds,
        tuple(segments),
        tuple(same_sizes),
        _is_plain(op_class),
        _defaults(op_def.properties),
        _defaults(op_def.attributes),
    )


def _is_plain(cls: type[IRDLOperation]) -> bool:
    """Whether `cls` builds through `Operation.__init__` and IRDL's
    `__post_init__` (not overridden), with a name."""
    return (
        cls.__post_init__ is _IRDL_POST_INIT
        and isinstance(getattr(cls, "name", None), str)
        and cls.name != ""
    )


def _post_init_as_defined() -> bool:
    """Whether IRDL's and `Operation`'s `__post_init__` are xDSL's own at this
    moment: xDSL's implicit builders (`ImplicitBuilder`, `Builder.implicit_region`)
    put another in front of `Operation`'s while they run, which inserts each op
    built into their block."""
    return (
        Operation.__post_init__ is _OPERATION_POST_INIT
        and IRDLOperation.__post_init__ is _IRDL_POST_INIT
    )


def _defaults(definitions: Mapping[str, Any]) -> tuple[tuple[str, Attribute], ...]:
    return tuple(
        (name, d.default_value)
        for name, d in definitions.items()
        if not isinstance(d, OptionalDef) and d.default_value is not None
    )


_PLANS: dict[type[IRDLOperation], tuple[OpDef, _Plan | None]] = {}
"""Each op class's plan of its definition (the definition beside it)."""

_VALUE, _OPERATION, _OTHER = 0, 1, 2

_TYPES: dict[type, int] = {}
"""Per Python type of an operand argument: an SSA value, an op, or neither."""

_SEQUENCES: dict[type, bool] = {list: True, tuple: True}
"""Per Python type: whether its objects are `Sequence`s (as xDSL asks it)."""

_TOKEN: list[object] = [abc.get_cache_token()]
"""The ABCs' registrations these answers hold for: a class registered as a
virtual subclass since (which may change an answer) clears them."""


def _fresh() -> None:
    token = abc.get_cache_token()
    if token != _TOKEN[0]:
        _TOKEN[0] = token
        _TYPES.clear()
        _SEQUENCES.clear()
        _SEQUENCES.update({list: True, tuple: True})


def _operand_kind(t: type) -> int:
    kind = _TYPES.get(t)
    if kind is None:
        kind = _TYPES[t] = (
            _VALUE
            if issubclass(t, SSAValue)
            else _OPERATION
            if issubclass(t, Operation)
            else _OTHER
        )
    return kind


def _is_sequence(t: type) -> bool:
    known = _SEQUENCES.get(t)
    if known is None:
        known = _SEQUENCES[t] = issubclass(t, Sequence)
    return known


def _sort(
    args: Sequence[Any], kinds: tuple[int, ...]
) -> tuple[list[Any], list[int]] | None:
    """What `irdl_build_arg_list` makes of `args` (one construct's arguments),
    or None where it would refuse them."""
    if len(args) != len(kinds):
        return None
    if not kinds:
        return [], []
    built: list[Any] = []
    sizes: list[int] = []
    for kind, arg in zip(kinds, args, strict=True):
        if arg is None:
            if kind != _OPTIONAL:
                return None
            sizes.append(0)
        elif _is_sequence(type(arg)):
            n = len(arg)
            if (n != 1 and kind == _SINGLE) or (n > 1 and kind == _OPTIONAL):
                return None
            built.extend(arg)
            sizes.append(n)
        else:
            built.append(arg)
            sizes.append(1)
    return built, sizes


def _operands(operands: Sequence[Any]) -> list[Any] | None:
    """`irdl_build_operations_arg` of each operand argument, or None where one
    is neither a value, nor an op, nor a sequence of those."""
    out: list[Any] = []
    for operand in operands:
        if operand is None:
            out.append([])
            continue
        kind = _operand_kind(type(operand))
        if kind == _VALUE:
            out.append(operand)
        elif kind == _OPERATION:
            out.append(SSAValue.get(operand))
        else:
            out.append([SSAValue.get(o) for o in operand])
    return out


def _build(
    op: IRDLOperation,
    plan: _Plan,
    operands: Sequence[Any],
    result_types: Sequence[Any],
    properties: Mapping[str, Attribute | None],
    attributes: Mapping[str, Attribute | None],
    successors: Sequence[Any],
    regions: Sequence[Any],
) -> bool:
    """Build `op` as xDSL's `irdl_op_init` would; False (having changed nothing)
    where xDSL's builder must: it refuses the arguments or takes them in a form
    this one does not."""
    for region in regions:
        if type(region) is not Region:  # xDSL builds a region from the rest
            return False
    try:
        operand_args = _operands(operands)
    except Exception:
        return False  # an op of several results, a value of the wrong kind
    if operand_args is None:
        return False
    sorted_: list[tuple[list[Any], list[int]]] = []
    for args, kinds in zip(
        (operand_args, result_types, regions, successors), plan.kinds, strict=True
    ):
        built = _sort(args, kinds)
        if built is None:
            return False
        sorted_.append(built)
    for construct, variadic in plan.same_sizes:
        sizes = sorted_[construct][1]
        if len({sizes[k] for k in variadic}) > 1:
            return False
    built_properties = {k: v for k, v in properties.items() if v is not None}
    built_attributes = {k: v for k, v in attributes.items() if v is not None}
    for construct, as_property, name in plan.segments:
        container = built_properties if as_property else built_attributes
        container[name] = _segment_sizes(tuple(sorted_[construct][1]))
    if not (plan.plain and _post_init_as_defined()):
        Operation.__init__(
            op,
            operands=sorted_[_OPERANDS][0],
            result_types=sorted_[_RESULTS][0],
            properties=built_properties,
            attributes=built_attributes,
            successors=sorted_[_SUCCESSORS][0],
            regions=sorted_[_REGIONS][0],
        )
        return True
    _init_operation(
        op,
        sorted_[_OPERANDS][0],
        sorted_[_RESULTS][0],
        built_properties,
        built_attributes,
        sorted_[_SUCCESSORS][0],
        sorted_[_REGIONS][0],
    )
    for defaults, container in (
        (plan.property_defaults, built_properties),
        (plan.attribute_defaults, built_attributes),
    ):
        for name, value in defaults:
            if name not in container:
                container[name] = value
    return True


@lru_cache(maxsize=1024)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    """The segment-size attribute of `sizes`, made once (attributes are immutable;
    making one took as long as the rest of its op's build)."""
    return DenseArrayBase.from_list(i32, list(sizes))


def _init_operation(
    op: Operation,
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: dict[str, Attribute],
    attributes: dict[str, Attribute],
    successors: Sequence[Block],
    regions: Sequence[Region],
) -> None:
    """What `Operation.__init__` does to an op not yet built (its operand and
    successor setters first detach the old ones, of which it has none), the
    dictionaries taken as they are (`_build` made them), without its
    `__post_init__` (`_build` fills the definition's defaults as IRDL's would)."""
    values = SSAValues(operands)
    op._operands = values  # pyright: ignore[reportPrivateUsage]
    op._operand_uses = _used_by(op, values)  # pyright: ignore[reportPrivateUsage]
    op.results = SSAValues(OpResult(t, op, k) for k, t in enumerate(result_types))
    op.properties = properties
    op.attributes = attributes
    op.location = UNKNOWN_LOC
    blocks = tuple(successors)
    op._successors = blocks  # pyright: ignore[reportPrivateUsage]
    op._successor_uses = _used_by(op, blocks)  # pyright: ignore[reportPrivateUsage]
    op.regions = ()
    for region in regions:
        op.add_region(region)


def _used_by(
    op: Operation, used: Sequence[SSAValue] | Sequence[Block]
) -> tuple[Use, ...]:
    """`op`'s uses of `used` (its operands or its successors), each recorded on
    what it uses."""
    uses = tuple(Use(op, k) for k in range(len(used)))
    for item, use in zip(used, uses, strict=True):
        item.add_use(use)
    return uses


def planned_op_init(
    self: IRDLOperation,
    op_def: OpDef,
    *,
    operands: Sequence[Any],
    result_types: Sequence[Any],
    properties: Mapping[str, Attribute | None],
    attributes: Mapping[str, Attribute | None],
    successors: Sequence[Block | Sequence[Block] | None],
    regions: Sequence[Any],
) -> None:
    """`irdl_op_init`, through the definition's plan where it has one."""
    _fresh()
    cls = type(self)
    entry = _PLANS.get(cls)
    if entry is None or entry[0] is not op_def:
        entry = _PLANS[cls] = (op_def, _plan_of(op_def, cls))
    plan = entry[1]
    if plan is not None and _build(
        self, plan, operands, result_types, properties, attributes, successors, regions
    ):
        return
    _xdsl_op_init(
        self,
        op_def,
        operands=operands,
        result_types=result_types,
        properties=properties,
        attributes=attributes,
        successors=successors,
        regions=regions,
    )


def install() -> None:
    """Build IRDL ops through their plans from now on (idempotent)."""
    irdl_operations.irdl_op_init = planned_op_init  # pyright: ignore[reportAttributeAccessIssue]
