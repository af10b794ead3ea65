"""Tuning a zoo within one budget (`affinec.tuning.many`, what `affinec tune network`
runs) without a GPU: the pipeline's schedule (one pool for the whole zoo, measuring
while the later specs compile, a spec shared by several networks compiled once, the
processes replaced), the same search as the single-spec tuner, the budget running
out, a spec whose candidates are all refused, a GPU that faults, and the command's
exit status.

The measurer makes its times up from the configuration's text and takes a fixed
time per measurement; compiles go through a thread pool in place of processes, each
real compile made once per configuration and kept (`Memo`), and each taking a fixed
time after that, so the schedule is tested, not the compiler's speed.
"""

import dataclasses
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.tools.cli import main as affinec_main
from affinec.tuning import Measurement, TuneOptions, TuningCache, many, tune
from affinec.tuning.compiling import REFUSED, Compiled, compile_one, config_from_json
from affinec.tuning.many import GPU_FAULTED, OUT_OF_TIME, tune_specs, tune_zoo

FAKE_GPU = "Fake GPU"
F32 = ConvSpec(1, 8, 10, 10, 24, 3, 3, padding=1)
SPECS = [
    F32,
    dataclasses.replace(F32, k=16),
    dataclasses.replace(F32, c=16),
    MatmulSpec(64, 48, 40, "bf16", "bias-relu"),
]
OPTIONS = TuneOptions(
    top=2, explore=0, finalists=2, max_candidates=2, jobs=1, progress=False
)


class Steady:
    """A measurer whose times are a function of the configuration's text, each
    measurement taking `delay` seconds; the GPU faults at measurement `fault_at`
    (counted over every `Steady`, through `calls`)."""

    def __init__(
        self, calls: list[str], delay: float = 0.0, fault_at: int | None = None
    ) -> None:
        self.gpu = FAKE_GPU
        self.broken = False
        self.calls, self.delay, self.fault_at = calls, delay, fault_at

    def measure(self, kernel, final: bool = False) -> Measurement:
        time.sleep(self.delay)
        described = kernel.info["config"]
        self.calls.append(described)
        if self.fault_at is not None and len(self.calls) >= self.fault_at:
            self.broken = True
            return Measurement(False, reason="launch failed: illegal address")
        ms = 0.05 + (zlib.crc32(described.encode()) % 1000) / 1e4
        return Measurement(True, ms, 1e-4, seconds=self.delay)

    def confirm(self, kernel, runs: int) -> Measurement:
        return Measurement(True, error=1e-4)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        return None

    def close(self) -> None:
        pass


class Memo:
    """`compile_one` made once per configuration (kept for the module), each call
    counted and taking `delay` seconds; `refuse`: the text of a spec whose every
    candidate is refused."""

    made: dict[tuple[str, str, str], Compiled] = {}
    lock = threading.Lock()

    def __init__(self, delay: float = 0.0, refuse: str = "") -> None:
        self.delay, self.refuse = delay, refuse
        self.calls: list[tuple[str, str]] = []

    def __call__(self, index: int, spec_text: str, knobs: dict, arch: str) -> Compiled:
        key = (spec_text, repr(sorted(knobs.items())), arch)
        with self.lock:
            self.calls.append(key[:2])
        time.sleep(self.delay)
        if spec_text == self.refuse:
            reason = "shared memory: 300000 bytes over the 232448 of a block"
            return Compiled(index, config_from_json(knobs), REFUSED, reason)
        c = self.made.get(key)
        if c is None:
            c = self.made[key] = compile_one(0, spec_text, knobs, arch)
        return dataclasses.replace(c, index=index)


@pytest.fixture
def threads(monkeypatch):
    """Pools of threads in place of processes, each recorded: how many tasks it
    was given, and whether it was shut down."""
    pools: list[ThreadPoolExecutor] = []

    class Recorded(ThreadPoolExecutor):
        def __init__(self, jobs: int) -> None:
            super().__init__(max_workers=jobs)
            self.given = 0
            self.ended = False
            pools.append(self)

        def submit(self, fn, /, *args, **kwargs):
            self.given += 1
            return super().submit(fn, *args, **kwargs)

        def shutdown(self, wait=True, *, cancel_futures=False):
            self.ended = True
            super().shutdown(wait, cancel_futures=cancel_futures)

    monkeypatch.setattr(many, "make_pool", Recorded)
    return pools


def test_a_zoo_is_tuned_cached_and_found_cached_again(tmp_path, monkeypatch):
    """Every spec tuned and cached, a line each; a second run finds them cached;
    without a measurer they are ranked only and nothing is cached."""
    monkeypatch.setattr(many, "compile_one", Memo())
    cache = TuningCache(tmp_path / "tuning.json")
    said: list[str] = []
    calls: list[str] = []
    results = tune_specs(
        SPECS[:2], OPTIONS, cache, budget_s=600, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady(calls), say=said.append,
    )  # fmt: skip
    assert [r.outcome for r in results] == ["tuned", "tuned"]
    assert len(cache.entries()) == 2 and len(said) == 2
    assert all(": tuned, " in line for line in said)
    again = tune_specs(
        SPECS[:2], OPTIONS, cache, budget_s=600, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady(calls), say=lambda _: None,
    )  # fmt: skip
    assert [r.outcome for r in again] == ["cached", "cached"]
    ranked = tune_specs(SPECS[:2], OPTIONS, cache, budget_s=600, say=said.append)
    assert [r.outcome for r in ranked] == ["ranked", "ranked"]
    assert "ms predicted for" in said[-1]


def test_the_zoo_measures_what_the_single_spec_tuner_measures(tmp_path, monkeypatch):
    """The pipeline changes when things run, not what: the same candidates,
    statuses, ranks, picks, times and winner as `tune` with the same measurer."""
    monkeypatch.setattr(many, "compile_one", Memo())
    spec = SPECS[0]
    alone = tune(spec, Steady([]), dataclasses.replace(OPTIONS, budget_s=600))
    zoo = tune_specs(
        [spec], OPTIONS, TuningCache(tmp_path / "t.json"), budget_s=600,
        gpu=FAKE_GPU, measurer_for=lambda s: Steady([]), say=lambda _: None,
    )  # fmt: skip

    def records(result):
        return [
            (r.config, r.status, r.rank, r.picked_by, r.measured_ms, r.final_ms)
            for r in result.records
        ]

    assert records(zoo[0].result) == records(alone)
    assert zoo[0].entry.config == alone.best.config


def test_one_pool_compiles_the_zoo_while_it_is_measured(tmp_path, monkeypatch, threads):
    """Two networks sharing a spec: each spec planned and each configuration
    compiled once; the first measurement starts long before the last compile is
    back (the GPU does not wait for the zoo's compiles), and every spec is cached
    within the budget; one pool, shut down at the end."""
    memo = Memo(delay=0.05)
    monkeypatch.setattr(many, "compile_one", memo)
    planned: list[str] = []
    plan_space = many.plan_space

    def counted(spec_text, *args):
        planned.append(spec_text)
        return plan_space(spec_text, *args)

    monkeypatch.setattr(many, "plan_space", counted)
    first, second = SPECS[:3], SPECS[1:]
    calls: list[str] = []
    budget = 120.0
    zoo = tune_zoo(
        first + second, dataclasses.replace(OPTIONS, jobs=2),
        TuningCache(tmp_path / "t.json"), budget_s=budget, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady(calls, delay=0.02), say=lambda _: None,
    )  # fmt: skip
    assert [t.outcome for t in zoo.shapes] == ["tuned"] * 6
    assert zoo.shapes[1] is zoo.shapes[3]  # one spec, one tuning
    assert sorted(planned) == sorted(s.to_text() for s in SPECS)
    assert len(memo.calls) == len(set(memo.calls))
    assert len(memo.calls) == sum(len(t.result.records) for t in zoo.shapes[2:])
    assert zoo.first_measurement_s < zoo.last_compile_s - 0.2
    assert zoo.seconds < budget and not zoo.stopped and not zoo.failed
    assert len(threads) == 1 and threads[0].ended
    assert zoo.compiles["compiled"] == len(memo.calls)
    summary = zoo.summary()
    assert "4 shapes" not in summary and "6 shapes" in summary
    assert "compiling (2 processes): 4 search spaces" in summary


def test_the_processes_are_replaced_as_they_compile(tmp_path, monkeypatch, threads):
    """LLVM keeps the memory of every module a process optimized: after
    `RECYCLE_COMPILES` tasks a process each, the next go to a fresh pool, and the
    old one is shut down."""
    monkeypatch.setattr(many, "compile_one", Memo())
    monkeypatch.setattr(many, "RECYCLE_COMPILES", 2)
    zoo = tune_zoo(
        SPECS, dataclasses.replace(OPTIONS, jobs=2), TuningCache(tmp_path / "t.json"),
        budget_s=600, gpu=FAKE_GPU, measurer_for=lambda spec: Steady([]),
        say=lambda _: None,
    )  # fmt: skip
    assert [t.outcome for t in zoo.shapes] == ["tuned"] * 4
    assert len(threads) > 2
    assert all(p.given <= 4 for p in threads) and all(p.ended for p in threads)
    assert sum(p.given for p in threads) == zoo.spaces + sum(zoo.compiles.values())


def test_what_the_budget_leaves_is_listed_and_the_rest_kept(tmp_path, monkeypatch):
    """Measuring slower than the budget allows: the first specs are tuned and
    cached, the rest are skipped and listed; nothing failed; a run started again
    tunes only what is left."""
    monkeypatch.setattr(many, "compile_one", Memo())
    cache = TuningCache(tmp_path / "t.json")
    said: list[str] = []
    started = time.monotonic()
    zoo = tune_zoo(
        SPECS, OPTIONS, cache, budget_s=1.0, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady([], delay=0.25), say=said.append,
    )  # fmt: skip
    outcomes = [t.outcome for t in zoo.shapes]
    assert "skipped" in outcomes and outcomes[0] == "tuned"
    assert set(outcomes) <= {"tuned", "skipped"}
    assert zoo.stopped == OUT_OF_TIME and not zoo.failed
    # the finalists and confirmation of the specs screened are all that follows
    assert time.monotonic() - started < 1.0 + 2 * 0.25 * OPTIONS.finalists + 1.5
    tuned = [t for t in zoo.shapes if t.outcome == "tuned"]
    assert len(cache.entries()) == len(tuned) == len(said) - outcomes.count("skipped")
    summary = zoo.summary()
    assert f"left for lack of time: {outcomes.count('skipped')}" in summary
    assert SPECS[-1].to_text() in summary.split("left for lack of time")[1]
    again = tune_zoo(
        SPECS, OPTIONS, cache, budget_s=600, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady([]), say=lambda _: None,
    )  # fmt: skip
    assert [t.outcome for t in again.shapes] == [
        "cached" if o == "tuned" else "tuned" for o in outcomes
    ]


def test_a_spec_whose_candidates_are_all_refused_says_so(tmp_path, monkeypatch):
    memo = Memo(refuse=SPECS[1].to_text())
    monkeypatch.setattr(many, "compile_one", memo)
    said: list[str] = []
    zoo = tune_zoo(
        SPECS[:3], OPTIONS, TuningCache(tmp_path / "t.json"), budget_s=600,
        gpu=FAKE_GPU, measurer_for=lambda spec: Steady([]), say=said.append,
    )  # fmt: skip
    assert [t.outcome for t in zoo.shapes] == ["tuned", "refused", "tuned"]
    assert zoo.failed
    line = next(line for line in said if SPECS[1].to_text() in line)
    assert ": refused: all " in line and "shared memory: 300000 bytes" in line
    assert "refused (no candidate compiled): 1" in zoo.summary()


def test_a_faulting_gpu_stops_the_zoo_without_a_crash(tmp_path, monkeypatch):
    """The GPU faults at the fourth measurement: nothing more is measured, the
    spec being measured is not cached unconfirmed, the rest are skipped."""
    monkeypatch.setattr(many, "compile_one", Memo())
    calls: list[str] = []
    cache = TuningCache(tmp_path / "t.json")
    zoo = tune_zoo(
        SPECS, OPTIONS, cache, budget_s=600, gpu=FAKE_GPU,
        measurer_for=lambda spec: Steady(calls, fault_at=4), say=lambda _: None,
    )  # fmt: skip
    assert len(calls) == 4
    assert zoo.stopped == GPU_FAULTED and zoo.failed
    assert zoo.shapes[0].outcome == "failed" and cache.entries() == []
    assert {t.outcome for t in zoo.shapes[1:]} == {"skipped"}


@pytest.fixture
def small_networks(monkeypatch):
    """Two networks of small layers, one shared (VGG-16's real ones take most of a
    minute to compile)."""
    from affinec.frontend import networks

    a = [networks.Layer("a", SPECS[0], 2), networks.Layer("b", SPECS[1], 1)]
    b = [networks.Layer("b", SPECS[1], 1), networks.Layer("c", SPECS[2], 1)]
    monkeypatch.setitem(networks.NETWORKS, "vgg16", lambda batch: a)
    monkeypatch.setitem(networks.NETWORKS, "resnet50", lambda batch: b)


def test_affinec_tune_network_by_the_cost_model(tmp_path, capsys, small_networks):
    """No GPU: every shape tuned by the cost model, each network's table, and the
    summary last; exit status 0."""
    argv = ["tune", "--cache", str(tmp_path / "t.json"), "network", "vgg16",
            "resnet50", "--measure", "cost-model", "--max-candidates", "2",
            "--top", "1", "--explore", "0", "--finalists", "1", "--jobs", "1",
            "--no-progress"]  # fmt: skip
    assert affinec_main(argv) == 0
    out = capsys.readouterr().out
    assert "2 networks and batches: 3 distinct convolutions" in out
    rows = [line.split() for line in out.splitlines()]
    assert sum(len(r) == 5 and r[2] == "tuned" for r in rows) == 4  # 2 + 2 layers
    last = out.strip().splitlines()
    assert last[-6].split() == ["network", "batch", "shapes", "tuned", "cached",
                                "skipped", "refused", "failed", "tuned", "ms",
                                "config_for", "gain"]  # fmt: skip
    # each network's row: its layers' outcomes, and its total as its own table's
    totals = [line.split() for line in last if line.startswith("total: ")]
    for row, total in zip(last[-5:-3], totals, strict=True):
        assert row.split()[1:8] == ["1", "2", "2", "0", "0", "0", "0"]
        assert row.split()[8:10] == [total[1], total[4]]
    assert last[-3].startswith("3 shapes in ") and last[-3].endswith(": 3 tuned")
    assert last[-2].startswith("compiling (1 processes): 3 search spaces")
    assert last[-1].startswith("measuring: ")


class _SecondATick:
    """`time` whose monotonic clock moves a second each reading: a budget of 0.01 s
    is spent before the first compile however fast the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 1.0
        return self.now

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_affinec_tune_network_out_of_budget_exits_0(
    tmp_path, capsys, small_networks, monkeypatch
):
    """A budget spent before anything is compiled: every shape listed as left,
    nothing cached, no failure."""
    monkeypatch.setattr(many, "time", _SecondATick())
    argv = ["tune", "--cache", str(tmp_path / "t.json"), "network", "vgg16",
            "resnet50", "--measure", "cost-model", "--network-budget-s", "0.01",
            "--max-candidates", "2", "--jobs", "1", "--no-progress"]  # fmt: skip
    assert affinec_main(argv) == 0
    out = capsys.readouterr().out
    assert "left for lack of time: 3" in out
    assert f"(budget 0.01 s; {OUT_OF_TIME})" in out
