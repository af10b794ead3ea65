"""The search space of the autotuner: the `KernelConfig`s worth compiling for a spec.

Two routes, each a product of a few knobs:

- SIMT (f32 and f16): a block tile of pixels x output channels, a register tile (the
  outputs one thread owns: between 4 and 64, leaving 64 to 512 threads), a reduction
  step that keeps the order of summation, the steps of the innermost reduction loop
  unrolled together (0, 2, 4), and 1 or 2 stages where the copies can be 16-byte
  asynchronous ones;
- tensor cores (f16 and bf16, from 16 input channels as `config_for` has it): a block tile of
  whole MMAs where it can (pixels in 16s, channels in 8s), a warp grid of 1..4 x
  1..4 warps (each warp at most 32 MMA tiles, `affinec-mma-sync`'s limit), one
  filter tap and 16, 32 or 64 channels a step (`reassociate`: the MMA sums in its
  own order anyway), or one filter row or the whole window and 16 or 32 channels
  a step (the taps unrolled or not), and 1 to 8 stages in flight (no more than the
  steps); with fewer channels than k where a filter
  row's columns x channels make one (`config_for`'s `coalesce_reduction`), one
  filter row or the whole window a step.

Block tiles along each pixel dimension are divisors of the output extent or powers of
two whose partial last tile wastes at most an eighth ("near-divisors"); a block holds
32 to 256 pixels (the innermost two pixel dimensions tiled freely, the batch only
when whole images fit) and 16 to 128 output channels. Of the pixel shapes of about
the same size, the ones that waste least are kept.

SIMT reduction steps keep the order of summation, as `affine-loop-tile` requires
without `reassociate` (`config._reduction_tiles` follows the same rule): the
dimensions cut into several tiles come first, in tiles of 1 but the last of them,
the others whole. For `r, s, c` that is `(1, 1, c')`, `(1, s', C)` or `(r', S, C)`.

The product is thousands of configurations; the cost model (`affinec.tuning.cost`),
with registers estimated, ranks them and keeps `max_candidates` (a few hundred at
most, no more than a few per block tile so that the compiled set stays varied), plus
`config_for(spec)`, the configuration the compiler picks unasked (the baseline, always
measured), and its neighbours (`affinec.tuning.neighbours`: the rule's alternatives,
measured right after it). Configurations whose shared tiles (all stages) cannot fit the capacity
are dropped before compiling; everything else is for the passes and ptxas to accept
or refuse.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace

from affinec.base.spec import ConvSpec, Spec
from affinec.driver.config import (
    DEFAULT_PLANNING_ARCH,
    MIN_SPLIT_CHANNELS,
    MMA_MIN_CHANNELS,
    KernelConfig,
    config_for,
    flattened_spec,
    flattens,
    takes_any_batch,
    tensor_cores_take,
)
from affinec.hardware.chips import WARP_SIZE, Chip, chip
from affinec.tuning.cost import H100, Prediction, predict
from affinec.tuning.hopper_space import best_per_tile_and_schedule, wgmma_configs
from affinec.tuning.neighbours import neighbours
from affinec.tuning.problem import (
    MMA_M,
    MMA_N,
    Problem,
    ceil_div,
    dma_copies,
    geometry,
    problem_of,
    split_problem,
    tile_efficiency,
)

MIN_TILE_EFFICIENCY = 0.875
"""A tile whose partial last tile wastes more than an eighth is not a near-divisor."""
BLOCK_PIXELS = (32, 256)
MAX_PIXEL_TILE = 64
"""Along one pixel dimension of a convolution (the block's other pixel dimensions
then have room)."""
SHAPES_PER_SIZE = 3
"""Pixel shapes kept per size class (powers of two)."""
CHANNEL_TILES = (16, 32, 64, 128)
THREADS = (64, 512)
REGISTER_OUTPUTS = (4, 64)
REGISTER_SIZES = (1, 2, 4, 8)
UNROLL_STEPS = (0, 2, 4)
SIMT_STEP = (4, 72)
"""Reduction points per step on the SIMT route."""
MMA_CHANNEL_STEPS = (16, 32, 64)
MMA_STAGES = (1, 2, 3, 4, 6, 8)
"""Tiles in flight on the tensor-core route (`affine-pipeline-data-transfer`; 8 is
cp.async's most groups in flight): deep pipelines of short steps are what cuDNN's
own mma.sync kernels run with few blocks (5 to 10 stages of 32-channel steps)."""
SIMT_STAGES = (1, 2)
WARPS = (1, 2, 3, 4)
MAX_MMA_TILES = 32
"""MMA tiles per warp (4 accumulators each per lane): `affinec-mma-sync`'s limit."""
MAX_CANDIDATES = 200
MMA_SHARE = 0.85
"""Of `max_candidates` for f16, the share of the tensor-core route."""
PER_BLOCK_TILE = 6
"""At most this many candidates share a block tile (and route)."""
SHARED_CAPACITY = 100 * 1024
"""The search keeps to configurations of which two blocks fit a multiprocessor (on
the H100, 2 x 100 KiB of its 228 KiB; `shared_capacity` on other chips)."""


def shared_capacity(target: Chip) -> int:
    """A block's shared memory in the search on `target`: `SHARED_CAPACITY`, at most
    what lets two blocks share one of its multiprocessors."""
    return min(SHARED_CAPACITY, target.shared_per_block_of(2))


@dataclass(frozen=True)
class Candidate:
    """A configuration to compile, where it comes from, and the model's estimate
    before compiling."""

    config: KernelConfig
    origin: str
    """`baseline` (what `config_for` picks), `neighbour NAME` (one of its rule's
    alternatives, `affinec.tuning.neighbours`) or `space`."""
    estimate: Prediction


@dataclass(frozen=True)
class Space:
    """The candidates of a spec and how many configurations they were chosen from."""

    spec: Spec
    candidates: tuple[Candidate, ...]
    considered: int
    """Configurations enumerated before the model kept `candidates`."""
    over_capacity: int
    """Of those, dropped because their shared tiles cannot fit."""

    @property
    def configs(self) -> list[KernelConfig]:
        return [c.config for c in self.candidates]


def search_space(
    spec: Spec,
    *,
    max_candidates: int = MAX_CANDIDATES,
    arch: str = DEFAULT_PLANNING_ARCH,
    capacity: int | None = None,
) -> Space:
    """The candidates for `spec` on `arch` (`NotTunable` for an outer product), each
    block's shared tiles within `capacity` (by default `shared_capacity(arch)`)."""
    if max_candidates < 1:
        raise ValueError(f"max_candidates must be at least 1, got {max_candidates}")
    problem = problem_of(spec)
    baseline = config_for(spec, arch=arch)
    # the routes and split counts are drawn around the spec's own grid
    unsplit = config_for(spec, arch=arch, splits=1, flatten_pixels=False)
    given_capacity = capacity
    if capacity is None:
        capacity = shared_capacity(chip(arch))
    considered = over = 0
    routes: dict[str, list[tuple[KernelConfig, Prediction]]] = {"mma": [], "simt": []}
    generators = {"simt": _simt_configs(problem)}
    channels = problem.reduction_extents[problem.reduction_channel]
    if not tensor_cores_take(spec):
        pass  # a grouped convolution in NCHW: the SIMT route only
    elif spec.dtype != "f32" and channels >= MMA_MIN_CHANNELS:
        generators["mma"] = _mma_configs(problem)
    elif spec.dtype != "f32" and unsplit.pad_channels > 1:
        # channels padded with zeros (3 as 4): the coalesced route of the padded spec
        assert isinstance(spec, ConvSpec)
        padded = problem_of(replace(spec, c=unsplit.pad_channels))
        generators["mma"] = (
            replace(c, pad_channels=unsplit.pad_channels)
            for c in _mma_configs(padded, coalesced=True)
        )
    elif spec.dtype != "f32" and unsplit.coalesce_reduction:
        generators["mma"] = _mma_configs(problem, coalesced=True)
    for splits in _split_counts(problem, unsplit):
        # Few blocks: the unsplit route over one split's channels, S times the
        # blocks (a padded or coalesced route keeps to its few channels unsplit).
        route = "mma" if unsplit.mma else "simt"
        if unsplit.pad_channels > 1 or unsplit.coalesce_reduction:
            break
        one = split_problem(problem, splits)
        made = _mma_configs(one) if unsplit.mma else _simt_configs(one)
        generators[f"{route}/{splits}"] = (replace(c, splits=splits) for c in made)
    if flattens(spec) and generators.get("mma") is not None:
        # a 1x1 convolution as the product of its flattened pixels: its M tiled freely
        product = problem_of(flattened_spec(spec))
        generators["mma/flat"] = (
            replace(c, flatten_pixels=True) for c in _mma_configs(product)
        )
    if chip(arch).has("wgmma"):
        # one block a multiprocessor is how these kernels run: the chip's whole
        # share of a block, unless a capacity was given
        generators["wgmma"] = wgmma_configs(
            spec, given_capacity or chip(arch).max_shared_per_block, SPLITS
        )
    routes.update({r: [] for r in generators if r not in routes})
    any_batch = isinstance(spec, ConvSpec) and spec.dynamic_batch
    for route, configs in generators.items():
        for config in configs:
            considered += 1
            if any_batch and not takes_any_batch(config):
                continue
            if config.wgmma:
                estimate = predict(problem, config)
                if estimate.feasible:
                    routes[route].append((config, estimate))
                continue
            g = geometry(problem, config)
            if g.shared_bytes(problem.element_bytes) > capacity:
                over += 1
                continue
            estimate = predict(problem, config, g=g)
            if estimate.feasible:
                routes[route].append((config, estimate))
    mma = [ce for r, scored in routes.items() if r.startswith("mma") for ce in scored]
    simt = [ce for r, scored in routes.items() if r.startswith("simt") for ce in scored]
    taken = {baseline}
    near = []
    for name, config in neighbours(spec, arch):
        if any_batch and not takes_any_batch(config):
            continue
        try:
            estimate = predict(problem, config)
        except ValueError:  # knobs the model cannot describe: the passes decide
            continue
        taken.add(config)
        near.append(Candidate(config, f"neighbour {name}", estimate))
    near = near[:max_candidates]
    budget = max_candidates - len(near)
    mma_quota = round(budget * MMA_SHARE) if mma else 0
    chosen_mma = _choose(problem, mma, mma_quota)
    chosen = chosen_mma + _choose(problem, simt, budget - len(chosen_mma))
    if len(chosen) < budget:  # the SIMT route had fewer: give the rest back
        chosen += _choose(problem, mma, budget - len(chosen), skip=chosen)
    chosen += best_per_tile_and_schedule(routes.get("wgmma", []))
    candidates = [Candidate(baseline, "baseline", predict(problem, baseline))]
    candidates += near
    candidates += [
        Candidate(c, "space", e)
        for c, e in sorted(chosen, key=lambda ce: ce[1].ms)
        if c not in taken
    ]
    return Space(spec, tuple(candidates), considered, over)


SPLITS = (2, 4, 8, 16)
"""Split counts the space may try (`affinec-split-reduction`) for a spec whose
baseline launches fewer blocks than the chip has multiprocessors: the two largest
that keep the grid within `MAX_SPLIT_WAVES` of the chip."""
MAX_SPLIT_WAVES = 1.5


def _split_counts(problem: Problem, baseline: KernelConfig) -> list[int]:
    """The split counts worth trying: none for a grid that fills the chip."""
    blocks = geometry(problem, baseline).blocks
    if blocks >= H100.multiprocessors:
        return []
    channels = problem.reduction_extents[problem.reduction_channel]
    fit = [
        s
        for s in SPLITS
        if channels // s >= MIN_SPLIT_CHANNELS
        and blocks * s <= MAX_SPLIT_WAVES * H100.multiprocessors
    ]
    return fit[-2:]


def _choose(
    problem: Problem,
    scored: list[tuple[KernelConfig, Prediction]],
    quota: int,
    skip: list[tuple[KernelConfig, Prediction]] | None = None,
) -> list[tuple[KernelConfig, Prediction]]:
    """The best `quota` by estimate, at most `PER_BLOCK_TILE` per block tile (and
    split count)."""
    taken = {c for c, _ in skip or []}
    per_tile: Counter[tuple] = Counter((c.tile_sizes, c.splits) for c in taken)
    out = []
    for config, estimate in sorted(scored, key=lambda ce: ce[1].ms):
        if len(out) >= quota:
            break
        tile = (config.tile_sizes, config.splits)
        if config in taken or per_tile[tile] >= PER_BLOCK_TILE:
            continue
        per_tile[tile] += 1
        out.append((config, estimate))
    return out


# -- the two routes --------------------------------------------------------------------------


def _simt_configs(problem: Problem) -> Iterator[KernelConfig]:
    reductions = _reduction_choices(problem)
    for tiles in _block_tiles(problem, mma=False):
        for registers in _register_tiles(problem, tiles):
            for rtiles in reductions:
                dma = any(dma_copies(problem, KernelConfig(), tiles, rtiles))
                for unroll in _unrolls(rtiles):
                    for stages in SIMT_STAGES if dma else SIMT_STAGES[:1]:
                        yield KernelConfig(
                            tile_sizes=tiles,
                            reduction_tile_sizes=rtiles,
                            register_tile=registers,
                            unroll_steps=unroll,
                            stages=stages,
                        )


def _mma_configs(problem: Problem, coalesced: bool = False) -> Iterator[KernelConfig]:
    """Tensor-core configurations; `coalesced`: the filter rows' columns x channels
    as the MMA's k (affinec-coalesce-reduction), one filter row or the whole window
    a step."""
    reductions = (
        _coalesced_reductions(problem) if coalesced else _mma_reductions(problem)
    )
    every_pixel = math.prod(problem.extents[d] for d in problem.pixels)
    for tiles in _block_tiles(problem, mma=True):
        pixels = math.prod(tiles[d] for d in problem.pixels)
        channels = tiles[problem.channel]
        low = _min_threads(problem)
        for wm in WARPS:
            for wn in WARPS:
                mt = ceil_div(pixels, MMA_M * wm)
                nt = ceil_div(channels, MMA_N * wn)
                used = pixels * channels / (mt * MMA_M * wm * nt * MMA_N * wn)
                # A block of all the problem's pixels (a 7x7 image at batch 1)
                # cannot waste less than its last MMA row's padding.
                least = MIN_TILE_EFFICIENCY
                if pixels == every_pixel and mt * wm == ceil_div(pixels, MMA_M):
                    least *= pixels / (ceil_div(pixels, MMA_M) * MMA_M)
                if (
                    mt * nt > MAX_MMA_TILES
                    or not low <= WARP_SIZE * wm * wn <= THREADS[1]
                    or used < least
                ):
                    continue
                for rtiles in reductions:
                    steps = math.prod(
                        ceil_div(e, t)
                        for e, t in zip(problem.reduction_extents, rtiles, strict=True)
                    )
                    # Stages past the steps would compile to the same kernel.
                    depths = [s for s in MMA_STAGES if s <= max(2, steps)]
                    for stages, unroll, staged in itertools.product(
                        depths,
                        _tap_unrolls(problem, rtiles, coalesced),
                        _output_stagings(problem),
                    ):
                        yield KernelConfig(
                            tile_sizes=tiles,
                            reduction_tile_sizes=rtiles,
                            reassociate=True,
                            coalesce_reduction=coalesced,
                            mma=True,
                            warp_grid=(wm, wn),
                            unroll_taps=unroll,
                            stages=stages,
                            stage_output=staged,
                        )


SMALL_PROBLEM = 64 * 256
"""Outputs of a problem too small to fill blocks of 64 threads (tests' specs)."""
MIN_BLOCK_OUTPUTS = 1024


def _min_threads(problem: Problem) -> int:
    """64 threads a block, or one warp for very small problems."""
    return THREADS[0] if math.prod(problem.extents) >= SMALL_PROBLEM else 32


# -- block tiles -----------------------------------------------------------------------------


def tile_choices(extent: int, limit: int) -> list[int]:
    """Tiles along `extent` up to `limit`: its divisors, and powers of two that are
    near-divisors (the last tile wastes at most an eighth)."""
    top = min(extent, limit)
    out = {t for t in range(1, top + 1) if extent % t == 0}
    p = 1
    while p <= top:
        if tile_efficiency(extent, p) >= MIN_TILE_EFFICIENCY:
            out.add(p)
        p *= 2
    return sorted(out)


def _block_tiles(problem: Problem, mma: bool) -> list[tuple[int, ...]]:
    """Pixel shapes x channel tiles of at least `MIN_BLOCK_OUTPUTS` outputs (fewer
    for small problems), as `tile_sizes`."""
    out = []
    least = min(MIN_BLOCK_OUTPUTS, math.prod(problem.extents) // 16)
    for shape in _pixel_shapes(problem, mma):
        for channels in _channel_tiles(problem, mma):
            if math.prod(shape.values()) * channels < least:
                continue
            tiles = [1] * len(problem.extents)
            for d, t in shape.items():
                tiles[d] = t
            tiles[problem.channel] = channels
            out.append(tuple(tiles))
    return out


def _pixel_shapes(problem: Problem, mma: bool) -> list[dict[int, int]]:
    """Tiles of the pixel dimensions (innermost first: the inner two freely, an
    outer one only when the inner ones are whole), 32 to 256 pixels, the least
    wasteful few per size class."""
    dims = problem.pixels
    extents = problem.extents
    total = math.prod(extents[d] for d in dims)
    low, high = min(BLOCK_PIXELS[0], total), BLOCK_PIXELS[1]
    limit = high if len(dims) == 1 else MAX_PIXEL_TILE
    shapes: list[dict[int, int]] = []

    def extend(k: int, shape: dict[int, int], whole: bool) -> None:
        size = math.prod(shape.values())
        if k == len(dims):
            if low <= size <= high:
                shapes.append(dict(shape))
            return
        d = dims[k]
        choices = tile_choices(extents[d], limit) if k < 2 or whole else [1]
        for t in choices:
            if size * t > high:
                break
            shape[d] = t
            extend(k + 1, shape, whole and t == extents[d])
            del shape[d]

    extend(0, {}, True)
    if mma:
        shapes = [
            s
            for s in shapes
            if tile_efficiency(math.prod(s.values()), MMA_M) >= MIN_TILE_EFFICIENCY
            or math.prod(s.values()) == total
        ]

    def waste(shape: dict[int, int]) -> tuple[float, int, float]:
        efficiency = math.prod(tile_efficiency(extents[d], t) for d, t in shape.items())
        inner = shape[dims[0]]
        aspect = abs(math.log(inner / shape[dims[1]])) if len(dims) > 1 else 0.0
        return (-efficiency, -inner, aspect)

    classes: dict[int, list[dict[int, int]]] = {}
    for s in shapes:
        classes.setdefault(round(math.log2(math.prod(s.values()))), []).append(s)
    return [
        s
        for group in classes.values()
        for s in sorted(group, key=waste)[:SHAPES_PER_SIZE]
    ]


def _channel_tiles(problem: Problem, mma: bool) -> list[int]:
    k = problem.extents[problem.channel]
    out = {
        t
        for t in CHANNEL_TILES
        if t <= k and tile_efficiency(k, t) >= MIN_TILE_EFFICIENCY
    }
    if k <= CHANNEL_TILES[-1]:
        out.add(k)
    if mma:
        out = {
            t for t in out if tile_efficiency(t, MMA_N) >= MIN_TILE_EFFICIENCY or t == k
        }
    return sorted(out)


# -- thread work -------------------------------------------------------------------------------


def _register_tiles(problem: Problem, tiles: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Register tiles of 4 to 64 outputs a thread that leave 64 to 512 threads: up
    to 8 output channels, and up to 8 pixels taken along the innermost pixel
    dimension first, each a divisor of the block tile."""
    channels = tiles[problem.channel]
    low = _min_threads(problem)
    out: list[tuple[int, ...]] = []
    for rk in REGISTER_SIZES:
        if rk > channels or channels % rk:
            continue
        for want in REGISTER_SIZES:
            registers = [1] * len(tiles)
            registers[problem.channel] = rk
            left = want
            for d in problem.pixels:
                registers[d] = _divisor_at_most(tiles[d], left)
                left = max(1, left // registers[d])
            outputs = math.prod(registers)
            threads = math.prod(
                ceil_div(t, r) for t, r in zip(tiles, registers, strict=True)
            )
            if (
                REGISTER_OUTPUTS[0] <= outputs <= REGISTER_OUTPUTS[1]
                and low <= threads <= THREADS[1]
                and tuple(registers) not in out
            ):
                out.append(tuple(registers))
    return out


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, max(limit, 1)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _reduction_choices(problem: Problem) -> list[tuple[int, ...]]:
    """SIMT reduction steps that keep the order of summation: dimensions before the
    cut in tiles of 1, the cut one in near-divisor tiles, the rest whole; 4 to 72
    points a step."""
    extents = problem.reduction_extents
    total = math.prod(extents)
    sizes: set[tuple[int, ...]] = set()
    for j, e in enumerate(extents):
        for t in tile_choices(e, e):
            sizes.add((1,) * j + (t,) + tuple(extents[j + 1 :]))
    return [
        s
        for s in sorted(sizes)
        if min(SIMT_STEP[0], total) <= math.prod(s) <= SIMT_STEP[1]
    ]


def _mma_reductions(problem: Problem) -> list[tuple[int, ...]]:
    """Tensor-core steps, in any order (`reassociate`: the MMA sums in its own order
    anyway): one filter tap and 16, 32 or 64 channels (near-divisors of the
    channels, in 16-byte rows), and for a filter of several taps one filter row or
    the whole window (the input tile's halo copied once for all its taps) and 16 or
    32 channels, as `config_for` steps it."""
    extents = problem.reduction_extents
    names = problem.reduction_names
    channels = extents[problem.reduction_channel]
    steps = [
        step
        for step in MMA_CHANNEL_STEPS
        if step <= channels
        and step % 8 == 0
        and (
            channels % step == 0
            or tile_efficiency(channels, step) >= MIN_TILE_EFFICIENCY
        )
    ]
    whole = dict(zip(names, extents, strict=True))
    windows: list[dict[str, int]] = [{}]
    if "r" in whole and whole["r"] * whole["s"] > 1:
        windows += [{"s": whole["s"]}, {"r": whole["r"], "s": whole["s"]}]
    out: list[tuple[int, ...]] = []
    for window in windows:
        for step in steps if not window else steps[:2]:
            sizes = {name: window.get(name, 1) for name in names}
            sizes[names[problem.reduction_channel]] = step
            tiles = tuple(sizes[name] for name in names)
            if tiles not in out:
                out.append(tiles)
    return out


def _output_stagings(problem: Problem) -> list[bool]:
    """Whether to stage the output through shared memory: both ways for 16-bit
    outputs (H100: 10-16 % faster for three of the benchmark convolutions, 1-2 %
    slower for two), never for f32 ones (tf32's conv1 8 % slower)."""
    return [False, True] if problem.element_bytes == 2 else [False]


def _tap_unrolls(
    problem: Problem, rtiles: tuple[int, ...], coalesced: bool
) -> list[bool]:
    """Whether to unroll a step's taps: both ways when the step spans several taps
    outside the k loop (H100: the 3x3 64-channel convolution 8 % faster unrolled,
    the 256-512 one 3 % slower)."""
    names = problem.reduction_names
    looped = "r" if coalesced else "rs"  # coalescing makes the columns part of k
    taps = math.prod(t for n, t in zip(names, rtiles, strict=True) if n in looped)
    return [False, True] if taps > 1 else [False]


def _coalesced_reductions(problem: Problem) -> list[tuple[int, ...]]:
    """One filter row a step, or the whole window (columns and channels whole)."""
    names = problem.reduction_names
    whole = dict(zip(names, problem.reduction_extents, strict=True))
    return [
        tuple(rows if n == "r" else whole[n] for n in names)
        for rows in sorted({1, whole["r"]})
    ]


def _unrolls(rtiles: tuple[int, ...]) -> list[int]:
    """Steps of the innermost reduction loop unrolled together: none, or 2 or 4
    dividing its tile."""
    last = rtiles[-1]
    return [u for u in UNROLL_STEPS if u == 0 or (u <= last and last % u == 0)]
