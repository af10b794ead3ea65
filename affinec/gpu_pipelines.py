"""The named pipelines of the GPU lowering, and the default pipeline built on them.

    affinec-lower-to-nvvm   tiled affine IR -> kernel at the llvm + nvvm level
    affinec-default         naive IR -> the same (tile, split, sink, then lower)

`default_pipeline(...)` spells the default pipeline out with options (tile sizes,
threads per block...), as `affinec compile` builds it from its flags.
"""

from __future__ import annotations

from collections.abc import Sequence

from affinec.pipeline import register_pipeline

LOWER_TO_NVVM = "affinec-lower-to-nvvm"
DEFAULT = "affinec-default"

_AFFINE_PIPELINE = "affinec-tile-split-sink"
"""The affine passes' own named pipeline (tiling, splitting, sinking)."""


def lowering_pipeline(threads_per_block: int = 0, index_bitwidth: int = 64) -> str:
    """Tiled (grid/block-mapped) affine IR to a kernel in llvm + nvvm."""
    to_gpu = "affinec-convert-parallel-to-gpu"
    if threads_per_block:
        to_gpu += f"{{threads-per-block={threads_per_block}}}"
    to_nvvm = "convert-gpu-to-nvvm"
    if index_bitwidth != 64:
        to_nvvm += f"{{index-bitwidth={index_bitwidth}}}"
    return ",".join(
        [
            to_gpu,
            "gpu-kernel-outlining",
            "lower-affine",
            "cse",
            "convert-scf-to-cf",
            to_nvvm,
        ]
    )


def default_pipeline(
    tile_sizes: Sequence[int] | None = None,
    reduction_tile_sizes: Sequence[int] | None = None,
    *,
    separate: bool = False,
    threads_per_block: int = 0,
    index_bitwidth: int = 64,
) -> str:
    """The default pipeline, naive IR to llvm + nvvm, with the given options."""
    options = []
    if tile_sizes:
        options.append(f"tile-sizes={','.join(map(str, tile_sizes))}")
    if reduction_tile_sizes:
        options.append(
            f"reduction-tile-sizes={','.join(map(str, reduction_tile_sizes))}"
        )
    if separate:
        options.append("separate=true")
    tile = "affine-loop-tile" + (f"{{{' '.join(options)}}}" if options else "")
    affine_passes = f"{tile},affinec-split,affinec-sink,affinec-canonicalize"
    return f"{affine_passes},{lowering_pipeline(threads_per_block, index_bitwidth)}"


def register_gpu_pipelines() -> None:
    register_pipeline(
        LOWER_TO_NVVM,
        lowering_pipeline(),
        "map the grid/block bands to a gpu.launch, outline the kernel, lower affine, "
        "scf and the kernel's ops to llvm + nvvm",
    )
    register_pipeline(
        DEFAULT,
        f"{_AFFINE_PIPELINE},{LOWER_TO_NVVM}",
        f"naive IR to a kernel ready for PTX: tile, split, sink, then {LOWER_TO_NVVM}",
    )
