"""A zoo's specs through the tuner's search, step by step as their compiles and
measurements come in, for `affinec.tuning.distributed`: the baseline queued as soon
as it is compiled, the ranking and picks once all are, screening, finalists,
confirmation, the entry stored; measurements taken from the journal instead of
made again, and what the time budget stops.

`ZooSteps` queues the measurements to make in `jobs` and is told of each that
comes in (`_measured`); who makes them, and how compiles are run, is its
subclass's business (`affinec.tuning.ray_driver`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from affinec.base.spec import Spec
from affinec.tuning.cache import Entry, TuningCache
from affinec.tuning.compiling import FAILED, REFUSED, SKIPPED, Compiled
from affinec.tuning.journal import (
    Row,
    config_key,
    journal_row,
    measurement_of,
)
from affinec.tuning.measure import Measurement
from affinec.tuning.problem import problem_of
from affinec.tuning.ray_workers import CONFIRM, FINAL, SCREEN
from affinec.tuning.space import Space
from affinec.tuning.tune_result import (
    PRUNED,
    RANKED,
    WRONG,
    Record,
    TuneResult,
)
from affinec.tuning.tuner import (
    TuneOptions,
    _absorb,
    choose_picks,
    end_screening,
    record_final,
    record_measurement,
)
from affinec.tuning.zoo_results import ShapeTuning, line_of

TIMED_OUT = "timed-out"
"""A record's status: its measurement outlasted `timeout_s` (the kernel hung)."""
LOST = "lost"
"""A record's status: its measuring actor died each time it measured it."""
REFUSED_ALL = "refused"
"""A spec's outcome: the compiler refused (or broke on) every candidate."""


@dataclass
class Unit:
    """One spec on one GPU model, on its way through the search."""

    number: int
    spec: Spec
    gpu: str
    arch: str
    journal: dict[tuple[str, str], Row]
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

    def take_space(self, space: Space, seconds: float) -> None:
        """Its search space, built in `seconds`: a record a candidate, each to be
        compiled."""
        self.space = space
        self.records = [
            Record(i, c.config, c.origin, c.estimate.ms)
            for i, c in enumerate(space.candidates)
        ]
        self.to_compile = len(self.records)
        self.phase = "compiling"
        self.result = TuneResult(
            self.spec, self.gpu, self.arch, self.records, space.considered,
            space.over_capacity, {"space": seconds},
        )  # fmt: skip


@dataclass
class Job:
    unit: Unit
    record: Record
    kind: str
    deaths: int = 0


class ZooSteps:
    """The steps of each spec of `units` (see the module). `deadline`: the
    `time.monotonic()` after which the budget is spent; `say`: where each finished
    spec's line goes."""

    def __init__(
        self,
        options: TuneOptions,
        cache: TuningCache,
        units: list[Unit],
        deadline: float | None,
        say: Callable[[str], None],
    ) -> None:
        self.options = options
        self.cache = cache
        self.units = units
        self.deadline = deadline
        self.jobs: list[Job] = []
        self.stopped = False
        self.bar = None
        self.say = say
        if options.progress:
            from tqdm import tqdm

            self.bar = tqdm(total=len(units), desc="zoo", unit="shape", file=sys.stderr)
            if say is print:
                self.say = self.bar.write

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    # -- compiled ----------------------------------------------------------------------

    def _absorbed(self, unit: Unit, c: Compiled) -> None:
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
            self._queue(unit, record, SCREEN)
            unit.queued.add(record.index)
        if unit.compiling == 0 and unit.to_compile == 0:
            self._ranked(unit)
        self._advance(unit)

    def _ranked(self, unit: Unit) -> None:
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
                self._queue(unit, r, SCREEN)
        deferred, unit.deferred = unit.deferred, []
        for settle in deferred:
            settle()

    # -- measuring ---------------------------------------------------------------------

    def _queue(self, unit: Unit, record: Record, kind: str) -> None:
        """A measurement to make, or to take from the journal; the budget spent, no
        screening starts."""
        if kind == SCREEN and self.stopped:
            unit.waiting.discard(record.index)
            return
        row = unit.journal.get((kind, config_key(record.config)))
        if row is not None and kind != CONFIRM:
            self._count(unit, "restored")
            if row.get("status") == TIMED_OUT:
                reason = str(row.get("reason", ""))
                self._measured(unit, record, partial(settle_timed_out, record, reason))
            else:
                m = measurement_of(row)
                self._measured(
                    unit, record, partial(self._apply, unit, record, kind, m)
                )
            return
        self.jobs.append(Job(unit, record, kind))

    # -- measured ----------------------------------------------------------------------

    def _apply(self, unit: Unit, r: Record, kind: str, m: Measurement) -> None:
        """What `affinec.tuning.tuner` does with a measurement of each kind."""
        if kind == SCREEN:
            record_measurement(r, m)
        elif kind == FINAL:
            record_final(r, m)
        elif m.ok:
            unit.phase = "confirmed"
        else:
            r.status, r.reason = WRONG, m.reason

    def _journal(
        self, unit: Unit, r: Record, kind: str, m: Measurement, status: str = ""
    ) -> None:
        row = journal_row(unit.spec, unit.gpu, unit.arch, kind, r, m, status)
        self.cache.append_measurements([row])

    def _count(self, unit: Unit, what: str) -> None:
        unit.counts[what] = unit.counts.get(what, 0) + 1

    def _measured(
        self, unit: Unit, record: Record, settle: Callable[[], None] = lambda: None
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

    def _advance(self, unit: Unit) -> None:
        """The next steps of `unit`, as far as its measurements in allow."""
        result = unit.result
        while not unit.waiting and result is not None:
            if unit.phase == "screening":
                finals = end_screening(result, unit.records, self.options.finalists)
                unit.phase = "finals"
                unit.waiting.update(r.index for r in finals)
                for r in finals:
                    self._queue(unit, r, FINAL)
            elif unit.phase in ("finals", "confirming"):
                unit.phase = "confirming"
                self._confirm_next(unit)
            elif unit.phase == "confirmed":
                self._finish(unit)
            else:
                return

    def _confirm_next(self, unit: Unit) -> None:
        assert unit.result is not None
        best = unit.result.best
        if best is None:
            self._finish(unit)
            return
        unit.waiting.add(best.index)
        self._queue(unit, best, CONFIRM)

    def _finish(self, unit: Unit, outcome: str = "") -> None:
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
            if entry is None and result is not None and refused_all(result):
                outcome = REFUSED_ALL
            elif (
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

    def _finished(self, unit: Unit) -> None:
        t = unit.tuning
        assert t is not None
        if self.bar is not None:
            self.bar.update(1)
        self.say(line_of(t))

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
        dropped = [j for j in self.jobs if j.kind == SCREEN]
        self.jobs = [j for j in self.jobs if j.kind != SCREEN]
        for job in dropped:
            self._measured(job.unit, job.record)
        for unit in self.units:
            self._advance(unit)


def refused_all(result: TuneResult) -> bool:
    """Whether no candidate of `result` compiled: each was refused or broke the
    compiler."""
    return bool(result.records) and all(
        r.status in (REFUSED, FAILED) for r in result.records
    )


def settle_timed_out(record: Record, reason: str) -> None:
    """Write into `record` that its measurement hung."""
    record.status, record.reason = TIMED_OUT, reason
    record.final_ms = None


def settle_lost(record: Record, reason: str) -> Callable[[], None]:
    """What writes into `record` that it is lost, for `_measured`."""

    def settle() -> None:
        record.status, record.reason = LOST, reason

    return settle


def settle_nothing() -> None:
    """For `_measured` where the record keeps what it has (a lost finalist keeps
    its screening time)."""
    pass
