"""Every tuning knob of the default pipeline, typed, once (`KernelConfig`).

`affinec.compile`, the command lines and the tuner share it; the pipelines module
turns it into pass options in one place; `affinec.driver.config.config_for` picks one for
a spec. Zero or empty means "the pass picks".
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Any


def _integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _integers(value: object) -> bool:
    return isinstance(value, tuple) and all(map(_integer, value))


def _kept_integers(value: object) -> bool:
    return type(value) is tuple and all(type(v) is int for v in value)


_KNOB_TYPES: dict[
    str,
    tuple[str, Callable[[Any], bool], Callable[[Any], Any], Callable[[Any], bool]],
] = {
    "bool": (
        "True or False",
        lambda v: isinstance(v, bool),
        bool,
        lambda v: type(v) is bool,
    ),
    "int": ("an integer", _integer, int, lambda v: type(v) is int),
    "str": ("a string", lambda v: isinstance(v, str), str, lambda v: type(v) is str),
    "tuple[int, ...]": (
        "a tuple of integers",
        _integers,
        lambda v: tuple(map(int, v)),
        _kept_integers,
    ),
}
"""Per annotation of a knob: what it takes, in words; whether a value is one; the
value as the config keeps it (numpy's integers as Python's: configs hash and
compare by value, and the passes build constants of them); and whether a value
is already kept so (the tuner builds hundreds of thousands of configs: the
abstract `numbers.Integral` check costs more than all the rest of one)."""


TENSOR_CORES = ("mma.sync", "wgmma")
"""The tensor-core instructions the `mma` route may take (`KernelConfig.tensor_core`)."""


@dataclass(frozen=True)
class KernelConfig:
    """The knobs of the default pipeline (see each field)."""

    tile_sizes: tuple[int, ...] = ()
    """Block tile along each output dimension, outermost first."""
    reduction_tile_sizes: tuple[int, ...] = ()
    """Tile along each reduction dimension (the outer tile loops stay on the grid
    side of the block loop)."""
    separate: bool = False
    """Separate full tiles (no bounds checks) from partial ones."""
    reassociate: bool = False
    """Let the reduction be tiled in any order (the rounding changes; the tensor-core
    route changes it anyway)."""
    promote: bool = True
    """Copy each compute band's inputs into shared memory
    (`affine-data-copy-generate`)."""
    dma: bool = True
    """Copy 16 bytes at a time with asynchronous copies where the tiles' rows allow
    (`affine-data-copy-generate{generate-dma}`)."""
    coalesce_reduction: bool = False
    """Coalesce the filter's columns with the channels into one reduction loop over
    shared tiles that hold them contiguously (`affinec-coalesce-reduction`): the
    tensor cores' k for convolutions with fewer channels than one MMA's k."""
    pad_channels: int = 0
    """Pad the channel loop with zeros to a multiple of this (`affinec-pad-channels`;
    0 or 1: not padded): 3 channels as 4, whose rows of k start on 16 bytes."""
    stages: int = 1
    """Tiles of the reduction in flight at once: 1 copies then computes; 2 or more
    run the asynchronous copies that many - 1 tiles ahead
    (`affine-pipeline-data-transfer`)."""
    mma: bool = False
    """Accumulate on tensor cores (`affinec-mma-sync`: f16 and bf16 operands): the
    copies lay the tiles out for ldmatrix, the warps tile the block."""
    tensor_core: str = "mma.sync"
    """With `mma`: the tensor-core instruction, `mma.sync` (`affinec-mma-sync`,
    warps of m16n8k16) or `wgmma` (`affinec-wgmma`, sm_90a: warpgroups of 128
    threads, one per 64 rows of the block tile, reading the shared tiles through
    descriptors); every other pass of the route is the same."""
    tma: bool = False
    """With `tensor_core="wgmma"`: the tiles `wgmma` reads loaded by TMA, each
    pipeline stage an mbarrier phase (`affinec-tma-copies`), instead of the
    promotion's cp.async copies."""
    in_flight: bool = False
    """With `tensor_core="wgmma"`: warpgroup MMAs left in flight while the next
    ones' operands load: with `tma` (3 stages or more), each step's until the next
    step, its stage handed back a step later (`affinec-tma-copies{in-flight}`);
    with A from registers (filter taps), each run's while the next run's fragments
    load (`affinec-wgmma{in-flight}`)."""
    warp_specialize: bool = False
    """With `tma`: one more warpgroup, the producer, issues every TMA load (its
    registers lowered, `setmaxnreg.dec`) while the block's warpgroups only wait,
    multiply and hand the stages back (theirs raised, `setmaxnreg.inc`)
    (`affinec-warp-specialize`)."""
    warp_grid: tuple[int, ...] = (2, 2)
    """With `mma`: warps along the block's pixels and output channels."""
    unroll_taps: bool = False
    """With `mma`: unroll a step's loops over the filter taps, so that ptxas can load
    the next tap's fragments while this tap's MMAs run."""
    stage_output: bool = False
    """With `mma`: store the output through a shared tile, 16 bytes a thread, instead
    of each lane's pairs of channels (where the output's layout allows)."""
    split_phases: bool = False
    """Store a shared tile read with a stride (a strided window's input tile) by
    phase, even columns then odd, where that costs fewer bank conflicts than any
    padding (`affinec-plan-shared-memory{split-phases}`)."""
    tf32: bool = False
    """With `mma` and f32 operands: multiply on the tensor cores in tf32 (the
    operands keep 10 bits of mantissa; held to tf32's tolerance). Opt-in only:
    `config_for` keeps f32 on the SIMT route, in f32's own precision."""
    threads_per_block: int = 0
    register_tile: tuple[int, ...] = ()
    """Iterations of the accumulator bands one thread owns, per output dimension
    (empty: the block's iterations are shared out in turns)."""
    vector_width: int = 0
    """Outputs a thread owns contiguously along the innermost dimension of its
    register tile (0: 16 bytes' worth when the tile allows, 1: strided)."""
    unroll_steps: int = 0
    """Steps of the innermost reduction loop unrolled together in a register-tiled
    band (0: rolled)."""
    fma: bool = True
    """Contract multiply-adds into fused ones (`affinec-contract-fma`)."""
    index_bitwidth: int = 0
    """Width of index arithmetic in the kernel: 32, 64, or 0 for 32 wherever
    `affinec-narrow-indices` proves it fits."""
    splits: int = 1
    """Split the channel reduction into this many partial sums, each its own blocks,
    added by a second kernel (`affinec-split-reduction`; 1: not split). The
    reduction tile sizes are then those of one split's channels."""
    flatten_pixels: bool = False
    """Compile a 1x1, stride-1, unpadded NHWC convolution as the matrix product it is
    over its flattened pixels (`flattened_spec`: M = N x H x W): its blocks tile M
    freely, not a 7 x 7 image by rows. The other knobs are the product's."""
    wgmma: bool = False
    """On a chip with `wgmma` (sm_90a): the product as a Hopper kernel
    (`affinec-wgmma-gemm`): TMA copies, `stages` mbarrier stages of 64 of K,
    warpgroup MMA from shared memory. f16 and bf16 matrix products, and 1x1
    convolutions through their flattened pixels; the knobs of the other routes are
    unused."""
    wgmma_tile: tuple[int, ...] = (128, 128)
    """With `wgmma`: a block's tile of the product's output (rows, columns)."""
    wgmma_schedule: str = "in-flight"
    """With `wgmma`: `waited`, `in-flight`, `specialized` or `cooperative`
    (`affinec-wgmma-gemm`)."""

    def __post_init__(self) -> None:
        for name, (words, accepts, kept, is_kept) in _knobs():
            value = getattr(self, name)
            if is_kept(value):
                continue
            if isinstance(value, list):
                value = tuple(value)
            if not accepts(value):
                raise TypeError(
                    f"{name.replace('_', '-')} takes {words}, got {value!r}"
                )
            object.__setattr__(self, name, kept(value))
        if self.tf32 and not self.mma:
            raise ValueError("tf32 multiplies on the tensor cores: it needs mma")
        if self.splits < 1:
            raise ValueError(f"splits must be 1 or more, got {self.splits}")
        if self.stages < 1:
            raise ValueError(f"stages must be 1 or more, got {self.stages}")
        if self.pad_channels < 0:
            raise ValueError(f"pad-channels must be 0 or more, got {self.pad_channels}")
        if self.tensor_core not in TENSOR_CORES:
            raise ValueError(
                f"tensor-core takes {' or '.join(TENSOR_CORES)}, got "
                f"{self.tensor_core!r}"
            )
        if self.tensor_core == "wgmma" and not self.mma:
            raise ValueError(
                "tensor-core=wgmma picks the tensor cores' instruction: it needs mma"
            )
        if self.tensor_core == "wgmma" and self.tf32:
            raise ValueError(
                "tensor-core=wgmma takes f16 and bf16 operands: not with tf32"
            )
        if self.in_flight and self.tensor_core != "wgmma":
            raise ValueError(
                "in-flight leaves warpgroup MMAs in flight: it needs tensor-core=wgmma"
            )
        if self.warp_specialize and not (self.tma and self.tensor_core == "wgmma"):
            raise ValueError(
                "warp-specialize gives the TMA loads a warpgroup of their own: it "
                "needs tensor-core=wgmma and tma"
            )
        if self.wgmma and self.mma:
            raise ValueError("wgmma is its own route to the tensor cores: not with mma")
        if self.splits > 1 and (self.pad_channels > 1 or self.coalesce_reduction):
            raise ValueError(
                "splits cut the channels the padded or coalesced route needs whole "
                "(pad-channels, coalesce-reduction): split a spec of more channels"
            )

    def describe(self) -> str:
        """The knobs that differ from the defaults, `name=value` each."""
        default = KernelConfig()
        parts = [
            f"{f.name.replace('_', '-')}={_value_text(getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return " ".join(parts) or "defaults"


@cache
def _knobs() -> tuple[tuple[str, tuple], ...]:
    """Each knob's name and `_KNOB_TYPES` entry, in the fields' order."""
    return tuple((f.name, _KNOB_TYPES[str(f.type)]) for f in fields(KernelConfig))


UNPROMOTED = KernelConfig(promote=False, fma=False, index_bitwidth=64)
"""The walking skeleton's route: every thread reads global memory, rounding exactly
as the naive IR (no FMA), 64-bit indices."""


def _value_text(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def with_knobs(config: KernelConfig, **knobs: object) -> KernelConfig:
    """`config` with some knobs changed (a ValueError naming an unknown one)."""
    known = {f.name for f in fields(KernelConfig)}
    if unknown := sorted(set(knobs) - known):
        raise ValueError(
            f"unknown compile option '{unknown[0]}' (the knobs are "
            f"{', '.join(sorted(known))})"
        )
    return replace(config, **knobs)  # pyright: ignore[reportArgumentType]
