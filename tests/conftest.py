"""Hypothesis profiles: `ci` (what `make test` runs: derandomized, the same examples
every run, and few of them so that the whole suite stays within minutes on two
cores), `dev` (the default), `thorough`, and `fuzz` (for `tests/test_fuzz.py`: minutes
of mutated modules). A slow property that sets its own count scales it with the
profile through `strategies.examples`.

    HYPOTHESIS_PROFILE=thorough pytest tests/test_frontend.py
"""

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}

settings.register_profile("ci", derandomize=True, max_examples=10, **_COMMON)
settings.register_profile("dev", max_examples=40, **_COMMON)
settings.register_profile("thorough", max_examples=400, **_COMMON)
# For tests/test_fuzz.py: 1,500 mutated modules per level, minutes in all.
settings.register_profile("fuzz", max_examples=1500, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# The compiler verifies once, at the end; the tests verify after every pass, as
# affinec-opt does (a pass that breaks the IR is named, not a later one).
os.environ.setdefault("AFFINEC_VERIFY_EACH", "1")


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where numba.cuda finds a GPU (`make gpu-test`).

    The tests that share a module-scoped fixture of this suite (a Ray cluster, a
    tuning) go to one xdist worker (`xdist_group`, which `--dist loadgroup` honours):
    spread over both, each worker would build the fixture again."""
    import pytest

    from affinec.backend.runtime import cuda_available

    for item in items:
        group = _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU available (run `make gpu-test` on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _shared_fixture_group(item) -> str | None:
    """The test's file when it uses a module-scoped fixture of the suite's own (those
    of pytest and its plugins have no base id)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for definitions in info.name2fixturedefs.values():
        if definitions[-1].scope == "module" and definitions[-1].baseid:
            return item.nodeid.split("::")[0]
    return None
