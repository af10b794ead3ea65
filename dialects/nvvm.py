"""An nvvm dialect named after MLIR's: NVIDIA's special registers, barriers,
tensor-core instructions and asynchronous copies.

Each op stands for one LLVM intrinsic call (`IntrinsicOp.intrinsic()` names it, and
`immediates()` gives the constant i32 arguments that follow the operands; the emitter
calls it, nothing else needs to know):

    %tid = nvvm.read.ptx.sreg.tid.x : i32      // llvm.nvvm.read.ptx.sreg.tid.x
    nvvm.barrier0                              // llvm.nvvm.barrier.cta.sync.aligned.all(0)
    %r = nvvm.ldmatrix %p {num = 4 : i32, layout = #nvvm.mma_layout<row>}
        : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
                                     // llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3
    %d = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[%c0, %c1, %c2, %c3]
        {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
         shape = #nvvm.shape<m = 16, n = 8, k = 16>}
        : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
                                     // llvm.nvvm.mma.m16n8k16.row.col.f32.f32
    nvvm.cp.async.shared.global %dst, %src, 16, cache = cg, %bytes
        : !llvm.ptr<3>, !llvm.ptr<1>, i32
                                     // llvm.nvvm.cp.async.cg.shared.global.16.s
    nvvm.cp.async.commit.group       // llvm.nvvm.cp.async.commit.group
    nvvm.cp.async.wait.group 1       // llvm.nvvm.cp.async.wait.group(1)

The warp-level ops (`ldmatrix`, `mma.sync`) mean what PTX says, lane by lane:
`affinec.ir.mma_layouts` has the fragment layouts. bf16 and tf32 MMA operands travel
as i32 registers (two bf16, or one tf32, each), with `multiplicandAPtxType` and
`multiplicandBPtxType` naming what they hold, as in MLIR.

This module is the dialect, `NVVM`, and the names of all its parts; they are defined
by idea in `nvvm_intrinsics` (`IntrinsicOp`, special registers, `barrier0`),
`nvvm_mma` (`ldmatrix`, `mma.sync` and their attributes), `nvvm_cp_async` (the
asynchronous copies), `nvvm_hopper` (mbarriers, TMA), `nvvm_wgmma` (warpgroup
MMA) and `nvvm_target` (kernel attribute names, `#nvvm.target`).
"""

from __future__ import annotations

from xdsl.ir import Dialect

from affinec.dialects.affinec_wgmma import PROXY_FENCE_OPS
from affinec.dialects.nvvm_cp_async import (
    CpAsyncCommitGroupOp,
    CpAsyncOp,
    CpAsyncWaitGroupOp,
    LoadCacheModifier,
    LoadCacheModifierAttr,
)
from affinec.dialects.nvvm_hopper import (
    HOPPER_NVVM_ATTRIBUTES,
    HOPPER_NVVM_OPS,
    CpAsyncBulkTensorGlobalToSharedClusterOp,
    FenceMBarrierInitOp,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierInitOp,
    MBarrierTryWaitParityOp,
    PtxOp,
    SetMaxRegisterOp,
    WgmmaFenceAlignedOp,
    WgmmaGroupSyncAlignedOp,
    WgmmaMmaAsyncOp,
    WgmmaWaitGroupSyncOp,
    accumulation_operands,
    accumulation_ptx,
    accumulation_run,
    accumulator_struct,
    required_feature,
)
from affinec.dialects.nvvm_intrinsics import (
    SPECIAL_REGISTERS,
    BarrierOp,
    BlockDimXOp,
    BlockDimYOp,
    BlockDimZOp,
    BlockIdXOp,
    BlockIdYOp,
    BlockIdZOp,
    GridDimXOp,
    GridDimYOp,
    GridDimZOp,
    IntrinsicOp,
    LaneIdOp,
    SpecialRegisterOp,
    ThreadIdXOp,
    ThreadIdYOp,
    ThreadIdZOp,
    WarpSizeOp,
)
from affinec.dialects.nvvm_mma import (
    LdMatrixOp,
    MMALayout,
    MMALayoutAttr,
    MmaOp,
    MMAShapeAttr,
    MMATypes,
    MMATypesAttr,
)
from affinec.dialects.nvvm_target import (
    BYVAL,
    GRID_CONSTANT,
    KERNEL,
    MAXNTID,
    MINCTASM,
    TargetAttr,
)
from affinec.dialects.nvvm_wgmma_registers import (
    WGMMA_REGISTER_OPS,
    WgmmaRegistersRunOp,
)

__all__ = [
    "BYVAL",
    "GRID_CONSTANT",
    "KERNEL",
    "MAXNTID",
    "MINCTASM",
    "NVVM",
    "SPECIAL_REGISTERS",
    "BarrierOp",
    "BlockDimXOp",
    "BlockDimYOp",
    "BlockDimZOp",
    "BlockIdXOp",
    "BlockIdYOp",
    "BlockIdZOp",
    "CpAsyncBulkTensorGlobalToSharedClusterOp",
    "CpAsyncCommitGroupOp",
    "CpAsyncOp",
    "CpAsyncWaitGroupOp",
    "FenceMBarrierInitOp",
    "GridDimXOp",
    "GridDimYOp",
    "GridDimZOp",
    "IntrinsicOp",
    "LaneIdOp",
    "LdMatrixOp",
    "LoadCacheModifier",
    "LoadCacheModifierAttr",
    "MBarrierArriveExpectTxOp",
    "MBarrierArriveOp",
    "MBarrierInitOp",
    "MBarrierTryWaitParityOp",
    "MMALayout",
    "MMALayoutAttr",
    "MMAShapeAttr",
    "MMATypes",
    "MMATypesAttr",
    "MmaOp",
    "PtxOp",
    "SetMaxRegisterOp",
    "SpecialRegisterOp",
    "TargetAttr",
    "ThreadIdXOp",
    "ThreadIdYOp",
    "ThreadIdZOp",
    "WarpSizeOp",
    "WgmmaFenceAlignedOp",
    "WgmmaGroupSyncAlignedOp",
    "WgmmaMmaAsyncOp",
    "WgmmaRegistersRunOp",
    "WgmmaWaitGroupSyncOp",
    "accumulation_operands",
    "accumulation_ptx",
    "accumulation_run",
    "accumulator_struct",
    "required_feature",
]


NVVM = Dialect(
    "nvvm",
    [
        BarrierOp,
        *SPECIAL_REGISTERS.values(),
        LaneIdOp,
        WarpSizeOp,
        LdMatrixOp,
        MmaOp,
        CpAsyncOp,
        CpAsyncCommitGroupOp,
        CpAsyncWaitGroupOp,
        *HOPPER_NVVM_OPS,
        *PROXY_FENCE_OPS,
        *WGMMA_REGISTER_OPS,
    ],
    [
        MMALayoutAttr,
        MMATypesAttr,
        MMAShapeAttr,
        LoadCacheModifierAttr,
        TargetAttr,
        *HOPPER_NVVM_ATTRIBUTES,
    ],
)
