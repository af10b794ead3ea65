"""The differential campaign's draw covers every route and knob the compiler
accepts (`affinec.tuning.differential.random_pairs`), so that a run of a few thousand
pairs checks each of them on the GPU."""

from affinec.base.spec import ConvSpec
from affinec.tuning.differential import Pair, random_pairs


def test_the_draw_covers_every_route_and_knob():
    pairs = random_pairs(seed=11, count=300, arch="sm_90a")
    assert len(pairs) == 300
    routes = {p.route() for p in pairs}
    knobs = {k for p in pairs for k in p.knobs()}
    assert {"simt", "mma", "wgmma"} <= routes
    assert {"product", "split-k", "flattened", "grouped", "depthwise", "any-batch",
            "residual", "torch"} <= knobs  # fmt: skip
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
