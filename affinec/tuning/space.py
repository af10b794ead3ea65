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

The routes' generators and the knob choices above are
`affinec.tuning.space_routes`'s; `search_space` draws from them, adds split and
flattened variants and Hopper's kernels (`affinec.tuning.hopper_space`), and keeps
the candidates.

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

from collections import Counter
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
from affinec.hardware.chips import Chip, chip
from affinec.tuning import MAX_CANDIDATES
from affinec.tuning.cost import H100, Prediction, predict
from affinec.tuning.hopper_space import (
    best_per_tile_and_schedule,
    best_wgmma_pass,
    wgmma_configs,
    wgmma_pass_configs,
    window_configs,
)
from affinec.tuning.neighbours import neighbours
from affinec.tuning.problem import Problem, geometry, problem_of, split_problem
from affinec.tuning.space_routes import (  # noqa: F401 (the routes' knobs: public here too)
    MMA_STAGES,
    THREADS,
    mma_configs,
    simt_configs,
)

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
    alternatives, `affinec.tuning.neighbours`), `window kernel` (on sm_90a, Hopper's
    kernels of a convolution with taps or strides: `window_configs`) or `space`."""
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
    generators = {"simt": simt_configs(problem)}
    channels = problem.reduction_channels
    if not tensor_cores_take(spec):
        pass  # a grouped convolution in NCHW: the SIMT route only
    elif spec.dtype != "f32" and channels >= MMA_MIN_CHANNELS:
        generators["mma"] = mma_configs(problem)
    elif spec.dtype != "f32" and unsplit.pad_channels > 1:
        # channels padded with zeros (3 as 4): the coalesced route of the padded spec
        assert isinstance(spec, ConvSpec)
        padded = problem_of(replace(spec, c=unsplit.pad_channels))
        generators["mma"] = (
            replace(c, pad_channels=unsplit.pad_channels)
            for c in mma_configs(padded, coalesced=True)
        )
    elif spec.dtype != "f32" and unsplit.coalesce_reduction:
        generators["mma"] = mma_configs(problem, coalesced=True)
    for splits in _split_counts(problem, unsplit):
        # Few blocks: the unsplit route over one split's channels, S times the
        # blocks (a padded or coalesced route keeps to its few channels unsplit).
        route = "mma" if unsplit.mma else "simt"
        if unsplit.pad_channels > 1 or unsplit.coalesce_reduction:
            break
        one = split_problem(problem, splits)
        made = mma_configs(one) if unsplit.mma else simt_configs(one)
        generators[f"{route}/{splits}"] = (replace(c, splits=splits) for c in made)
    if flattens(spec) and generators.get("mma") is not None:
        # a 1x1 convolution as the product of its flattened pixels: its M tiled freely
        product = problem_of(flattened_spec(spec))
        generators["mma/flat"] = (
            replace(c, flatten_pixels=True) for c in mma_configs(product)
        )
    if chip(arch).has("wgmma"):
        # one block a multiprocessor is how these kernels run: the chip's whole
        # share of a block, unless a capacity was given
        generators["wgmma"] = wgmma_configs(
            spec, given_capacity or chip(arch).max_shared_per_block, SPLITS
        )
        # the tensor-core route's own configurations on affinec-wgmma: a product's,
        # a 1x1 convolution's through its flattened pixels
        if isinstance(spec, ConvSpec) and flattens(spec) and "mma" in generators:
            routed = (
                replace(c, flatten_pixels=True)
                for c in mma_configs(problem_of(flattened_spec(spec)))
            )
            generators["wgmma-pass"] = wgmma_pass_configs(routed)
        elif not isinstance(spec, ConvSpec) and "mma" in generators:
            generators["wgmma-pass"] = wgmma_pass_configs(mma_configs(problem))
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
    for config in window_configs(spec, arch):
        if config in taken or (any_batch and not takes_any_batch(config)):
            continue
        taken.add(config)
        near.append(Candidate(config, "window kernel", predict(problem, config)))
    near = near[:max_candidates]
    budget = max_candidates - len(near)
    mma_quota = round(budget * MMA_SHARE) if mma else 0
    chosen_mma = _choose(problem, mma, mma_quota)
    chosen = chosen_mma + _choose(problem, simt, budget - len(chosen_mma))
    if len(chosen) < budget:  # the SIMT route had fewer: give the rest back
        chosen += _choose(problem, mma, budget - len(chosen), skip=chosen)
    chosen += best_per_tile_and_schedule(routes.get("wgmma", []))
    chosen += best_wgmma_pass(routes.get("wgmma-pass", []))
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
    channels = problem.reduction_channels
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
