"""Hypothesis profiles: `ci` (what `make test` runs: derandomized and bounded so the
whole suite stays well inside CI's time), `dev` (the default), `thorough`, and `fuzz`
(for `tests/test_fuzz.py`: minutes of mutated modules).

    HYPOTHESIS_PROFILE=thorough pytest tests/test_frontend.py
"""

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

settings.register_profile("ci", derandomize=True, max_examples=20, **_COMMON)
settings.register_profile("dev", max_examples=40, **_COMMON)
settings.register_profile("thorough", max_examples=400, **_COMMON)
# For tests/test_fuzz.py: 1,500 mutated modules per level, minutes in all.
settings.register_profile("fuzz", max_examples=1500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The compiler verifies once, at the end; the tests verify after every pass, as
# affinec-opt does (a pass that breaks the IR is named, not a later one).
os.environ.setdefault("AFFINEC_VERIFY_EACH", "1")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where numba.cuda finds a GPU (`make gpu-test`)."""
    import pytest

    from affinec.backend.runtime import cuda_available

    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU available (run `make gpu-test` on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
