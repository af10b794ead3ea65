"""The default pipeline and the named ones, built from typed pass objects with the
knobs of a `KernelConfig` (`affinec.driver.config`).

    config = KernelConfig(tile_sizes=(1, 64, 16, 16), threads_per_block=128)
    passes = default_passes(config)        # [AffineLoopTilePass(...), ...]
    Pipeline(passes).run(module)           # affinec.driver.pipeline
    pipeline_text(passes)                  # affinec.driver.pipeline_names

A knob is a typed field of `KernelConfig`, turned into pass options here, in one
place (`affine_passes`, `map_to_gpu_passes`, `gpu_to_nvvm_passes`), never an
f-string. Text pipelines exist only at the command-line
boundary (`Pipeline.parse`), and print back with `pass_text`.

Named pipelines (`NAMED_PIPELINES` in `affinec.driver.pipeline_names`, listed by
`affinec-opt --list-passes`) are the same builders with the default configuration
(`named_passes`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import (
    CommonSubexpressionElimination,
)

from affinec.base.diagnostics import PassError
from affinec.base.spec import Spec
from affinec.dialects.affinec import SPLITS
from affinec.driver import pipeline_names as names
from affinec.driver.config import UNPROMOTED, KernelConfig, config_for
from affinec.passes.affine_data_copy_generate import (
    MAX_CAPACITY_KIB,
    AffineDataCopyGenerate,
)
from affinec.passes.affine_loop_tile import AffineLoopTilePass
from affinec.passes.affine_pipeline_data_transfer import AffinePipelineDataTransfer
from affinec.passes.affinec_canonicalize import AffinecCanonicalizePass
from affinec.passes.affinec_coalesce_reduction import AffinecCoalesceReduction
from affinec.passes.affinec_contract_fma import AffinecContractFma
from affinec.passes.affinec_insert_barriers import AffinecInsertBarriers
from affinec.passes.affinec_map_threads import AffinecMapThreads
from affinec.passes.affinec_mma_sync import AffinecMmaSync
from affinec.passes.affinec_narrow_indices import AffinecNarrowIndices
from affinec.passes.affinec_pad_channels import AffinecPadChannels
from affinec.passes.affinec_place_buffers import AffinecPlaceBuffers
from affinec.passes.affinec_plan_shared_memory import AffinecPlanSharedMemory
from affinec.passes.affinec_sink import AffinecSinkPass
from affinec.passes.affinec_split import AffinecSplitPass
from affinec.passes.affinec_split_reduction import AffinecSplitReduction
from affinec.passes.affinec_stage_output import AffinecStageOutput
from affinec.passes.affinec_tma_copies import AffinecTmaCopies
from affinec.passes.affinec_warp_specialize import AffinecWarpSpecialize
from affinec.passes.affinec_wgmma import AffinecWgmma
from affinec.passes.affinec_wgmma_gemm import AffinecWgmmaGemm
from affinec.passes.convert_gpu_to_nvvm import ConvertGpuToNvvm
from affinec.passes.convert_nvgpu_to_nvvm import ConvertNvgpuToNvvm
from affinec.passes.convert_parallel_to_gpu import ConvertParallelToGpu
from affinec.passes.convert_scf_to_cf import ConvertScfToCf
from affinec.passes.gpu_kernel_outlining import GpuKernelOutlining
from affinec.passes.lower_affine import LowerAffine

DEFAULT_CONFIG = KernelConfig()


def affine_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Naive IR → tiled, split and sunk (the reference design's affine passes)."""
    return [
        *(
            [AffinecPadChannels(multiple=config.pad_channels)]
            if config.pad_channels > 1
            else []
        ),
        *([AffinecSplitReduction(splits=config.splits)] if config.splits > 1 else []),
        AffineLoopTilePass(
            tile_sizes=config.tile_sizes,
            reduction_tile_sizes=config.reduction_tile_sizes,
            separate=config.separate,
            reassociate=config.reassociate,
        ),
        AffinecSplitPass(),
        AffinecSinkPass(),
        AffinecCanonicalizePass(),
        *(
            [
                AffineDataCopyGenerate(
                    # Past 48 KiB the tiles are dynamic shared memory; what all
                    # stages take together is affinec-place-buffers' to check.
                    fast_mem_capacity=MAX_CAPACITY_KIB,
                    generate_dma=config.dma,
                    reduction_innermost=config.mma,
                )
            ]
            if config.promote or config.mma
            else []
        ),
        *([AffinecCoalesceReduction()] if config.coalesce_reduction else []),
        *(
            [AffinePipelineDataTransfer(stages=config.stages)]
            if config.stages > 1 and config.dma
            else []
        ),
    ]


def map_to_gpu_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Grid/block-mapped affine IR → a `gpu.launch`, one decision per pass: buffer
    placement, barriers, thread mapping, then the mechanical conversion."""
    return [
        AffinecPlaceBuffers(),
        *([AffinecStageOutput()] if config.mma and config.stage_output else []),
        AffinecInsertBarriers(),
        *([tensor_core_pass(config)] if config.mma else []),
        *(
            [AffinecTmaCopies(in_flight=config.in_flight)]
            if config.mma and config.tensor_core == "wgmma" and config.tma
            else []
        ),
        AffinecMapThreads(
            threads_per_block=config.threads_per_block,
            register_tile=config.register_tile,
            vector_width=config.vector_width,
            unroll_steps=config.unroll_steps,
        ),
        *([AffinecWarpSpecialize()] if config.warp_specialize else []),
        AffinecPlanSharedMemory(
            pad=config.promote or config.mma, split_phases=config.split_phases
        ),
        *([AffinecContractFma()] if config.fma and not config.mma else []),
        ConvertParallelToGpu(),
    ]


def tensor_core_pass(config: KernelConfig) -> ModulePass:
    """The one pass that picks the tensor cores' instruction (`tensor_core`):
    warp-level mma.sync, or Hopper's warpgroup MMA; every pass around it is the
    same for both."""
    if config.tensor_core == "wgmma":
        return AffinecWgmma(in_flight=config.in_flight)
    return AffinecMmaSync(
        warp_grid=config.warp_grid, tf32=config.tf32, unroll_taps=config.unroll_taps
    )


def gpu_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Tiled (grid/block-mapped) affine IR → a kernel at the llvm + nvvm level."""
    return [*map_to_gpu_passes(config), *gpu_to_nvvm_passes(config)]


def gpu_to_nvvm_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """A `gpu.launch` → an outlined kernel at the llvm + nvvm level."""
    return [
        GpuKernelOutlining(),
        *([AffinecNarrowIndices()] if config.index_bitwidth == 0 else []),
        LowerAffine(),
        CommonSubexpressionElimination(),
        ConvertNvgpuToNvvm(),
        ConvertScfToCf(),
        ConvertGpuToNvvm(
            index_bitwidth=config.index_bitwidth, use_bare_ptr_memref_call_conv=True
        ),
    ]


def default_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """The whole way: naive IR → a kernel ready for PTX."""
    if config.wgmma:
        return wgmma_passes(config)
    return [*affine_passes(config), *gpu_passes(config)]


def wgmma_passes(config: KernelConfig) -> list[ModulePass]:
    """Hopper's route: the naive product → a TMA + mbarrier + wgmma kernel
    (`affinec-wgmma-gemm`) → llvm + nvvm."""
    return [
        AffinecWgmmaGemm(
            tile_sizes=config.wgmma_tile,
            stages=config.stages,
            schedule=config.wgmma_schedule,
            splits=config.splits,
        ),
        ConvertNvgpuToNvvm(),
        ConvertScfToCf(),
        ConvertGpuToNvvm(use_bare_ptr_memref_call_conv=True),
    ]


def _default_after_split(spec: Spec | None, splits: int) -> list[ModulePass]:
    """`affinec-default`: `config_for`'s pipeline for `spec`, for a reduction the
    module has already split into `splits` (then without a split of its own).

    A split that `config_for` cannot configure gives a pass that refuses the module
    when it runs (`RefusedDefault`): the pipeline is built before any pass runs, and
    the `affinec-split-reduction` before it, which refuses most such splits itself,
    must get to say why, located, in its own words."""
    if spec is None:
        return default_passes(DEFAULT_CONFIG)
    try:
        config = config_for(spec, splits=splits)
    except ValueError as e:
        return [RefusedDefault(reason=str(e))]
    passes = default_passes(config)
    if splits == 1:
        return passes
    return [p for p in passes if not isinstance(p, AffinecSplitReduction)]


@dataclass(frozen=True)
class RefusedDefault(ModulePass):
    """`affinec-default` for a module it has no configuration for: refuses it,
    located, with `config_for`'s reason."""

    name = names.DEFAULT

    reason: str = ""
    """Why no configuration fits the module."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise PassError(_split_band(op) or op, f"{self.name}: {self.reason}")


def _split_band(module: ModuleOp) -> Operation | None:
    """The band the module's split records its count on, if any."""
    for op in module.walk():
        if SPLITS in op.attributes:
            return op
    return None


def named_passes(name: str, spec: Spec | None, splits: int) -> list[ModulePass]:
    """The passes of the pipeline called `name` (`NAMED_PIPELINES`), for a module
    with the given spec (`affinec.spec`) or none, whose reduction is already split
    in the given number of partial sums (1: unsplit)."""
    match name:
        case names.TILE_SPLIT_SINK:
            return affine_passes(UNPROMOTED)
        case names.TILE_SPLIT_SINK_SEPARATE:
            return affine_passes(replace(UNPROMOTED, separate=True))
        case names.MAP_TO_GPU:
            return map_to_gpu_passes(UNPROMOTED)
        case names.GPU_TO_NVVM:
            return gpu_to_nvvm_passes(UNPROMOTED)
        case names.LOWER_TO_NVVM:
            return gpu_passes(UNPROMOTED)
        case names.DEFAULT:
            return _default_after_split(spec, splits)
        case names.UNPROMOTED_ROUTE:
            return default_passes(UNPROMOTED)
    raise KeyError(f"no pipeline is called '{name}'")
