"""Tuning through Ray (`affinec.tuning.distributed`) on a real local Ray cluster of
two CPUs, measured without a GPU: the results are those of the tuner without Ray,
a killed compile worker and a killed measuring actor lose nothing else, a hanging
kernel is timed out, a run started again resumes from the cache and its journal,
and concurrent writers of the cache lose no record.

The measurer here makes its times up from the configuration's text, the same in
every process, so that which process measured a kernel changes nothing; the tests
look only at what the orchestration does with the times.
"""

import dataclasses
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from affinec.base.extras import MissingExtra  # noqa: E402
from affinec.base.spec import ConvSpec, MatmulSpec  # noqa: E402
from affinec.driver.config import KernelConfig  # noqa: E402
from affinec.tuning import (  # noqa: E402
    Entry,
    Measurement,
    TuneOptions,
    TuningCache,
    compile_cached,
)
from affinec.tuning.distributed import (  # noqa: E402
    LOST,
    TIMED_OUT,
    require_ray,
    tune_specs_ray,
)
from affinec.tuning.many import tune_specs  # noqa: E402
from affinec.tuning.measure import MeasurerUnavailable  # noqa: E402

SPECS = [
    ConvSpec(1, 8, 10, 10, 24, 3, 3, padding=1),
    MatmulSpec(64, 48, 40, "bf16", "bias-relu"),
]
OPTIONS = TuneOptions(
    top=2, explore=1, finalists=2, max_candidates=4, jobs=1, progress=False
)
FAKE_GPU = "Fake GPU"


class Made:
    """A measurer whose times are a function of the configuration's text alone;
    one configuration in five is wrong. `hang`: the configuration whose measurement
    never ends; `die_on`: the configuration whose first measurement kills its
    process (once: a file in `marks` remembers it)."""

    gpu = FAKE_GPU

    def __init__(self, hang: str = "", die_on: str = "", marks: str = "") -> None:
        self.hang, self.die_on, self.marks = hang, die_on, marks
        self.broken = False

    def measure(self, kernel, final: bool = False) -> Measurement:
        described = kernel.info["config"]
        if self.marks:
            with open(Path(self.marks) / "calls", "a") as f:
                f.write(f"{'final' if final else 'screen'} {described}\n")
        if described == self.hang:
            time.sleep(600)
        if described == self.die_on and self.marks:
            try:
                os.close(os.open(Path(self.marks) / "died", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        crc = zlib.crc32(described.encode())
        if crc % 5 == 0:
            return Measurement(False, error=0.5, reason="wrong: error 0.5")
        ms = 0.05 + (crc % 1000) / 1e4
        if final:
            ms *= 1 + (crc >> 10) % 7 / 100
        return Measurement(True, ms, 1e-4, seconds=0.001)

    def confirm(self, kernel, runs: int) -> Measurement:
        return Measurement(True, error=1e-4)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        return None

    def close(self) -> None:
        pass


@dataclasses.dataclass
class Measuring:
    """What the actors run: `(spec, seed) -> Made(...)`."""

    hang: str = ""
    die_on: str = ""
    marks: str = ""

    def __call__(self, spec, seed: int) -> Made:
        return Made(self.hang, self.die_on, self.marks)


def _write(path: str, who: int, count: int) -> None:
    cache = TuningCache(path)
    for i in range(count):
        config = KernelConfig()
        cache.store(Entry(f"spec {who} {i}", FAKE_GPU, "c", "sm_90", config, 1.0))
        cache.append_measurements([{"who": who, "i": i}])


def test_concurrent_writers_of_the_cache_lose_no_record(tmp_path):
    """Processes storing entries and appending measurements at once: every entry
    and every line is there, and a line torn by a writer that died is skipped and
    ended by the next writer. (First in the module: the writers are forked, before
    Ray's threads exist.)"""
    path = tmp_path / "tuning.json"
    cache = TuningCache(path)
    cache.journal_path.write_text('{"torn": ')  # a writer killed mid-line
    writers, each = 4, 25
    fork = multiprocessing.get_context("fork")
    procs = [
        fork.Process(target=_write, args=(str(path), w, each)) for w in range(writers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * writers
    assert len(cache.entries()) == writers * each
    rows = cache.measurements()
    assert sorted((r["who"], r["i"]) for r in rows) == sorted(
        (w, i) for w in range(writers) for i in range(each)
    )


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of two CPUs for the module; the test module's classes
    travel to the workers by value (the workers cannot import it)."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The zoo tuned without Ray, in this process, with the same measurer."""
    cache = TuningCache(tmp_path_factory.mktemp("reference") / "tuning.json")
    results = tune_specs(
        SPECS, OPTIONS, cache, budget_s=3600, gpu=FAKE_GPU,
        measurer_for=lambda spec: Made(), say=lambda _: None,
    )  # fmt: skip
    assert [r.outcome for r in results] == ["tuned", "tuned"]
    return results


@pytest.fixture(scope="module")
def through_ray(cluster, tmp_path_factory):
    """The zoo tuned through Ray: its cache, and what it returned."""
    cache = TuningCache(tmp_path_factory.mktemp("ray") / "tuning.json")
    said: list[str] = []
    zoo = tune_specs_ray(
        SPECS, OPTIONS, cache, measure=Measuring(), gpu=FAKE_GPU, say=said.append
    )
    return cache, zoo, said


def _records(result) -> list[tuple]:
    return [
        (r.config, r.status, r.rank, r.picked_by, r.measured_ms, r.final_ms)
        for r in result.records
    ]


def test_ray_finds_what_the_tuner_finds(reference, through_ray):
    """Same candidates, statuses, ranks, picks, times and winners as `tune_specs`
    without Ray; a line per shape and a summary table."""
    cache, zoo, said = through_ray
    assert [t.outcome for t in zoo.shapes] == ["tuned", "tuned"]
    for mine, theirs in zip(zoo.shapes, reference, strict=True):
        assert mine.spec == theirs.spec and mine.gpu == FAKE_GPU
        assert _records(mine.result) == _records(theirs.result)
        assert mine.entry.config == theirs.entry.config
        assert mine.entry.ms == theirs.entry.ms
        assert mine.entry.baseline_ms == theirs.entry.baseline_ms
        assert mine.restored == mine.timed_out == mine.lost == 0
    stored = {e.spec: e.config for e in cache.entries()}
    assert stored == {t.entry.spec: t.entry.config for t in reference}
    # what affinec.compile reads
    compiled = compile_cached(SPECS[0], OPTIONS.arch, cache=cache.path, gpu=FAKE_GPU)
    assert compiled.config == zoo.shapes[0].entry.config
    assert compiled.config_source.startswith("tuned")
    assert len(said) == 2 and all("tuned" in line for line in said)
    table = zoo.table()
    assert "2 shapes (2 tuned) on Fake GPU" in table
    assert "measured by the cost model" not in table
    # every screening and final measurement is in the journal
    rows = cache.measurements()
    assert len(rows) == sum(
        sum(r.measure_s is not None for r in t.result.records)
        + sum(r.final_ms is not None for r in t.result.records)
        for t in zoo.shapes
    )


def test_a_run_started_again_resumes_from_the_cache_and_the_journal(
    through_ray, tmp_path
):
    """The first shape is in the cache: skipped. The second is not (as if the run
    had stopped before storing it), but its measurements are in the journal: none is
    made again (only the winner's confirmation runs), and the result is the same."""
    cache, zoo, _ = through_ray
    second = zoo.shapes[1].entry
    data = json.loads(cache.path.read_text())
    del data["entries"][second.key]
    cache.path.write_text(json.dumps(data))
    marks = tmp_path / "marks"
    marks.mkdir()
    again = tune_specs_ray(
        SPECS, OPTIONS, cache, measure=Measuring(marks=str(marks)), gpu=FAKE_GPU,
        say=lambda _: None,
    )  # fmt: skip
    assert [t.outcome for t in again.shapes] == ["cached", "tuned"]
    assert not (marks / "calls").exists()  # nothing measured again
    resumed = again.shapes[1]
    before = zoo.shapes[1].result.records
    made = sum(r.measure_s is not None for r in before)
    made += sum(r.final_ms is not None for r in before)
    assert resumed.restored == made > 0
    assert resumed.measured == 1  # the confirmation
    assert resumed.entry.config == second.config and resumed.entry.ms == second.ms
    assert _records(resumed.result) == _records(zoo.shapes[1].result)


def test_killed_workers_and_a_hanging_kernel_lose_nothing_else(
    cluster, reference, tmp_path
):
    """In one run: a compile worker is killed from outside (SIGKILL) while it
    compiles, a measuring actor's process kills itself mid-measurement, and one
    kernel never returns. Ray runs the compile again and restarts the actor, the
    killed measurement is made again, the hanging one is timed out and recorded as
    such (in the journal too), and every other record is the tuner's."""
    import psutil

    conv = reference[0].result
    measured = sorted(
        (r for r in conv.records if r.measured_ms is not None),
        key=lambda r: r.measured_ms,
    )
    assert len(measured) > OPTIONS.finalists  # the slowest is no finalist
    hung = measured[-1]
    victim = next(r for r in reference[1].result.records if r.measured_ms)
    marks = tmp_path / "marks"
    marks.mkdir()
    killed: list[int] = []
    stop = threading.Event()

    def kill_a_compile() -> None:
        while not stop.is_set() and not killed:
            for p in psutil.process_iter(["cmdline"]):
                if (p.info["cmdline"] or [""])[0].startswith("ray::compile_one"):
                    os.kill(p.pid, signal.SIGKILL)
                    killed.append(p.pid)
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_a_compile)
    killer.start()
    cache = TuningCache(tmp_path / "tuning.json")
    try:
        zoo = tune_specs_ray(
            SPECS, OPTIONS, cache, gpu=FAKE_GPU, timeout_s=3, say=lambda _: None,
            measure=Measuring(
                hang=hung.config.describe(), die_on=victim.config.describe(),
                marks=str(marks),
            ),
        )  # fmt: skip
    finally:
        stop.set()
        killer.join()
    assert killed, "no compile worker was seen running"
    assert (marks / "died").exists()
    assert [t.outcome for t in zoo.shapes] == ["tuned", "tuned"]
    first, second = zoo.shapes
    assert first.timed_out == 1 and second.remeasured == 1
    assert first.lost == second.lost == 0
    assert zoo.actor_restarts == 2
    for mine, theirs in zip(zoo.shapes, reference, strict=True):
        for a, b in zip(_records(mine.result), _records(theirs.result), strict=True):
            if a[0] == hung.config and mine is first:
                assert a[1] == TIMED_OUT and a[4] is None
            else:
                assert a == b
        assert mine.entry.config == theirs.entry.config
    timed_out = [r for r in cache.measurements() if r["status"] == TIMED_OUT]
    assert [r["describe"] for r in timed_out] == [hung.config.describe()]
    assert all(r.status != LOST for t in zoo.shapes for r in t.result.records)


def test_the_command_line_tunes_a_zoo_through_ray_by_the_cost_model(
    cluster, tmp_path, monkeypatch, capsys
):
    """`affinec tune network A B --batch .. --ray --measure cost-model`: a line per
    shape, the summary, said to be the cost model's; a second run finds them all
    cached."""
    from affinec.frontend import networks
    from affinec.tools.cli import main

    small = [networks.Layer("a", SPECS[0], 2)]
    monkeypatch.setitem(networks.NETWORKS, "vgg16", lambda batch: small)
    monkeypatch.setitem(
        networks.NETWORKS,
        "resnet50",
        lambda batch: [networks.Layer("b", dataclasses.replace(SPECS[0], n=batch), 1)],
    )
    argv = ["tune", "network", "vgg16", "resnet50", "--batch", "1", "2",
            "--ray", "--measure", "cost-model", "--cache", str(tmp_path / "t.json"),
            "--max-candidates", "2", "--top", "1", "--explore", "0",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 distinct convolutions" in out  # n=1 twice, n=2 once
    assert out.count("on cost model (no GPU): tuned") == 2
    assert "2 shapes (2 tuned) on cost model (no GPU)" in out
    assert "resnet50 at batch 2 on cost model (no GPU):" in out
    assert out.count("total: ") == 4  # each network at each batch
    assert "measured by the cost model: no kernel ran" in out
    assert main(argv) == 0
    assert "2 shapes (2 cached)" in capsys.readouterr().out


def test_a_spent_budget_starts_nothing(cluster, tmp_path):
    cache = TuningCache(tmp_path / "tuning.json")
    zoo = tune_specs_ray(
        SPECS, OPTIONS, cache, measure=Measuring(), gpu=FAKE_GPU, budget_s=1e-9,
        say=lambda _: None,
    )  # fmt: skip
    assert [t.outcome for t in zoo.shapes] == ["skipped", "skipped"]
    assert cache.entries() == [] and cache.measurements() == []


def test_measuring_on_gpus_needs_a_cluster_with_some(cluster, tmp_path):
    with pytest.raises(MeasurerUnavailable, match="--measure cost-model"):
        tune_specs_ray(SPECS, OPTIONS, TuningCache(tmp_path / "t.json"))


def test_without_ray_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingExtra, match=r"pip install -e '\.\[ray\]'"):
        require_ray()
