"""The shared-memory hazard check of the outlined kernels, made later in a compile.

`gpu-kernel-outlining` checks the kernels it made (`check_shared_memory_hazards`,
the last level whose kernels are structured). Within `hazards_deferred` -- a
compile that verifies once, at the end -- it keeps a copy of the module instead,
and the compile checks that copy while LLVM writes the PTX in a thread of its own
(Python's share of the two cores), and returns no PTX where it refuses: the same
check, on the same IR, with the same refusal. A compile whose later passes, the
verifier or LLVM fail checks the copy first, so that a hazard is still the error
reported, as when checked at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from xdsl.dialects.builtin import ModuleOp

from affinec.transforms.gpu.shared_memory_hazards import check_shared_memory_hazards

_PENDING: ContextVar[list[ModuleOp] | None] = ContextVar(
    "hazards_pending", default=None
)


@contextmanager
def hazards_deferred() -> Iterator[list[ModuleOp]]:
    """Within: `check_kernels` keeps copies in the list given (for `check_pending`)
    rather than checking."""
    pending: list[ModuleOp] = []
    token = _PENDING.set(pending)
    try:
        yield pending
    finally:
        _PENDING.reset(token)


def check_kernels(module: ModuleOp) -> None:
    """`gpu-kernel-outlining`'s check of `module`: now, or within
    `hazards_deferred` on a copy of it as it is now, by `check_pending`."""
    pending = _PENDING.get()
    if pending is None:
        check_shared_memory_hazards(module)
    else:
        pending.append(module.clone())


def check_pending(pending: list[ModuleOp]) -> None:
    """Make the checks `hazards_deferred` kept, in order (a `PassError` at the op
    of the copy, as `check_shared_memory_hazards` raises it); each passed is
    dropped, one refused is kept (asked again, it refuses again)."""
    while pending:
        check_shared_memory_hazards(pending[0])
        pending.pop(0)
