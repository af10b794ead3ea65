"""The differential campaign's draw covers every route and knob the compiler
accepts (`affinec.tuning.differential.random_pairs`), so that a run of a few thousand
pairs checks each of them on the GPU."""

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.tuning.differential import (
    TAPS_SS,
    TAPS_SS_RULE,
    WARP_SPECIALIZE,
    Pair,
    hopper_counts,
    hopper_pairs,
    random_pairs,
)


def test_the_draw_covers_every_route_and_knob():
    pairs = random_pairs(seed=11, count=300, arch="sm_90a")
    assert len(pairs) == 300
    routes = {p.route() for p in pairs}
    knobs = {k for p in pairs for k in p.knobs()}
    assert {"simt", "mma", "wgmma", TAPS_SS, TAPS_SS_RULE, WARP_SPECIALIZE} <= routes
    assert {"product", "split-k", "flattened", "grouped", "depthwise", "any-batch",
            "residual", "torch", "tma", "cp.async", "strided"} <= knobs  # fmt: skip
    for p in pairs:
        if isinstance(p.spec, ConvSpec) and p.spec.dynamic_batch:
            assert p.run_batch and p.run_batch != p.spec.n, p.describe()
            assert p.run_spec().n == p.run_batch
        else:
            assert not p.run_batch
        assert not p.torch_inputs or p.spec.dtype == "bf16"
        assert not p.config.wgmma or p.route() == "wgmma"


def test_a_pair_describes_how_it_runs():
    spec = ConvSpec(n=2, c=8, h=5, w=5, k=8, r=3, s=3, dtype="bf16", dynamic_batch=True)
    from affinec.driver.config import config_for

    pair = Pair(spec, config_for(spec), run_batch=5, torch_inputs=True)
    text = pair.describe()
    assert "run at batch 5" in text and "torch tensors" in text
    assert {"any-batch", "torch"} <= set(pair.knobs())


def test_the_hopper_routes_have_their_share_on_sm_90a_only():
    assert hopper_counts(1500, "sm_90a") == {
        TAPS_SS: 60,
        TAPS_SS_RULE: 30,
        WARP_SPECIALIZE: 60,
    }
    assert hopper_counts(50, "sm_90a") == {TAPS_SS: 2, TAPS_SS_RULE: 1,
                                           WARP_SPECIALIZE: 2}  # fmt: skip
    assert hopper_counts(1500, "sm_90") == {} == hopper_counts(1500, "sm_80")
    assert not {p.route() for p in random_pairs(seed=4, count=12)} & {
        TAPS_SS,
        TAPS_SS_RULE,
        WARP_SPECIALIZE,
    }


def test_the_other_pairs_of_a_seed_are_those_drawn_without_the_hopper_routes():
    """The new routes come last, from a stream of their own: the pairs before them
    are the first of the seed's draw without them, and a seed draws the same pairs
    again."""
    pairs = random_pairs(seed=13, count=30, arch="sm_90a")
    plain = random_pairs(seed=13, count=30, arch="sm_90a", hopper_routes=False)
    extra = sum(hopper_counts(30, "sm_90a").values())
    assert pairs[: 30 - extra] == plain[: 30 - extra]
    assert {p.route() for p in pairs[30 - extra :]} == {
        TAPS_SS,
        TAPS_SS_RULE,
        WARP_SPECIALIZE,
    }
    assert random_pairs(seed=13, count=30, arch="sm_90a") == pairs


def test_the_hopper_routes_draw_what_each_route_takes():
    from affinec.driver.wgmma_taps_ss_config import CHANNEL_STEP
    from affinec.driver.wgmma_taps_ss_rule import ss_config_for

    pairs = hopper_pairs(
        13, {TAPS_SS: 40, TAPS_SS_RULE: 6, WARP_SPECIALIZE: 30}, "sm_90a"
    )
    by_route: dict[str, list[Pair]] = {}
    for p in pairs:
        by_route.setdefault(p.route(), []).append(p)
    assert [len(by_route[r]) for r in (TAPS_SS, TAPS_SS_RULE, WARP_SPECIALIZE)] == [
        40,
        6,
        30,
    ]
    for p in by_route[TAPS_SS] + by_route[TAPS_SS_RULE]:
        spec, c = p.spec, p.config
        assert isinstance(spec, ConvSpec), p.describe()
        assert (spec.layout, spec.filter_layout, spec.groups) == ("nhwc", "rsck", 1)
        assert spec.dtype in ("f16", "bf16") and spec.c % CHANNEL_STEP == 0
        assert spec.r * spec.s > 1 or spec.stride != (1, 1)
        assert c.tensor_core == "wgmma" and c.mma and not c.warp_specialize
        assert c.reduction_tile_sizes == (1, 1, CHANNEL_STEP)
        assert len(c.tile_sizes) == 4 and not c.flatten_pixels
    ss = by_route[TAPS_SS]
    assert {p.config.tma for p in ss} == {True, False}
    assert {p.spec.stride for p in ss} == {(1, 1), (2, 2)}
    assert len({p.config.tile_sizes[:3] for p in ss}) > 10  # boxes of many shapes
    for p in by_route[TAPS_SS_RULE]:
        assert p.config == ss_config_for(p.spec), p.describe()
    ws = by_route[WARP_SPECIALIZE]
    for p in ws:
        c = p.config
        assert c.warp_specialize and c.tma and c.tensor_core == "wgmma", p.describe()
        assert c.tile_sizes[0] in (64, 128) and c.tile_sizes[1] % 8 == 0
        if isinstance(p.spec, ConvSpec):
            assert c.flatten_pixels and p.spec.r == p.spec.s == 1
    assert {type(p.spec) for p in ws} == {ConvSpec, MatmulSpec}
    assert {p.config.stages for p in ws} == {1, 2, 3, 4}
    assert {p.config.stage_output for p in ws} == {True, False}
    assert any(p.config.in_flight for p in ws)
