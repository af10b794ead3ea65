"""Checking a call of a kernel before any device work (`Kernel.check`): the arrays
given by position or by name against the kernel's parameters (none unknown, none
twice, none missing but the output), the batch of a kernel of any batch (one for
all its arrays, at least 1, a grid that holds it), a missing output allocated in the
inputs' kind, and each array against its parameter (`check_argument`) with the
output apart from the inputs (`check_aliasing`). A mismatch raises
`KernelArgumentError` naming the argument. Needs no GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from affinec.backend.errors import KernelArgumentError
from affinec.backend.kernel_arguments import (
    Argument,
    check_aliasing,
    check_argument,
    new_output,
    shape_of,
)

if TYPE_CHECKING:
    from affinec.backend.runtime import Kernel

MAX_GRID_X = (1 << 31) - 1
"""The most blocks a grid has along x."""


def call_batch(kernel: Kernel, values: dict[str, Any]) -> int | None:
    """The batch of a call of `kernel` with `values` by parameter name: the
    outermost size of every batched array given, which must agree (and be at least
    1)."""
    batch, first = None, None
    for p in kernel.arguments:
        value = values.get(p.name)
        if not p.batched or value is None:
            continue
        shape = shape_of(value)
        if not shape:
            continue  # check_argument says what is wrong with it
        if batch is None:
            batch, first = shape[0], p.name
        elif shape[0] != batch:
            raise KernelArgumentError(
                f"argument '{p.name}': its batch (outermost size) is {shape[0]}, "
                f"'{first}''s is {batch}: a kernel of any batch takes one batch "
                "for all its arrays"
            )
    if batch is not None and batch < 1:
        raise KernelArgumentError(
            f"argument '{first}': a batch of {batch}; the kernel runs at least one"
        )
    if batch is not None:
        for launch in kernel.launches:
            blocks = launch.grid_for(batch)[0]
            if blocks > MAX_GRID_X:
                raise KernelArgumentError(
                    f"a batch of {batch} needs {blocks} blocks, more than a grid "
                    f"holds ({MAX_GRID_X})"
                )
    return batch


def check_call(kernel: Kernel, args: tuple, kwargs: dict[str, Any]) -> list[Argument]:
    """Every argument of a call of `kernel` checked against its parameter, in the
    parameters' order; a missing output allocated in the inputs' kind
    (`new_output`: numpy if any input is a numpy array)."""
    parameters = kernel.arguments
    names = [p.name for p in parameters]
    if len(args) > len(parameters):
        raise KernelArgumentError(
            f"kernel {kernel.name} takes {len(parameters)} arrays "
            f"({kernel.signature()}), {len(args)} were given"
        )
    values: dict[str, Any] = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names:
            raise KernelArgumentError(
                f"kernel {kernel.name} has no parameter '{key}' ({kernel.signature()})"
            )
        if key in values:
            raise KernelArgumentError(f"argument '{key}' given twice")
        values[key] = value
    batch = call_batch(kernel, values)
    if kernel.batched and batch is None:
        raise KernelArgumentError(
            f"kernel {kernel.name} takes any batch: give at least one batched "
            f"input ({kernel.signature()})"
        )
    given = [v for v in values.values() if v is not None]
    # Any numpy input makes the call a host call (its output comes back).
    like = next((v for v in given if isinstance(v, np.ndarray)), None)
    if like is None and given:
        like = given[0]
    checked: list[Argument] = []
    for p in (p.for_batch(batch) if batch is not None else p for p in parameters):
        if values.get(p.name) is None:
            if not p.output:
                raise KernelArgumentError(
                    f"missing argument '{p.name}' ({p.describe()}); kernel "
                    f"{kernel.name} takes ({kernel.signature()})"
                )
            values[p.name] = new_output(p, like)
        checked.append(check_argument(p, values[p.name]))
    check_aliasing(checked)
    return checked


__all__ = ["MAX_GRID_X", "call_batch", "check_call"]
