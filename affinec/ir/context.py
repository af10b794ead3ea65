"""The xDSL context every affinec tool parses in: xDSL's dialects, with ours in place
of the ones we re-syntax."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Dialect


def _affine() -> Dialect:
    from affinec.dialects.affine import Affine

    return Affine


def _affinec() -> Dialect:
    from affinec.dialects.affinec import Affinec

    return Affinec


def _gpu() -> Dialect:
    from affinec.dialects.gpu import Gpu

    return Gpu


def _linalg() -> Dialect:
    from affinec.dialects.linalg import Linalg

    return Linalg


def _llvm() -> Dialect:
    from affinec.dialects.llvm import LLVM

    return LLVM


def _memref() -> Dialect:
    from affinec.dialects.memref import MemRef

    return MemRef


def _scf() -> Dialect:
    from affinec.dialects.scf import Scf

    return Scf


def _nvgpu() -> Dialect:
    from affinec.dialects.nvgpu import NVGPU

    return NVGPU


def _nvvm() -> Dialect:
    from affinec.dialects.nvvm import NVVM

    return NVVM


def _arith() -> Dialect:
    from affinec.dialects.arith import Arith

    return Arith


def _func() -> Dialect:
    from affinec.dialects.func import Func

    return Func


def _rocdl() -> Dialect:
    from affinec.dialects.rocdl import ROCDL

    return ROCDL


def _vector() -> Dialect:
    from affinec.dialects.vector import Vector

    return Vector


AFFINEC_DIALECTS: dict[str, Callable[[], Dialect]] = {
    "affine": _affine,
    "affinec": _affinec,
    "arith": _arith,
    "func": _func,
    "gpu": _gpu,
    "linalg": _linalg,
    "llvm": _llvm,
    "memref": _memref,
    "nvgpu": _nvgpu,
    "nvvm": _nvvm,
    "rocdl": _rocdl,
    "scf": _scf,
    "vector": _vector,
}
"""Dialects of ours, by name; those also in xDSL replace xDSL's in our context (`llvm`
is xDSL's with the ops it lacks added; `arith` xDSL's with MLIR's checks of the
float casts and the comparisons' predicates; `func` xDSL's with MLIR's check of
declarations; `memref` xDSL's with MLIR's syntax of `memref.cast` and checks of
views; `linalg` xDSL's with MLIR's named convolutions and products as
`affinec-lower-linalg` reads them; `scf` xDSL's with MLIR's forms of result types
after `->`; `vector` xDSL's with MLIR's checks of positions and shapes)."""


NOT_REGISTERED = ("test",)
"""xDSL's dialects mlir-opt does not have: MLIR's `test` ops are unregistered there,
so `--allow-unregistered-dialect` takes them (xDSL's `test` dialect would refuse
the ones it does not define)."""


def all_dialects() -> dict[str, Callable[[], Dialect]]:
    ours = {k: v for k, v in get_all_dialects().items() if k not in NOT_REGISTERED}
    return ours | AFFINEC_DIALECTS


def make_context() -> Context:
    """A context that knows every dialect an affinec pipeline reads or writes."""
    ctx = Context()
    for name, factory in all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def require_affinec_dialects(module: ModuleOp) -> None:
    """Refuse ops built from xDSL's own `affine` or `gpu` dialect.

    affinec's passes rewrite affinec's definitions of those dialects. Plain `xdsl-opt`
    (which offers our passes through the `xdsl.universe` entry point) parses `affine`
    and `gpu` with xDSL's, whose ops our passes would silently walk past.
    """
    from affinec.base.diagnostics import PassError

    checked = _CHECKED.get()
    if checked is not None and any(m is module for m in checked):
        return
    ours = _resyntaxed_operations()
    seen = _ACCEPTED_TYPES
    for op in module.walk():
        if type(op) in seen:
            continue
        name = op.dialect_name()
        allowed = ours.get(name)
        if allowed is None or type(op) in allowed:
            seen.add(type(op))
            continue
        raise PassError(
            op,
            f"comes from xDSL's '{name}' dialect, which affinec's passes do "
            "not rewrite: run them with affinec-opt (or parse with "
            "affinec.ir.context.make_context())",
        )
    if checked is not None:
        checked.append(module)


_CHECKED: ContextVar[list[ModuleOp] | None] = ContextVar(
    "affinec_dialects_checked", default=None
)
"""The modules `require_affinec_dialects` has passed within `dialects_checked_once`
(None outside)."""


@contextmanager
def dialects_checked_once() -> Iterator[Callable[[], None]]:
    """Within: `require_affinec_dialects` checks a module once, not again in every
    pass (affinec's passes build affinec's ops only). The function it gives forgets
    what was checked: call it before a pass that is not affinec's, which may build
    xDSL's ops."""
    checked: list[ModuleOp] = []
    token = _CHECKED.set(checked)
    try:
        yield checked.clear
    finally:
        _CHECKED.reset(token)


_ACCEPTED_TYPES: set[type] = set()
"""Op classes `require_affinec_dialects` has let through (an op's class fixes its
dialect: xDSL makes a class per unregistered op name too)."""


@functools.cache
def _resyntaxed_operations() -> dict[str, frozenset[type]]:
    """The op classes of each dialect of ours that xDSL also defines (one walk of
    the module checks them all; the dialects are built once)."""
    return {
        name: frozenset(AFFINEC_DIALECTS[name]().operations) for name in _RESYNTAXED
    }


_EXTENDED = {"llvm", "scf"}
"""Our dialects whose ops include xDSL's (`llvm`: xDSL's plus ops it lacks; `scf`:
subclasses that only parse more): xDSL's ops are ours too."""

_RESYNTAXED = [
    name
    for name in AFFINEC_DIALECTS
    if name in get_all_dialects() and name not in _EXTENDED
]
"""Our dialects that xDSL also defines (in its own syntax)."""
