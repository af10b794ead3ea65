"""The host side of a kernel lowered with dynamic shared memory: every
`gpu.launch_func` of it gives the bytes (its `dynamic_shared_memory_size`), and so
does its launch record, which the runtime launches from."""

from __future__ import annotations

import dataclasses

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, SymbolRefAttr, i32
from xdsl.ir import Operation

from affinec.base.diagnostics import PassError
from affinec.dialects import gpu
from affinec.dialects.affinec import LAUNCH, LaunchRecord


def give_dynamic_shared_memory(
    module: ModuleOp, kernels: gpu.ModuleOp, kernel: Operation, size: int
) -> None:
    """Size every launch of `kernel` (in `kernels`) and its launch record at `size`
    bytes of dynamic shared memory."""
    name = kernel.properties["sym_name"].data  # pyright: ignore[reportAttributeAccessIssue]
    target = SymbolRefAttr(kernels.sym_name.data, [name])
    for launch in [o for o in module.walk() if isinstance(o, gpu.LaunchFuncOp)]:
        if launch.kernel != target:
            continue
        if launch.dynamicSharedMemorySize is not None:
            raise PassError(
                launch,
                f"launches @{name} with its own dynamic shared memory, but the "
                f"kernel's workgroup buffers are placed there ({size} bytes)",
            )
        _relaunch(launch, size)
    if LAUNCH in kernel.attributes:
        record = LaunchRecord.from_attribute(kernel.attributes[LAUNCH])
        record = dataclasses.replace(record, dynamic_shared_memory=size)
        kernel.attributes[LAUNCH] = record.to_attribute()


def _relaunch(launch: gpu.LaunchFuncOp, size: int) -> None:
    """`launch` again, with `size` bytes of dynamic shared memory."""
    block = launch.parent_block()
    assert block is not None
    constant = arith.ConstantOp(IntegerAttr(size, i32))
    sized = gpu.LaunchFuncOp(
        launch.kernel,
        launch.grid_sizes,
        launch.block_sizes,
        list(launch.kernelOperands),
        constant,
        async_dependencies=list(launch.asyncDependencies),
        is_async=launch.asyncToken is not None,
        clusters=list(launch.cluster_sizes)
        if launch.clusterSizeX is not None
        else None,
        async_object=launch.asyncObject,
    )
    block.insert_ops_before([constant, sized], launch)
    if launch.asyncToken is not None and sized.asyncToken is not None:
        launch.asyncToken.replace_all_uses_with(sized.asyncToken)
    block.erase_op(launch)
