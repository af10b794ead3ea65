"""affinec's passes, one per file (imported as `affinec.passes`).

`get_all_passes` is the registry `affinec-opt`, the pipeline API and the `xdsl.universe`
entry point read; each entry imports its pass lazily, as xDSL's own registry does.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every affinec pass, by the name pipelines use."""

    def _convert_parallel_to_gpu():
        from affinec.passes.convert_parallel_to_gpu import ConvertParallelToGpu

        return ConvertParallelToGpu

    def _gpu_kernel_outlining():
        from affinec.passes.gpu_kernel_outlining import GpuKernelOutlining

        return GpuKernelOutlining

    def _convert_gpu_to_nvvm():
        from affinec.passes.convert_gpu_to_nvvm import ConvertGpuToNvvm

        return ConvertGpuToNvvm

    def _lower_affine():
        from affinec.passes.lower_affine import LowerAffine

        return LowerAffine

    return {
        "affinec-convert-parallel-to-gpu": _convert_parallel_to_gpu,
        "gpu-kernel-outlining": _gpu_kernel_outlining,
        "lower-affine": _lower_affine,
        "convert-gpu-to-nvvm": _convert_gpu_to_nvvm,
    }


def register_named_pipelines() -> None:
    """Register the named pipelines (`affinec-opt --list-passes` shows them)."""
