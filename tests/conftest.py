"""Hypothesis profiles: `ci` (what `make test` runs: derandomized, the same examples
every run, and few of them so that the whole suite stays within minutes on two
cores), `dev` (the default), `thorough`, and `fuzz` (for `tests/test_fuzz.py`: minutes
of mutated modules). A slow property that sets its own count scales it with the
profile through `strategies.examples`.

    HYPOTHESIS_PROFILE=thorough pytest tests/test_frontend.py
"""

import os
from pathlib import Path

import pytest
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

# One thread for torch's and OpenBLAS's arithmetic (OpenMP's setting, which both
# read when they load; the notebooks and doc blocks the tests start inherit it):
# beside the other xdist worker on two busy cores their threads spun waiting for
# each other, and a MobileNet-v2 of test_torch_front_door took 72 s of CPU instead
# of 3.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The compiler verifies once, at the end; the tests verify after every pass, as
# affinec-opt does (a pass that breaks the IR is named, not a later one).
os.environ.setdefault("AFFINEC_VERIFY_EACH", "1")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the directory above the workers' own temporary ones, for
    what one worker builds and the others read (`fuzzing.seeds`): xdist gives each
    worker a base temporary directory of its own inside one for the run."""
    if "PYTEST_XDIST_WORKER" in os.environ and config.option.basetemp:
        shared = Path(config.option.basetemp).parent
        shared.mkdir(parents=True, exist_ok=True)
        os.environ["AFFINEC_TESTS_SHARED"] = str(shared)


SLOW_FIRST = (
    "test_wgmma_taps_ss.py",
    "test_ray_tuning.py",
    "test_wgmma_rule.py",
    "test_doc_blocks.py",
    "test_wgmma_taps.py",
    "test_wgmma_gemm.py",
    "test_mma_pass.py",
    "test_race_soundness.py",
    "test_wgmma_tma.py",
    "test_fuzz.py",
    "test_tuning.py",
    "test_torch_front_door.py",
    "test_depthwise_vectors.py",
    "test_differential_coverage.py",
    "test_mlir_interop.py",
    "test_flatten_pixels.py",
    "test_lockstep.py",
    "test_notebooks.py",
    "test_coalescing.py",
    "test_wgmma_pipeline.py",
    "test_split_reduction.py",
    "test_tuning_zoo.py",
    "test_mlir_execution.py",
    "test_hopper_lowering.py",
)
"""The files whose tests take longest (by their longest test's CPU time, then the
file's), the longest first. xdist hands the tests out in collection order, a few at
a time, and a worker that runs out waits for the other at the end: in alphabetical
order the Hopper files' tests of 10-15 s each came last, one worker finishing them
while the other sat idle. Run first, the cheap tests even the end. A file missing
here runs in its alphabetical place: add a slow new one."""


def _slow_first(items: list) -> None:
    """Reorder `items` in place: the files of SLOW_FIRST in its order, then the rest
    as collected (the order within a file kept)."""
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    first = len(SLOW_FIRST)
    keyed = [(rank.get(item.path.name, first), n) for n, item in enumerate(items)]
    order = sorted(range(len(items)), key=keyed.__getitem__)
    items[:] = [items[n] for n in order]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where numba.cuda finds a GPU (`make gpu-test`).

    The tests that share a module-scoped fixture of this suite (a Ray cluster, a
    tuning) go to one xdist worker (`xdist_group`, which `--dist loadgroup` honours):
    spread over both, each worker would build the fixture again. The slowest files
    run first (SLOW_FIRST)."""
    from affinec.backend.runtime import cuda_available

    _slow_first(items)
    grouping = getattr(config.option, "loadgroup", False)  # set in xdist's workers
    for item in items:
        group = _shared_fixture_group(item)
        if group is not None and config.pluginmanager.hasplugin("xdist"):
            item.add_marker(pytest.mark.xdist_group(group))
            if grouping:
                _join_group(item, group)
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU available (run `make gpu-test` on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _join_group(item, group: str) -> None:
    """Put `item` in xdist's work unit `group` (`--dist loadgroup`).

    xdist 3.8 reads an item's group off the end of its id (`...::test@group`), which
    its own hook appends by setting `item._nodeid`; pytest 9.2 keeps the id as
    `item._id` (a NodeId) and ignores that, so every grouped test ran wherever it
    fell, and each worker built the module's Ray cluster and tuning again. Where the
    id is a NodeId this appends the group itself (this hook runs before xdist's);
    under an older pytest xdist's own suffix still works."""
    node_id = getattr(item, "_id", None)
    if node_id is None or isinstance(node_id, str):
        return
    item._id = type(node_id).parse(f"{item.nodeid}@{group}")
    if not item.nodeid.endswith(f"@{group}"):
        raise pytest.UsageError(f"{item.nodeid}: could not join xdist group {group}")


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
