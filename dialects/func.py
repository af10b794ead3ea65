"""xDSL's func dialect with MLIR's check that xDSL's verifier lacks: a function
declared without a body is not public (it names a function defined elsewhere,
which a public symbol of this module would claim to be).

    func.func @g(i32) -> i32            // refused
    func.func private @g(i32) -> i32    // a declaration

`Func` is xDSL's dialect; affinec's context registers it from here, and with it
the check (`OP_CHECKS`).
"""

from __future__ import annotations

from xdsl.dialects import func as xdsl_func
from xdsl.ir import Dialect, Operation

from affinec.base.diagnostics import OP_CHECKS


def _declaration_not_public(op: Operation) -> str | None:
    assert isinstance(op, xdsl_func.FuncOp)
    visibility = op.sym_visibility
    if op.body.blocks or (visibility is not None and visibility.data != "public"):
        return None
    return "symbol declaration cannot have public visibility"


OP_CHECKS[xdsl_func.FuncOp] = _declaration_not_public

Func: Dialect = xdsl_func.Func
"""xDSL's func dialect itself; importing it from here registers the check."""
