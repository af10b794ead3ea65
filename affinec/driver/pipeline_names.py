"""Pipelines by name and as text, as the command line spells them: how a
configured pass prints, and the pipelines that have a name.

    pass_text(AffineLoopTilePass(tile_sizes=(1, 64, 16, 16)))
        # 'affine-loop-tile{tile-sizes=1,64,16,16}'
    NAMED_PIPELINES["affinec-default"].summary

What a named pipeline's passes are is `affinec.driver.pipelines.named_passes`: the
recipes, which import every pass they configure, load only when a named pipeline
is built, so that `affinec-opt -p some-pass` loads that pass alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec


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
    per_spec: bool = False
    """Whether the passes depend on the module's spec (`affinec.spec`)."""


TILE_SPLIT_SINK = "affinec-tile-split-sink"
TILE_SPLIT_SINK_SEPARATE = TILE_SPLIT_SINK + "-separate"
MAP_TO_GPU = "affinec-map-to-gpu"
GPU_TO_NVVM = "affinec-gpu-to-nvvm"
LOWER_TO_NVVM = "affinec-lower-to-nvvm"
DEFAULT = "affinec-default"
UNPROMOTED_ROUTE = "affinec-unpromoted"

NAMED_PIPELINES: dict[str, NamedPipeline] = {
    TILE_SPLIT_SINK: NamedPipeline(
        "tile into grid and block loops, split the block loop around a block-shaped "
        "accumulator, sink it below the reduction's tile loops, canonicalize"
    ),
    TILE_SPLIT_SINK_SEPARATE: NamedPipeline(
        f"{TILE_SPLIT_SINK}, with full tiles separated from partial ones (a fast "
        "path without bounds)"
    ),
    MAP_TO_GPU: NamedPipeline(
        "place the buffers of each block, insert barriers, map block bands to "
        "threads, convert to gpu.launch"
    ),
    GPU_TO_NVVM: NamedPipeline(
        "outline the kernel of a gpu.launch, lower affine, scf and the kernel's ops "
        "to llvm + nvvm"
    ),
    LOWER_TO_NVVM: NamedPipeline(f"{MAP_TO_GPU}, then {GPU_TO_NVVM}"),
    DEFAULT: NamedPipeline(
        "naive IR to a kernel ready for PTX with the configuration config_for picks "
        "for the module's spec (its affinec.spec attribute; the defaults below "
        "without one): tile, split, sink, copy into shared memory, on the tensor "
        "cores for f16/bf16, map to the GPU, lower to llvm + nvvm",
        per_spec=True,
    ),
    UNPROMOTED_ROUTE: NamedPipeline(
        f"the walking skeleton's route: {TILE_SPLIT_SINK}, then {LOWER_TO_NVVM} "
        "(no shared-memory copies, no FMA, 64-bit indices: bit-identical to the "
        "naive IR down to PTX)"
    ),
}
"""Pipelines by name. The pieces of the way (tile-split-sink, map-to-gpu,
gpu-to-nvvm, lower-to-nvvm) keep the order of summation and the rounding of the
naive IR; `affinec-default` adds the shared-memory copies, FMA contraction and
32-bit indices, with the passes' default sizes."""
