"""The kernels of a compiled function and the plans of their launches.

`Launch` is one kernel of a function: its entry point, geometry, dynamic shared
memory and the parameters it takes. `LaunchPlan` is all that a call of a `Kernel`
with one layout of device arrays (shapes, dtypes, strides, devices) needs, decided
once: `build_plan` makes it from a call whose arguments passed every check,
`find_plan` finds it again for a later call of the same layout (`layout_key`) whose
addresses pass `addresses_admitted`. Nothing here needs a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from affinec.backend.kernel_arguments import (
    Argument,
    Parameter,
    ParameterBlock,
    addresses_admitted,
    array_kind,
    layout_of,
    memory_vouched,
)
from affinec.hardware.tensor_maps import TiledTensorMap

if TYPE_CHECKING:
    from xdsl.ir.affine import AffineMap

    from affinec.backend.runtime import Kernel


@dataclass
class LaunchPlan:
    """What a call of a kernel with one layout of device arrays needs, decided once
    when the first call of that layout passed every check (`Kernel.prepare`): a
    later call of the layout only reads its arrays' addresses, has them judged by
    `addresses_admitted`, writes them into the parameter blocks and launches."""

    names: tuple[str, ...]
    """The parameter of each array the call gives, in the call's order."""
    sizes: tuple[int, ...]
    """Bytes of each array given."""
    output: int
    """The output's position among the arrays given; -1 where the call leaves it
    to the kernel, which then allocates it (`allocate`) at each call."""
    allocate: Parameter | None
    asked: tuple[bool, ...]
    """Per array given: whether its memory is asked of the driver at each call
    (`memory_vouched`)."""
    torch_device: int | None
    """The CUDA device of the call's torch tensors, if any: the kernels then run
    on torch's current stream there, and the workspaces are torch's memory."""
    grids: tuple[tuple[int, int, int], ...]
    """Each launch's grid at the call's batch."""
    blocks: tuple[ParameterBlock, ...]
    """Each launch's parameters."""
    order: tuple[str, ...] = ()
    """The parameters whose addresses a call lists, in its order: the arrays
    given, the output allocated (if it is), the workspaces."""
    workspaces: tuple[str, ...] = ()
    writes: tuple[tuple[tuple[int, int], ...], ...] = ()
    """Per launch: (parameter position, index into the call's addresses) of each
    array passed by its address."""
    maps: tuple[tuple[tuple[int, int, TiledTensorMap], ...], ...] = ()
    """Per launch: (parameter position, index, tensor map) of each array passed as
    a TMA tensor map."""


@dataclass(frozen=True)
class Launch:
    """One kernel of a compiled function: its entry point, geometry, dynamic shared
    memory, and the parameters it takes, by name, in its own order."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_memory: int
    arguments: tuple[str, ...]
    tensor_maps: tuple[TiledTensorMap | None, ...] = ()
    """Per argument (empty: none): None for a pointer to the array, or the TMA
    tensor map the kernel takes over the array instead (by value, 128 bytes),
    encoded at each launch for the array's address (`affinec.hardware.tensor_maps`)."""
    batch_grid: AffineMap | None = None
    """For a kernel of any batch: the grid's x as a function of the batch (`grid`
    then holds 0 there)."""

    def grid_for(self, batch: int | None) -> tuple[int, int, int]:
        """The grid of a launch over `batch` images."""
        if self.batch_grid is None or batch is None:
            return self.grid
        (blocks,) = self.batch_grid.eval([batch], [])
        return (blocks, self.grid[1], self.grid[2])

    @property
    def takes_tensor_maps(self) -> bool:
        return any(m is not None for m in self.tensor_maps)


def layout_key(args: tuple, kwargs: dict) -> tuple[tuple, list[int]] | None:
    """The key of a call's layout (how many arrays by position, the names of the
    others, each array's layout) and the addresses of the arrays given; None where
    an argument has no layout (a numpy array, anything else)."""
    values = (*args, *kwargs.values()) if kwargs else args
    layouts, addresses = [], []
    for value in values:
        if value is None:
            layouts.append(None)
            continue
        layout = layout_of(value)
        if layout is None:
            return None
        layouts.append(layout[0])
        addresses.append(layout[1])
    return (len(args), tuple(kwargs), tuple(layouts)), addresses


def build_plan(
    kernel: Kernel, args: tuple, kwargs: dict, arguments: list[Argument]
) -> tuple[tuple, LaunchPlan] | None:
    """The layout key and the plan of a call of `kernel` whose `arguments` passed
    every check (`Kernel.check`); None for a call with an array of no layout (numpy
    arrays: they are copied, not planned)."""
    keyed = layout_key(args, kwargs)
    if keyed is None:
        return None
    key, _ = keyed
    names = [p.name for p in kernel.arguments[: len(args)]] + list(kwargs)
    given = [
        (n, v) for n, v in zip(names, (*args, *kwargs.values()), strict=True)
        if v is not None
    ]  # fmt: skip
    by_name = {a.parameter.name: a.parameter for a in arguments}
    (out,) = (a.parameter for a in arguments if a.parameter.output)
    given_names = [n for n, _ in given]
    batch = None
    if kernel.batched:  # every batched parameter was checked at the call's batch
        batch = next(by_name[p.name].shape[0] for p in kernel.arguments if p.batched)
    torch_device = next(
        (v.device.index for _, v in given if array_kind(v) == "torch"), None
    )
    plan = LaunchPlan(
        names=tuple(given_names),
        sizes=tuple(by_name[n].nbytes for n in given_names),
        output=given_names.index(out.name) if out.name in given_names else -1,
        allocate=None if out.name in given_names else out,
        asked=tuple(not memory_vouched(v) for _, v in given),
        torch_device=torch_device,
        grids=tuple(launch.grid_for(batch) for launch in kernel.launches),
        blocks=tuple(ParameterBlock(len(launch.arguments)) for launch in kernel.launches),
    )  # fmt: skip
    plan.workspaces = tuple(p.name for p in kernel.parameters if p.workspace)
    plan.order = (
        *plan.names,
        *((out.name,) if plan.allocate is not None else ()),
        *plan.workspaces,
    )
    index = {name: k for k, name in enumerate(plan.order)}
    writes, maps = [], []
    for launch in kernel.launches:
        tensor_maps = launch.tensor_maps or (None,) * len(launch.arguments)
        pairs = list(enumerate(zip(launch.arguments, tensor_maps, strict=True)))
        writes.append(tuple((k, index[a]) for k, (a, m) in pairs if m is None))
        maps.append(tuple((k, index[a], m) for k, (a, m) in pairs if m is not None))
    plan.writes, plan.maps = tuple(writes), tuple(maps)
    return key, plan


def find_plan(
    plans: dict[tuple, LaunchPlan], args: tuple, kwargs: dict
) -> tuple[LaunchPlan, list[Any], list[int]] | None:
    """The plan among `plans` of a call whose layout was checked before and whose
    addresses pass (`addresses_admitted`), with the arrays given and their
    addresses; None sends the call to the full checks."""
    if not plans:
        return None
    keyed = layout_key(args, kwargs)
    if keyed is None:
        return None
    key, addresses = keyed
    plan = plans.get(key)
    if plan is None or not addresses_admitted(
        addresses, plan.sizes, plan.output, plan.asked
    ):
        return None
    values = [v for v in (*args, *kwargs.values()) if v is not None]
    return plan, values, addresses


__all__ = [
    "Launch",
    "LaunchPlan",
    "build_plan",
    "find_plan",
    "layout_key",
]
