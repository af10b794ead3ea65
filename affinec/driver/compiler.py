"""The compiler: a spec (or its IR) to PTX and what it takes to launch it.

    from affinec.driver.compiler import compile_to_ptx
    kernel = compile_to_ptx(ConvSpec(n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=1))
    kernel.ptx                  # PTX text (sm_80 unless arch="sm_90")
    kernel.name                 # its entry point, "conv_kernel"
    kernel.launch               # LaunchRecord: grid, block, shared memory, arguments
    kernel.resources()          # registers, shared memory, spills (ptxas -v)
    kernel.runtime_kernel()     # affinec.backend.runtime.Kernel, ready to call on a GPU

The knobs come as one `KernelConfig` (`affinec.driver.pipelines`), or as its fields for
short: `compile_to_ptx(spec, tile_sizes=(1, 64, 16, 16))`. `affinec compile` is the
command line over this function (`affinec.tools.cli`).
"""

from __future__ import annotations

import gc
import math
import os
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass

from affinec.backend.emitter import emit
from affinec.backend.ptxas import Resources, assemble
from affinec.base.diagnostics import (
    PassError,
    collecting_remarks,
    format_error,
    location_of,
    verify,
)
from affinec.base.dtypes import numpy_dtype
from affinec.base.spec import ConvSpec, Spec, not_a_spec
from affinec.dialects.affinec import (
    KernelArgument,
    LaunchRecord,
    function_named,
    read_spec,
    workspace_flags,
)
from affinec.dialects.nvgpu_hopper_types import TensorMapDescriptorType
from affinec.dialects.nvvm_target import TARGET, TargetAttr, target_attr
from affinec.driver.checking import arithmetic_tolerance
from affinec.driver.config import (
    KernelConfig,
    config_for,
    flattened_spec,
    flattens,
    with_knobs,
)
from affinec.driver.pipeline import Pipeline, collector_paused
from affinec.driver.pipeline_names import pass_text, pipeline_text
from affinec.driver.pipelines import default_passes
from affinec.frontend.contraction import contraction_of
from affinec.hardware.chips import ARCHS, DEFAULT_ARCH
from affinec.hardware.tensor_maps import TiledTensorMap, tensor_map_of
from affinec.transforms.gpu.deferred_hazards import check_pending, hazards_deferred
from affinec.transforms.gpu.outlining import find_kernels

if TYPE_CHECKING:
    from affinec.backend.runtime import Kernel


@dataclass
class CompiledKernel:
    """One compiled kernel: PTX, entry point, launch record, and how it was made."""

    ptx: str
    name: str
    """The PTX entry point (`.entry`), as `launch.kernel`."""
    launch: LaunchRecord
    """Grid, block, dynamic shared memory and the arguments, in parameter order."""
    module: ModuleOp
    """The final IR (llvm + nvvm level; the host function keeps its gpu.launch_func)."""
    arch: str
    llvm_ir: str
    """The LLVM IR the PTX was compiled from (before LLVM's optimizations)."""
    pipeline: str
    spec: Spec | None = None
    config: KernelConfig | None = None
    """The knobs the pipeline was built with (None for a pipeline given as such)."""
    timings: list[tuple[str, float]] = field(default_factory=list)
    """Seconds per stage: each pass, then `verify` (unless the verifier ran after
    every pass) and `llvm-ir + ptx`. The verifier runs while LLVM optimizes:
    `verify` is its own time, `llvm-ir + ptx` the rest of the time the two took
    together, with what the compiler does while LLVM writes the PTX, among it
    the shared-memory hazard check of the outlined kernels (its own time first,
    as `shared-memory hazards`: `affinec.transforms.gpu.deferred_hazards`); the
    stages add up to the compile's time."""
    config_source: str = ""
    """Where the configuration came from: `given`, `config_for` (picked without
    measuring), `pipeline` (a pipeline given as such), or `tuned (...)` (the
    tuning cache, `affinec.tuning`)."""
    tolerance: float | None = None
    """The relative error against float64 the kernel's result is held to: its
    dtype's, or looser where a pass's arithmetic is (tf32 tensor cores)."""
    remarks: list[str] = field(default_factory=list)
    """What the passes chose for the user (`affinec.base.diagnostics.remark`): a knob
    they had to lower, a fallback, as `file:line:col: remark: ...`."""
    launches: list[LaunchRecord] = field(default_factory=list)
    """Every kernel, in the order the host function launches them: `launch` alone,
    or (a split reduction) the partial sums' kernel, then the one adding them."""
    parameters: list[HostParameter] = field(default_factory=list)
    """The host function's array parameters, in order: what a caller passes (the
    workspaces, which the runtime provides, marked)."""
    flattened_from: Spec | None = None
    """The convolution compiled as the matrix product `spec` is of its flattened
    pixels (`KernelConfig.flatten_pixels`): the runtime kernel takes its arrays."""

    def __post_init__(self) -> None:
        if not self.launches:
            self.launches = [self.launch]

    @property
    def seconds(self) -> float:
        return sum(t for _, t in self.timings)

    def resources(self, arch: str | None = None) -> Resources:
        """What ptxas reports for the kernel (assembling it for `arch`)."""
        return assemble(self.ptx, arch or self.arch)[self.name]

    def runtime_kernel(self) -> Kernel:
        """The kernel as `affinec.backend.runtime` launches it."""
        from affinec.backend.runtime import Kernel, Launch, Parameter

        written = {name for r in self.launches for name in r.outputs}
        host = self.parameters or [
            HostParameter(a.name, a.type, False) for a in self.launch.arguments
        ]
        names = {p.name: p.name for p in host}
        shapes = {p.name: p.shape for p in host}
        if self.flattened_from is not None:
            # the convolution's arrays, the same bytes as the product's
            operands = contraction_of(self.flattened_from).operands
            product = [p for p in host if not p.workspace]
            for p, conv in zip(product, operands, strict=True):
                assert math.prod(conv.shape) == math.prod(p.shape)
                names[p.name], shapes[p.name] = conv.name, conv.shape
        parameters = [
            Parameter(
                names[p.name],
                shapes[p.name],
                p.dtype,
                output=p.name in written and not p.workspace,
                workspace=p.workspace,
            )
            for p in host
        ]
        by_name = {p.name: p for p in host}
        launches = [
            Launch(
                r.kernel,
                r.grid,
                r.block,
                r.dynamic_shared_memory,
                tuple(names.get(a.name, a.name) for a in r.arguments),
                tuple(
                    _tensor_map(a, by_name, dict(r.tensor_map_shapes))
                    for a in r.arguments
                ),
                r.batch_grid,
            )
            for r in self.launches
        ]
        return Kernel(
            self.ptx,
            launches,
            parameters,
            info={
                "spec": (self.flattened_from or self.spec).to_text()
                if self.spec
                else None,
                "pipeline": self.pipeline,
                "arch": self.arch,
                "config": self.config.describe() if self.config else None,
                "config_source": self.config_source,
            },
        )


def compile_to_ptx(
    spec_or_module: Spec | ModuleOp,
    config: KernelConfig | None = None,
    *,
    pipeline: str | Sequence[ModulePass] | None = None,
    arch: str = DEFAULT_ARCH,
    opt_level: int = 3,
    check: bool = False,
    verify_each: bool | None = None,
    callback: Callable[[ModulePass, ModuleOp, float], None] | None = None,
    **knobs: Any,
) -> CompiledKernel:
    """Compile a spec (built by the frontend) or a module (naive IR, or any level the
    pipeline continues from) to PTX for `arch`.

    `pipeline` (passes, or text as `affinec-opt -p` takes it) defaults to the default
    pipeline built with `config` (or with `knobs`, the fields of a `KernelConfig`). A
    module is rewritten in place. With `check`, every pass is interpreted against the
    one before (slow: small specs only); `callback(pass, module, seconds)` is called
    after every pass, as `Pipeline.run` calls it. The verifier runs once, on the
    final module, unless `verify_each` (by default: with `check`, or where the
    environment sets `AFFINEC_VERIFY_EACH=1`, as the tests do) runs it after every
    pass, as `affinec-opt` does. Errors: `PipelineError`,
    `PassError` (located), `EmitterError`, and ValueError for a module with no or
    several kernels, or an unknown knob.
    """
    if arch not in ARCHS:
        raise ValueError(
            f"unknown GPU architecture '{arch}' (expected one of {', '.join(ARCHS)})"
        )
    from affinec.frontend.naive import build

    if isinstance(spec_or_module, ModuleOp):
        module = spec_or_module
        spec = read_spec(module, required=False)
    elif isinstance(spec_or_module, Spec):
        spec = spec_or_module
        module = build(spec)
    else:
        raise not_a_spec(spec_or_module, or_module=True)
    source = (
        "pipeline"
        if pipeline is not None
        else "given"
        if config is not None or knobs
        else ("config_for" if spec is not None else "defaults")
    )
    config = _config(config, knobs, spec, arch)
    if config.wgmma and isinstance(spec, ConvSpec) and flattens(spec):
        config = replace(config, flatten_pixels=True)  # a product of its pixels
    flattened_from = None
    if config.flatten_pixels:
        if isinstance(spec_or_module, ModuleOp) or spec is None:
            raise ValueError(
                "flatten-pixels compiles a convolution's spec, not a module: give "
                "the spec"
            )
        flattened_from, spec = spec, flattened_spec(spec)
        module = build(spec)
    _set_target(module, arch)
    if pipeline is None:
        passes = default_passes(config)
    elif isinstance(pipeline, str):
        passes = Pipeline.parse(pipeline, spec).passes
    else:
        passes = Pipeline(pipeline).passes
    timings: list[tuple[str, float]] = []

    def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
        timings.append((pass_text(p), seconds))
        if callback is not None:
            callback(p, m, seconds)

    if verify_each is None:
        verify_each = check or os.environ.get("AFFINEC_VERIFY_EACH") == "1"
    beside: dict[str, float] = {}

    def verify_timed() -> None:
        begin = time.perf_counter()
        verify(module)
        beside["verify"] = time.perf_counter() - begin

    collecting = gc.isenabled()
    finish: dict[str, Any] = {}

    def while_llvm_writes_the_ptx() -> None:
        # The outlined kernels' hazards, checked at their level: the PTX written
        # meanwhile is not returned where they are refused.
        if pending:
            begin = time.perf_counter()
            check_pending(pending)
            beside["shared-memory hazards"] = time.perf_counter() - begin
        # The collector resumes here: its first pass walks every object made since
        # the first pass that still lives (the module), while LLVM writes the PTX.
        if collecting:
            gc.enable()
        finish["parameters"] = host_parameters(module, records[0].host)
        finish["remarks"] = [
            format_error(message, location_of(op), severity="remark")
            for op, message in remarks
        ]
        finish["tolerance"] = (
            None if spec is None else arithmetic_tolerance(spec.dtype, passes)
        )

    # One pause of the cyclic collector from the first pass to LLVM's code
    # generation (not one after the passes and another after LLVM).
    with collector_paused():
        # Without verifying each pass, the outlined kernels' hazard check waits for
        # LLVM to write the PTX, to run beside it (and runs first where a later
        # pass, the verifier or LLVM fails, so that a hazard is the error raised).
        deferring = nullcontext([]) if verify_each else hazards_deferred()
        with collecting_remarks() as remarks, deferring as pending:
            try:
                Pipeline(passes).run(
                    module, check=check, verify_each=verify_each, callback=after
                )
            except Exception:
                check_pending(pending)
                raise
        try:
            records = _launch_records(module)
        except Exception:
            if not verify_each:
                check_pending(pending)
                verify(module)  # an invalid module's error first
            raise
        # The verifier runs while LLVM optimizes (LLVM code generation after it).
        start = time.perf_counter()
        try:
            emitted = emit(
                module,
                arch,
                opt_level,
                None if verify_each else verify_timed,
                while_llvm_writes_the_ptx,
            )
        except Exception:
            check_pending(pending)
            raise
        seconds = time.perf_counter() - start
    record = records[0]
    timings.extend(beside.items())
    timings.append(("llvm-ir + ptx", seconds - sum(beside.values())))
    return CompiledKernel(
        ptx=emitted.ptx,
        name=record.kernel,
        launch=record,
        module=module,
        arch=arch,
        llvm_ir=emitted.llvm_ir,
        pipeline=pipeline_text(passes),
        spec=spec,
        config=config if pipeline is None else None,
        timings=timings,
        config_source=source,
        tolerance=finish["tolerance"],
        remarks=finish["remarks"],
        launches=records,
        parameters=finish["parameters"],
        flattened_from=flattened_from,
    )


def _launch_records(module: ModuleOp) -> list[LaunchRecord]:
    """The launch records of the module's kernels, all of one host function; a
    ValueError or a located `PassError` if there is none, a kernel has none, or
    several host functions launch them."""
    kernels = find_kernels(module)
    if not kernels:
        raise ValueError("the pipeline left no kernel")
    for kernel, record in kernels:
        if record is None:
            raise PassError(kernel, "the kernel has no launch record (affinec.launch)")
    records = [r for _, r in kernels if r is not None]
    if len({r.host for r in records}) != 1:
        raise ValueError(
            "the pipeline left kernels of several host functions; the compiler "
            "handles one function"
        )
    return records


@dataclass(frozen=True)
class HostParameter:
    """An array parameter of the host function: its name, type, and whether it is a
    workspace (`affinec.workspace`: provided by the runtime, not by the caller)."""

    name: str
    type: MemRefType
    workspace: bool

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a dynamic size (the batch) as -1."""
        return tuple(max(d, -1) for d in self.type.get_shape())

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.type.get_element_type())


def _tensor_map(
    argument: KernelArgument,
    host: dict[str, HostParameter],
    views: dict[str, tuple[int, ...]],
) -> TiledTensorMap | None:
    """The tensor map a kernel takes for `argument` (None: a pointer), over the host
    array of its name, as the kernel sees it (a flattened convolution's arrays as
    the product's matrices, a strided convolution's input as steps and phases of
    the stride: the same bytes)."""
    if not isinstance(argument.type, TensorMapDescriptorType):
        return None
    array = host[argument.name]
    shape = views.get(argument.name, array.shape)
    assert math.prod(shape) == math.prod(array.shape), (shape, array.shape)
    strides = [array.dtype.itemsize]
    for extent in reversed(shape[1:]):
        strides.append(strides[-1] * extent)
    return tensor_map_of(argument.type, shape, tuple(reversed(strides)), array.dtype)


def host_parameters(module: ModuleOp, host: str) -> list[HostParameter]:
    """The array parameters of the function `@host` of `module`, in order."""
    fn = function_named(module, host)
    if fn is None:
        return []
    return [
        HostParameter(a.name_hint or f"arg{k}", a.type, workspace)
        for k, (a, workspace) in enumerate(
            zip(fn.regions[0].block.args, workspace_flags(fn), strict=True)
        )
        if isinstance(a.type, MemRefType)
    ]


def _set_target(module: ModuleOp, arch: str) -> None:
    """Record `arch` as the chip the passes plan for (`nvvm-attach-target`'s
    attribute); a module already planned for another chip is refused."""
    target = module.attributes.get(TARGET)
    if isinstance(target, TargetAttr):
        if target.chip.data != arch:
            raise ValueError(
                f"the module is for {target.chip.data} (its {TARGET}), not {arch}"
            )
        return
    module.attributes[TARGET] = target_attr(arch)


def _config(
    config: KernelConfig | None, knobs: dict[str, Any], spec: Spec | None, arch: str
) -> KernelConfig:
    """The configuration asked for: `config`, or the defaults with `knobs` changed,
    or (neither given) the one `config_for` picks for the spec on `arch`."""
    if knobs:
        if config is not None:
            raise ValueError("give a KernelConfig or its fields, not both")
        if knobs == {"flatten_pixels": True} and spec is not None:
            return config_for(spec, arch=arch, flatten_pixels=True)
        if knobs == {"wgmma": True} and spec is not None:
            return config_for(spec, arch=arch, wgmma=True)
        return with_knobs(KernelConfig(), **knobs)
    if config is not None:
        if not isinstance(config, KernelConfig):
            raise TypeError(
                f"config takes a KernelConfig, got {type(config).__name__} (or give "
                "its fields as keyword arguments)"
            )
        return config
    return config_for(spec, arch=arch) if spec is not None else KernelConfig()
