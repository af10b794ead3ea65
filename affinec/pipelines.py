"""The default pipeline and the named ones, built from typed pass objects, and the one
typed configuration of every tuning knob.

    config = KernelConfig(tile_sizes=(1, 64, 16, 16), threads_per_block=128)
    passes = default_passes(config)        # [AffineLoopTilePass(...), ...]
    Pipeline(passes).run(module)           # affinec.pipeline
    pipeline_text(passes)                  # as `affinec-opt -p` spells it

`KernelConfig` is what `affinec.compile`, the command lines and the tuner share: a
knob is a typed field here, turned into pass options in one place (`affine_passes`,
`gpu_passes`), never an f-string. Text pipelines exist only at the command-line
boundary (`Pipeline.parse`), and print back with `pass_text`.

Named pipelines (`NAMED_PIPELINES`, listed by `affinec-opt --list-passes`) are the
same builders with the default configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from xdsl.passes import ModulePass
from xdsl.transforms.common_subexpression_elimination import (
    CommonSubexpressionElimination,
)
from xdsl.utils.arg_spec import ArgSpec

from affinec.passes.affine_data_copy_generate import AffineDataCopyGenerate
from affinec.passes.affine_loop_tile import AffineLoopTilePass
from affinec.passes.affinec_canonicalize import AffinecCanonicalizePass
from affinec.passes.affinec_insert_barriers import AffinecInsertBarriers
from affinec.passes.affinec_map_threads import AffinecMapThreads
from affinec.passes.affinec_place_buffers import AffinecPlaceBuffers
from affinec.passes.affinec_sink import AffinecSinkPass
from affinec.passes.affinec_split import AffinecSplitPass
from affinec.passes.convert_gpu_to_nvvm import ConvertGpuToNvvm
from affinec.passes.convert_parallel_to_gpu import ConvertParallelToGpu
from affinec.passes.convert_scf_to_cf import ConvertScfToCf
from affinec.passes.gpu_kernel_outlining import GpuKernelOutlining
from affinec.passes.lower_affine import LowerAffine


@dataclass(frozen=True)
class KernelConfig:
    """Every knob of the default pipeline. Zero or empty means "the pass picks"."""

    tile_sizes: tuple[int, ...] = ()
    """Block tile along each output dimension, outermost first."""
    reduction_tile_sizes: tuple[int, ...] = ()
    """Tile along each reduction dimension (the outer tile loops stay on the grid
    side of the block loop)."""
    separate: bool = False
    """Separate full tiles (no bounds checks) from partial ones."""
    promote: bool = False
    """Copy each compute band's inputs into shared memory
    (`affine-data-copy-generate`)."""
    threads_per_block: int = 0
    register_tile: tuple[int, ...] = ()
    """Iterations of the accumulator bands one thread owns, per output dimension."""
    index_bitwidth: int = 64
    """Width of index arithmetic in the kernel (32 or 64)."""

    def __post_init__(self) -> None:
        # Lists from callers become tuples, so configs hash and compare by value.
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))

    def describe(self) -> str:
        """The knobs that differ from the defaults, `name=value` each."""
        default = KernelConfig()
        parts = [
            f"{f.name.replace('_', '-')}={_value_text(getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return " ".join(parts) or "defaults"


def _value_text(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


DEFAULT_CONFIG = KernelConfig()


def affine_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Naive IR → tiled, split and sunk (the reference design's affine passes)."""
    return [
        AffineLoopTilePass(
            tile_sizes=config.tile_sizes,
            reduction_tile_sizes=config.reduction_tile_sizes,
            separate=config.separate,
        ),
        AffinecSplitPass(),
        AffinecSinkPass(),
        AffinecCanonicalizePass(),
        *([AffineDataCopyGenerate()] if config.promote else []),
    ]


def map_to_gpu_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Grid/block-mapped affine IR → a `gpu.launch`, one decision per pass: buffer
    placement, barriers, thread mapping, then the mechanical conversion."""
    return [
        AffinecPlaceBuffers(),
        AffinecInsertBarriers(),
        AffinecMapThreads(
            threads_per_block=config.threads_per_block,
            register_tile=config.register_tile,
        ),
        ConvertParallelToGpu(),
    ]


def gpu_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """Tiled (grid/block-mapped) affine IR → a kernel at the llvm + nvvm level."""
    return [*map_to_gpu_passes(config), *gpu_to_nvvm_passes(config)]


def gpu_to_nvvm_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """A `gpu.launch` → an outlined kernel at the llvm + nvvm level."""
    return [
        GpuKernelOutlining(),
        LowerAffine(),
        CommonSubexpressionElimination(),
        ConvertScfToCf(),
        ConvertGpuToNvvm(index_bitwidth=config.index_bitwidth),
    ]


def default_passes(config: KernelConfig = DEFAULT_CONFIG) -> list[ModulePass]:
    """The whole way: naive IR → a kernel ready for PTX."""
    return [*affine_passes(config), *gpu_passes(config)]


def pass_text(p: ModulePass) -> str:
    """A configured pass as pipelines spell it, options in kebab-case and defaults
    left out: `affine-loop-tile{tile-sizes=1,64,16,16 separate=true}`."""
    spec = p.spec()
    return str(
        ArgSpec(spec.name, {k.replace("_", "-"): v for k, v in spec.parameters.items()})
    )


def pipeline_text(passes: Sequence[ModulePass]) -> str:
    """The passes as `affinec-opt -p` takes them."""
    return ",".join(pass_text(p) for p in passes)


@dataclass(frozen=True)
class NamedPipeline:
    summary: str
    build: Callable[[], list[ModulePass]]


TILE_SPLIT_SINK = "affinec-tile-split-sink"
MAP_TO_GPU = "affinec-map-to-gpu"
GPU_TO_NVVM = "affinec-gpu-to-nvvm"
LOWER_TO_NVVM = "affinec-lower-to-nvvm"
DEFAULT = "affinec-default"

NAMED_PIPELINES: dict[str, NamedPipeline] = {
    TILE_SPLIT_SINK: NamedPipeline(
        "tile into grid and block loops, split the block loop around a block-shaped "
        "accumulator, sink it below the reduction's tile loops, canonicalize",
        affine_passes,
    ),
    TILE_SPLIT_SINK + "-separate": NamedPipeline(
        f"{TILE_SPLIT_SINK}, with full tiles separated from partial ones (a fast "
        "path without bounds)",
        lambda: affine_passes(KernelConfig(separate=True)),
    ),
    MAP_TO_GPU: NamedPipeline(
        "place the buffers of each block, insert barriers, map block bands to "
        "threads, convert to gpu.launch",
        map_to_gpu_passes,
    ),
    GPU_TO_NVVM: NamedPipeline(
        "outline the kernel of a gpu.launch, lower affine, scf and the kernel's ops "
        "to llvm + nvvm",
        gpu_to_nvvm_passes,
    ),
    LOWER_TO_NVVM: NamedPipeline(
        f"{MAP_TO_GPU}, then {GPU_TO_NVVM}",
        gpu_passes,
    ),
    DEFAULT: NamedPipeline(
        f"naive IR to a kernel ready for PTX: {TILE_SPLIT_SINK}, then {LOWER_TO_NVVM}",
        default_passes,
    ),
}
"""Pipelines by name, each built with the default configuration."""
