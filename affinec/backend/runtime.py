"""Running emitted PTX on a GPU: the driver's `cuLaunchKernel` (through
cuda.bindings, in numba's context, the primary one torch shares).

`Kernel` is a compiled kernel plus the wrapper around it that Loopy's generated
wrappers are the model for: every argument is checked before launch — present,
shape, dtype, strides, device memory, the output not aliasing an input — and a
mismatch raises `KernelArgumentError` naming the argument, what was expected and what
came. Arguments may be numpy arrays (copied to the device and, for the output, back),
numba device arrays, or anything with `__cuda_array_interface__` (torch, cupy), used
in place without copies. A missing output is allocated in the inputs' kind and
returned: numpy in, numpy out; torch in, a torch tensor out (same device, bf16 as
`torch.bfloat16`); cupy in, cupy out; numba in, numba out. bf16 arrays are
`ml_dtypes`' bfloat16 in numpy and `torch.bfloat16` tensors, whose dtype (not their
typestr, which torch spells as float16's or as two opaque bytes) tells them apart.

A call on device arrays checks each layout of arrays (shapes, dtypes, strides,
devices) once and keeps what a call of that layout needs (`LaunchPlan`: the
parameters packed as `cuLaunchKernel` takes them, each launch's grid); a later call
of the layout reads the arrays' addresses, checks them (aligned, the output apart)
and launches, on torch's current stream for torch tensors. bf16 arrays of numba or
cupy, which have no bf16, arrive as uint16 (their bits) and a missing output comes
back so.

Without a GPU everything up to PTX works; calling a kernel raises `NoCudaGPU`. The
checks run first, so they work (and are tested) without a GPU too.

This module holds `Kernel` and its launch path (loading, workspaces, packing the
parameters, launching); the rest lives beside it and is importable from here too:
`call_checks` (a call's arguments and batch checked), `launch_plans` (`Launch`,
`LaunchPlan` and the plans of a layout of device arrays), `kernel_loading` (PTX
loaded by the driver), `kernel_text` (a kernel's `repr` and `str`), `kernel_arguments`
(each argument against its parameter), `cuda_launch` (the CUDA calls) and `errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from affinec.backend import call_checks
from affinec.backend.call_checks import check_call
from affinec.backend.cuda_launch import (
    allow_dynamic_shared_memory,
    cuda_available,
    current_arch,
    driver_result,
    launch_by_driver,
    launch_function,
    launch_parameters,
    require_gpu,
    shared_memory_limit,
    stream_handle,
    torch_stream,
)
from affinec.backend.errors import (
    KernelArgumentError,
    NoCudaGPU,
    SharedMemoryError,
)
from affinec.backend.kernel_arguments import (
    Argument,
    Parameter,
    ParameterBlock,
    addresses_admitted,
    array_kind,
    check_aliasing,
    check_argument,
    layout_of,
    memory_vouched,
    new_output,
    shape_of,
    transferable,
)
from affinec.backend.kernel_loading import load_functions
from affinec.backend.kernel_text import kernel_repr, kernel_signature, kernel_str
from affinec.backend.launch_plans import Launch, LaunchPlan, build_plan, find_plan
from affinec.base.dtypes import BFLOAT16
from affinec.hardware.tensor_maps import TiledTensorMap

MAX_GRID_X = call_checks.MAX_GRID_X
"""The most blocks a grid has along x (a call whose batch needs more is refused)."""

MAX_PLANS = 64
"""Argument layouts a kernel keeps plans for (past that, it starts again)."""


@dataclass
class Kernel:
    """A compiled function ready to launch: PTX, its kernels in launch order (one,
    or a split reduction's two), and the function's parameters.

    Call it with the arrays in the order of `parameters` (or by name); it returns the
    output array (the one given, or a new one). Workspaces (a split reduction's
    partial sums) are not arguments: the kernel object allocates them on the device
    once per stream, on first use, and frees them with itself, so concurrent calls
    on one stream are ordered as CUDA orders them and calls on different streams do
    not share them. Calls from torch tensors run on torch's current stream, their
    workspaces taken from torch's allocator (inside a CUDA graph's capture, from the
    graph's own pool).

    A call on numpy arrays copies them to the device and the output back, and
    returns when the kernels are done. A call on device arrays (numba, torch, cupy)
    is asynchronous, as their own kernels are: the first call of a layout of arrays
    (shapes, dtypes, strides, devices) checks them all and keeps a `LaunchPlan`; a
    later call of the same layout compares the layout, checks the addresses (aligned,
    the output apart from the inputs) and launches through `cuLaunchKernel` with
    the parameters packed once. An array that does not fit is still refused before
    launch, by the full checks, with the same message.
    """

    ptx: str
    launches: list[Launch]
    parameters: list[Parameter]
    """Every parameter of the function, the workspaces included."""
    info: dict[str, Any] = field(default_factory=dict)
    """Whatever the compiler recorded: spec, pipeline, resources, IR."""
    _workspaces: dict[int, dict[str, Any]] = field(default_factory=dict, repr=False)
    _encoded: dict[tuple[str, int, int], Any] = field(default_factory=dict, repr=False)
    """Tensor maps already encoded, by kernel, argument position and address."""
    _plans: dict[tuple, LaunchPlan] = field(default_factory=dict, repr=False)
    """Plans by the layout of a call's arguments (`_layout_key`)."""

    @classmethod
    def single(
        cls,
        ptx: str,
        name: str,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        parameters: list[Parameter],
        shared_memory: int = 0,
    ) -> Kernel:
        """One kernel `name` of `ptx` taking `parameters` in their order."""
        arguments = tuple(p.name for p in parameters)
        return cls(
            ptx, [Launch(name, grid, block, shared_memory, arguments)], parameters
        )

    @property
    def name(self) -> str:
        """The first kernel's entry point (the one doing the arithmetic)."""
        return self.launches[0].name

    @property
    def grid(self) -> tuple[int, int, int]:
        """The first kernel's grid; for a kernel of any batch, 0 along x (its grid
        over a batch is `launches[0].grid_for(batch)`)."""
        return self.launches[0].grid

    @property
    def block(self) -> tuple[int, int, int]:
        return self.launches[0].block

    @property
    def shared_memory(self) -> int:
        """Bytes of dynamic shared memory per block of the first kernel."""
        return self.launches[0].shared_memory

    @property
    def arguments(self) -> list[Parameter]:
        """The parameters a call passes: all but the workspaces."""
        return [p for p in self.parameters if not p.workspace]

    def signature(self) -> str:
        """The parameters a call passes, each with its shape and dtype."""
        return kernel_signature(self.arguments)

    def __repr__(self) -> str:
        """One line: entry point, spec, arch and the size of the PTX (not the PTX:
        `kernel.ptx` holds it)."""
        return kernel_repr(self)

    def __str__(self) -> str:
        """A few lines to read: what the kernel computes, with which configuration,
        for which GPU, how each kernel is launched, the registers a thread takes
        when known, and where the PTX is."""
        return kernel_str(self)

    @property
    def batched(self) -> bool:
        """Whether the kernel takes any batch (its batched parameters agree)."""
        return any(p.batched for p in self.parameters)

    # -- arguments ------------------------------------------------------------------------

    def check(self, *args: Any, **kwargs: Any) -> list[Argument]:
        """Check every argument against its parameter, before any device work.

        Arguments go by position or by name; a missing output is allocated in the
        inputs' kind (`new_output`: numpy if any input is a numpy array).
        """
        return check_call(self, args, kwargs)

    # -- launching ----------------------------------------------------------------------

    @cached_property
    def functions(self) -> dict[str, Any]:
        """The loaded kernels by name: the driver's `CUfunction`s (loaded in numba's
        context, the primary one torch shares), as `cuLaunchKernel` takes them."""
        require_gpu()
        return load_functions(self.ptx, self.launches)

    @property
    def function(self):
        """The first kernel, loaded."""
        return self.functions[self.name]

    def workspaces(
        self, stream: Any = None, torch_device: int | None = None
    ) -> dict[str, Any]:
        """The device buffers of the workspaces for `stream`, allocated once: torch
        tensors (from torch's allocator: inside a graph's capture, the graph's pool)
        where `torch_device` is given, numba device arrays otherwise."""
        key = (stream_handle(stream), torch_device)
        if key not in self._workspaces:
            spaces = [p for p in self.parameters if p.workspace]
            if torch_device is not None:
                import torch

                self._workspaces[key] = {
                    p.name: torch.empty(
                        p.nbytes, dtype=torch.uint8, device=f"cuda:{torch_device}"
                    )
                    for p in spaces
                }
            else:
                from numba import cuda

                self._workspaces[key] = {
                    p.name: cuda.device_array(
                        p.shape, np.uint16 if p.dtype == BFLOAT16 else p.dtype
                    )
                    for p in spaces
                }
        return self._workspaces[key]

    def _workspace_addresses(self, stream: int, torch_device: int | None) -> dict:
        return {
            name: _address(buffer)
            for name, buffer in self.workspaces(stream, torch_device).items()
        }

    def launch(self, arguments: Sequence[Argument], stream: Any = None) -> None:
        """Launch every kernel in order on checked arguments already on the device
        (asynchronously; the workspaces are the kernel object's)."""
        pointers = {a.parameter.name: a.span[0] for a in arguments}
        batched = {p.name for p in self.parameters if p.batched}
        batch = next(
            (a.parameter.shape[0] for a in arguments if a.parameter.name in batched),
            None,
        )
        pointers.update(self._workspace_addresses(stream_handle(stream), None))
        for launch in self.launches:
            maps = launch.tensor_maps or (None,) * len(launch.arguments)
            values = [
                pointers[a]
                if m is None
                else self._tensor_map(launch, k, m, pointers[a])
                for k, (a, m) in enumerate(zip(launch.arguments, maps, strict=True))
            ]
            sized = replace(launch, grid=launch.grid_for(batch))
            launch_by_driver(self.functions[launch.name], sized, values, stream)

    def _tensor_map(
        self, launch: Launch, position: int, tensor_map: TiledTensorMap, address: int
    ) -> Any:
        """The driver's CUtensorMap of an argument at `address`, encoded once."""
        key = (launch.name, position, address)
        if key not in self._encoded:
            self._encoded[key] = tensor_map.encode(address)
        return self._encoded[key]

    # -- the launch path of a layout checked once -----------------------------------------

    def prepare(self, *args: Any, **kwargs: Any) -> LaunchPlan | None:
        """Check a call's arguments (`check`: a `KernelArgumentError` if one does
        not fit) and, if they are all device arrays, decide and keep all that a
        call of their layout needs (`LaunchPlan`); None for a call with numpy
        arrays. Needs no GPU."""
        arguments = self.check(*args, **kwargs)
        return self._plan(args, kwargs, arguments)

    def _plan(
        self, args: tuple, kwargs: dict, arguments: list[Argument]
    ) -> LaunchPlan | None:
        built = build_plan(self, args, kwargs, arguments)
        if built is None:
            return None
        key, plan = built
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def planned(
        self, args: tuple, kwargs: dict
    ) -> tuple[LaunchPlan, list[Any], list[int]] | None:
        """The plan of a call whose layout was checked before and whose addresses
        pass (`addresses_admitted`), with the arrays given and their addresses; None
        sends the call to the full checks."""
        return find_plan(self._plans, args, kwargs)

    def pack(self, plan: LaunchPlan, pointers: dict[str, int]) -> None:
        """Write the addresses of a call, by parameter name (the workspaces' too),
        into the plan's parameter blocks; a tensor map's parameter points at its
        encoding for the address (which needs the driver)."""
        self._pack(plan, [pointers[name] for name in plan.order])

    def _pack(self, plan: LaunchPlan, addresses: list[int]) -> None:
        for block, writes in zip(plan.blocks, plan.writes, strict=True):
            slots = block.slots
            for position, source in writes:
                slots[position] = addresses[source]
        for launch, block, maps in zip(
            self.launches, plan.blocks, plan.maps, strict=True
        ):
            for position, source, tensor_map in maps:
                encoded = self._tensor_map(
                    launch, position, tensor_map, addresses[source]
                )
                block.point_at(position, int(encoded.getPtr()))

    def _run_plan(self, plan: LaunchPlan, addresses: list[int], stream: Any) -> None:
        """Launch every kernel of a planned call (`addresses` in `plan.order`, but
        the workspaces'), on `stream` (torch's current one for torch tensors where
        none is given)."""
        functions = self.functions
        if stream is not None:
            handle = stream_handle(stream)
        elif plan.torch_device is not None:
            handle = torch_stream(plan.torch_device)
        else:
            handle = 0
        if plan.workspaces:
            spaces = self._workspace_addresses(handle, plan.torch_device)
            addresses = [*addresses, *(spaces[name] for name in plan.workspaces)]
        self._pack(plan, addresses)
        for launch, grid, block in zip(
            self.launches, plan.grids, plan.blocks, strict=True
        ):
            launch_parameters(
                functions[launch.name],
                grid,
                launch.block,
                launch.shared_memory,
                handle,
                block.address,
            )

    def __call__(self, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        """Check the arguments, run the kernel, return the output array (see the
        class's docstring for when a call returns)."""
        planned = self.planned(args, kwargs)
        if planned is not None:
            plan, values, addresses = planned
            if plan.allocate is not None:
                out = new_output(plan.allocate, values[0])
                addresses.append(_address(out))
            else:
                out = values[plan.output]
            self._run_plan(plan, addresses, stream)
            return out
        arguments = self.check(*args, **kwargs)
        require_gpu()
        (out,) = (a for a in arguments if a.parameter.output)
        plan = self._plan(args, kwargs, arguments)
        if plan is not None:
            spans = {a.parameter.name: a.span[0] for a in arguments}
            given = plan.order[: len(plan.order) - len(plan.workspaces)]
            self._run_plan(plan, [spans[name] for name in given], stream)
            return out.value
        for a in arguments:
            a.to_device()
        self.launch(arguments, stream)
        from numba import cuda

        cuda.synchronize()
        if out.host is not None:
            out.to_host()
            return out.host
        return out.value


def _address(array: Any) -> int:
    """The device address of a torch tensor or any array with
    `__cuda_array_interface__`."""
    layout = layout_of(array)
    if layout is not None:
        return layout[1]
    return int(array.__cuda_array_interface__["data"][0])


__all__ = [
    "MAX_GRID_X",
    "MAX_PLANS",
    "LaunchPlan",
    "Launch",
    "Kernel",
    # the CUDA calls (`cuda_launch`)
    "allow_dynamic_shared_memory",
    "cuda_available",
    "current_arch",
    "driver_result",
    "launch_by_driver",
    "launch_function",
    "launch_parameters",
    "require_gpu",
    "shared_memory_limit",
    "stream_handle",
    "torch_stream",
    # the errors (`errors`)
    "KernelArgumentError",
    "NoCudaGPU",
    "SharedMemoryError",
    # the arguments (`kernel_arguments`)
    "Argument",
    "Parameter",
    "ParameterBlock",
    "addresses_admitted",
    "array_kind",
    "check_aliasing",
    "check_argument",
    "layout_of",
    "memory_vouched",
    "new_output",
    "shape_of",
    "transferable",
]
