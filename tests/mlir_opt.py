"""A real `mlir-opt` 22, for the tests that check affinec against it.

`MLIR_OPT` is `/usr/lib/llvm-22/bin/mlir-opt` (Debian's `mlir-22-tools`) or an
`mlir-opt` on PATH that says it is version 22; None where there is neither, and
`needs_mlir_opt` skips a test then. `same_ir` compares two modules as IR, not as
text: both are parsed with affinec's parser and printed in the generic form without
value names, so mlir-opt's renaming (`%arg0`, `#map`) does not count, while any
difference in an op, an operand, a property or an attribute does.
"""

from __future__ import annotations

import functools
import io
import shutil
import subprocess
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer

from affinec.context import make_context
from affinec.diagnostics import parse_module

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

needs_mlir_opt = pytest.mark.skipif(
    MLIR_OPT is None,
    reason=f"needs mlir-opt {MLIR_VERSION} (Debian: apt-get install "
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


def parse(text: str, allow_unregistered: bool = False) -> ModuleOp:
    ctx = make_context()
    ctx.allow_unregistered = allow_unregistered
    return parse_module(ctx, text)


def printed(module: ModuleOp, generic: bool = False) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def anonymous_generic(module: ModuleOp) -> str:
    """`module` in generic form with every value and block unnamed, and its
    attribute and property dictionaries sorted (as MLIR prints them)."""
    module = module.clone()
    for op in module.walk():
        for result in op.results:
            result.name_hint = None
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    arg.name_hint = None
    for op in module.walk():
        op.attributes = dict(sorted(op.attributes.items()))
        op.properties = dict(sorted(op.properties.items()))
    return printed(module, generic=True)


def unwrap(module: ModuleOp) -> ModuleOp:
    """The module itself, or the one module it wraps (mlir-opt prints an explicit
    `module {...}` around what it read)."""
    ops = list(module.body.block.ops)
    if len(ops) == 1 and isinstance(ops[0], ModuleOp) and not module.attributes:
        inner = ops[0]
        inner.detach()
        return inner
    return module


def same_ir(ours: str, theirs: str, allow_unregistered: bool = False) -> bool:
    """Whether two texts hold the same IR (see the module docstring)."""
    a = unwrap(parse(ours, allow_unregistered))
    b = unwrap(parse(theirs, allow_unregistered))
    return anonymous_generic(a) == anonymous_generic(b)
