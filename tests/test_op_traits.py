"""The remembered trait look-ups (`affinec.base.op_traits`) answer as xDSL's.

Every op class of every dialect a pipeline reads or writes, asked about every
trait class xDSL and affinec define and about every trait value those op classes
hold: the same trait (the same object) or None, the same list; asked twice (the
second answer from the table); and a trait added to a class afterwards is seen.
"""

from __future__ import annotations

import inspect

import pytest
import xdsl.ir.core as xdsl_core
import xdsl.traits as xdsl_traits
from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.ir import Operation, OpTrait

from affinec.base import op_traits
from affinec.ir.context import all_dialects


def _op_classes() -> list[type[Operation]]:
    classes = []
    for factory in all_dialects().values():
        classes.extend(factory().operations)
    return classes


def _trait_classes() -> list[type]:
    found = {
        c
        for c in vars(xdsl_traits).values()
        if inspect.isclass(c) and issubclass(c, OpTrait)
    }
    for cls in _op_classes():
        found.update(type(t) for t in cls.traits)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def _asked(classes: list[type[Operation]]) -> list[tuple[type, object]]:
    """Each class about its own traits (by class and by value) and about a spread
    of the others (every 8th trait class, every 16th trait value)."""
    kinds = _trait_classes()
    values = sorted(
        {t for cls in classes for t in cls.traits if _hashable(t)}, key=repr
    )
    asked = []
    for cls in classes:
        own = [t for t in cls.traits if _hashable(t)]
        for trait in (*{type(t) for t in own}, *kinds[::8], *own, *values[::16]):
            asked.append((cls, trait))
    return asked


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _answers(cls: type[Operation], trait) -> tuple:
    of_type = cls.get_traits_of_type(trait) if isinstance(trait, type) else None
    return cls.get_trait(trait), cls.has_trait(trait), of_type


def test_every_op_class_answers_as_xdsl_for_every_trait() -> None:
    classes = _op_classes()
    assert len(classes) > 300  # every dialect's ops, not a few
    asked = _asked(classes)
    assert len(asked) > 10_000
    op_traits.uninstall()
    try:
        expected = [_answers(cls, trait) for cls, trait in asked]
    finally:
        op_traits.install()
    for _ in range(2):  # the first answers computed, the second from the table
        for (cls, trait), want in zip(asked, expected, strict=True):
            got = _answers(cls, trait)
            assert got[0] is want[0], (cls.name, trait)
            assert got[1:] == want[1:], (cls.name, trait)


def test_the_list_of_traits_is_a_new_one_each_time() -> None:
    cls = next(c for c in _op_classes() if c.get_traits_of_type(OpTrait))
    first = cls.get_traits_of_type(OpTrait)
    first.clear()
    assert cls.get_traits_of_type(OpTrait), "the table's list was handed out"


def test_a_trait_added_to_a_class_is_seen() -> None:
    class _Marker(OpTrait):
        pass

    cls = _op_classes()[0]
    before = cls.traits._traits  # pyright: ignore[reportPrivateUsage]
    assert cls.get_trait(_Marker) is None and not cls.get_traits_of_type(_Marker)
    marker = _Marker()
    cls.traits.add_trait(marker)
    try:
        assert cls.get_trait(_Marker) is marker
        assert cls.get_traits_of_type(_Marker) == [marker]
        assert cls.has_trait(marker)
    finally:
        cls.traits._traits = before  # pyright: ignore[reportPrivateUsage]
    assert cls.get_trait(_Marker) is None


def test_an_unhashable_trait_value_is_asked_of_xdsl() -> None:
    class _Unhashable(OpTrait):
        __hash__ = None  # pyright: ignore[reportAssignmentType]

    cls = _op_classes()[0]
    assert cls.get_trait(_Unhashable()) is None


@pytest.mark.parametrize("installed", [True, False])
def test_an_op_built_has_xdsls_unknown_location(installed: bool) -> None:
    if not installed:
        op_traits.uninstall()
    try:
        assert xdsl_core._unknown_loc() is UNKNOWN_LOC  # pyright: ignore
    finally:
        op_traits.install()
