"""Outlining a `gpu.launch` body into a kernel, and finding kernels again later.

`outline_launch` does the work of `gpu-kernel-outlining` for one launch;
`find_kernels` lists the kernels of a module at any level from gpu down (a `gpu.func`
or, after `convert-gpu-to-nvvm`, an `llvm.func` marked `nvvm.kernel`), with their
launch records.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, llvm, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType, ModuleOp, SymbolRefAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.traits import Pure

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import (
    LAUNCH,
    OVERLAY,
    SHARED_OFFSETS,
    KernelArgument,
    LaunchRecord,
)
from affinec.dialects.nvgpu_hopper_types import TensorMapDescriptorType
from affinec.dialects.nvvm import KERNEL
from affinec.dialects.nvvm_target import TARGET
from affinec.ir.effects import writes
from affinec.transforms.affine.analysis import constant_index


def check_outlinable(launch: gpu.LaunchOp, taken: set[str]) -> None:
    """Refuse (before rewriting) what `outline_launch` does not outline as MLIR does."""
    if launch.cluster_sizes is not None:
        raise PassError(
            launch,
            "has clusters, which affinec's gpu-kernel-outlining does not outline "
            "(affinec has no gpu.cluster_id / gpu.cluster_dim ops)",
        )
    for what, sizes in (("grid", launch.grid_sizes), ("block", launch.block_sizes)):
        known = _constants(sizes)
        if known is not None and any(n <= 0 for n in known):
            raise PassError(
                launch,
                f"its {what} is {'x'.join(map(str, known))}: every size must be positive",
            )
    module = launch.kernelModule
    if module is not None and module.root_reference.data in taken:
        raise PassError(
            launch,
            f"names the existing symbol @{module.root_reference.data} as its kernel "
            "module; affinec's gpu-kernel-outlining only creates new modules",
        )


def _host_function(launch: gpu.LaunchOp) -> Operation | None:
    host = launch.parent_op()
    while host is not None and "sym_name" not in host.properties:
        host = host.parent_op()
    return host


def _kernel_names(launch: gpu.LaunchOp, taken: set[str]) -> tuple[str, str, str]:
    """(host function, kernel module, kernel function): `module(@m) function(@f)`
    where the launch names them, else `<host>_kernel` for both (made unique)."""
    host_func = _host_function(launch)
    host = host_func.properties["sym_name"].data if host_func else "kernel"  # pyright: ignore
    name = f"{host}_kernel"
    if launch.kernelFunc is not None:
        name = launch.kernelFunc.root_reference.data
    if launch.kernelModule is not None:
        return host, launch.kernelModule.root_reference.data, name
    unique, k = name, 0
    while unique in taken:
        k += 1
        unique = f"{name}_{k}"
    return host, unique, unique if launch.kernelFunc is None else name


def outline_launch(launch: gpu.LaunchOp, taken: set[str]) -> gpu.ModuleOp:
    """Replace `launch` by a `gpu.launch_func` of a new kernel; return its module."""
    host_func = _host_function(launch)
    host, module_name, name = _kernel_names(launch, taken)

    captured = _captured_values(launch)
    sunk = [v for v in captured if _sinkable(v)]
    inputs = _order_inputs([v for v in captured if v not in sunk], host_func)

    old_entry = launch.body.block
    workgroup = list(launch.workgroup_args)
    attributions = [*workgroup, *launch.private_args]
    entry = Block(
        arg_types=[*(v.type for v in inputs), *(a.type for a in attributions)]
    )
    for new, old in zip(entry.args, [*inputs, *attributions], strict=True):
        new.name_hint = old.name_hint

    grid = _constants(launch.grid_sizes)
    block = _constants(launch.block_sizes)
    batch_grid = _batch_grid(launch.grid_sizes, host_func)
    prologue: list[Operation] = []
    for k, arg in enumerate(old_entry.args[:12]):
        if not arg.uses:
            continue
        kind = ("block_id", "thread_id", "grid_dim", "block_dim")[k // 3]
        dim = "xyz"[k % 3]
        sizes = grid if kind in ("block_id", "grid_dim") else block
        bound = sizes[k % 3] if sizes is not None else None
        if kind in ("grid_dim", "block_dim") and bound is not None:
            c = arith.ConstantOp(IntegerAttr.from_index_int_value(bound))
            c.result.name_hint = arg.name_hint
            prologue.append(c)
            arg.replace_all_uses_with(c.result)
            continue
        id_op = gpu.ID_OPS[kind](dim, bound)
        id_op.result.name_hint = arg.name_hint
        prologue.append(id_op)
        arg.replace_all_uses_with(id_op.result)
    for value in sunk:
        clone = value.owner.clone()  # pyright: ignore[reportAttributeAccessIssue]
        prologue.append(clone)
        _replace_inside(value, clone.results[0], launch)
    for old, new in zip(inputs, entry.args[: len(inputs)], strict=True):
        _replace_inside(old, new, launch)
    for old, new in zip(attributions, entry.args[len(inputs) :], strict=True):
        old.replace_all_uses_with(new)
    entry.add_ops(prologue)
    for op in list(old_entry.ops):
        op.detach()
        entry.add_op(op)
    region = Region(entry)
    for b in list(launch.body.blocks)[1:]:
        launch.body.detach_block(b)
        region.add_block(b)
    for b in region.blocks:
        term = b.last_op
        if isinstance(term, gpu.TerminatorOp):
            b.insert_op_before(gpu.ReturnOp(), term)
            b.erase_op(term)

    kernel = gpu.FuncOp(
        name,
        [v.type for v in inputs],
        region,
        kernel=True,
        workgroup_count=len(workgroup),
        known_block_size=block,
        known_grid_size=grid,
    )
    for planned in (OVERLAY, SHARED_OFFSETS):
        if planned in launch.attributes:
            kernel.attributes[planned] = launch.attributes[planned]
    shared_dynamic = launch.dynamicSharedMemorySize
    is_async = launch.asyncToken is not None or bool(launch.asyncDependencies)
    record_grid = grid
    if batch_grid is not None:
        record_grid = (0, *batch_grid[1])
    if (
        record_grid is not None
        and block is not None
        and shared_dynamic is None
        and not is_async
    ):
        arguments = [
            KernelArgument(_argument_name(v, k), v.type)  # pyright: ignore
            for k, v in enumerate(inputs)
            if isinstance(v.type, MemRefType | TensorMapDescriptorType)
        ]
        if len(arguments) == len(inputs):
            written = _written(region, entry.args[: len(inputs)])
            outputs = tuple(
                a.name
                for a, karg in zip(arguments, entry.args, strict=False)
                if karg in written
            )
            record = LaunchRecord(
                name,
                host,
                record_grid,
                block,
                0,
                tuple(arguments),
                outputs,
                batch_grid=batch_grid[0] if batch_grid is not None else None,
            )
            kernel.attributes[LAUNCH] = record.to_attribute()
    host_block = launch.parent_block()
    assert host_block is not None
    call = gpu.LaunchFuncOp(
        SymbolRefAttr(module_name, [name]),
        launch.grid_sizes,
        launch.block_sizes,
        inputs,
        shared_dynamic,
        async_dependencies=list(launch.asyncDependencies),
        is_async=launch.asyncToken is not None,
    )
    host_block.insert_op_before(call, launch)
    if launch.asyncToken is not None and call.asyncToken is not None:
        launch.asyncToken.replace_all_uses_with(call.asyncToken)
    # The kernel is compiled for the chip the module was planned for.
    target = launch.parent_op()
    while target is not None and TARGET not in target.attributes:
        target = target.parent_op()
    targets = [target.attributes[TARGET]] if target is not None else None
    host_block.erase_op(launch)
    return gpu.ModuleOp(module_name, [kernel], targets)


def _argument_name(v: SSAValue, k: int) -> str:
    """A kernel parameter's name in the launch record: a tensor map is named after
    the host array it maps (`nvgpu.tma.create.descriptor` of a `memref.cast`)."""
    owner = v.owner
    if isinstance(owner, nvgpu.TmaCreateDescriptorOp):
        cast = owner.tensor.owner
        source = getattr(cast, "source", None)
        if isinstance(source, SSAValue) and source.name_hint:
            return source.name_hint
    return v.name_hint or f"arg{k}"


def _written(region: Region, buffers: Sequence[SSAValue]) -> set[SSAValue]:
    """Those of `buffers` that some op in `region` writes (as the ops declare it)."""
    stored = {b for op in region.walk() for b in writes(op)}
    return {b for b in buffers if b in stored}


def _captured_values(launch: gpu.LaunchOp) -> list[SSAValue]:
    """Values used in the body but defined outside it, in order of first use."""
    seen: dict[SSAValue, None] = {}
    for op in launch.body.walk():
        for v in op.operands:
            if not launch.is_ancestor(v.owner):
                seen.setdefault(v, None)
    return list(seen)


def _sinkable(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, Operation)
        and not owner.operands
        and not owner.regions
        and owner.has_trait(Pure)
    )


def _order_inputs(
    values: list[SSAValue], host_func: Operation | None
) -> list[SSAValue]:
    """The host function's arguments first, in their order; then the others."""
    if host_func is None or not host_func.regions or not host_func.regions[0].blocks:
        return values
    args = list(host_func.regions[0].block.args)
    first = [a for a in args if a in values]
    return first + [v for v in values if v not in first]


def _replace_inside(old: SSAValue, new: SSAValue, launch: Operation) -> None:
    old.replace_uses_with_if(new, lambda use: launch.is_ancestor(use.operation))


def _batch_grid(
    sizes: Sequence[SSAValue], host_func: Operation | None
) -> tuple[AffineMap, tuple[int, int]] | None:
    """A grid whose x is a function of the outermost size of one of the host
    function's memrefs (a dynamic batch: `memref.dim %input, %c0`, or an
    `affine.apply` of it) and whose y and z are constants: that function, as a map
    of the size, and y and z."""
    rest = [constant_index(v) for v in sizes[1:]]
    if host_func is None or None in rest or not host_func.regions:
        return None
    args = list(host_func.regions[0].block.args)
    x = sizes[0].owner
    blocks = AffineMap.identity(1)
    if isinstance(x, affine.ApplyOp) and len(x.mapOperands) == 1:
        m = x.map.data
        one = [AffineExpr.dimension(0)]
        blocks = AffineMap(
            1,
            0,
            tuple(
                e.replace_dims_and_symbols(one[: m.num_dims], one[: m.num_symbols])
                for e in m.results
            ),
        )
        x = x.mapOperands[0].owner
    if not (
        isinstance(x, memref.DimOp)
        and x.source in args
        and constant_index(x.index) == 0
        and len(blocks.results) == 1
    ):
        return None
    return blocks, (rest[0], rest[1])  # pyright: ignore[reportReturnType]


def _constants(values: Sequence[SSAValue]) -> tuple[int, int, int] | None:
    out = []
    for v in values:
        owner = v.owner
        if not (
            isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr)
        ):
            return None
        out.append(owner.value.value.data)
    return (out[0], out[1], out[2])


def find_kernels(module: ModuleOp) -> list[tuple[Operation, LaunchRecord | None]]:
    """Every kernel of the module's `gpu.module`s, with its launch record if any."""
    found: list[tuple[Operation, LaunchRecord | None]] = []
    for op in module.body.block.ops:
        if not isinstance(op, gpu.ModuleOp):
            continue
        for f in op.body.block.ops:
            is_kernel = (isinstance(f, gpu.FuncOp) and f.kernel is not None) or (
                isinstance(f, llvm.FuncOp) and KERNEL in f.attributes
            )
            if is_kernel:
                found.append((f, LaunchRecord.of(f)))
    return found
