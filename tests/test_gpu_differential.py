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


def test_random_pairs_compile_or_are_refused():
    for pair in random_pairs(seed=2, count=6, per_spec=2):
        outcome = compile_pair(pair, "sm_90")
        assert outcome.status in (COMPILED, REFUSED), (
            f"{pair.describe()}: {outcome.reason}"
        )


_PAIRS: list = []


def _gpu_pairs() -> list:
    if not _PAIRS:
        _PAIRS.extend(random_pairs(seed=0, count=GPU_PAIRS))
    return _PAIRS
