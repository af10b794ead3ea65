"""A real `mlir-opt` 22, for the tests that check affinec against it.

`MLIR_OPT` is `/usr/lib/llvm-22/bin/mlir-opt` (Debian's `mlir-22-tools`) or an
`mlir-opt` on PATH that says it is version 22; None where there is neither, and
`needs_mlir_opt` skips a test then. `same_ir` compares two modules as IR, not as
text: both are parsed with affinec's parser and printed in the generic form without
value names, so mlir-opt's renaming (`%arg0`, `#map`) does not count, while any
difference in an op, an operand, a property or an attribute does. Two things count
as the same, since MLIR itself does not keep them: the order of dictionary entries
(MLIR sorts them), and the shape of an affine map's (pure affine) expressions and
operands the map does not use (MLIR rebuilds expressions in its canonical order as
it reads them, and its custom form of `affine.load` drops unused operands): maps
are compared as `compose_map` simplifies them.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp
from xdsl.ir import Attribute, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.printer import Printer

from affinec.base.locating_parser import parse_module
from affinec.ir.context import make_context
from affinec.transforms.affine.analysis import compose_map, map_slots
from affinec.transforms.affine.rewriting import set_map_slots

MLIR_VERSION = 22
_DEBIAN_PATH = Path(f"/usr/lib/llvm-{MLIR_VERSION}/bin/mlir-opt")


@functools.cache
def find_mlir_opt() -> str | None:
    """The path of mlir-opt 22, or None."""
    candidates = [str(_DEBIAN_PATH)] if _DEBIAN_PATH.exists() else []
    if (on_path := shutil.which("mlir-opt")) is not None:
        candidates.append(on_path)
    for candidate in candidates:
        try:
            version = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, timeout=30
            ).stdout
        except OSError:
            continue
        if f"version {MLIR_VERSION}." in version:
            return candidate
    return None


MLIR_OPT = find_mlir_opt()

if MLIR_OPT is None and os.environ.get("AFFINEC_REQUIRE_MLIR_OPT"):
    raise RuntimeError(
        f"AFFINEC_REQUIRE_MLIR_OPT is set but there is no mlir-opt {MLIR_VERSION} "
        "(scripts/install_mlir_opt.sh installs it)"
    )

needs_mlir_opt = pytest.mark.skipif(
    MLIR_OPT is None,
    reason=f"needs mlir-opt {MLIR_VERSION} (scripts/install_mlir_opt.sh, or Debian's "
    f"mlir-{MLIR_VERSION}-tools; see README)",
)


class MlirOptError(Exception):
    """mlir-opt refused its input; the message is its stderr."""


def mlir_opt(text: str, *flags: str) -> str:
    """mlir-opt's output for `text` (stdin) with `flags`; `MlirOptError` on failure."""
    assert MLIR_OPT is not None
    run = subprocess.run(
        [MLIR_OPT, *flags], input=text, capture_output=True, text=True, timeout=60
    )
    if run.returncode != 0:
        raise MlirOptError(run.stderr)
    return run.stdout


def mlir_opt_each(texts: Sequence[str], *flags: str) -> list[str]:
    """mlir-opt's output for each of `texts`, in one run (`--split-input-file`)."""
    marker = "// -----"
    out = mlir_opt(f"\n{marker}\n".join(texts), "--split-input-file", *flags)
    pieces = out.split(f"{marker}\n")
    assert len(pieces) == len(texts)
    return pieces


def parse(text: str, allow_unregistered: bool = False) -> ModuleOp:
    ctx = make_context()
    ctx.allow_unregistered = allow_unregistered
    return parse_module(ctx, text)


MLIR_LACKS = ("affinec",)
"""Dialects of ours that mlir-opt does not have: it reads their ops only in the
generic form (with --allow-unregistered-dialect)."""


class MlirReadablePrinter(Printer):
    """affinec's printer, but the ops of `MLIR_LACKS` always in the generic form."""

    def print_op(self, op) -> None:
        if op.dialect_name() not in MLIR_LACKS or self.print_generic_format:
            super().print_op(op)
            return
        self.print_generic_format = True
        try:
            super().print_op(op)
        finally:
            self.print_generic_format = False


def printed(module: ModuleOp, generic: bool = False) -> str:
    """`module` as text mlir-opt reads (custom form, or generic)."""
    out = io.StringIO()
    MlirReadablePrinter(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def _by_appearance(
    m: AffineMap, operands: Sequence[SSAValue]
) -> tuple[AffineMap, list[SSAValue]]:
    """`m` with its dims and symbols numbered in the order the results use them (as
    MLIR's custom form numbers `%x` and `symbol(%x)`), unused ones dropped."""
    dims: list[int] = []
    syms: list[int] = []
    for e in m.results:
        for sub in e.dfs():
            if isinstance(sub, AffineDimExpr) and sub.position not in dims:
                dims.append(sub.position)
            if isinstance(sub, AffineSymExpr) and sub.position not in syms:
                syms.append(sub.position)
    new_dims = [
        AffineExpr.dimension(dims.index(k)) if k in dims else AffineExpr.constant(0)
        for k in range(m.num_dims)
    ]
    new_syms = [
        AffineExpr.symbol(syms.index(k)) if k in syms else AffineExpr.constant(0)
        for k in range(m.num_symbols)
    ]
    results = tuple(e.replace_dims_and_symbols(new_dims, new_syms) for e in m.results)
    values = [operands[k] for k in dims] + [operands[m.num_dims + k] for k in syms]
    return AffineMap(len(dims), len(syms), results), values


def _canonical_maps(module: ModuleOp) -> None:
    """Every pure affine map of `module` simplified, its operands in the order of
    their use, unused ones dropped."""
    for op in module.walk():
        slots = map_slots(op)
        if any(not e.is_pure_affine() for s in slots for e in s.map.results):
            continue
        if slots:
            composed = [
                _by_appearance(*compose_map(s.map, s.operands, fold_producers=False))
                for s in slots
            ]
            set_map_slots(op, composed)


def anonymous_generic(module: ModuleOp) -> str:
    """`module` in generic form with every value and block unnamed, and its
    attribute and property dictionaries sorted (as MLIR prints them)."""
    module = module.clone()
    _canonical_maps(module)
    for op in module.walk():
        for result in op.results:
            result.name_hint = None
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
    for op in module.walk():
        op.attributes = {k: _sorted(v) for k, v in sorted(op.attributes.items())}
        op.properties = {k: _sorted(v) for k, v in sorted(op.properties.items())}
    return printed(module, generic=True)


def _sorted(attr: Attribute) -> Attribute:
    """`attr` with the entries of its dictionaries sorted, as MLIR keeps them."""
    if isinstance(attr, DictionaryAttr):
        return DictionaryAttr({k: _sorted(v) for k, v in sorted(attr.data.items())})
    if isinstance(attr, ArrayAttr):
        return ArrayAttr([_sorted(a) for a in attr.data])
    return attr


def unwrap(module: ModuleOp) -> ModuleOp:
    """The module itself, or the one module it wraps (mlir-opt prints an explicit
    `module {...}` around what it read)."""
    ops = list(module.body.block.ops)
    if len(ops) == 1 and isinstance(ops[0], ModuleOp) and not module.attributes:
        inner = ops[0]
        inner.detach()
        return inner
    return module


def canonical(text: str, allow_unregistered: bool = False) -> str:
    """The IR of `text` as `same_ir` compares it."""
    return anonymous_generic(unwrap(parse(text, allow_unregistered)))


def same_ir(ours: str, theirs: str, allow_unregistered: bool = False) -> bool:
    """Whether two texts hold the same IR (see the module docstring)."""
    return canonical(ours, allow_unregistered) == canonical(theirs, allow_unregistered)


def read_back_differently(texts: Sequence[str]) -> list[int]:
    """The indices of those of `texts` that mlir-opt does not read as the same IR:
    each module is printed by affinec in the custom form (mlir-opt prints it back in
    the generic form) and in the generic form (printed back in the custom form), so
    mlir-opt reads both of affinec's forms and affinec both of mlir-opt's; what
    comes back is compared with the module affinec printed."""
    modules = [parse(t, allow_unregistered=True) for t in texts]
    expected = [anonymous_generic(unwrap(m.clone())) for m in modules]
    differ: set[int] = set()
    for generic, flags in ((False, ["--mlir-print-op-generic"]), (True, [])):
        ours = [printed(m, generic) for m in modules]
        theirs = mlir_opt_each(ours, "--allow-unregistered-dialect", *flags)
        for k, text in enumerate(theirs):
            if canonical(text, allow_unregistered=True) != expected[k]:
                differ.add(k)
    return sorted(differ)
