"""affinec's passes, one per file (imported as `affinec.passes`).

`get_all_passes` is the registry `affinec-opt`, the pipeline API and the `xdsl.universe`
entry point read; each entry imports its pass lazily, as xDSL's own registry does.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every affinec pass, by the name pipelines use."""

    def _affine_pipeline_data_transfer():
        from affinec.passes.affine_pipeline_data_transfer import (
            AffinePipelineDataTransfer,
        )

        return AffinePipelineDataTransfer

    def _affine_loop_tile():
        from affinec.passes.affine_loop_tile import AffineLoopTilePass

        return AffineLoopTilePass

    def _affine_loop_normalize():
        from affinec.passes.affine_loop_normalize import AffineLoopNormalizePass

        return AffineLoopNormalizePass

    def _affinec_split():
        from affinec.passes.affinec_split import AffinecSplitPass

        return AffinecSplitPass

    def _affinec_sink():
        from affinec.passes.affinec_sink import AffinecSinkPass

        return AffinecSinkPass

    def _affinec_canonicalize():
        from affinec.passes.affinec_canonicalize import AffinecCanonicalizePass

        return AffinecCanonicalizePass

    def _canonicalize():
        from affinec.passes.canonicalize import CanonicalizePass

        return CanonicalizePass

    def _affine_data_copy_generate():
        from affinec.passes.affine_data_copy_generate import AffineDataCopyGenerate

        return AffineDataCopyGenerate

    def _affinec_coalesce_reduction():
        from affinec.passes.affinec_coalesce_reduction import (
            AffinecCoalesceReduction,
        )

        return AffinecCoalesceReduction

    def _affinec_contract_fma():
        from affinec.passes.affinec_contract_fma import AffinecContractFma

        return AffinecContractFma

    def _affinec_mma_sync():
        from affinec.passes.affinec_mma_sync import AffinecMmaSync

        return AffinecMmaSync

    def _affinec_wgmma():
        from affinec.passes.affinec_wgmma import AffinecWgmma

        return AffinecWgmma

    def _affinec_narrow_indices():
        from affinec.passes.affinec_narrow_indices import AffinecNarrowIndices

        return AffinecNarrowIndices

    def _affinec_pad_channels():
        from affinec.passes.affinec_pad_channels import AffinecPadChannels

        return AffinecPadChannels

    def _affinec_split_reduction():
        from affinec.passes.affinec_split_reduction import AffinecSplitReduction

        return AffinecSplitReduction

    def _affinec_lower_linalg():
        from affinec.passes.affinec_lower_linalg import AffinecLowerLinalg

        return AffinecLowerLinalg

    def _affinec_stage_output():
        from affinec.passes.affinec_stage_output import AffinecStageOutput

        return AffinecStageOutput

    def _affinec_tma_copies():
        from affinec.passes.affinec_tma_copies import AffinecTmaCopies

        return AffinecTmaCopies

    def _affinec_warp_specialize():
        from affinec.passes.affinec_warp_specialize import AffinecWarpSpecialize

        return AffinecWarpSpecialize

    def _affinec_wgmma_gemm():
        from affinec.passes.affinec_wgmma_gemm import AffinecWgmmaGemm

        return AffinecWgmmaGemm

    def _affinec_plan_shared_memory():
        from affinec.passes.affinec_plan_shared_memory import AffinecPlanSharedMemory

        return AffinecPlanSharedMemory

    def _affinec_place_buffers():
        from affinec.passes.affinec_place_buffers import AffinecPlaceBuffers

        return AffinecPlaceBuffers

    def _affinec_insert_barriers():
        from affinec.passes.affinec_insert_barriers import AffinecInsertBarriers

        return AffinecInsertBarriers

    def _affinec_verify_shared_memory():
        from affinec.passes.affinec_verify_shared_memory import (
            AffinecVerifySharedMemory,
        )

        return AffinecVerifySharedMemory

    def _affinec_map_threads():
        from affinec.passes.affinec_map_threads import AffinecMapThreads

        return AffinecMapThreads

    def _convert_parallel_to_gpu():
        from affinec.passes.convert_parallel_to_gpu import ConvertParallelToGpu

        return ConvertParallelToGpu

    def _gpu_kernel_outlining():
        from affinec.passes.gpu_kernel_outlining import GpuKernelOutlining

        return GpuKernelOutlining

    def _convert_gpu_to_nvvm():
        from affinec.passes.convert_gpu_to_nvvm import ConvertGpuToNvvm

        return ConvertGpuToNvvm

    def _convert_nvgpu_to_nvvm():
        from affinec.passes.convert_nvgpu_to_nvvm import ConvertNvgpuToNvvm

        return ConvertNvgpuToNvvm

    def _convert_scf_to_cf():
        from affinec.passes.convert_scf_to_cf import ConvertScfToCf

        return ConvertScfToCf

    def _nvvm_attach_target():
        from affinec.passes.nvvm_attach_target import NvvmAttachTarget

        return NvvmAttachTarget

    def _lower_affine():
        from affinec.passes.lower_affine import LowerAffine

        return LowerAffine

    return {
        "affine-loop-tile": _affine_loop_tile,
        "affine-pipeline-data-transfer": _affine_pipeline_data_transfer,
        "affine-loop-normalize": _affine_loop_normalize,
        "affinec-split": _affinec_split,
        "affinec-sink": _affinec_sink,
        "affinec-canonicalize": _affinec_canonicalize,
        "canonicalize": _canonicalize,
        "affine-data-copy-generate": _affine_data_copy_generate,
        "affinec-coalesce-reduction": _affinec_coalesce_reduction,
        "affinec-contract-fma": _affinec_contract_fma,
        "affinec-mma-sync": _affinec_mma_sync,
        "affinec-wgmma": _affinec_wgmma,
        "affinec-tma-copies": _affinec_tma_copies,
        "affinec-warp-specialize": _affinec_warp_specialize,
        "affinec-narrow-indices": _affinec_narrow_indices,
        "affinec-pad-channels": _affinec_pad_channels,
        "affinec-split-reduction": _affinec_split_reduction,
        "affinec-lower-linalg": _affinec_lower_linalg,
        "affinec-plan-shared-memory": _affinec_plan_shared_memory,
        "affinec-stage-output": _affinec_stage_output,
        "affinec-wgmma-gemm": _affinec_wgmma_gemm,
        "affinec-place-buffers": _affinec_place_buffers,
        "affinec-insert-barriers": _affinec_insert_barriers,
        "affinec-map-threads": _affinec_map_threads,
        "affinec-verify-shared-memory": _affinec_verify_shared_memory,
        "affinec-convert-parallel-to-gpu": _convert_parallel_to_gpu,
        "gpu-kernel-outlining": _gpu_kernel_outlining,
        "lower-affine": _lower_affine,
        "nvvm-attach-target": _nvvm_attach_target,
        "convert-nvgpu-to-nvvm": _convert_nvgpu_to_nvvm,
        "convert-gpu-to-nvvm": _convert_gpu_to_nvvm,
        "convert-scf-to-cf": _convert_scf_to_cf,
    }
