"""The differential campaign's draws of sm_90a routes the tuner's search space does
not offer (`affinec.tuning.differential` puts them after the rest of a seed's
pairs): `affinec-wgmma` reading a convolution's box of pixels by descriptor
(`TAPS_SS`), that route's block rule (`TAPS_SS_RULE`) and warp specialization
(`WARP_SPECIALIZE`). Each draw gives (spec, configuration, route label).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.config import KernelConfig

TAPS_SS = "wgmma-taps-ss"
"""`affinec-wgmma` reading a convolution's box of pixels by descriptor, one tap and 64
channels a step (`wgmma_taps_ss_config`)."""
TAPS_SS_RULE = "wgmma-taps-ss-rule"
"""That route's block rule's choice (`ss_config_for`)."""
WARP_SPECIALIZE = "warp-specialize"
"""`affinec-wgmma` with TMA's loads issued by a producer warpgroup of their own."""
HOPPER_SHARES = {TAPS_SS: 0.04, TAPS_SS_RULE: 0.02, WARP_SPECIALIZE: 0.04}
"""Of the pairs drawn on a chip with wgmma, those of each of these routes, which the
tuner's space does not offer: drawn after the rest from a stream of their own, so
that the other pairs of a seed are those it drew without them (the first ones)."""


def hopper_counts(count: int, arch: str) -> dict[str, int]:
    """How many of `count` pairs `random_pairs` draws of each of `HOPPER_SHARES`'
    routes on `arch` (none on a chip without wgmma)."""
    from affinec.hardware.chips import chip

    if not chip(arch).has("wgmma"):
        return {}
    counts = {route: round(count * share) for route, share in HOPPER_SHARES.items()}
    # a few pairs (a chunk of a campaign, a test's) still draw each route once
    return {route: max(n, 1) if count >= 10 else n for route, n in counts.items()}


def _taps_conv(
    rng: random.Random,
    channels: list[int],
    outputs: list[int],
    pixels: int,
    epilogues: tuple[str, ...],
) -> ConvSpec:
    """An NHWC/RSCK f16/bf16 convolution with taps, or a 1x1 of stride 2, of at
    least `pixels` output pixels an image (a box the route takes)."""
    r, s, stride = rng.choice(
        [
            (3, 3, 1),
            (3, 3, 1),
            (3, 3, 1),
            (1, 3, 1),
            (3, 3, 2),
            (3, 1, 2),
            (1, 1, 2),
            (2, 2, 2),
        ]
    )
    padding = (rng.randint(0, r // 2), rng.randint(0, s // 2))
    while True:
        h, w = rng.randint(6, 20) * stride, rng.randint(6, 20) * stride
        spec = ConvSpec(
            n=rng.choice([1, 1, 2]),
            c=rng.choice(channels),
            h=h,
            w=w,
            k=rng.choice(outputs),
            r=r,
            s=s,
            stride=(stride, stride),
            padding=padding,
            layout="nhwc",
            filter_layout="rsck",
            dtype=rng.choice(("f16", "bf16")),
            epilogue=rng.choice(epilogues),
        )
        if spec.out_h * spec.out_w >= pixels:
            return spec


def _taps_ss_pair(
    rng: random.Random, arch: str, epilogues: tuple[str, ...]
) -> tuple[Spec, KernelConfig, str]:
    from affinec.driver.wgmma_taps_ss_config import SS_TILES, wgmma_taps_ss_config
    from affinec.transforms.gpu.wgmma_plan import pixel_box

    while True:
        spec = _taps_conv(
            rng, [64, 64, 128, 192], [16, 32, 40, 64, 96, 128], 64, epilogues
        )
        rows, columns = rng.choice(SS_TILES)
        box: tuple[int, int, int] | None = None
        kind = rng.choice(["tile", "tile", "pixel box", "random"])
        if kind == "pixel box":
            box = (1, *pixel_box(spec.out_h, spec.out_w, rows))
        elif kind == "random":
            # a box of one image of 64 pixels or more (wgmma's rows), at most `rows`
            height = rng.randint(1, min(spec.out_h, rows))
            width = rng.randint(min(spec.out_w, -(-64 // height)), spec.out_w)
            box = (1, height, min(width, rows // height))
        try:
            config = wgmma_taps_ss_config(
                spec, rows, columns, box=box, tma=rng.random() < 0.6, arch=arch
            )
        except ValueError:  # a box or block the route does not take: another
            continue
        if config.tile_sizes[0] * config.tile_sizes[1] * config.tile_sizes[2] >= 64:
            return spec, config, TAPS_SS


def _taps_ss_rule_pair(
    rng: random.Random, arch: str, epilogues: tuple[str, ...]
) -> tuple[Spec, KernelConfig, str]:
    """A stride-1 3x3 of 128 channels or more in and out, of enough pixels that the
    rule's block fills the chip (`MIN_BLOCKS`), and the rule's configuration."""
    from affinec.driver.wgmma_taps_ss_rule import MIN_BLOCKS, ss_config_for

    while True:
        h, w = rng.randint(14, 40), rng.randint(14, 40)
        spec = ConvSpec(
            n=-(-MIN_BLOCKS * 128 // (h * w)) + rng.randint(0, 3),
            c=rng.choice([128, 192, 256]),
            h=h,
            w=w,
            k=rng.choice([128, 192, 256]),
            r=3,
            s=3,
            padding=(1, 1),
            layout="nhwc",
            filter_layout="rsck",
            dtype=rng.choice(("f16", "bf16")),
            epilogue=rng.choice(epilogues),
        )
        try:
            return spec, ss_config_for(spec, arch=arch), TAPS_SS_RULE
        except ValueError:  # too few blocks for the rule: another
            continue


def _warp_specialized_pair(
    rng: random.Random, arch: str, epilogues: tuple[str, ...]
) -> tuple[Spec, KernelConfig, str]:
    """A product or a 1x1 convolution through its flattened pixels (row strides TMA
    loads: multiples of 8 elements) and a configuration with a producer warpgroup:
    one or two consumer warpgroups, 1 to 4 stages, MMAs in flight or waited, the
    output staged through shared memory or not. The pass takes whole blocks of rows
    and whole reduction steps: M at least the block's rows, K a multiple of the
    step."""
    dtype = rng.choice(("f16", "bf16"))
    epilogue = rng.choice(
        ("none", "bias", "bias-relu", "residual", "bias,residual,relu")
    )
    rows = 64 * rng.randint(1, 2)
    step = rng.choice([16, 32, 64])
    k = step * rng.randint(1, 320 // step)
    flat = rng.random() < 0.4
    if flat:
        while True:
            spec: Spec = ConvSpec(
                n=rng.choice([1, 2, 3]),
                c=k,
                h=rng.randint(2, 14),
                w=rng.randint(2, 14),
                k=8 * rng.randint(1, 24),
                r=1,
                s=1,
                layout="nhwc",
                filter_layout="rsck",
                dtype=dtype,
                epilogue=epilogue,
            )
            if spec.n * spec.h * spec.w >= rows:
                break
        n = spec.k
    else:
        spec = MatmulSpec(
            m=rng.randint(rows, 320),
            n=8 * rng.randint(1, 32),
            k=k,
            dtype=dtype,
            epilogue=epilogue,
        )
        n = spec.n
    stages = rng.randint(1, 4)
    columns = 8 * rng.randint(1, min(32, -(-n // 8)))
    config = KernelConfig(
        tile_sizes=(rows, columns),
        reduction_tile_sizes=(step,),
        mma=True,
        tensor_core="wgmma",
        tma=True,
        stages=stages,
        in_flight=stages >= 3 and rng.random() < 0.5,
        stage_output=rng.random() < 0.5,
        flatten_pixels=flat,
        warp_specialize=True,
    )
    return spec, config, ""


HOPPER_DRAWS: dict[
    str, Callable[[random.Random, str, tuple[str, ...]], tuple[Spec, KernelConfig, str]]
] = {
    TAPS_SS: _taps_ss_pair,
    TAPS_SS_RULE: _taps_ss_rule_pair,
    WARP_SPECIALIZE: _warp_specialized_pair,
}
"""Each route's draw, by its label."""

__all__ = [
    "HOPPER_DRAWS",
    "HOPPER_SHARES",
    "TAPS_SS",
    "TAPS_SS_RULE",
    "WARP_SPECIALIZE",
    "hopper_counts",
]
