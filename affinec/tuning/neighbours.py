"""Configurations next to `config_for`'s: its rule's alternatives, by name.

`config_for` chooses by rules fitted on measurements; where a rule is wrong for a
shape, the better choice is usually one knob away — another tile, the flattened
pixels, one filter row a step. A neighbour is `config_for`'s configuration with
such knobs changed: `config_for`'s own options (`flatten_pixels`, `splits`), then
`KernelConfig` fields.

    neighbours(spec)        # [(name, config)] that differ from config_for(spec)

The tuner measures them right after the baseline, before the cost model's picks
(which rank poorly against measured time), so a whole network is tuned in a few
candidates a layer; `benchmarks/layer_sweep.py` times every layer of a network
with each of them against cuDNN, the measurements a rule is fitted on.
"""

from __future__ import annotations

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.config import (
    DEFAULT_PLANNING_ARCH,
    MMA_WINDOW_STEP,
    WGMMA_MIN_CHANNELS,
    KernelConfig,
    config_for,
    depthwise_config,
    strided_depthwise_config,
    warpgroup_product_config,
    wgmma_config_for,
)
from affinec.driver.kernel_config import with_knobs
from affinec.driver.wgmma_taps_ss_config import wgmma_taps_ss_config
from affinec.driver.wgmma_taps_ss_rule import ss_config_for
from affinec.frontend.contraction import is_depthwise

_WIDE = {"tile_sizes": (128, 128), "reduction_tile_sizes": (32,), "stages": 4}
VARIANTS: dict[str, tuple[dict, dict]] = {
    "config_for": ({}, {}),
    "unsplit": ({"splits": 1, "flatten_pixels": False}, {}),
    "flat": ({"flatten_pixels": True, "splits": 1}, {}),
    "flat 128x64 w2x2": (
        {"flatten_pixels": True, "splits": 1},
        {"tile_sizes": (128, 64), "warp_grid": (2, 2)},
    ),
    "flat 128x128 w4x2": (
        {"flatten_pixels": True, "splits": 1},
        _WIDE | {"warp_grid": (4, 2)},
    ),
    "flat 64x64 w2x2": (
        {"flatten_pixels": True, "splits": 1},
        {"tile_sizes": (64, 64), "warp_grid": (2, 2)},
    ),
    "flat 128x32 w4x1": (
        {"flatten_pixels": True, "splits": 1},
        {"tile_sizes": (128, 32), "warp_grid": (4, 1)},
    ),
    "flat 128x96 w2x2": (
        {"flatten_pixels": True, "splits": 1},
        {"tile_sizes": (128, 96), "warp_grid": (2, 2)},
    ),
    "flat 64x32 w2x1": (
        {"flatten_pixels": True, "splits": 1},
        {"tile_sizes": (64, 32), "warp_grid": (2, 1)},
    ),
    "flat 256x128 w4x2": (
        {"flatten_pixels": True, "splits": 1},
        _WIDE | {"tile_sizes": (256, 128), "warp_grid": (4, 2), "stages": 3},
    ),
    "warps 2x2": ({}, {"warp_grid": (2, 2)}),
    "row steps": ({}, {"reduction_tile_sizes": (1, 3, 16), "stages": 3}),  # 1, s, 16
    "taps": (
        {},
        {"reduction_tile_sizes": (1, 1, 64), "stages": 2, "unroll_taps": False},
    ),
    "taps 32ch s3": (
        {},
        {"reduction_tile_sizes": (1, 1, 32), "stages": 3, "unroll_taps": False},
    ),
    "phases": ({}, {"split_phases": True}),
    "row steps phases": (
        {},
        {"reduction_tile_sizes": (1, 3, 16), "stages": 3, "split_phases": True},
    ),
    "half block s2": ({}, {"stages": 2}),
    "half block s2 phases": ({}, {"stages": 2, "split_phases": True}),
    "depthwise row steps": ({}, {"reduction_tile_sizes": (1, 3, 16), "stages": 3}),
    "depthwise row steps s1": ({}, {"reduction_tile_sizes": (1, 3, 16), "stages": 1}),
    "depthwise row steps s2": ({}, {"reduction_tile_sizes": (1, 3, 16), "stages": 2}),
    "depthwise window": ({}, {"reduction_tile_sizes": (3, 3, 16), "stages": 2}),
    "depthwise strided": ({}, {}),
    "depthwise vectors": ({}, {}),
    "depthwise unfilled": ({}, {}),
    "flat 64x64 s2": (
        {"flatten_pixels": True, "splits": 2},
        {"tile_sizes": (64, 64), "warp_grid": (2, 2)},
    ),
    "flat 64x64 s4": (
        {"flatten_pixels": True, "splits": 4},
        {"tile_sizes": (64, 64), "warp_grid": (2, 2)},
    ),
    "hopper": ({}, {}),
    "hopper 64x64": ({}, {"wgmma_tile": (64, 64)}),
    "tma 128x128": ({}, {"tile_sizes": (128, 128)}),
    "tma 128x64": ({}, {"tile_sizes": (128, 64)}),
    "tma 64x64": ({}, {"tile_sizes": (64, 64)}),
    "tma 128x256": ({}, {"tile_sizes": (128, 256)}),
    "tma 128x256 s3 ws": (
        {},
        {"tile_sizes": (128, 256), "stages": 3, "warp_specialize": True},
    ),
    "ss": ({}, {}),
    "ss 64x64": ({}, {"tile_sizes": (64, 64)}),
}
"""Every named variant `benchmarks/layer_sweep.py` can time: flattened 1x1s as
products on wider or narrower blocks and more warps; the window route's steps one
filter row at a time (three in flight where a whole window's tile leaves room for
one); a strided window's taps one at a time; a strided window's input tile stored
by phase (`split_phases`); the flattened products' 64 x 64 tiles with their
reduction split; a depthwise convolution's channels strided across the block
(`strided_depthwise_config`), in vectors (`depthwise_config`, `config_for`'s rule)
and those vectors on blocks as large as at any batch, the grid left unfilled;
on sm_90a, Hopper's kernel (`wgmma_config_for`'s tile, or 64 x 64) and a product's
or 1x1's `affinec-wgmma` kernel with TMA stages (`warpgroup_product_config`) in
128 x 128, 128 x 64, 64 x 64 or 128 x 256 tiles (the last also in three stages
with a producer warpgroup: the pipeline's fastest 4096-wide product, 2026-12-07),
whatever the grid; a 3x3 on `affinec-wgmma`'s
descriptor route in the block `ss_config_for` picks ("ss") or in blocks of 64 pixels
and 64 output channels, one warpgroup's (the pipeline's counterpart of Hopper's
kernel in 64 x 64 tiles, which the tuner takes for most of ResNet-50's and
MobileNetV2's wide layers at batch 1)."""

TUNER_NEIGHBOURS = (
    "unsplit",
    "flat",
    "flat 128x64 w2x2",
    "flat 64x64 w2x2",
    "flat 128x128 w4x2",
    "row steps",
    "taps 32ch s3",
    "half block s2",
    "half block s2 phases",
    "depthwise row steps s1",
    "depthwise row steps s2",
    "depthwise strided",
)
"""The variants the tuner measures after the baseline: those that were some layer's
fastest in the sweeps of ResNet-50, VGG-16, MobileNetV2 and EfficientNet-B0 at batch 1
and 32 (H100, 2026-12-06; the split flattened products never were), and a depthwise
convolution's channels strided across the block (`config_for`'s rule until the
vectors won on the H100, 2026-12-07)."""


def window_route(config: KernelConfig) -> bool:
    """Whether `config` is the mma.sync window route's (taps unrolled, the filter's
    window in the promoted tile), whose steps and block the window variants change;
    Hopper's window kernels have steps of their own."""
    return config.unroll_taps and config.tensor_core == "mma.sync" and not config.wgmma


def variant_config(
    spec: Spec, name: str, arch: str = DEFAULT_PLANNING_ARCH
) -> KernelConfig:
    """`config_for(spec)` changed as the variant `name` says; a ValueError where the
    variant does not apply to `spec` (a flattened 3x3, a strided 1x1)."""
    if name not in VARIANTS:
        raise ValueError(
            f"unknown variant '{name}' (expected one of {', '.join(VARIANTS)})"
        )
    options, knobs = VARIANTS[name]
    if name.startswith("hopper"):
        # Hopper's kernel (TMA tap by tap, MMAs in flight): wgmma_config_for
        # names what stops it
        return with_knobs(wgmma_config_for(spec, arch), **knobs)
    if name == "ss":
        # the descriptor route's rule (config_for's on sm_90a where it takes the spec)
        return ss_config_for(spec, arch)
    if name.startswith("ss "):
        # the descriptor route in a block of the variant's pixels and channels
        return wgmma_taps_ss_config(spec, *knobs["tile_sizes"], arch=arch)
    if name.startswith("tma "):
        if arch != "sm_90a":
            raise ValueError(f"'{name}' is affinec-wgmma's: sm_90a, not {arch}")
        rows, _ = knobs["tile_sizes"]
        # one warpgroup's rows (64) take products as narrow as its MMA's 64 channels,
        # as Hopper's template kernel in 64 x 64 tiles does
        floor = min(rows, WGMMA_MIN_CHANNELS)
        product = warpgroup_product_config(spec, knobs["tile_sizes"], arch, floor)
        if product is None:
            raise ValueError(
                f"'{name}' is for products and 1x1s of {floor} channels or more a side"
            )
        columns = spec.k if isinstance(spec, ConvSpec) else getattr(spec, "n", 0)
        if knobs["tile_sizes"][1] > columns:
            raise ValueError(
                f"'{name}' is wider than the product's {columns} output columns"
            )
        rest = {k: v for k, v in knobs.items() if k != "tile_sizes"}
        return with_knobs(product, **rest) if rest else product
    config = config_for(spec, arch=arch, **options)
    if name.startswith("half block"):
        # the window route's block of pixels halved along its rows, for two steps in
        # flight where one step of the whole block takes the shared-memory budget
        if not (window_route(config) and isinstance(spec, ConvSpec)):
            raise ValueError(
                f"'{name}' halves the window route's block: not this route"
            )
        tiles = list(config.tile_sizes)
        tiles[2] = -(-tiles[2] // 2)
        return with_knobs(config, **knobs | {"tile_sizes": tuple(tiles)})
    if name.startswith("depthwise"):
        # a depthwise convolution's steps over its window: one filter row (or the
        # whole window) a step, as wide as the spec's
        if not (isinstance(spec, ConvSpec) and 1 < spec.groups == spec.c):
            raise ValueError(f"'{name}' is for depthwise convolutions alone")
        if name in ("depthwise strided", "depthwise vectors", "depthwise unfilled"):
            if not is_depthwise(spec):
                raise ValueError(f"'{name}' is for depthwise convolutions alone")
            if name == "depthwise strided":
                return strided_depthwise_config(spec)
            return depthwise_config(spec, fill=name == "depthwise vectors")
        rows = spec.r if name == "depthwise window" else 1
        # (one filter a group: the window is the whole reduction; else the
        # group's one channel is the last reduction dimension)
        step = (rows, spec.s) if is_depthwise(spec) else (rows, spec.s, 16)
        return with_knobs(config, **knobs | {"reduction_tile_sizes": step})
    if "reduction_tile_sizes" in knobs and not options:
        # the window route's steps: for its layers alone, one filter row as wide
        # as the spec's
        if not (window_route(config) and isinstance(spec, ConvSpec)):
            raise ValueError(
                f"'{name}' changes the window route's steps: not this spec's route"
            )
        if name.startswith("row steps"):
            knobs = knobs | {"reduction_tile_sizes": (1, spec.s, MMA_WINDOW_STEP)}
    return with_knobs(config, **knobs) if knobs else config


def neighbours(
    spec: Spec,
    arch: str = DEFAULT_PLANNING_ARCH,
    names: tuple[str, ...] = TUNER_NEIGHBOURS,
) -> list[tuple[str, KernelConfig]]:
    """The variants among `names` that apply to `spec`, each configuration once and
    none equal to `config_for(spec)`'s."""
    seen = {config_for(spec, arch=arch)}
    found = []
    for name in names:
        try:
            config = variant_config(spec, name, arch)
        except ValueError:
            continue
        if config not in seen:
            seen.add(config)
            found.append((name, config))
    return found


__all__ = ["TUNER_NEIGHBOURS", "VARIANTS", "neighbours", "variant_config"]
