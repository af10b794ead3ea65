"""Modules several tests of a file start from, built (and checked) once per test
process: each test gets its own copy to edit, as if it had built the module itself.

The key says everything the module depends on (spec, configuration, passes); the
passes and the interpreter are deterministic, so the copy is the module the test
would have built."""

from collections.abc import Callable, Hashable

from xdsl.dialects.builtin import ModuleOp

_BUILT: dict[Hashable, ModuleOp] = {}


def built_once(key: Hashable, make: Callable[[], ModuleOp]) -> ModuleOp:
    """A fresh copy of `make()`'s module, which runs the first time `key` is asked
    for (its checks with it)."""
    if key not in _BUILT:
        _BUILT[key] = make()
    return _BUILT[key].clone()
