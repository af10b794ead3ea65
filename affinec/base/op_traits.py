"""xDSL's trait look-ups (`Operation.get_trait`, `has_trait`,
`get_traits_of_type`) remembered per op class.

An op class's traits are a class attribute, yet xDSL answers every question about
them by going through all of them: for a trait class, an ABC `isinstance` check
per trait; for a trait value, a dataclass `==` per trait. The passes, CSE, dead-
code elimination and the verifier ask for every op they meet (is it pure, is it
a terminator, does it hold a symbol table), some 2 % of a compile. `install`
puts in front of the three a table per (class, trait asked) whose answer is
xDSL's own, kept as long as the class's set of traits is the same object (xDSL
replaces it when a trait is added), and asked of xDSL again otherwise or for a
trait that cannot be a key. `_unknown_loc`, the default location of every op
built, returns xDSL's `UNKNOWN_LOC` without the import statement it runs each
time. `tests/test_op_traits.py` compares the answers with xDSL's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import xdsl.ir.core as xdsl_core
from xdsl.dialects.builtin import UNKNOWN_LOC
from xdsl.ir import Operation

_xdsl_get_trait: Callable[..., Any] = Operation.get_trait.__func__  # pyright: ignore
_xdsl_get_traits_of_type: Callable[..., Any] = Operation.get_traits_of_type.__func__  # pyright: ignore
_xdsl_unknown_loc: Callable[[], Any] = xdsl_core._unknown_loc  # pyright: ignore

_TRAIT: dict[tuple[type, Any], tuple[frozenset, Any]] = {}
_TRAITS_OF_TYPE: dict[tuple[type, type], tuple[frozenset, tuple]] = {}


def get_trait(cls: type[Operation], trait: Any) -> Any:
    """`Operation.get_trait`: the trait of `cls` of that type or equal to it."""
    current = cls.traits.traits
    key = (cls, trait)
    try:
        hit = _TRAIT.get(key)
    except TypeError:  # a trait value that cannot be a key
        return _xdsl_get_trait(cls, trait)
    if hit is not None and hit[0] is current:
        return hit[1]
    found = _xdsl_get_trait(cls, trait)
    _TRAIT[key] = (current, found)
    return found


def get_traits_of_type(cls: type[Operation], trait_type: type) -> list:
    """`Operation.get_traits_of_type`: the traits of `cls` of that type (a new
    list each time, as xDSL's)."""
    current = cls.traits.traits
    key = (cls, trait_type)
    hit = _TRAITS_OF_TYPE.get(key)
    if hit is None or hit[0] is not current:
        hit = _TRAITS_OF_TYPE[key] = (
            current,
            tuple(_xdsl_get_traits_of_type(cls, trait_type)),
        )
    return list(hit[1])


def unknown_loc() -> Any:
    return UNKNOWN_LOC


def install() -> None:
    """Look traits up through the tables from now on (idempotent)."""
    Operation.get_trait = classmethod(get_trait)  # pyright: ignore[reportAttributeAccessIssue]
    Operation.get_traits_of_type = classmethod(get_traits_of_type)  # pyright: ignore[reportAttributeAccessIssue]
    xdsl_core._unknown_loc = unknown_loc  # pyright: ignore[reportAttributeAccessIssue]


def uninstall() -> None:
    """xDSL's own look-ups again (for comparing the two)."""
    Operation.get_trait = classmethod(_xdsl_get_trait)  # pyright: ignore[reportAttributeAccessIssue]
    Operation.get_traits_of_type = classmethod(_xdsl_get_traits_of_type)  # pyright: ignore[reportAttributeAccessIssue]
    xdsl_core._unknown_loc = _xdsl_unknown_loc  # pyright: ignore[reportAttributeAccessIssue]
