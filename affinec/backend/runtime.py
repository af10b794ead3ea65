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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from affinec.backend.cuda_launch import (  # noqa: F401 (cuda_available ...: public here too)
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
from affinec.backend.errors import (  # noqa: F401 (NoCudaGPU ...: public here too)
    KernelArgumentError,
    NoCudaGPU,
    SharedMemoryError,
)
from affinec.backend.kernel_arguments import (  # noqa: F401 (array_kind ...: public here too)
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
from affinec.base.dtypes import BFLOAT16
from affinec.hardware.chips import DEFAULT_SHARED_PER_BLOCK
from affinec.hardware.tensor_maps import TiledTensorMap

if TYPE_CHECKING:
    from xdsl.ir.affine import AffineMap

MAX_GRID_X = (1 << 31) - 1
"""The most blocks a grid has along x."""

MAX_PLANS = 64
"""Argument layouts a kernel keeps plans for (past that, it starts again)."""


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
        return ", ".join(
            f"{p.name}: {'x'.join('?' if d < 0 else str(d) for d in p.shape)}x{p.dtype}"
            for p in self.arguments
        )

    def __repr__(self) -> str:
        """One line: entry point, spec, arch and the size of the PTX (not the PTX:
        `kernel.ptx` holds it)."""
        parts = [repr(self.name)]
        for key in ("spec", "arch"):
            if self.info.get(key):
                parts.append(f"{key}={self.info[key]!r}")
        parts.append(f"ptx={len(self.ptx)} chars")
        return f"<affinec Kernel {' '.join(parts)}>"

    def __str__(self) -> str:
        """A few lines to read: what the kernel computes, with which configuration,
        for which GPU, how each kernel is launched, the registers a thread takes
        when known, and where the PTX is."""
        info = self.info
        lines = [f"affinec Kernel {self.name}({self.signature()})"]
        for key, label in (
            ("spec", "spec"),
            ("config", "config"),
            ("config_source", "config from"),
            ("arch", "arch"),
        ):
            if info.get(key):
                lines.append(f"  {label}: {info[key]}")
        registers = self._known_registers()
        for launch in self.launches:
            grid = "x".join(
                "(by batch)" if k == 0 and launch.batch_grid is not None else str(g)
                for k, g in enumerate(launch.grid)
            )
            block = "x".join(str(b) for b in launch.block)
            text = f"  launch {launch.name}: grid {grid}, block {block}"
            if launch.shared_memory:
                text += f", {launch.shared_memory} bytes dynamic shared memory"
            if launch.name in registers:
                text += f", {registers[launch.name]} registers per thread"
            lines.append(text)
        lines.append(
            f"  ptx: {len(self.ptx)} characters (kernel.ptx; "
            "`affinec compile` prints it)"
        )
        return "\n".join(lines)

    def _known_registers(self) -> dict[str, int]:
        """Registers per thread of each kernel where something already measured
        them: ptxas's report in `info["resources"]`, or the loaded kernels'
        attributes. Nothing is loaded or assembled to find out."""
        found: dict[str, int] = {}
        for resources in self.info.get("resources") or ():
            registers = getattr(resources, "registers", None)
            if isinstance(registers, int) and registers > 0:
                found[resources.kernel] = registers
        loaded = self.__dict__.get("functions") or {}
        for name, function in loaded.items():
            registers = getattr(getattr(function, "attrs", None), "regs", None)
            if isinstance(registers, int) and registers > 0:
                found.setdefault(name, registers)
        return found

    @property
    def batched(self) -> bool:
        """Whether the kernel takes any batch (its batched parameters agree)."""
        return any(p.batched for p in self.parameters)

    def _batch(self, values: dict[str, Any]) -> int | None:
        """The batch of a call: the outermost size of every batched array given,
        which must agree (and be at least 1)."""
        batch, first = None, None
        for p in self.arguments:
            value = values.get(p.name)
            if not p.batched or value is None:
                continue
            shape = shape_of(value)
            if not shape:
                continue  # _check says what is wrong with it
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
            for launch in self.launches:
                blocks = launch.grid_for(batch)[0]
                if blocks > MAX_GRID_X:
                    raise KernelArgumentError(
                        f"a batch of {batch} needs {blocks} blocks, more than a grid "
                        f"holds ({MAX_GRID_X})"
                    )
        return batch

    # -- arguments ------------------------------------------------------------------------

    def check(self, *args: Any, **kwargs: Any) -> list[Argument]:
        """Check every argument against its parameter, before any device work.

        Arguments go by position or by name; a missing output is allocated in the
        inputs' kind (`new_output`: numpy if any input is a numpy array).
        """
        parameters = self.arguments
        names = [p.name for p in parameters]
        if len(args) > len(parameters):
            raise KernelArgumentError(
                f"kernel {self.name} takes {len(parameters)} arrays "
                f"({self.signature()}), {len(args)} were given"
            )
        values: dict[str, Any] = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names:
                raise KernelArgumentError(
                    f"kernel {self.name} has no parameter '{key}' ({self.signature()})"
                )
            if key in values:
                raise KernelArgumentError(f"argument '{key}' given twice")
            values[key] = value
        batch = self._batch(values)
        if self.batched and batch is None:
            raise KernelArgumentError(
                f"kernel {self.name} takes any batch: give at least one batched "
                f"input ({self.signature()})"
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
                        f"{self.name} takes ({self.signature()})"
                    )
                values[p.name] = new_output(p, like)
            checked.append(check_argument(p, values[p.name]))
        check_aliasing(checked)
        return checked

    # -- launching ----------------------------------------------------------------------

    @cached_property
    def functions(self) -> dict[str, Any]:
        """The loaded kernels by name: the driver's `CUfunction`s (loaded in numba's
        context, the primary one torch shares), as `cuLaunchKernel` takes them."""
        require_gpu()
        return _driver_functions(self.ptx, self.launches)

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

    @staticmethod
    def _layout_key(args: tuple, kwargs: dict) -> tuple[tuple, list[int]] | None:
        """The key of a call's layout (how many arrays by position, the names of
        the others, each array's layout) and the addresses of the arrays given;
        None where an argument has no layout (a numpy array, anything else)."""
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
        keyed = self._layout_key(args, kwargs)
        if keyed is None:
            return None
        key, _ = keyed
        names = [p.name for p in self.arguments[: len(args)]] + list(kwargs)
        given = [
            (n, v) for n, v in zip(names, (*args, *kwargs.values()), strict=True)
            if v is not None
        ]  # fmt: skip
        by_name = {a.parameter.name: a.parameter for a in arguments}
        (out,) = (a.parameter for a in arguments if a.parameter.output)
        given_names = [n for n, _ in given]
        batch = None
        if self.batched:  # every batched parameter was checked at the call's batch
            batch = next(by_name[p.name].shape[0] for p in self.arguments if p.batched)
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
            grids=tuple(launch.grid_for(batch) for launch in self.launches),
            blocks=tuple(ParameterBlock(len(launch.arguments)) for launch in self.launches),
        )  # fmt: skip
        plan.workspaces = tuple(p.name for p in self.parameters if p.workspace)
        plan.order = (
            *plan.names,
            *((out.name,) if plan.allocate is not None else ()),
            *plan.workspaces,
        )
        index = {name: k for k, name in enumerate(plan.order)}
        writes, maps = [], []
        for launch in self.launches:
            tensor_maps = launch.tensor_maps or (None,) * len(launch.arguments)
            pairs = list(enumerate(zip(launch.arguments, tensor_maps, strict=True)))
            writes.append(tuple((k, index[a]) for k, (a, m) in pairs if m is None))
            maps.append(tuple((k, index[a], m) for k, (a, m) in pairs if m is not None))
        plan.writes, plan.maps = tuple(writes), tuple(maps)
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
        if not self._plans:
            return None
        keyed = self._layout_key(args, kwargs)
        if keyed is None:
            return None
        key, addresses = keyed
        plan = self._plans.get(key)
        if plan is None or not addresses_admitted(
            addresses, plan.sizes, plan.output, plan.asked
        ):
            return None
        values = [v for v in (*args, *kwargs.values()) if v is not None]
        return plan, values, addresses

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


def _driver_functions(ptx: str, launches: Sequence[Launch]) -> dict[str, Any]:
    """The kernels of `ptx` loaded by the driver itself (in numba's context), as
    `cuLaunchKernel` takes them: kernels with by-value tensor maps are launched
    through it, with a pointer to each parameter's bytes."""
    from cuda.bindings import driver
    from numba import cuda

    cuda.current_context()  # numba's context, current for the calls below
    module = driver_result(driver.cuModuleLoadData(ptx.encode() + b"\0"))
    loaded = {}
    for launch in launches:
        function = driver_result(
            driver.cuModuleGetFunction(module, launch.name.encode())
        )
        if launch.shared_memory > DEFAULT_SHARED_PER_BLOCK:
            limit = shared_memory_limit()
            if limit is not None and launch.shared_memory > limit:
                raise SharedMemoryError(
                    f"kernel {launch.name} needs {launch.shared_memory} bytes of "
                    f"shared memory per block; this GPU gives a block at most {limit}"
                )
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            driver_result(
                driver.cuFuncSetAttribute(function, attribute, launch.shared_memory)
            )
        loaded[launch.name] = function
    return loaded
