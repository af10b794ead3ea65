"""The gpu dialect in MLIR's syntax.

xDSL 0.74's gpu dialect prints every op in the generic form. This file defines the ops
affinec's lowering produces, op for op with MLIR's names, properties and custom syntax,
so the lowered IR reads like MLIR's:

    gpu.module @conv_kernel {
      gpu.func @conv_kernel(%in: memref<8xf32>) workgroup(%tile : memref<64xf32, 3>)
          kernel attributes {known_block_size = array<i32: 64, 1, 1>} {
        %tx = gpu.thread_id x upper_bound 64
        %bx = gpu.block_id x
        gpu.barrier
        gpu.return
      }
    }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, %gy = %c1, %gz = %c1)
               threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
      gpu.terminator
    }
    gpu.launch_func @conv_kernel::@conv_kernel blocks in (%c4, %c1, %c1)
        threads in (%c64, %c1, %c1) args(%in : memref<8xf32>)

Memory attributions follow MLIR: the entry block of a `gpu.func` (or the body of a
`gpu.launch`, after its twelve id and size arguments and the six of its clusters, if
any) takes the function's inputs, then one argument per `workgroup` buffer (shared
memory, memory space 3), then one per `private` buffer.

The generic form is MLIR 22's, both ways: a kernel is marked by the discardable
`gpu.kernel` attribute and the number of workgroup attributions is the
`workgroup_attributions` attribute (as mlir-opt prints them); `gpu.launch` has MLIR's
eleven operand segments (async dependencies, grid, block and cluster sizes, dynamic
shared memory) and `gpu.launch_func` its thirteen (those, the kernel operands and the
async object). Also defined, as MLIR has them: `gpu.wait`, `gpu.shuffle`,
`gpu.rotate`, `gpu.all_reduce` / `gpu.yield`, `gpu.subgroup_reduce`,
`gpu.subgroup_broadcast`, `gpu.warp_execute_on_lane_0`, `gpu.lane_id`,
`gpu.subgroup_id`, `gpu.num_subgroups`, `gpu.subgroup_size`, `gpu.printf`, the host's
`gpu.alloc`, `gpu.dealloc`, `gpu.memcpy`, `gpu.memset` and `gpu.set_default_device`,
`gpu.module` with targets and `gpu.binary` with its `#gpu.object`s. affinec's lowering and interpreter handle only the ops its pipeline
produces; its passes refuse the others by name.

This module is the dialect, `Gpu`, and the names of all its parts; they are defined by
idea in `gpu_common` (attribute names, memory spaces, the async and attribution
syntax), `gpu_ops` (ids, sizes, barrier, terminators, wait), `gpu_reductions`
(shuffle, all_reduce, subgroup_reduce), `gpu_subgroups` (rotate,
subgroup_broadcast, warp_execute_on_lane_0, printf), `gpu_memory` (the host's
memory ops), `gpu_module` (gpu.module, gpu.func), `gpu_binary` (gpu.binary) and
`gpu_launch` (gpu.launch, gpu.launch_func).
"""

from __future__ import annotations

from xdsl.dialects.gpu import AsyncTokenType, DimensionAttr, DimensionEnum
from xdsl.ir import Dialect

from affinec.dialects.gpu_binary import BinaryOp, ObjectAttr, SelectObjectAttr
from affinec.dialects.gpu_common import (
    CONTAINER_MODULE,
    DIMENSIONS,
    KERNEL,
    PRIVATE_ADDRESS_SPACE,
    WORKGROUP_ADDRESS_SPACE,
    WORKGROUP_ATTRIBUTIONS,
    AddressSpace,
    AddressSpaceAttr,
    in_memory_space,
    memory_space,
)
from affinec.dialects.gpu_launch import LaunchFuncOp, LaunchOp
from affinec.dialects.gpu_memory import (
    AllocOp,
    DeallocOp,
    MemcpyOp,
    MemsetOp,
    SetDefaultDeviceOp,
)
from affinec.dialects.gpu_module import FuncOp, ModuleOp
from affinec.dialects.gpu_ops import (
    ID_OPS,
    BarrierOp,
    BlockDimOp,
    BlockIdOp,
    GlobalIdOp,
    GridDimOp,
    LaneIdOp,
    NumSubgroupsOp,
    ReturnOp,
    SubgroupIdOp,
    SubgroupSizeOp,
    TerminatorOp,
    ThreadIdOp,
    WaitOp,
    _IndexOfDim,  # pyright: ignore[reportPrivateUsage]
)
from affinec.dialects.gpu_reductions import (
    AllReduceKind,
    AllReduceOp,
    AllReduceOpAttr,
    ShuffleMode,
    ShuffleModeAttr,
    ShuffleOp,
    SubgroupReduceOp,
    YieldOp,
)
from affinec.dialects.gpu_subgroups import (
    BroadcastType,
    BroadcastTypeAttr,
    PrintfOp,
    RotateOp,
    SubgroupBroadcastOp,
    WarpExecuteOnLane0Op,
)

__all__ = [
    "WarpExecuteOnLane0Op",
    "SubgroupBroadcastOp",
    "SetDefaultDeviceOp",
    "SelectObjectAttr",
    "RotateOp",
    "PrintfOp",
    "ObjectAttr",
    "MemsetOp",
    "MemcpyOp",
    "DeallocOp",
    "BroadcastTypeAttr",
    "BroadcastType",
    "BinaryOp",
    "AllocOp",
    "CONTAINER_MODULE",
    "DIMENSIONS",
    "ID_OPS",
    "KERNEL",
    "PRIVATE_ADDRESS_SPACE",
    "WORKGROUP_ADDRESS_SPACE",
    "WORKGROUP_ATTRIBUTIONS",
    "AddressSpace",
    "AddressSpaceAttr",
    "AllReduceKind",
    "AllReduceOp",
    "AllReduceOpAttr",
    "AsyncTokenType",
    "BarrierOp",
    "BlockDimOp",
    "BlockIdOp",
    "DimensionAttr",
    "DimensionEnum",
    "FuncOp",
    "Gpu",
    "GridDimOp",
    "LaneIdOp",
    "LaunchFuncOp",
    "LaunchOp",
    "ModuleOp",
    "NumSubgroupsOp",
    "ReturnOp",
    "ShuffleMode",
    "ShuffleModeAttr",
    "ShuffleOp",
    "SubgroupIdOp",
    "SubgroupReduceOp",
    "SubgroupSizeOp",
    "TerminatorOp",
    "GlobalIdOp",
    "ThreadIdOp",
    "WaitOp",
    "YieldOp",
    "_IndexOfDim",
    "in_memory_space",
    "memory_space",
]


Gpu = Dialect(
    "gpu",
    [
        AllocOp,
        AllReduceOp,
        BarrierOp,
        BinaryOp,
        DeallocOp,
        MemcpyOp,
        MemsetOp,
        PrintfOp,
        RotateOp,
        SetDefaultDeviceOp,
        SubgroupBroadcastOp,
        WarpExecuteOnLane0Op,
        BlockDimOp,
        BlockIdOp,
        FuncOp,
        GridDimOp,
        LaneIdOp,
        LaunchFuncOp,
        LaunchOp,
        ModuleOp,
        NumSubgroupsOp,
        ReturnOp,
        ShuffleOp,
        SubgroupIdOp,
        SubgroupReduceOp,
        SubgroupSizeOp,
        TerminatorOp,
        GlobalIdOp,
        ThreadIdOp,
        WaitOp,
        YieldOp,
    ],
    [
        AddressSpaceAttr,
        AllReduceOpAttr,
        AsyncTokenType,
        BroadcastTypeAttr,
        DimensionAttr,
        ObjectAttr,
        SelectObjectAttr,
        ShuffleModeAttr,
    ],
)
