"""Output targets of `affinec-opt -t NAME`, beyond xDSL's own (`mlir`, ...)."""

from collections.abc import Callable
from typing import IO

from xdsl.dialects.builtin import ModuleOp


def get_all_targets() -> dict[str, Callable[[ModuleOp, IO[str]], None]]:
    """Targets by name; each writes the module in its form to the stream."""
    return {}
