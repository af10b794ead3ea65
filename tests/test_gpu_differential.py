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
    compile_pair,
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
    """The wgmma route's configurations from the tuner's space on sm_90a."""
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
