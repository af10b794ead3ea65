"""The loop that tunes a zoo over a Ray cluster (`affinec.tuning.distributed`):
compiles submitted as Ray tasks and collected, a spec's steps taken as they come in
(`affinec.tuning.zoo_steps`), measurements handed to idle measuring actors and
collected; an actor that dies has its kernel measured again, one that hangs past
the timeout is killed (Ray restarts it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from affinec.tuning.cache import TuningCache
from affinec.tuning.compiling import FAILED, Compiled, config_to_json
from affinec.tuning.measure import Measurement, MeasurerUnavailable
from affinec.tuning.ray_workers import (
    COMPILE_RETRIES,
    CONFIRM,
    COST_MODEL,
    FINAL,
    compile_task,
)
from affinec.tuning.space import search_space
from affinec.tuning.tuner import TuneOptions
from affinec.tuning.zoo_steps import (
    TIMED_OUT,
    Job,
    Unit,
    ZooSteps,
    settle_lost,
    settle_nothing,
    settle_timed_out,
)


@dataclass
class Slot:
    """A measuring actor and what it is doing: `starting` (its identity asked for,
    after a start or a restart), `idle`, `busy` or `dead`."""

    actor: Any
    gpu: str = ""
    """The name of its GPU: it measures the specs of that GPU model only."""
    state: str = "starting"
    ref: Any = None
    job: Job | None = None
    since: float = 0.0
    restarts: int = 0


def cause_of(error: Exception) -> BaseException:
    """What a Ray task raised, without Ray's wrapping."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


class RayDriver(ZooSteps):
    """The loop of `tune_specs_ray`: compiles submitted and collected, measurements
    handed to idle actors and collected, timeouts, and each spec's steps."""

    def __init__(
        self,
        ray: Any,
        options: TuneOptions,
        cache: TuningCache,
        units: list[Unit],
        slots: list[Slot],
        actor_gpu: str,
        timeout_s: float,
        remeasure: int,
        deadline: float | None,
        cpus: float,
        say: Callable[[str], None],
        measure: object,
    ) -> None:
        super().__init__(options, cache, units, deadline, say)
        self.ray = ray
        self.slots = slots
        self.actor_gpu = actor_gpu
        self.timeout_s = timeout_s
        self.remeasure = remeasure
        self.compile = compile_task(ray)
        self.most_compiling = max(2, int(2 * cpus))
        self.most_ahead = 2 * len(slots) + 2
        """Specs compiled or compiling ahead of their measurements, at most: enough
        to keep every GPU busy, few enough that their kernels fit the driver."""
        self.compiles: dict[Any, tuple[Unit, int]] = {}
        self.compile_failures = 0
        self.next_unit = 0
        if measure == COST_MODEL:
            self.say("measured by the cost model (no GPU): times are predictions")
        for unit in units:
            if unit.phase == "done":
                self._finished(unit)

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

    def _start_next_unit(self) -> Unit | None:
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
            unit.take_space(space, time.monotonic() - unit.started)
            return unit
        return None

    def _compiled(self, ref: Any) -> None:
        ray = self.ray
        unit, index = self.compiles.pop(ref)
        record = unit.records[index]
        try:
            c = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            cause = cause_of(e)
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

    # -- measuring ---------------------------------------------------------------------

    def _dispatch(self) -> None:
        for slot in self.slots:
            if slot.state != "idle":
                continue
            mine = [j for j in self.jobs if j.unit.gpu == slot.gpu]
            if not mine:
                continue
            job = min(mine, key=lambda j: (j.unit.number, j.kind != CONFIRM))
            self.jobs.remove(job)
            kernel = job.record.kernel
            slot.ref = slot.actor.run.remote(
                job.unit.spec.to_text(), kernel, job.kind, self.options.confirm_runs
            )
            slot.state, slot.job, slot.since = "busy", job, time.monotonic()

    def _answered(self, slot: Slot) -> None:
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
            cause = cause_of(e)
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
            lost = (
                settle_nothing if job.kind == FINAL else settle_lost(job.record, reason)
            )
            self._measured(unit, job.record, lost)
            self._advance(unit)
            return
        if broken:  # a faulted CUDA context: a fresh process gets a fresh one
            ray.kill(slot.actor, no_restart=False)
            slot.restarts += 1
            self._restarting(slot)
        self._count(job.unit, "measured")
        if job.kind != CONFIRM:
            self._journal(job.unit, job.record, job.kind, m)
        unit, record, kind = job.unit, job.record, job.kind
        self._measured(unit, record, partial(self._apply, unit, record, kind, m))
        self._advance(unit)

    def _restarting(self, slot: Slot) -> None:
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
            if job.kind != CONFIRM:
                m = Measurement(False, reason=reason, seconds=now - slot.since)
                self._journal(job.unit, job.record, job.kind, m, TIMED_OUT)
            record = job.record
            self._measured(job.unit, record, partial(settle_timed_out, record, reason))
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
            lost = (
                settle_nothing if job.kind == FINAL else settle_lost(job.record, reason)
            )
            self._measured(job.unit, job.record, lost)
        for job in jobs:
            self._advance(job.unit)
