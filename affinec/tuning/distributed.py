"""Tuning a model zoo over a Ray cluster: compiling on every CPU, measuring on every
GPU, one cache, nothing lost when a worker dies.

    import ray
    from affinec.tuning import TuneOptions, TuningCache
    from affinec.tuning.distributed import tune_specs_ray

    ray.init(address="auto")            # a running cluster; ray.init() starts one here
    zoo = tune_specs_ray(specs, TuneOptions(top=24), TuningCache())
    print(zoo.table())

(`affinec tune network resnet50 vgg16 --batch 1 8 --ray [ADDRESS]` on the command
line.) Each spec goes through the same search as `affinec.tuning.tune`: the same
candidates, pruning, ranking, picks, finalists and confirmation, so the same
measurements give the same result. What differs is where each step runs:

- every candidate is compiled by a Ray task (one CPU each, anywhere in the
  cluster), the zoo's specs queued in order so that the first finish first; a
  worker process is replaced after `RECYCLE_COMPILES` compiles, because LLVM keeps
  the memory of every module it optimized (`affinec.tuning.many`);
- one Ray actor per GPU measures (`num_gpus=1`: Ray gives it that GPU alone), one
  kernel at a time. The driver hands an idle actor the next kernel as soon as one is
  ready: a spec's baseline as soon as it is compiled, the spec's other picks as soon
  as its candidates are all compiled (the model ranks a spec's candidates
  together), while the next specs compile. No GPU waits for the zoo's compiles;
- results come back to the driver, which alone writes the cache: the JSON file that
  `affinec.compile` reads, keyed by spec and GPU model (why that format and not
  SQLite: `affinec.tuning.cache`), and its journal, one line per measurement as it
  comes in. A cluster whose GPUs are of several models tunes each spec for each.

Faults. A compile whose worker dies is run again by Ray (`COMPILE_RETRIES`). A
measuring actor that dies is restarted by Ray (`max_restarts`), and the kernel it
was measuring is measured again (`remeasure` times; after that it is recorded as
`lost`); nothing else is lost. A measurement that takes longer than `timeout_s` (a
kernel that hangs its GPU) has its actor killed and restarted, and is recorded as
`timed-out`, in the journal too, so that no later run waits on it again. A run
started again skips the specs the cache has and takes the measurements the journal
has instead of measuring them again.

Without a GPU in the cluster, `measure="cost-model"` measures with the cost model
(`affinec.tuning.model_measure`): the reports say so, and the cache keys those
entries by a GPU name of their own.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from affinec.base.extras import missing_extra
from affinec.base.spec import Spec, parse_spec
from affinec.driver.config import KernelConfig
from affinec.tuning.cache import Entry, TuningCache, compiler_version, tuning_key
from affinec.tuning.compiling import (
    FAILED,
    SKIPPED,
    Compiled,
    compile_one,
    config_to_json,
)
from affinec.tuning.many import SpecTuning
from affinec.tuning.measure import Measurement, Measurer, MeasurerUnavailable
from affinec.tuning.model_measure import COST_MODEL_GPU, CostModelMeasurer
from affinec.tuning.problem import problem_of
from affinec.tuning.space import Space, search_space
from affinec.tuning.tuner import (
    PRUNED,
    RANKED,
    WRONG,
    Record,
    TuneOptions,
    TuneResult,
    _absorb,
    choose_picks,
    end_screening,
    record_final,
    record_measurement,
)

GPU = "gpu"
COST_MODEL = "cost-model"
MEASURES = (GPU, COST_MODEL)
"""How the actors measure: on their GPU, or by the cost model on a CPU."""

TIMED_OUT = "timed-out"
"""A record's status: its measurement outlasted `timeout_s` (the kernel hung)."""
LOST = "lost"
"""A record's status: its measuring actor died each time it measured it."""

COMPILE_RETRIES = 3
"""Times Ray runs a compile again whose worker process died."""
RECYCLE_COMPILES = 32
"""Compiles a worker process runs before Ray replaces it (LLVM's memory)."""
ACTOR_RESTARTS = 100
"""Times Ray restarts a measuring actor that died or was killed (each hang costs
one)."""

_SCREEN, _FINAL, _CONFIRM = "screen", "final", "confirm"


def require_ray() -> Any:
    """The `ray` module, or a `MissingExtra` naming the extra that installs it."""
    try:
        import ray
    except ModuleNotFoundError as error:
        raise missing_extra(error, "tuning through Ray (affinec tune --ray)") from None
    return ray


def connect(address: str | None = None) -> None:
    """Join the Ray cluster at `address` ("auto": the one this machine belongs to;
    "ray://host:10001": through Ray's client), or with None the one `RAY_ADDRESS`
    names, else start one on this machine. Nothing if Ray is initialized already."""
    ray = require_ray()
    if ray.is_initialized():
        return
    if address is None and not os.environ.get("RAY_ADDRESS"):
        ray.init(include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)


class MeasuringActor:
    """What runs in each measuring actor: a measurer for the spec at hand (made again
    when the spec changes), one kernel at a time."""

    def __init__(
        self, measure: str | Callable[[Spec, int], Measurer], seed: int
    ) -> None:
        self.measure = measure
        self.seed = seed
        self.spec_text: str | None = None
        self.measurer: Measurer | None = None

    def identity(self, gpu: str) -> tuple[str, str | None, int]:
        """The GPU's name (`gpu` unless it measures on one), its architecture (None
        without a GPU) and the process's id."""
        if self.measure == GPU:
            from affinec.backend.runtime import current_arch, require_gpu
            from affinec.tuning.measure import gpu_name

            require_gpu()
            return gpu_name(), current_arch(), os.getpid()
        return gpu, None, os.getpid()

    def run(
        self, spec_text: str, kernel: Any, kind: str, runs: int
    ) -> tuple[Measurement, bool]:
        """Measure (`screen`, `final`) or confirm `kernel`; the measurement and
        whether the GPU is broken since."""
        measurer = self._measurer_for(spec_text)
        if kind == _CONFIRM:
            m = measurer.confirm(kernel, runs)
        else:
            m = measurer.measure(kernel, final=kind == _FINAL)
        return m, measurer.broken

    def _measurer_for(self, spec_text: str) -> Measurer:
        if self.measurer is None or spec_text != self.spec_text:
            if self.measurer is not None:
                self.measurer.close()
                self.measurer = None
            spec = parse_spec(spec_text)
            if self.measure == GPU:
                from affinec.tuning.measure import GpuMeasurer

                self.measurer = GpuMeasurer(spec, self.seed)
            elif self.measure == COST_MODEL:
                self.measurer = CostModelMeasurer(spec, self.seed)
            else:
                assert callable(self.measure)
                self.measurer = self.measure(spec, self.seed)
            self.spec_text = spec_text
        return self.measurer


@dataclass
class ShapeTuning(SpecTuning):
    """What became of one spec on one GPU model (`SpecTuning`'s outcomes), and what
    measuring it took."""

    gpu: str = ""
    measured: int = 0
    """Measurements made in this run."""
    restored: int = 0
    """Measurements taken from the journal instead."""
    timed_out: int = 0
    lost: int = 0
    remeasured: int = 0
    """Measurements made again because their actor died."""
    seconds: float = 0.0
    """From its first compile to its entry."""


@dataclass
class ZooTuning:
    """A zoo's tuning: a `ShapeTuning` per spec and GPU model, in the specs' order."""

    shapes: list[ShapeTuning]
    measure: str
    """`gpu`, `cost-model`, or `custom` (a measurer given by the caller)."""
    measurers: int
    cpus: float
    seconds: float
    compile_failures: int = 0
    """Compiles whose worker process died each time Ray ran them."""
    actor_restarts: int = 0

    def table(self) -> str:
        """The summary: a line per spec and GPU, then the totals."""
        head = (
            f"{'spec':<58} {'outcome':>8} {'ms':>9} {'config_for':>10} {'gain':>6} "
            f"{'meas.':>5} {'journal':>7} {'t/o':>3} {'lost':>4} {'s':>6}"
        )
        lines = [head]
        for t in self.shapes:
            e = t.entry
            ms = f"{e.ms:9.4f}" if e is not None else f"{'-':>9}"
            base = f"{e.baseline_ms:10.4f}" if e and e.baseline_ms else f"{'-':>10}"
            gain = (
                f"{e.baseline_ms / e.ms:5.2f}x"
                if e and e.baseline_ms and e.ms
                else f"{'-':>6}"
            )
            text = t.spec.to_text()
            text = text if len(text) <= 58 else text[:55] + "..."
            lines.append(
                f"{text:<58} {t.outcome:>8} {ms} {base} {gain} {t.measured:>5} "
                f"{t.restored:>7} {t.timed_out:>3} {t.lost:>4} {t.seconds:6.1f}"
            )
        outcomes: dict[str, int] = {}
        for t in self.shapes:
            outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
        gpus = sorted({t.gpu for t in self.shapes})
        lines.append(
            f"{len(self.shapes)} shapes ("
            + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
            + f") on {', '.join(gpus)}: {self.measurers} measuring actors, "
            f"{self.cpus:g} CPUs, {self.seconds:.1f} s; "
            f"{sum(t.measured for t in self.shapes)} measurements, "
            f"{sum(t.restored for t in self.shapes)} from the journal, "
            f"{sum(t.timed_out for t in self.shapes)} timed out, "
            f"{sum(t.lost for t in self.shapes)} lost; actors restarted "
            f"{self.actor_restarts} times"
        )
        if self.measure == COST_MODEL:
            lines.append(
                "measured by the cost model: no kernel ran, the times are its "
                "predictions and nothing was checked against float64"
            )
        return "\n".join(lines)


@dataclass
class _Unit:
    """One spec on one GPU model, on its way through the search."""

    number: int
    spec: Spec
    gpu: str
    arch: str
    journal: dict[tuple[str, str], dict[str, Any]]
    space: Space | None = None
    records: list[Record] = field(default_factory=list)
    result: TuneResult | None = None
    to_compile: int = 0
    """Candidates not yet submitted to compile."""
    compiling: int = 0
    """Candidates submitted and not back."""
    phase: str = "waiting"
    waiting: set[int] = field(default_factory=set)
    """Records of the phase's measurements not in yet."""
    queued: set[int] = field(default_factory=set)
    """Records queued for screening (the baseline goes before the others)."""
    early: set[int] = field(default_factory=set)
    """Records screened before the ranking was done (the baseline)."""
    counts: dict[str, int] = field(default_factory=dict)
    """measured, restored, remeasured, timed_out, lost."""
    deferred: list[Callable[[], None]] = field(default_factory=list)
    """The early measurements, written into their records once ranked."""
    started: float = 0.0
    compile_done: float = 0.0
    tuning: ShapeTuning | None = None


@dataclass
class _Job:
    unit: _Unit
    record: Record
    kind: str
    deaths: int = 0


@dataclass
class _Slot:
    """A measuring actor and what it is doing: `starting` (its identity asked for,
    after a start or a restart), `idle`, `busy` or `dead`."""

    actor: Any
    gpu: str = ""
    """The name of its GPU: it measures the specs of that GPU model only."""
    state: str = "starting"
    ref: Any = None
    job: _Job | None = None
    since: float = 0.0
    restarts: int = 0


def tune_specs_ray(
    specs: Sequence[Spec],
    options: TuneOptions,
    cache: TuningCache,
    *,
    measure: str | Callable[[Spec, int], Measurer] = GPU,
    gpu: str = "",
    arch: str | None = None,
    measurers: int = 0,
    timeout_s: float = 120.0,
    remeasure: int = 1,
    budget_s: float | None = None,
    force: bool = False,
    say: Callable[[str], None] | None = None,
) -> ZooTuning:
    """Tune the distinct `specs` over the Ray cluster this process is connected to
    (`connect`; a local one is started if none), storing each best in `cache` (see
    the module).

    `measure`: `"gpu"` (one actor per GPU of the cluster), `"cost-model"` (no GPU:
    the cost model's predictions, see `affinec.tuning.model_measure`), or a function
    `(spec, seed) -> Measurer`, run in each actor, whose results are cached under
    `gpu`. `arch`: what to compile for (default: each GPU's own; without a GPU,
    `options.arch`). `measurers`: how many actors (default: one per GPU; one
    without GPUs).
    `timeout_s`: longest a measurement may take. `remeasure`: times a kernel is
    measured again after its actor died. `budget_s`: after that many seconds no more
    compiles or screening measurements start (the specs not compiled are `skipped`).
    `force`: tune the specs the cache has, measuring everything again. `say`: where
    the line of each finished spec goes (with `options.progress`, above a bar).
    """
    ray = require_ray()
    options = options.validate()
    if not isinstance(measure, str):
        if not gpu:
            raise ValueError("a measurer of your own needs the name of its GPU (gpu=)")
    elif measure not in MEASURES:
        raise ValueError(
            f"unknown measure '{measure}' (expected one of {', '.join(MEASURES)})"
        )
    if timeout_s <= 0 or remeasure < 0 or measurers < 0:
        raise ValueError("timeout_s must be positive, remeasure and measurers >= 0")
    if not ray.is_initialized():
        connect(None)
    start = time.monotonic()
    resources = ray.cluster_resources()
    cpus = float(resources.get("CPU", 0))
    if measure == GPU:
        gpus = int(resources.get("GPU", 0))
        count = measurers or gpus
        if count > gpus:
            raise ValueError(
                f"{count} measurers asked for, the cluster has {gpus} GPUs"
            )
        if count == 0:
            raise MeasurerUnavailable(
                "the Ray cluster has no GPU to measure on: --measure cost-model "
                "tunes by the cost model without one"
            )
        actor_options = {"num_gpus": 1, "num_cpus": 1}
    else:
        count = measurers or 1
        # light: they must leave the CPUs to the compiles
        actor_options = {"num_gpus": 0, "num_cpus": 0}
    actor_gpu = COST_MODEL_GPU if measure == COST_MODEL else gpu
    actor_class = ray.remote(MeasuringActor)
    slots = [
        _Slot(
            actor_class.options(
                max_restarts=ACTOR_RESTARTS, max_task_retries=0, **actor_options
            ).remote(measure, options.seed)
        )
        for _ in range(count)
    ]
    try:
        identities = ray.get([s.actor.identity.remote(actor_gpu) for s in slots])
    except ray.exceptions.RayTaskError as e:
        _kill_all(ray, slots)
        raise _cause(e) from None
    for s, (name, _, _) in zip(slots, identities, strict=True):
        s.state, s.gpu = "idle", name
    models = sorted(
        {(name, arch or found or options.arch) for name, found, _ in identities}
    )
    distinct = list(dict.fromkeys(specs))
    journal = {} if force else _journal_index(cache)
    units: list[_Unit] = []
    results: list[ShapeTuning] = []
    for name, target in models:
        for spec in distinct:
            key = tuning_key(spec)
            done = journal.get((key, name, target), {})
            unit = _Unit(len(units), spec, name, target, done)
            units.append(unit)
            entry = None if force else cache.lookup(key, name)
            if entry is not None and entry.arch == target:
                unit.phase = "done"
                unit.tuning = ShapeTuning(spec, "cached", entry=entry, gpu=name)
    driver = _Driver(
        ray, options, cache, units, slots, actor_gpu, timeout_s, remeasure,
        None if budget_s is None else start + budget_s, cpus, say or print, measure,
    )  # fmt: skip
    try:
        driver.run()
    finally:
        _kill_all(ray, slots)
        driver.close()
    for unit in units:
        assert unit.tuning is not None
        results.append(unit.tuning)
    return ZooTuning(
        results,
        measure if isinstance(measure, str) else "custom",
        count,
        cpus,
        time.monotonic() - start,
        driver.compile_failures,
        sum(s.restarts for s in slots),
    )


def _kill_all(ray: Any, slots: list[_Slot]) -> None:
    for s in slots:
        with contextlib.suppress(Exception):  # already gone
            ray.kill(s.actor, no_restart=True)


def _cause(error: Exception) -> BaseException:
    """What a Ray task raised, without Ray's wrapping."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def _config_key(config: KernelConfig) -> str:
    return json.dumps(config_to_json(config), sort_keys=True)


def _journal_index(
    cache: TuningCache,
) -> dict[tuple[str, str, str], dict[tuple[str, str], dict[str, Any]]]:
    """The journal's rows of this compiler by (spec, GPU, arch), then by (kind,
    configuration); the last row of a configuration wins."""
    current = compiler_version()
    out: dict[tuple[str, str, str], dict[tuple[str, str], dict[str, Any]]] = {}
    for row in cache.measurements():
        try:
            if row["compiler"] != current:
                continue
            unit = (str(row["spec"]), str(row["gpu"]), str(row["arch"]))
            key = (str(row["kind"]), json.dumps(row["config"], sort_keys=True))
        except (KeyError, TypeError):
            continue
        out.setdefault(unit, {})[key] = row
    return out


class _Driver:
    """The loop of `tune_specs_ray`: compiles submitted and collected, measurements
    handed to idle actors and collected, timeouts, and each spec's steps."""

    def __init__(
        self,
        ray: Any,
        options: TuneOptions,
        cache: TuningCache,
        units: list[_Unit],
        slots: list[_Slot],
        actor_gpu: str,
        timeout_s: float,
        remeasure: int,
        deadline: float | None,
        cpus: float,
        say: Callable[[str], None],
        measure: object,
    ) -> None:
        self.ray = ray
        self.options = options
        self.cache = cache
        self.units = units
        self.slots = slots
        self.actor_gpu = actor_gpu
        self.timeout_s = timeout_s
        self.remeasure = remeasure
        self.deadline = deadline
        self.compile = ray.remote(
            num_cpus=1, max_retries=COMPILE_RETRIES, max_calls=RECYCLE_COMPILES
        )(compile_one)
        self.most_compiling = max(2, int(2 * cpus))
        self.most_ahead = 2 * len(slots) + 2
        """Specs compiled or compiling ahead of their measurements, at most: enough
        to keep every GPU busy, few enough that their kernels fit the driver."""
        self.compiles: dict[Any, tuple[_Unit, int]] = {}
        self.jobs: list[_Job] = []
        self.compile_failures = 0
        self.next_unit = 0
        self.stopped = False
        self.bar = None
        self.say = say
        if options.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=len(units), desc="zoo", unit="shape", file=sys.stderr)
            if say is print:
                self.say = self.bar.write
        if measure == COST_MODEL:
            self.say("measured by the cost model (no GPU): times are predictions")
        for unit in units:
            if unit.phase == "done":
                self._finished(unit)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        ray = self.ray
        while any(u.phase != "done" for u in self.units):
            if self.deadline is not None and time.monotonic() > self.deadline:
                self._out_of_time()
                continue
            self._submit_compiles()
            self._dispatch()
            waiting = list(self.compiles)
            waiting += [s.ref for s in self.slots if s.state in ("busy", "starting")]
            if not waiting:
                self._no_actor_left()
                continue
            ready, _ = ray.wait(waiting, num_returns=1, timeout=self._wait_s())
            if ready:
                ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            for ref in ready:
                if ref in self.compiles:
                    self._compiled(ref)
                else:
                    slot = next(s for s in self.slots if s.ref == ref)
                    self._answered(slot)
            self._time_out()

    def _wait_s(self) -> float | None:
        ends = [s.since + self.timeout_s for s in self.slots if s.state == "busy"]
        if self.deadline is not None:
            ends.append(self.deadline)
        return max(0.0, min(ends) - time.monotonic()) if ends else None

    # -- compiling ---------------------------------------------------------------------

    def _submit_compiles(self) -> None:
        while len(self.compiles) < self.most_compiling:
            unit = next((u for u in self.units if u.to_compile), None)
            if unit is None:
                unit = self._start_next_unit()
                if unit is None:
                    return
                continue
            index = len(unit.records) - unit.to_compile
            unit.to_compile -= 1
            unit.compiling += 1
            record = unit.records[index]
            ref = self.compile.remote(
                index, unit.spec.to_text(), config_to_json(record.config), unit.arch
            )
            self.compiles[ref] = (unit, index)

    def _start_next_unit(self) -> _Unit | None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            return None
        started = sum(u.phase not in ("waiting", "done") for u in self.units)
        if started >= self.most_ahead:
            return None  # enough compiled kernels wait at the driver
        while self.next_unit < len(self.units):
            unit = self.units[self.next_unit]
            self.next_unit += 1
            if unit.phase != "waiting":
                continue
            unit.started = time.monotonic()
            space = search_space(
                unit.spec, max_candidates=self.options.max_candidates, arch=unit.arch
            )
            unit.space = space
            unit.records = [
                Record(i, c.config, c.origin, c.estimate.ms)
                for i, c in enumerate(space.candidates)
            ]
            unit.to_compile = len(unit.records)
            unit.phase = "compiling"
            unit.result = TuneResult(
                unit.spec, unit.gpu, unit.arch, unit.records, space.considered,
                space.over_capacity, {"space": time.monotonic() - unit.started},
            )  # fmt: skip
            return unit
        return None

    def _compiled(self, ref: Any) -> None:
        ray = self.ray
        unit, index = self.compiles.pop(ref)
        record = unit.records[index]
        try:
            c = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = _cause(e)
            from affinec.backend.ptxas import PtxasNotFound

            if isinstance(cause, PtxasNotFound):
                raise cause from None
            c = Compiled(
                index, record.config, FAILED, f"{type(cause).__name__}: {cause}"
            )
        except ray.exceptions.RayError as e:
            self.compile_failures += 1
            c = Compiled(
                index, record.config, FAILED,
                f"its compiler process died {COMPILE_RETRIES + 1} times "
                f"({type(e).__name__})",
            )  # fmt: skip
        self._absorbed(unit, c)

    def _absorbed(self, unit: _Unit, c: Compiled) -> None:
        record = unit.records[c.index]
        _absorb(record, c, problem_of(unit.spec))
        unit.compiling -= 1
        if (
            record.origin == "baseline"
            and record.status in (RANKED, PRUNED)
            and unit.phase == "compiling"
        ):
            # always measured: no need to wait for the ranking
            record.picked_by = "baseline"
            self._queue(unit, record, _SCREEN)
            unit.queued.add(record.index)
        if unit.compiling == 0 and unit.to_compile == 0:
            self._ranked(unit)
        self._advance(unit)

    def _ranked(self, unit: _Unit) -> None:
        assert unit.result is not None
        unit.compile_done = time.monotonic()
        unit.result.seconds["compile"] = unit.compile_done - unit.started
        ranked = sorted(
            (r for r in unit.records if r.status == RANKED),
            key=lambda r: (r.predicted_ms, r.index),
        )
        for k, r in enumerate(ranked):
            r.rank = k + 1
        unit.phase = "screening"
        picks = choose_picks(unit.result, ranked, self.options)
        picked = {r.index for r in picks}
        for r in unit.records:
            if r.index not in picked:
                r.kernel = None  # never measured: its PTX need not wait here
        for r in picks:
            if r.index in unit.queued:
                if r.index not in unit.early:
                    unit.waiting.add(r.index)
            else:
                unit.waiting.add(r.index)
                self._queue(unit, r, _SCREEN)
        deferred, unit.deferred = unit.deferred, []
        for settle in deferred:
            settle()

    # -- measuring ---------------------------------------------------------------------

    def _queue(self, unit: _Unit, record: Record, kind: str) -> None:
        """A measurement to make, or to take from the journal; the budget spent, no
        screening starts."""
        if kind == _SCREEN and self.stopped:
            unit.waiting.discard(record.index)
            return
        row = unit.journal.get((kind, _config_key(record.config)))
        if row is not None and kind != _CONFIRM:
            self._count(unit, "restored")
            if row.get("status") == TIMED_OUT:
                reason = str(row.get("reason", ""))
                self._measured(unit, record, partial(_timed_out, record, reason))
            else:
                m = Measurement(
                    bool(row.get("ok")),
                    row.get("ms"),
                    row.get("error"),
                    str(row.get("reason", "")),
                    float(row.get("seconds") or 0.0),
                )
                self._measured(
                    unit, record, partial(self._apply, unit, record, kind, m)
                )
            return
        self.jobs.append(_Job(unit, record, kind))

    def _dispatch(self) -> None:
        for slot in self.slots:
            if slot.state != "idle":
                continue
            mine = [j for j in self.jobs if j.unit.gpu == slot.gpu]
            if not mine:
                continue
            job = min(mine, key=lambda j: (j.unit.number, j.kind != _CONFIRM))
            self.jobs.remove(job)
            kernel = job.record.kernel
            slot.ref = slot.actor.run.remote(
                job.unit.spec.to_text(), kernel, job.kind, self.options.confirm_runs
            )
            slot.state, slot.job, slot.since = "busy", job, time.monotonic()

    def _answered(self, slot: _Slot) -> None:
        ray = self.ray
        ref, job = slot.ref, slot.job
        if slot.state == "starting":
            slot.ref = None
            try:
                ray.get(ref)
                slot.state = "idle"
            except ray.exceptions.ActorUnavailableError:
                # asked while Ray was restarting it: ask again
                time.sleep(0.05)
                slot.ref = slot.actor.identity.remote(self.actor_gpu)
            except ray.exceptions.RayError:
                slot.state = "dead"  # out of restarts
            return
        assert job is not None
        slot.state, slot.ref, slot.job = "idle", None, None
        try:
            m, broken = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = _cause(e)
            if isinstance(cause, MeasurerUnavailable):
                raise cause from None
            m, broken = (
                Measurement(False, reason=f"launch failed: {type(cause).__name__}: "
                            f"{str(cause)[:200]}"),
                False,
            )  # fmt: skip
        except ray.exceptions.RayError as e:
            # the actor died with the kernel in flight: Ray restarts it
            slot.restarts += 1
            self._restarting(slot)
            job.deaths += 1
            unit = job.unit
            if job.deaths <= self.remeasure:
                self._count(unit, "remeasured")
                self.jobs.append(job)
                return
            self._count(unit, "lost")
            reason = (
                f"its measuring process died {job.deaths} times while measuring it "
                f"({type(e).__name__})"
            )
            # a final lost keeps its screening time
            lost = _nothing if job.kind == _FINAL else _lost(job.record, reason)
            self._measured(unit, job.record, lost)
            self._advance(unit)
            return
        if broken:  # a faulted CUDA context: a fresh process gets a fresh one
            ray.kill(slot.actor, no_restart=False)
            slot.restarts += 1
            self._restarting(slot)
        self._count(job.unit, "measured")
        if job.kind != _CONFIRM:
            self._journal(job.unit, job.record, job.kind, m)
        unit, record, kind = job.unit, job.record, job.kind
        self._measured(unit, record, partial(self._apply, unit, record, kind, m))
        self._advance(unit)

    def _restarting(self, slot: _Slot) -> None:
        slot.state = "starting"
        slot.job = None
        slot.ref = slot.actor.identity.remote(self.actor_gpu)

    def _time_out(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.state != "busy" or now - slot.since < self.timeout_s:
                continue
            job = slot.job
            assert job is not None
            self.ray.kill(slot.actor, no_restart=False)
            slot.restarts += 1
            self._restarting(slot)
            reason = (
                f"its measurement took over {self.timeout_s:g} s (the kernel hung); "
                "the measuring actor was restarted"
            )
            self._count(job.unit, "timed_out")
            if job.kind != _CONFIRM:
                m = Measurement(False, reason=reason, seconds=now - slot.since)
                self._journal(job.unit, job.record, job.kind, m, TIMED_OUT)
            record = job.record
            self._measured(job.unit, record, partial(_timed_out, record, reason))
            self._advance(job.unit)

    def _no_actor_left(self) -> None:
        """Every actor of a GPU model is out of restarts: what is left to measure
        on that model is lost."""
        alive = {s.gpu for s in self.slots if s.state != "dead"}
        jobs = [j for j in self.jobs if j.unit.gpu not in alive]
        if not jobs:
            raise RuntimeError("the tuning loop has nothing to wait for")  # a bug
        self.jobs = [j for j in self.jobs if j.unit.gpu in alive]
        for job in jobs:
            self._count(job.unit, "lost")
            reason = "every measuring actor is out of restarts"
            lost = _nothing if job.kind == _FINAL else _lost(job.record, reason)
            self._measured(job.unit, job.record, lost)
        for job in jobs:
            self._advance(job.unit)

    def _apply(self, unit: _Unit, r: Record, kind: str, m: Measurement) -> None:
        """What `affinec.tuning.tuner` does with a measurement of each kind."""
        if kind == _SCREEN:
            record_measurement(r, m)
        elif kind == _FINAL:
            record_final(r, m)
        elif m.ok:
            unit.phase = "confirmed"
        else:
            r.status, r.reason = WRONG, m.reason

    def _journal(
        self, unit: _Unit, r: Record, kind: str, m: Measurement, status: str = ""
    ) -> None:
        self.cache.append_measurements(
            [
                {
                    "spec": tuning_key(unit.spec),
                    "gpu": unit.gpu,
                    "compiler": compiler_version(),
                    "arch": unit.arch,
                    "kind": kind,
                    "config": config_to_json(r.config),
                    "describe": r.config.describe(),
                    "status": status or r.status,
                    "ok": m.ok,
                    "ms": m.ms,
                    "error": None
                    if m.error is None or math.isinf(m.error)
                    else m.error,
                    "reason": m.reason,
                    "seconds": m.seconds,
                    "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                }
            ]
        )

    def _count(self, unit: _Unit, what: str) -> None:
        unit.counts[what] = unit.counts.get(what, 0) + 1

    def _measured(
        self, unit: _Unit, record: Record, settle: Callable[[], None] = lambda: None
    ) -> None:
        """A measurement of `record` is in, `settle` writes it into the record
        (callers then `_advance`). Before the spec is ranked (its baseline) it waits
        for the ranking, which must see the record as compiling left it."""
        unit.waiting.discard(record.index)
        if unit.phase == "compiling":
            unit.early.add(record.index)
            unit.deferred.append(settle)
        else:
            settle()

    # -- a spec's steps ----------------------------------------------------------------

    def _advance(self, unit: _Unit) -> None:
        """The next steps of `unit`, as far as its measurements in allow."""
        result = unit.result
        while not unit.waiting and result is not None:
            if unit.phase == "screening":
                finals = end_screening(result, unit.records, self.options.finalists)
                unit.phase = "finals"
                unit.waiting.update(r.index for r in finals)
                for r in finals:
                    self._queue(unit, r, _FINAL)
            elif unit.phase in ("finals", "confirming"):
                unit.phase = "confirming"
                self._confirm_next(unit)
            elif unit.phase == "confirmed":
                self._finish(unit)
            else:
                return

    def _confirm_next(self, unit: _Unit) -> None:
        assert unit.result is not None
        best = unit.result.best
        if best is None:
            self._finish(unit)
            return
        unit.waiting.add(best.index)
        self._queue(unit, best, _CONFIRM)

    def _finish(self, unit: _Unit, outcome: str = "") -> None:
        from affinec.tuning.cached import entry_of

        result = unit.result
        now = time.monotonic()
        unit.phase = "done"
        counts = unit.counts
        entry: Entry | None = None
        if result is not None:
            result.seconds["measure"] = now - (unit.compile_done or now)
            result.seconds["total"] = now - unit.started
            entry = entry_of(result)
            if entry is not None and not outcome:
                self.cache.store(entry)
            for r in unit.records:
                r.kernel = None  # measured: the PTX is in the log, not needed here
        if not outcome:
            outcome = "tuned" if entry is not None else "failed"
            if (
                entry is None
                and counts.get("measured", 0) + counts.get("restored", 0) == 0
                and result is not None
                and result.stopped
            ):
                outcome = "skipped"
        unit.tuning = ShapeTuning(
            unit.spec,
            outcome,
            result,
            entry if outcome == "tuned" else None,
            gpu=unit.gpu,
            measured=counts.get("measured", 0),
            restored=counts.get("restored", 0),
            timed_out=counts.get("timed_out", 0),
            lost=counts.get("lost", 0),
            remeasured=counts.get("remeasured", 0),
            seconds=now - unit.started if unit.started else 0.0,
        )
        self._finished(unit)

    def _finished(self, unit: _Unit) -> None:
        t = unit.tuning
        assert t is not None
        if self.bar is not None:
            self.bar.update(1)
        self.say(_line(t))

    def _out_of_time(self) -> None:
        """The budget is spent: no compile and no screening measurement starts any
        more (specs not started are `skipped`); what runs ends, and the specs
        measured get their finalists and confirmation."""
        self.stopped = True
        self.deadline = None
        stopped = "the budget ran out"
        for unit in self.units:
            if unit.phase == "waiting":
                unit.phase = "done"
                unit.tuning = ShapeTuning(unit.spec, "skipped", gpu=unit.gpu)
                self._finished(unit)
                continue
            if unit.result is not None and unit.phase != "done":
                unit.result.stopped = stopped
            if unit.to_compile:
                problem = problem_of(unit.spec)
                for r in unit.records[len(unit.records) - unit.to_compile :]:
                    skipped = Compiled(
                        r.index, r.config, SKIPPED,
                        "not compiled: the time budget ran out",
                    )  # fmt: skip
                    _absorb(r, skipped, problem)
                unit.to_compile = 0
                if unit.compiling == 0:
                    self._ranked(unit)
        dropped = [j for j in self.jobs if j.kind == _SCREEN]
        self.jobs = [j for j in self.jobs if j.kind != _SCREEN]
        for job in dropped:
            self._measured(job.unit, job.record)
        for unit in self.units:
            self._advance(unit)


def _timed_out(record: Record, reason: str) -> None:
    record.status, record.reason = TIMED_OUT, reason
    record.final_ms = None


def _lost(record: Record, reason: str) -> Callable[[], None]:
    def settle() -> None:
        record.status, record.reason = LOST, reason

    return settle


def _nothing() -> None:
    pass


def _line(t: ShapeTuning) -> str:
    text = f"{t.spec.to_text()} on {t.gpu}: {t.outcome}"
    e = t.entry
    if e is not None:
        text += f", {e.ms:.4f} ms"
        if e.baseline_ms:
            text += f" ({e.baseline_ms / e.ms:.2f}x config_for)"
    if t.outcome != "cached":
        text += (
            f"; {t.measured} measurements, {t.restored} from the journal, "
            f"{t.timed_out} timed out, {t.lost} lost, {t.seconds:.1f} s"
        )
    return text


__all__ = [
    "COST_MODEL",
    "GPU",
    "LOST",
    "MEASURES",
    "TIMED_OUT",
    "MeasuringActor",
    "ShapeTuning",
    "ZooTuning",
    "connect",
    "require_ray",
    "tune_specs_ray",
]
