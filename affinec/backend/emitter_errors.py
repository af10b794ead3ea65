"""The emitter's error, `EmitterError`, and `emitting`: what xDSL's LLVM backend or
llvmlite raise on an op (a type they cannot translate, an op they do not know,
operands of the wrong types) turned into an `EmitterError` located at the op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.ir import Operation

from affinec.base.diagnostics import OpError, is_user_error, raised_by, xdsl_failure


class EmitterError(OpError):
    """The module cannot be emitted; `op` (when set) is the op at fault."""


@contextmanager
def emitting(op: Operation) -> Iterator[None]:
    """Emit `op`: what xDSL's backend or llvmlite raise on it (a type they cannot
    translate, an op they do not know, operands of the wrong types) is an
    `EmitterError` at `op`."""
    try:
        yield
    except EmitterError:
        raise
    except Exception as e:
        if not (is_user_error(e) or raised_by(e, "llvmlite")):
            raise
        raise EmitterError(op, f"cannot emit it as LLVM IR: {xdsl_failure(e)}") from e


__all__ = ["EmitterError", "emitting"]
