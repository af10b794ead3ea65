"""Tuning many specs at once — a zoo of networks' distinct convolutions — within one
budget, as a pipeline over the whole zoo rather than one spec after another:

    zoo = tune_zoo(specs, options, cache, budget_s=300, measurer_for=GpuMeasurer)
    for t in zoo.shapes: t.spec, t.outcome, t.entry
    print(zoo.summary())

- one pool of compiler processes (`options.jobs`: every core but one) works for the
  whole zoo: it builds each spec's search space (the baseline `config_for`, its
  neighbours, the cost model's picks: `affinec.tuning.space`, seconds of a core for
  a large spec) and compiles its candidates, the specs in order, a few spaces built
  ahead of the compiles so that no process waits;
- this process measures on the GPU whatever is ready, one kernel at a time: a spec's
  baseline as soon as it is compiled, its other picks as soon as its candidates are
  all compiled (the model ranks them together), while the later specs compile. The
  GPU never waits on more than one spec's compiles, and the compiles never wait on
  the GPU;
- each spec goes through the search of `affinec.tuning.tuner` (the same candidates,
  pruning, ranking, picks, finalists and confirmation, step by step:
  `affinec.tuning.zoo_steps`), and its best is cached as soon as it is confirmed;
- the measurements go to the cache's journal as they are made, so a run started
  again takes them from there instead of measuring them again.

A spec is given to `specs` once however many networks and batches share it, and so
is compiled once. The budget bounds the wall time: once it is spent no compile and
no screening measurement starts (compiles under way are dropped), the specs
already screened get their finalists and confirmation and are cached, and the
others are `skipped`. A spec whose every candidate was refused is `refused`.

The processes are replaced every `RECYCLE_COMPILES` compiles each, because LLVM, as
llvmlite 0.50 runs its -O3 pipeline, keeps about 0.3 KB an instruction of every
module a process optimized (1-3 MB a tensor-core kernel) until the process ends.

Without `measurer_for` (no GPU) the candidates are compiled and ranked only and
nothing is cached. A spec the cache already holds is not tuned again (`force`
does).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from affinec.backend.ptxas import PtxasNotFound
from affinec.base.spec import Spec, parse_spec
from affinec.tuning.cache import TuningCache, tuning_key
from affinec.tuning.compiling import (
    COMPILED,
    DIED,
    FAILED,
    REFUSED,
    SKIPPED,
    Compiled,
    InlineExecutor,
    compile_one,
    config_to_json,
    end_processes,
    make_pool,
)
from affinec.tuning.journal import journal_index
from affinec.tuning.log import write_log
from affinec.tuning.measure import Measurement, Measurer
from affinec.tuning.ray_workers import CONFIRM, FINAL, RECYCLE_COMPILES, SCREEN
from affinec.tuning.space import Space, search_space
from affinec.tuning.tune_result import PRUNED, RANKED, Record
from affinec.tuning.tuner import TuneOptions
from affinec.tuning.zoo_lines import line_of_spec
from affinec.tuning.zoo_results import ShapeTuning, SpecTuning
from affinec.tuning.zoo_steps import REFUSED_ALL, Unit, ZooSteps, settle_nothing

SPACES_AHEAD = 16
"""Candidates a search space under way is counted as, when deciding whether the
compiles queued are enough to keep the processes busy while it is built."""


@dataclass
class ZooRun:
    """What `tune_zoo` did: a `ShapeTuning` per spec (in the order given), and what
    the compiling and measuring took."""

    shapes: list[ShapeTuning]
    seconds: float
    """Wall time of the whole run."""
    budget_s: float
    processes: int
    """Compiler processes (1: compiled in this process)."""
    spaces: int = 0
    space_s: float = 0.0
    """Seconds the search spaces took, summed over the processes."""
    compiles: Counter[str] = field(default_factory=Counter)
    """Candidates by what compiling them gave (`compiled`, `refused`, `failed`,
    `skipped`)."""
    compile_s: float = 0.0
    """Seconds the compiles took, summed over the processes."""
    measurements: int = 0
    measure_s: float = 0.0
    """Seconds this process spent measuring (the GPU's busy time, at most)."""
    first_measurement_s: float | None = None
    """When the first measurement started, from the start of the run."""
    last_compile_s: float | None = None
    """When the last compile came back, from the start of the run."""
    stopped: str = ""
    """Why the run stopped before every spec was done (empty if it did not)."""

    @property
    def failed(self) -> bool:
        """A spec failed or was refused whole, or measuring broke down."""
        return bool(self.stopped and self.stopped != OUT_OF_TIME) or any(
            t.outcome in ("failed", REFUSED_ALL) for t in self.shapes
        )

    def summary(self) -> str:
        """A few lines: the outcomes, what compiling and measuring took, and the
        specs left, refused or failed."""
        outcomes = Counter(t.outcome for t in self.shapes)
        ended = f"; {self.stopped}" if self.stopped else ""
        lines = [
            f"{len(self.shapes)} shapes in {self.seconds:.1f} s (budget "
            f"{self.budget_s:g} s{ended}): "
            + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))
        ]
        total = sum(self.compiles.values())
        done = self.compiles[COMPILED] + self.compiles[REFUSED] + self.compiles[FAILED]
        each = self.compile_s / done if done else 0.0
        last = (
            f", the last back at {self.last_compile_s:.1f} s"
            if self.last_compile_s is not None
            else ""
        )
        lines.append(
            f"compiling ({self.processes} processes): {self.spaces} search spaces "
            f"({self.space_s:.1f} s of CPU), {total} candidates: "
            + ", ".join(f"{n} {k}" for k, n in sorted(self.compiles.items()))
            + f" ({self.compile_s:.1f} s of CPU, {each:.2f} s each){last}"
        )
        first = (
            f", the first at {self.first_measurement_s:.1f} s"
            if self.first_measurement_s is not None
            else ""
        )
        busy = self.measure_s / self.seconds if self.seconds else 0.0
        lines.append(
            f"measuring: {self.measurements} measurements in {self.measure_s:.1f} s "
            f"({busy:.0%} of the wall time){first}"
        )
        for outcome, what in (
            ("skipped", "left for lack of time"),
            (REFUSED_ALL, "refused (no candidate compiled)"),
            ("failed", "failed (nothing measured was right)"),
        ):
            specs = [t.spec.to_text() for t in self.shapes if t.outcome == outcome]
            if specs:
                lines.append(f"{what}: {len(specs)}")
                lines += [f"  {text}" for text in specs]
        return "\n".join(lines)


OUT_OF_TIME = "the budget ran out"
GPU_FAULTED = "the GPU faulted (a kernel's launch failed)"


def tune_specs(
    specs: Sequence[Spec],
    options: TuneOptions,
    cache: TuningCache,
    *,
    budget_s: float,
    gpu: str = "",
    measurer_for: Callable[[Spec], Measurer] | None = None,
    force: bool = False,
    log_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> list[SpecTuning]:
    """`tune_zoo`'s outcome of each spec, in the order given."""
    zoo = tune_zoo(
        specs, options, cache, budget_s=budget_s, gpu=gpu, measurer_for=measurer_for,
        force=force, log_dir=log_dir, say=say,
    )  # fmt: skip
    return list(zoo.shapes)


def tune_zoo(
    specs: Sequence[Spec],
    options: TuneOptions,
    cache: TuningCache,
    *,
    budget_s: float,
    gpu: str = "",
    measurer_for: Callable[[Spec], Measurer] | None = None,
    force: bool = False,
    log_dir: Path | None = None,
    say: Callable[[str], None] = print,
) -> ZooRun:
    """Tune `specs` within `budget_s` seconds of wall time in all (see the module),
    each best stored in `cache` under `gpu`; `say` gets a line per spec as it
    finishes, `log_dir` its records (JSON lines)."""
    options = options.validate()
    if budget_s <= 0:
        raise ValueError(
            f"the budget must be a positive number of seconds, got {budget_s}"
        )
    start = time.monotonic()
    distinct = list(dict.fromkeys(specs))
    measuring = measurer_for is not None
    journal = journal_index(cache) if measuring and not force else {}
    units: list[Unit] = []
    for spec in distinct:
        key = tuning_key(spec)
        unit = Unit(
            len(units),
            spec,
            gpu,
            options.arch,
            journal.get((key, gpu, options.arch), {}),
        )
        units.append(unit)
        entry = cache.lookup(key, gpu) if measuring and not force else None
        if entry is not None and entry.arch == options.arch:
            unit.phase = "done"
            unit.tuning = ShapeTuning(spec, "cached", entry=entry, gpu=gpu)
    pipeline = Pipeline(
        options, cache, units, start + budget_s, say, measurer_for, log_dir
    )
    try:
        pipeline.run()
    finally:
        pipeline.close()
    by_spec = {}
    for unit in units:
        assert unit.tuning is not None
        by_spec[unit.spec] = unit.tuning
    run = pipeline.run_stats
    run.shapes = [by_spec[s] for s in specs]
    run.seconds = time.monotonic() - start
    run.budget_s = budget_s
    return run


def plan_space(spec_text: str, max_candidates: int, arch: str) -> tuple[Space, float]:
    """A spec's search space and the seconds it took (what a compiler process runs
    for each spec before its candidates)."""
    start = time.perf_counter()
    space = search_space(
        parse_spec(spec_text), max_candidates=max_candidates, arch=arch
    )
    return space, time.perf_counter() - start


class Pipeline(ZooSteps):
    """The loop of `tune_zoo`: spaces and compiles submitted to the processes and
    collected, the measurements made here, each spec's steps (`ZooSteps`)."""

    def __init__(
        self,
        options: TuneOptions,
        cache: TuningCache,
        units: list[Unit],
        deadline: float,
        say: Callable[[str], None],
        measurer_for: Callable[[Spec], Measurer] | None,
        log_dir: Path | None,
    ) -> None:
        super().__init__(options, cache, units, deadline, say)
        self.start = time.monotonic()
        self.measurer_for = measurer_for
        self.log_dir = log_dir
        self.processes = options.workers
        self.pool: Executor | None = None
        self.pool_tasks = 0
        self.retired: list[Executor] = []
        self.tasks: dict[Future, tuple[Unit, int | None]] = {}
        """Under way: a spec's space (None) or one of its candidates (the index)."""
        self.measurers: dict[int, Measurer] = {}
        self.run_stats = ZooRun([], 0.0, 0.0, self.processes)
        self.logs = 0
        for unit in units:
            if unit.phase == "done":
                self._finished(unit)

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> None:
        while any(u.phase != "done" for u in self.units):
            if self.deadline is not None and time.monotonic() > self.deadline:
                self._stop(OUT_OF_TIME)
                continue
            self._submit()
            self._collect(0.0)
            if self.jobs:
                self._measure_next()
                continue
            if not self.tasks:
                if self._submittable() or all(u.phase == "done" for u in self.units):
                    continue  # compiled in this process: the next task, or the end
                raise RuntimeError("the tuning loop has nothing to wait for")  # a bug
            timeout = (
                None
                if self.deadline is None
                else max(0.0, self.deadline - time.monotonic())
            )
            self._collect(timeout)

    def close(self) -> None:
        super().close()
        for measurer in self.measurers.values():
            measurer.close()
        self.measurers.clear()
        pools = self.retired + ([self.pool] if self.pool is not None else [])
        for pool in pools:
            if self.tasks or self.stopped:
                end_processes(pool)
            pool.shutdown(wait=not self.stopped, cancel_futures=True)
        self.pool, self.retired = None, []

    # -- compiling ---------------------------------------------------------------------

    def _executor(self) -> Executor:
        """The pool to submit to: a fresh one once each process has had its
        `RECYCLE_COMPILES` tasks (the old one ends once its tasks are done)."""
        if self.processes == 1:
            if self.pool is None:
                self.pool = InlineExecutor()
            return self.pool
        if (
            self.pool is not None
            and self.pool_tasks >= self.processes * RECYCLE_COMPILES
        ):
            self.pool.shutdown(wait=False)
            self.retired.append(self.pool)
            self.pool = None
        if self.pool is None:
            self.pool = make_pool(self.processes)
            self.pool_tasks = 0
        self.pool_tasks += 1
        return self.pool

    def _submit(self) -> None:
        """Keep every process busy: the next candidates in the specs' order, and
        the next spaces once fewer candidates wait than the processes take."""
        if self.stopped:
            return
        room = 1 if self.processes == 1 else 2 * self.processes
        while len(self.tasks) < room:
            planning = sum(index is None for _, index in self.tasks.values())
            waiting = sum(u.to_compile for u in self.units) + SPACES_AHEAD * planning
            unplanned = next((u for u in self.units if u.phase == "waiting"), None)
            compiling = next((u for u in self.units if u.to_compile), None)
            if unplanned is not None and (waiting < room or compiling is None):
                self._plan(unplanned)
            elif compiling is not None:
                self._compile(compiling)
            else:
                return

    def _submittable(self) -> bool:
        return not self.stopped and any(
            u.phase == "waiting" or u.to_compile for u in self.units
        )

    def _plan(self, unit: Unit) -> None:
        unit.phase = "planning"
        unit.started = time.monotonic()
        self._task(
            unit, None, plan_space, unit.spec.to_text(), self.options.max_candidates,
            unit.arch,
        )  # fmt: skip

    def _compile(self, unit: Unit) -> None:
        index = len(unit.records) - unit.to_compile
        unit.to_compile -= 1
        unit.compiling += 1
        config = config_to_json(unit.records[index].config)
        self._task(
            unit, index, compile_one, index, unit.spec.to_text(), config, unit.arch
        )

    def _task(self, unit: Unit, index: int | None, fn, *args) -> None:
        try:
            future = self._executor().submit(fn, *args)
        except BrokenProcessPool:
            self.pool = None  # a process died: the next task gets a fresh pool
            future = Future()
            future.set_exception(BrokenProcessPool(DIED))
        self.tasks[future] = (unit, index)

    def _collect(self, timeout: float | None) -> None:
        if not self.tasks:
            return
        done, _ = wait(list(self.tasks), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: _order(self.tasks[f])):
            unit, index = self.tasks.pop(future)
            if index is None:
                self._planned(unit, future)
            else:
                self._compiled(unit, index, future)

    def _planned(self, unit: Unit, future: Future) -> None:
        try:
            space, seconds = future.result()
        except BrokenProcessPool:
            self.pool = None
            self._unplannable(unit, DIED)
            return
        except Exception as e:  # the space could not be built: say why, go on
            self._unplannable(unit, f"{type(e).__name__}: {e}")
            return
        self.run_stats.spaces += 1
        self.run_stats.space_s += seconds
        unit.take_space(space, seconds)

    def _unplannable(self, unit: Unit, reason: str) -> None:
        self.say(f"{unit.spec.to_text()}: no search space: {reason}")
        unit.phase = "done"
        unit.tuning = ShapeTuning(unit.spec, "failed", gpu=unit.gpu)
        self._finished(unit)

    def _compiled(self, unit: Unit, index: int, future: Future) -> None:
        config = unit.records[index].config
        if future.cancelled():
            c = Compiled(
                index, config, SKIPPED, "not compiled: the time budget ran out"
            )
        else:
            try:
                c = future.result()
            except PtxasNotFound:
                raise
            except BrokenProcessPool:
                self.pool = None
                c = Compiled(index, config, FAILED, DIED)
            except Exception as e:
                c = Compiled(index, config, FAILED, f"{type(e).__name__}: {e}")
        self.run_stats.compiles[c.status] += 1
        self.run_stats.compile_s += c.seconds
        self.run_stats.last_compile_s = time.monotonic() - self.start
        self._absorbed(unit, c)

    # -- without a measurer: ranked only -------------------------------------------------

    def _queue(self, unit: Unit, record: Record, kind: str) -> None:
        if self.measurer_for is not None:
            super()._queue(unit, record, kind)

    def _ranked(self, unit: Unit) -> None:
        super()._ranked(unit)
        if self.measurer_for is None:
            unit.waiting.clear()
            compiled = any(r.status in (RANKED, PRUNED) for r in unit.records)
            self._finish(unit, "ranked" if compiled else "")

    # -- measuring ---------------------------------------------------------------------

    def _measurer(self, unit: Unit) -> Measurer:
        measurer = self.measurers.get(unit.number)
        if measurer is None:
            assert self.measurer_for is not None
            measurer = self.measurers[unit.number] = self.measurer_for(unit.spec)
        return measurer

    def _measure_next(self) -> None:
        """Make the first measurement queued (the earliest spec's, a confirmation
        first), or, the GPU broken, let it go unmade."""
        job = min(self.jobs, key=lambda j: (j.unit.number, j.kind != CONFIRM))
        self.jobs.remove(job)
        unit, record, kind = job.unit, job.record, job.kind
        if self.stopped and self.run_stats.stopped == GPU_FAULTED:
            self._unmeasured(unit, record, kind)
            return
        measurer = self._measurer(unit)
        kernel = record.kernel
        assert kernel is not None
        started = time.monotonic()
        if self.run_stats.first_measurement_s is None:
            self.run_stats.first_measurement_s = started - self.start
        if kind == CONFIRM:
            m = measurer.confirm(kernel, self.options.confirm_runs)
        else:
            m = measurer.measure(kernel, final=kind == FINAL)
        self.run_stats.measurements += 1
        self.run_stats.measure_s += time.monotonic() - started
        self._count(unit, "measured")
        if kind != CONFIRM:
            self._journal(unit, record, kind, m)
        self._measured(unit, record, partial(self._apply, unit, record, kind, m))
        self._advance(unit)
        if measurer.broken and not self.stopped:
            self._stop(GPU_FAULTED)

    def _unmeasured(self, unit: Unit, record: Record, kind: str) -> None:
        """A measurement the broken GPU cannot make: a pick stays unmeasured, a
        finalist keeps its screening time, a winner is not confirmed (so not
        cached)."""
        if kind == SCREEN:
            self._measured(unit, record)
        elif kind == FINAL:
            self._measured(unit, record, settle_nothing)
        else:
            m = Measurement(False, reason=f"not confirmed: {GPU_FAULTED}")
            self._measured(unit, record, partial(self._apply, unit, record, kind, m))
        self._advance(unit)

    # -- the end -----------------------------------------------------------------------

    def _stop(self, reason: str) -> None:
        """No compile or screening measurement starts any more: the compiles under
        way are dropped, the specs not compiled are `skipped` (`ZooSteps`)."""
        self.run_stats.stopped = reason
        self.stopped = True
        for unit in self.units:
            if unit.result is not None and unit.phase != "done":
                unit.result.stopped = reason
        tasks, self.tasks = self.tasks, {}
        for future in tasks:
            future.cancel()
        for unit, index in sorted(tasks.values(), key=_order):
            if index is None:
                unit.phase = "waiting"  # skipped below
            else:
                dropped = Compiled(
                    index, unit.records[index].config, SKIPPED,
                    f"not compiled: {reason}",
                )  # fmt: skip
                self.run_stats.compiles[SKIPPED] += 1
                self._absorbed(unit, dropped)
        self._out_of_time()
        for unit in self.units:
            if unit.result is not None and unit.phase != "done":
                unit.result.stopped = reason

    def _finish(self, unit: Unit, outcome: str = "") -> None:
        measurer = self.measurers.get(unit.number)
        result = unit.result
        if (
            self.options.measure_cudnn
            and measurer is not None
            and not measurer.broken
            and result is not None
            and not outcome
        ):
            result.cudnn_ms = measurer.cudnn_ms()
        super()._finish(unit, outcome)

    def _finished(self, unit: Unit) -> None:
        measurer = self.measurers.pop(unit.number, None)
        if measurer is not None:
            measurer.close()
        t = unit.tuning
        assert t is not None
        if self.log_dir is not None and t.result is not None:
            self.logs += 1
            write_log(t.result, self.log_dir / f"{unit.spec.kind}-{self.logs}.jsonl")
        if self.bar is not None:
            self.bar.update(1)
        self.say(line_of_spec(t))


def _order(task: tuple[Unit, int | None]) -> tuple[int, int]:
    unit, index = task
    return unit.number, -1 if index is None else index


__all__ = [
    "GPU_FAULTED",
    "OUT_OF_TIME",
    "Pipeline",
    "SpecTuning",
    "ZooRun",
    "line_of_spec",
    "plan_space",
    "tune_specs",
    "tune_zoo",
]
