"""The autotuner (`affinec.tuning`) without a GPU: the search space and its legality,
the cost model, compiling in processes, a whole tuning with a fake measurer, the
cache, the command line and the GPU script.

Nothing here times anything: the fake measurer makes its times up, and the tests
look only at what the tuner does with them.
"""

import dataclasses
import json
import math
import runpy
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import affinec
from affinec.backend.ptxas import Resources
from affinec.backend.runtime import NoCudaGPU, cuda_available
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, occupancy, with_format
from affinec.driver.config import KernelConfig, config_for
from affinec.tools.cli import main as affinec_main
from affinec.tuning import (
    CacheError,
    Measurement,
    TuneOptions,
    TuningCache,
    cached_entry,
    compile_cached,
    compiler_version,
    default_path,
    entry_of,
    search_space,
    tune,
    write_log,
)
from affinec.tuning import cache as cache_module
from affinec.tuning.compiling import (
    COMPILED,
    REFUSED,
    Compilation,
    Compiled,
    compile_one,
    config_from_json,
    config_to_json,
)
from affinec.tuning.cost import Facts, instruction_mix, predict, resident_blocks
from affinec.tuning.log import read_log, records_by_spec
from affinec.tuning.problem import NotTunable, geometry, problem_of
from affinec.tuning.space import (
    MAX_CANDIDATES,
    MMA_STAGES,
    SHARED_CAPACITY,
    THREADS,
)
from affinec.tuning.stats import ranks, spearman
from affinec.tuning.tuner import (
    LAUNCH_FAILED,
    MEASURED,
    PRUNED,
    UNMEASURED,
    WRONG,
    Record,
    _absorb,
)
from strategies import conv_specs, examples

SMALL_F16 = ConvSpec(
    2, 16, 8, 8, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck", dtype="f16"
)
SMALL_F32 = ConvSpec(1, 8, 10, 10, 24, 3, 3, padding=1)
SMALL_MATMUL = MatmulSpec(64, 48, 40, "bf16", "bias-relu")
FAKE_GPU = "Fake GPU"


class FakeMeasurer:
    """Times made up from the configuration's text; the model's first pick (the
    first kernel measured after the baseline) is made the fastest and wrong, and
    with `fault_after` the GPU faults at that measurement."""

    def __init__(self, fault_after: int | None = None, confirm_fails: int = 0) -> None:
        self.gpu = FAKE_GPU
        self.broken = False
        self.calls: list[str] = []
        self.fault_after = fault_after
        self.confirm_fails = confirm_fails
        """How many winners are wrong on fresh inputs (a racy kernel)."""
        self.confirmed: list[str] = []

    def measure(self, kernel, final: bool = False) -> Measurement:
        described = kernel.info["config"]
        self.calls.append(described)
        if self.fault_after is not None and len(self.calls) > self.fault_after:
            self.broken = True
            return Measurement(False, reason="launch failed: illegal address")
        if len(self.calls) == 2 and not final:
            return Measurement(False, error=math.inf, reason="wrong: error inf")
        ms = 0.05 + (zlib.crc32(described.encode()) % 1000) / 1e4
        return Measurement(True, ms, 1e-4, seconds=0.01)

    def confirm(self, kernel, runs: int) -> Measurement:
        self.confirmed.append(kernel.info["config"])
        if len(self.confirmed) <= self.confirm_fails:
            return Measurement(False, error=0.5, reason="wrong on fresh inputs (run 2)")
        return Measurement(True, error=1e-4)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        return 0.1

    def close(self) -> None:
        pass


def _keeps_order(tiles: tuple[int, ...], extents: tuple[int, ...]) -> bool:
    """`affine-loop-tile`'s rule: 1s, then any tile, then whole extents."""
    return any(
        all(t == 1 for t in tiles[:j])
        and all(t == e for t, e in zip(tiles[j + 1 :], extents[j + 1 :], strict=True))
        for j in range(len(tiles))
    )


# -- the search space --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("resnet50-conv1", "f16"), ("conv3x3-256-512", "f32"), ("conv3x3-128", "f16")],
)
def test_the_space_of_a_design_convolution_is_bounded_and_keeps_the_order(name, dtype):
    spec = with_format(DESIGN_CONVOLUTIONS[name], dtype)
    space = search_space(spec)
    problem = problem_of(spec)
    configs = space.configs
    assert space.candidates[0].origin == "baseline"
    assert configs[0] == config_for(spec)
    assert len(configs) <= MAX_CANDIDATES + 1 < space.considered
    assert len(set(configs)) == len(configs)
    # ResNet-50's first layer has 4 input channels: the tensor cores' k is a filter
    # row's columns x channels (coalesced), on both routes
    assert any(c.mma for c in configs) == (name != "conv3x3-256-512")
    assert any(c.coalesce_reduction for c in configs) == (name == "resnet50-conv1")
    assert any(not c.mma for c in configs)
    for c in configs[1:]:
        assert len(c.tile_sizes) == len(problem.extents)
        g = geometry(problem, c)
        assert 32 <= g.block_pixels <= 256
        assert THREADS[0] <= g.threads <= THREADS[1], c
        if c.mma:  # the MMA sums in its own order: taps whole or one at a time
            assert c.reassociate and c.stages in MMA_STAGES
            assert c.stages <= max(2, g.steps)  # deeper compiles the same kernel
            assert g.mma_tiles[0] * g.mma_tiles[1] <= 32
            channel = problem.reduction_channel
            if c.coalesce_reduction:  # one filter row or the whole window
                assert c.reduction_tile_sizes in ((1, 7, 4), (7, 7, 4))
            else:
                assert c.reduction_tile_sizes[channel] in (16, 32, 64)
            for d, (t, e) in enumerate(
                zip(c.reduction_tile_sizes, problem.reduction_extents, strict=True)
            ):
                assert d == channel or t in (1, e), c
        else:
            assert not c.reassociate
            assert _keeps_order(c.reduction_tile_sizes, problem.reduction_extents), c
            assert 4 <= g.register_pixels * g.register_channels <= 64
        assert g.shared_bytes(problem.element_bytes) <= SHARED_CAPACITY


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 64, 14, 14, 64, 3, 3, padding=1, groups=2, layout="nhwc",
                 filter_layout="rsck", dtype="f16"),
        ConvSpec(1, 32, 14, 14, 32, 3, 3, padding=1, groups=32, layout="nhwc",
                 filter_layout="rsck", dtype="f16"),
        ConvSpec(1, 32, 8, 8, 32, 3, 3, padding=1, groups=2, dtype="f16"),
    ],
)  # fmt: skip
def test_grouped_convolutions_are_tuned_within_a_group(spec):
    # a block within one group (the tensor cores' k and n are the group's); the
    # tensor cores only where they take the layout; depthwise tiles its groups
    from affinec.frontend.contraction import contraction_of

    space = search_space(spec, max_candidates=20)
    names = [n for n, _ in contraction_of(spec).output_index]
    tiles = {c.tile_sizes[names.index("g")] for c in space.configs}
    if spec.groups == spec.k:  # depthwise: its groups are its channels
        assert max(tiles) > 1
    else:
        assert tiles == {1}
    if spec.layout == "nchw":
        assert not any(c.mma for c in space.configs)
    from affinec.driver.compiler import compile_to_ptx

    for config in space.configs[:3]:
        compile_to_ptx(spec, config, arch="sm_90")


@settings(max_examples=examples(15))
@given(conv_specs(max_channels=20, max_image=12))
def test_the_space_of_any_convolution_keeps_the_order(spec):
    space = search_space(spec, max_candidates=30)
    problem = problem_of(spec)
    assert space.configs[0] == config_for(spec)
    for c in space.configs[1:]:
        assert c.reassociate or _keeps_order(
            c.reduction_tile_sizes, problem.reduction_extents
        ), c
        assert not c.mma or spec.dtype != "f32"


@pytest.mark.parametrize(
    ("spec", "count"), [(SMALL_F16, 3), (SMALL_F32, 2), (SMALL_MATMUL, 1)]
)
def test_every_candidate_compiles_or_is_refused_with_a_reason(spec, count):
    space = search_space(spec, max_candidates=count)
    results = Compilation(spec.to_text(), space.configs, "sm_90", None).results()
    assert [r.index for r in results] == list(range(len(space.configs)))
    for r in results:
        assert r.status in (COMPILED, REFUSED), (r.config.describe(), r.reason)
        if r.status == REFUSED:
            assert r.reason
        else:
            assert r.kernel is not None and r.resources is not None
            assert r.mix is not None and r.mix.compute > 0
    assert any(r.config.mma for r in results if r.ok) == (spec.dtype != "f32")


@settings(max_examples=examples(3))
@given(conv_specs(max_channels=20, max_image=10), st.randoms(use_true_random=False))
def test_candidates_of_random_convolutions_compile_or_are_refused(spec, rng):
    space = search_space(spec, max_candidates=20)
    picks = space.configs[1:] or space.configs
    config = rng.choice(picks)
    result = compile_one(0, spec.to_text(), config_to_json(config), "sm_80")
    assert result.status in (COMPILED, REFUSED), (config.describe(), result.reason)


def test_a_configuration_over_the_shared_memory_is_refused_with_the_reason():
    spec = ConvSpec(
        1, 64, 32, 32, 64, 3, 3, padding=1, layout="nhwc", filter_layout="rsck"
    )
    config = KernelConfig(  # a 34x34x64 f32 input tile: 296 KiB
        tile_sizes=(1, 32, 32, 64),
        reduction_tile_sizes=(3, 3, 64),
        register_tile=(1, 1, 8, 8),
    )
    result = compile_one(0, spec.to_text(), config_to_json(config), "sm_90")
    assert result.status == REFUSED
    assert "bytes" in result.reason and "op" in result.reason


def test_spills_are_pruned_with_the_reason():
    record = Record(0, config_for(SMALL_F32), "baseline", 1.0)
    compiled = compile_one(
        0, SMALL_F32.to_text(), config_to_json(record.config), "sm_90"
    )
    assert compiled.resources is not None
    spilled = Compiled(
        0,
        record.config,
        COMPILED,
        kernel=compiled.kernel,
        resources=Resources(compiled.resources.kernel, "sm_90", 255, spill_stores=64),
    )
    _absorb(record, spilled, problem_of(SMALL_F32))
    assert record.status == PRUNED
    assert "64 bytes of spills" in record.reason


def test_ptxas_s_cost_notes_reach_the_log():
    record = Record(0, config_for(SMALL_F32), "baseline", 1.0)
    compiled = compile_one(
        0, SMALL_F32.to_text(), config_to_json(record.config), "sm_90"
    )
    assert compiled.resources is not None and compiled.resources.advisories == ()
    note = (
        "C7511 Potential Performance Loss: wgmma.mma_async instructions are serialized"
    )
    noted = Compiled(
        0,
        record.config,
        COMPILED,
        kernel=compiled.kernel,
        resources=dataclasses.replace(compiled.resources, advisories=(note,)),
    )
    _absorb(record, noted, problem_of(SMALL_F32))
    assert json.loads(json.dumps(record.to_json()))["ptxas_notes"] == [note]


def test_outer_products_are_not_tunable():
    with pytest.raises(NotTunable, match="convolutions and matrix products"):
        search_space(OuterSpec(8, 8))


def test_configurations_travel_as_json():
    config = KernelConfig(
        tile_sizes=(1, 8, 16, 64), warp_grid=(4, 2), mma=True, unroll_steps=2
    )
    assert config_from_json(json.loads(json.dumps(config_to_json(config)))) == config
    with pytest.raises(ValueError, match="unknown knob 'warp_size'"):
        config_from_json({"warp_size": 32})
    with pytest.raises(ValueError, match="list of integers"):
        config_from_json({"tile_sizes": "1,2"})
    with pytest.raises(ValueError, match="true or false"):
        config_from_json({"mma": 1})


# -- the cost model ------------------------------------------------------------------------------

LOOP_PTX = """
.visible .entry k(
{
    mov.u32 %r1, 0;
$L__BB0_1:
    bar.sync 0;
    ld.global.nc.f32 %f1, [%rd1];
$L__BB0_2:
    ld.shared.f32 %f2, [%r2];
    ld.shared.v4.f32 {%f3, %f4, %f5, %f6}, [%r3];
    fma.rn.f32 %f7, %f2, %f3, %f7;
    fma.rn.f32 %f8, %f2, %f4, %f8;
    add.s32 %r2, %r2, 4;
    setp.lt.u32 %p1, %r2, 64;
    @%p1 bra $L__BB0_2;
    @%p2 bra $L__BB0_1;
    ret;
}
"""


def test_the_instruction_mix_is_read_off_the_innermost_loop():
    mix = instruction_mix(LOOP_PTX)
    assert mix is not None and mix.in_loop
    assert (mix.total, mix.compute, mix.shared_loads, mix.barriers) == (7, 2, 2, 0)
    assert mix.per_compute == 3.5
    assert instruction_mix("ret;") is None


def test_residency_agrees_with_the_benchmarks_occupancy():
    for registers, threads in ((32, 128), (128, 256), (255, 64), (64, 1024)):
        warps = threads // 32
        assert resident_blocks(registers, threads, 0) * warps / 64 == occupancy(
            registers, threads, 0
        )
    assert resident_blocks(255, 1024, 0) == 0
    assert resident_blocks(32, 128, 120 * 1024) == 1


def test_the_model_prefers_tensor_cores_and_refuses_what_cannot_run():
    spec = with_format(DESIGN_CONVOLUTIONS["conv3x3-128"], "f16")
    problem = problem_of(spec)
    simt = predict(
        problem,
        KernelConfig(
            tile_sizes=(1, 7, 14, 64),
            reduction_tile_sizes=(1, 1, 8),
            register_tile=(1, 1, 7, 8),
        ),
    )
    mma = predict(
        problem,
        KernelConfig(
            tile_sizes=(1, 4, 28, 64),
            reduction_tile_sizes=(1, 1, 32),
            reassociate=True,
            mma=True,
            warp_grid=(2, 2),
            stages=3,
        ),
    )
    assert mma.feasible and simt.feasible
    assert mma.ms < simt.ms
    assert mma.work_efficiency == pytest.approx(112 * 64 / (128 * 64))
    full = predict(problem, config_for(spec), Facts(255, 1024, 0))
    assert not full.feasible and math.isinf(full.ms)


def test_spearman_rank_correlation():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2], [1, 2]) is None
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)


# -- a whole tuning with a fake measurer ------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_tuning():
    """One tuning of a small convolution, compiled by two worker processes."""
    measurer = FakeMeasurer()
    options = TuneOptions(
        max_candidates=4, top=2, explore=1, jobs=2, progress=False, measure_cudnn=True
    )
    return tune(SMALL_F32, measurer, options), measurer


def test_a_fake_tuning_measures_the_baseline_and_the_models_picks(fake_tuning):
    result, measurer = fake_tuning
    baseline = result.baseline
    assert baseline is not None and baseline.picked_by == "baseline"
    assert measurer.calls[0] == baseline.config.describe()
    first = next(r for r in result.records if r.rank == 1)
    assert first.status == WRONG and "wrong" in first.reason
    picks = [r for r in result.records if r.picked_by]
    assert sum(r.picked_by == "model" for r in picks) == 2
    assert sum(r.picked_by == "explore" for r in picks) == 1
    assert result.cudnn_ms == 0.1
    ranked = [r for r in result.records if r.rank is not None]
    assert sorted(r.rank for r in ranked) == list(range(1, len(ranked) + 1))


def test_the_winner_is_confirmed_on_fresh_inputs_before_it_is_taken():
    # The fastest is wrong on fresh inputs (as a racy kernel right once would be):
    # it gives way to the next, which is confirmed in turn.
    measurer = FakeMeasurer(confirm_fails=1)
    options = TuneOptions(max_candidates=4, top=2, explore=1, jobs=1, progress=False)
    result = tune(SMALL_F32, measurer, options)
    first, second = measurer.confirmed
    assert first != second
    best = result.best
    assert best is not None and best.config.describe() == second
    (racy,) = [r for r in result.records if r.config.describe() == first]
    assert racy.status == WRONG and "fresh inputs" in racy.reason


def test_a_wrong_configuration_is_never_picked(fake_tuning):
    result, _ = fake_tuning
    best = result.best
    assert best is not None and best.status == MEASURED
    assert best.ms == min(r.ms for r in result.measured if r.ms is not None)
    assert all(r.ms is None for r in result.records if r.status == WRONG)
    finalists = [r for r in result.measured if r.final_ms is not None]
    assert 1 <= len(finalists) <= 3 and best in finalists


def test_the_report_gives_the_models_correlation_and_the_savings(fake_tuning):
    result, _ = fake_tuning
    quality = result.model_quality()
    pairs = [(r.predicted_ms, r.measured_ms) for r in result.measured]
    assert quality["spearman"] == pytest.approx(
        spearman([p for p, _ in pairs], [m for _, m in pairs])
    )
    savings = result.savings()
    assert savings["considered"] == result.considered > savings["measured"] > 0
    report = result.report()
    assert "Spearman rho" in report and "measured" in report and "spared" in report
    assert "cuDNN" in report


def test_the_log_has_every_configuration_and_a_summary(fake_tuning, tmp_path):
    result, _ = fake_tuning
    path = tmp_path / "log.jsonl"
    write_log(result, path)
    lines = read_log(path)
    assert [line["kind"] for line in lines] == ["config"] * len(result.records) + [
        "summary"
    ]
    configs = records_by_spec(lines)[SMALL_F32.to_text()]
    for line, record in zip(configs, result.records, strict=True):
        assert config_from_json(line["config"]) == record.config
        assert line["status"] == record.status
        assert line["registers"] == record.registers
        assert line["predicted_ms"] == record.predicted_ms
    assert lines[-1]["model"]["spearman"] == result.spearman


def test_the_cache_serves_the_tuned_configuration(fake_tuning, tmp_path, monkeypatch):
    result, _ = fake_tuning
    cache = TuningCache(tmp_path / "tuning.json")
    entry = entry_of(result)
    assert entry is not None and entry.config == result.best.config
    cache.store(entry)
    compiled = compile_cached(SMALL_F32, "sm_90", cache=cache.path, gpu=FAKE_GPU)
    assert compiled.config == entry.config
    assert compiled.config_source.startswith("tuned")
    assert str(cache.path) in compiled.runtime_kernel().info["config_source"]
    # another architecture, another GPU, another compiler: not this entry
    assert cached_entry(SMALL_F32, "sm_80", cache, FAKE_GPU) is None
    assert cached_entry(SMALL_F32, "sm_90", cache, "Other GPU") is None
    monkeypatch.setattr(cache_module, "compiler_version", lambda: "0.1.0+changed")
    assert cached_entry(SMALL_F32, "sm_90", cache, FAKE_GPU) is None
    fallback = compile_cached(SMALL_F32, "sm_90", cache=cache.path, gpu=FAKE_GPU)
    assert fallback.config_source == "config_for"
    assert fallback.config == config_for(SMALL_F32)


def test_a_faulting_gpu_stops_the_measuring():
    measurer = FakeMeasurer(fault_after=1)
    options = TuneOptions(max_candidates=2, top=2, explore=0, jobs=1, progress=False)
    result = tune(SMALL_F32, measurer, options)
    assert "faulted" in result.stopped
    assert len(measurer.calls) == 2
    statuses = [r.status for r in result.records if r.picked_by]
    assert statuses[:2] == [MEASURED, LAUNCH_FAILED]
    assert set(statuses[2:]) <= {UNMEASURED}


def test_tune_options_are_checked():
    for bad, message in (
        (TuneOptions(top=0), "top must be at least 1, got 0"),
        (TuneOptions(budget_s=0), "budget-s must be a positive"),
        (TuneOptions(jobs=-1), "jobs must be at least 0"),
        (TuneOptions(arch="sm_70"), "unknown GPU architecture 'sm_70'"),
    ):
        with pytest.raises(ValueError, match=message):
            bad.validate()


def test_affinec_compile_with_tune_needs_no_config_and_a_gpu():
    with pytest.raises(ValueError, match="tune=True picks the configuration"):
        affinec.compile(SMALL_F32, KernelConfig(), tune=True)
    if not cuda_available():
        with pytest.raises(NoCudaGPU):
            affinec.compile(SMALL_F32, tune=True)


# -- the cache file ------------------------------------------------------------------------------


def _entry(spec_text: str, gpu: str = FAKE_GPU, compiler: str | None = None):
    from affinec.tuning.cache import Entry

    return Entry(
        spec=spec_text,
        gpu=gpu,
        compiler=compiler or compiler_version(),
        arch="sm_90",
        config=KernelConfig(tile_sizes=(1, 8, 16, 64)),
        ms=0.25,
        baseline_ms=0.5,
        tuned_at="2026-11-25T10:00:00",
        measured=12,
    )


def test_the_cache_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("AFFINEC_TUNING_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "affinec" / "tuning.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_path() == Path.home() / ".cache" / "affinec" / "tuning.json"
    monkeypatch.setenv("AFFINEC_TUNING_CACHE", str(tmp_path / "mine.json"))
    assert default_path() == tmp_path / "mine.json"
    assert TuningCache().path == tmp_path / "mine.json"
    assert TuningCache(tmp_path / "given.json").path == tmp_path / "given.json"


def test_entries_are_keyed_by_spec_gpu_and_compiler(tmp_path):
    cache = TuningCache(tmp_path / "c" / "tuning.json")
    assert cache.entries() == []
    cache.store(_entry(SMALL_F16.to_text()))
    cache.store(_entry(SMALL_F32.to_text()))
    cache.store(_entry(SMALL_F32.to_text(), gpu="Other GPU"))
    assert len(cache.entries()) == 3
    found = cache.lookup(SMALL_F32.to_text(), FAKE_GPU)
    assert found is not None and found.config.tile_sizes == (1, 8, 16, 64)
    assert cache.lookup(SMALL_MATMUL.to_text(), FAKE_GPU) is None
    stale = _entry(SMALL_MATMUL.to_text(), compiler="0.0.1+old")
    cache.store(stale)
    assert cache.lookup(SMALL_MATMUL.to_text(), FAKE_GPU) is None
    data = json.loads(cache.path.read_text())
    assert data["schema"] == 1 and stale.key in data["entries"]
    assert all(" | " in key for key in data["entries"])


def test_the_compiler_version_hashes_the_compilers_sources():
    release, digest = compiler_version().split("+")
    assert release and len(digest) == 12
    cache_module.compiler_version.cache_clear()
    assert compiler_version() == f"{release}+{digest}"


def test_a_broken_cache_file_is_an_error_that_names_it(tmp_path):
    path = tmp_path / "tuning.json"
    path.write_text("{not json")
    cache = TuningCache(path)
    with pytest.raises(CacheError, match="is not JSON"):
        cache.entries()
    assert cache.lookup(SMALL_F16.to_text(), FAKE_GPU) is None
    path.write_text('{"schema": 99, "entries": {}}')
    with pytest.raises(CacheError, match="not one of schema 1"):
        cache.entries()
    path.write_bytes(b'{"schema": 1, \xff}')
    with pytest.raises(CacheError, match="is not text"):
        cache.entries()
    assert cache.lookup(SMALL_F16.to_text(), FAKE_GPU) is None


# -- the command line ----------------------------------------------------------------------------

SMALL_SIZES = {"n": 1, "c": 8, "h": 10, "w": 10, "k": 24, "r": 3, "s": 3, "pad": 1}
SMALL_FLAGS = ["conv"] + [
    flag for name, value in SMALL_SIZES.items() for flag in (f"--{name}", str(value))
]


def test_tune_list_shows_the_cache_and_stale_entries(tmp_path, capsys):
    path = tmp_path / "tuning.json"
    assert affinec_main(["tune", "--list", "--cache", str(path)]) == 0
    assert "holds no configurations" in capsys.readouterr().out
    cache = TuningCache(path)
    cache.store(_entry(SMALL_F32.to_text()))
    cache.store(_entry(SMALL_F16.to_text(), compiler="0.0.1+old"))
    assert affinec_main(["tune", "--list", "--cache", str(path)]) == 0
    out = capsys.readouterr().out
    assert SMALL_F32.to_text() in out and "tile-sizes=1,8,16,64" in out
    assert "2.00x config_for" in out
    assert out.count("[stale: compiler 0.0.1+old]") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune"], "error: give a spec to tune"),
        (["tune", "--list", *SMALL_FLAGS], "error: --list shows the cache"),
        (["tune", *SMALL_FLAGS, "--top", "0"], "error: top must be at least 1, got 0"),
        (["tune", *SMALL_FLAGS, "--budget-s", "-5"], "error: budget-s must be"),
        (["tune", *SMALL_FLAGS, "--jobs", "-2"], "error: jobs must be at least 0"),
        (
            ["tune", *SMALL_FLAGS[:-2], "--r", "30"],
            "error: ConvSpec.r: the dilated filter extent 30",
        ),
    ],
)
def test_tune_refuses_bad_flags_in_one_line(argv, message, capsys):
    assert affinec_main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert "Traceback" not in err


def test_tune_list_of_a_broken_cache_is_one_line(tmp_path, capsys):
    path = tmp_path / "tuning.json"
    path.write_text("[]")
    assert affinec_main(["tune", "--list", "--cache", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: the tuning cache {path}") and err.count("\n") == 1


@pytest.mark.skipif(cuda_available(), reason="a GPU is there")
def test_tune_without_a_gpu_says_so(tmp_path, capsys):
    argv = ["tune", *SMALL_FLAGS, "--cache", str(tmp_path / "t.json")]
    assert affinec_main(argv) == 1
    assert capsys.readouterr().err.startswith("error: no CUDA GPU available")


def test_tune_dry_run_ranks_without_a_gpu(tmp_path, capsys):
    argv = [
        "tune",
        *SMALL_FLAGS,
        "--dry-run",
        "--max-candidates",
        "2",
        "--jobs",
        "1",
        "--top",
        "2",
        "--log-dir",
        str(tmp_path),
    ]
    assert affinec_main(argv) == 0
    out = capsys.readouterr().out
    assert "rank  pred. ms" in out and "   1 " in out
    assert "configurations: " in out
    (log,) = tmp_path.glob("conv-*.jsonl")
    assert read_log(log)[-1]["kind"] == "summary"


# -- the GPU script, with a fake measurer ------------------------------------------------------------


def test_the_gpu_script_tunes_writes_and_resumes(tmp_path, capsys):
    script = runpy.run_path(
        str(Path(__file__).parent.parent / "benchmarks" / "tune_all.py")
    )
    out = tmp_path / "run"
    argv = [
        "--out",
        str(out),
        "--only",
        "conv1x1-256-64",
        "--dtype",
        "f32",
        "--max-candidates",
        "2",
        "--top",
        "2",
        "--explore",
        "0",
        "--jobs",
        "1",
        "--no-progress",
    ]
    args = script["parse_args"](argv)
    out.mkdir()
    assert script["run"](args, lambda spec: FakeMeasurer(), FAKE_GPU, "sm_90") == 0
    printed = capsys.readouterr().out
    assert "f32: geomean cuDNN/ours" in printed
    for name in ("tuning.json", "tune-log.jsonl", "summary.json", "table.txt"):
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    (spec,) = summary["specs"]
    assert spec["name"] == "conv1x1-256-64" and spec["cudnn_ms"] == 0.1
    assert spec["best_ms"] is not None
    assert len(TuningCache(out / "tuning.json").entries()) == 1
    # a second run finds it cached, and --plot-only redraws from the files
    assert script["run"](args, lambda spec: FakeMeasurer(), FAKE_GPU, "sm_90") == 0
    assert "cached, not tuned again" in capsys.readouterr().out
    assert script["main"]([*argv, "--plot-only"]) == 0
    assert "conv1x1-256-64" in capsys.readouterr().out


def test_plots_are_drawn_when_matplotlib_is_there(fake_tuning, tmp_path):
    pytest.importorskip("matplotlib")
    from affinec.tuning.plots import (
        RooflinePoint,
        SpecTimes,
        plot_roofline,
        plot_tuning,
    )

    result, _ = fake_tuning
    records = [r.to_json() for r in result.records]
    times = plot_tuning([SpecTimes("small", records, 0.1)], tmp_path / "t.png")
    point = RooflinePoint("small", "f16", SMALL_F16.flops, 4096, 0.2, 0.1)
    roof = plot_roofline([point], tmp_path / "r.png")
    assert times.stat().st_size > 0 and roof.stat().st_size > 0


def test_affinec_tune_network_dry_run(capsys, monkeypatch):
    """The command over a network (its layers made small here: VGG-16's 224×224
    kernels take most of a minute to compile)."""
    from affinec.frontend import networks
    from affinec.tools.cli import main

    small = [
        networks.Layer("a", dataclasses.replace(SMALL_F16, n=1), 2),
        networks.Layer("b", SMALL_F16, 1),
    ]
    monkeypatch.setitem(networks.NETWORKS, "vgg16", lambda batch: small)
    argv = ["tune", "network", "vgg16", "--batch", "1", "--dry-run",
            "--max-candidates", "2", "--jobs", "1", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "vgg16 at batch 1: 2 distinct convolutions" in out
    assert out.count(" ranked ") == 2
    assert "ranked only (--dry-run): nothing cached" in out
    assert main(["tune", "network", "vgg16", "--batch", "0", "--dry-run"]) == 1
