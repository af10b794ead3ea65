"""A table of functions registered per op class: the one registry that the
interpreter's emitters and the nvvm lowering's converters both use.

    EMITTERS = OpTable("interpreter emitter")

    @EMITTERS.register(arith.AddfOp, arith.SubfOp)
    def _binary(op, writer): ...

    EMITTERS.lookup(op)   # the function for op's class (or a base class), or None

Lookups follow the op's class hierarchy, so registering a base class (the affine
loads' `AffineLoadBase`) covers its subclasses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from xdsl.ir import Operation

F = TypeVar("F", bound=Callable)


class OpTable(Generic[F]):
    """Functions by op class; `what` names them in messages ("nvvm converter")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._table: dict[type[Operation], F] = {}

    def register(self, *op_types: type[Operation]) -> Callable[[F], F]:
        """A decorator registering the function for each of `op_types`."""

        def register(fn: F) -> F:
            for t in op_types:
                if t in self._table:
                    raise ValueError(f"two {self.what}s for '{t.name}'")
                self._table[t] = fn
            return fn

        return register

    def lookup(self, op: Operation) -> F | None:
        """The function registered for `op`'s class or its nearest base class."""
        for cls in type(op).__mro__:
            if cls in self._table:
                return self._table[cls]
        return None

    def __contains__(self, op: Operation) -> bool:
        return self.lookup(op) is not None

    def __iter__(self) -> Iterator[type[Operation]]:
        return iter(self._table)
