"""Random convolutions x configurations from the tuner's space, against float64.

On a GPU (`make gpu-test`): a fixed few hundred pairs, none may be wrong or crash
(`scripts/gpu_differential.py` runs as many as asked). Without one: a few pairs
compiled to PTX, so that every configuration the tuner may pick gets through the
passes' static checks or is refused with a diagnostic, never a crash.
"""

import pytest

from affinec.tuning.differential import (
    COMPILED,
    CORRECT,
    REFUSED,
    TAPS_SS,
    TAPS_SS_RULE,
    WARP_SPECIALIZE,
    compile_pair,
    hopper_pairs,
    random_pairs,
    run_pair,
)

GPU_PAIRS = 240


@pytest.mark.gpu
@pytest.mark.parametrize("k", range(GPU_PAIRS))
def test_random_pairs_match_float64(k):
    pair = _gpu_pairs()[k]
    outcome = run_pair(pair, seed=k)
    assert outcome.status in (CORRECT, REFUSED), (
        f"{pair.describe()}: {outcome.status} {outcome.error} {outcome.reason}"
    )


WGMMA_PAIRS = 120


@pytest.mark.gpu
@pytest.mark.parametrize("k", range(WGMMA_PAIRS))
def test_random_wgmma_pairs_match_float64(k):
    """The wgmma route's configurations from the tuner's space on sm_90a, and the
    Hopper routes the space does not offer (`hopper_pairs`)."""
    from numba import cuda

    if cuda.get_current_device().compute_capability != (9, 0):
        pytest.skip("wgmma needs an H100 (sm_90a)")
    pair = _wgmma_pairs()[k]
    outcome = run_pair(pair, seed=k, arch="sm_90a")
    assert outcome.status in (CORRECT, REFUSED), (
        f"{pair.describe()}: {outcome.status} {outcome.error} {outcome.reason}"
    )


def test_random_wgmma_pairs_compile():
    for pair in random_pairs(seed=3, count=4, per_spec=2, arch="sm_90a",
                             wgmma_only=True):  # fmt: skip
        assert pair.route() in ("wgmma", "wgmma-pass")
        outcome = compile_pair(pair, "sm_90a")
        assert outcome.status == COMPILED, f"{pair.describe()}: {outcome.reason}"


def test_the_hopper_routes_pairs_compile_and_assemble_for_sm_90a():
    """Of the routes the tuner's space does not offer, a pair of each kind drawn
    (the descriptor route by TMA, by cp.async, at a stride of 2; its rule's block;
    warp specialization of a product and of a 1x1's flattened pixels) through the
    whole pipeline to PTX that ptxas assembles for sm_90a."""
    from affinec.backend.ptxas import assemble, find_ptxas
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    pairs = hopper_pairs(
        13, {TAPS_SS: 12, TAPS_SS_RULE: 1, WARP_SPECIALIZE: 8}, "sm_90a"
    )
    kinds = {
        "tma": lambda p: p.route() == TAPS_SS and p.config.tma,
        "cp.async": lambda p: p.route() == TAPS_SS and not p.config.tma,
        "strided": lambda p: p.route() == TAPS_SS and p.spec.stride == (2, 2),
        "rule": lambda p: p.route() == TAPS_SS_RULE,
        "product": lambda p: (
            p.route() == WARP_SPECIALIZE and not isinstance(p.spec, ConvSpec)
        ),
        "flattened": lambda p: (
            p.route() == WARP_SPECIALIZE and isinstance(p.spec, ConvSpec)
        ),
    }

    def cost(pair) -> int:  # the fewest taps and channels: the quickest to compile
        spec = pair.spec
        return spec.r * spec.s * spec.c if isinstance(spec, ConvSpec) else spec.k

    chosen: list = []
    for kind in kinds.values():
        if not any(kind(p) for p in chosen):
            chosen.append(min((p for p in pairs if kind(p)), key=cost))
    for pair in chosen:
        compiled = compile_to_ptx(pair.spec, pair.config, arch="sm_90a")
        assert ".target sm_90a" in compiled.ptx
        if pair.route() == WARP_SPECIALIZE:
            assert "setmaxnreg.dec.sync.aligned.u32" in compiled.ptx
        if pair.config.tma:
            assert "cp.async.bulk.tensor" in compiled.ptx, pair.describe()
        if find_ptxas() is not None:
            assert assemble(compiled.ptx, "sm_90a"), pair.describe()


def test_random_pairs_compile_or_are_refused():
    for pair in random_pairs(seed=2, count=6, per_spec=2):
        outcome = compile_pair(pair, "sm_90")
        assert outcome.status in (COMPILED, REFUSED), (
            f"{pair.describe()}: {outcome.reason}"
        )


_PAIRS: list = []
_WGMMA_PAIRS: list = []


def _wgmma_pairs() -> list:
    if not _WGMMA_PAIRS:
        _WGMMA_PAIRS.extend(
            random_pairs(seed=0, count=WGMMA_PAIRS, arch="sm_90a", wgmma_only=True)
        )
    return _WGMMA_PAIRS


def _gpu_pairs() -> list:
    if not _PAIRS:
        _PAIRS.extend(random_pairs(seed=0, count=GPU_PAIRS))
    return _PAIRS
