"""The autotuner: enumerate, prune, compile in parallel, rank, measure, keep the best.

    from affinec.tuning import GpuMeasurer, TuneOptions, tune
    result = tune(spec, GpuMeasurer(spec), TuneOptions(budget_s=120, top=24))
    result.best.config          # the fastest right configuration measured
    print(result.report())      # counts, the model's rank correlation, the savings

The steps, each recorded per configuration (`Record`, with the `TuneResult`, in
`affinec.tuning.tune_result`; written as JSON lines by
`affinec.tuning.log.write_log`):

1. the search space (`affinec.tuning.space`): a few hundred candidates chosen by the
   cost model, with registers estimated, from thousands of legal-looking ones;
2. compiling them in parallel processes (`affinec.tuning.compiling`); the passes
   or ptxas refuse some (`refused`, with their reason);
3. static pruning: spills or stack frames (`pruned`), blocks that cannot reside on
   a multiprocessor; the survivors ranked by the cost model with ptxas's registers
   and the PTX's instruction mix (`ranked`);
4. measuring on the GPU through a `Measurer`: the baseline (`config_for`), the
   model's top `top`, and `explore` picks at random from the rest (so the model's
   quality is measured over its whole range, not only its favourites), each checked
   against float64 first (`wrong` ones are never picked), until the budget is
   spent; then the `finalists` fastest are timed again with the benchmark's full
   method and the fastest of those is the result.

Without a measurer (`dry run`) it stops after ranking. Tuning one convolution takes
at most `budget_s` (default 120 s): compiling gets at most half of it, measuring
what is left.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from affinec.base.spec import Spec
from affinec.hardware.chips import ARCHS
from affinec.tuning.compiling import (
    COMPILED,
    Compilation,
    Compiled,
    default_jobs,
    make_pool,
)
from affinec.tuning.cost import Facts, predict
from affinec.tuning.measure import Measurement, Measurer
from affinec.tuning.problem import problem_of
from affinec.tuning.space import MAX_CANDIDATES, Space, search_space
from affinec.tuning.tune_result import (
    LAUNCH_FAILED,
    MEASURED,
    PRUNED,
    RANKED,
    UNMEASURED,
    WRONG,
    Record,
    TuneResult,
)

COMPILE_SHARE = 0.5
"""Of the budget, the most compiling may take before the rest is dropped."""


@dataclass(frozen=True)
class TuneOptions:
    """How hard to look (see `tune`)."""

    budget_s: float = 120.0
    """Wall time for the whole tuning of one spec."""
    top: int = 24
    """Configurations measured in the cost model's order."""
    explore: int = 8
    """Further configurations measured at random from the rest of the ranking."""
    finalists: int = 3
    """The fastest measured, timed again with the full method."""
    confirm_runs: int = 4
    """Fresh sets of inputs the winner must be right on before it is taken."""
    max_candidates: int = MAX_CANDIDATES
    jobs: int = 0
    """Compiler processes (0: every core but one; 1: in this process)."""
    arch: str = "sm_90"
    seed: int = 0
    progress: bool = True
    measure_cudnn: bool = False

    def validate(self) -> TuneOptions:
        """The options, or a ValueError naming the first bad one."""
        checks = [
            ("budget_s", self.budget_s > 0, "a positive number of seconds"),
            ("top", self.top >= 1, "at least 1"),
            ("explore", self.explore >= 0, "at least 0"),
            ("finalists", self.finalists >= 1, "at least 1"),
            ("confirm_runs", self.confirm_runs >= 1, "at least 1"),
            ("max_candidates", self.max_candidates >= 1, "at least 1"),
            ("jobs", self.jobs >= 0, "at least 0"),
        ]
        for name, ok, what in checks:
            if not ok:
                raise ValueError(
                    f"{name.replace('_', '-')} must be {what}, got {getattr(self, name)}"
                )

        if self.arch not in ARCHS:
            raise ValueError(
                f"unknown GPU architecture '{self.arch}' (expected one of "
                f"{', '.join(ARCHS)})"
            )
        return self

    @property
    def workers(self) -> int:
        return self.jobs or default_jobs()


def tune(
    spec: Spec,
    measurer: Measurer | None,
    options: TuneOptions | None = None,
    *,
    pool: ProcessPoolExecutor | None = None,
    compilation: Compilation | None = None,
    space: Space | None = None,
    gpu: str = "",
) -> TuneResult:
    """Tune `spec` (see the module's docstring). Without `measurer`, rank only.

    `pool` shares compiler processes between calls (else one is made for this call
    if `options.jobs` allows more than one process); `compilation` is the compiling
    already under way for `space` (`start_compiling`), so that a script can compile
    the next specs while this one is measured.
    """
    options = (options or TuneOptions()).validate()
    start = time.monotonic()
    deadline = start + options.budget_s
    space = space or search_space(
        spec, max_candidates=options.max_candidates, arch=options.arch
    )
    seconds = {"space": time.monotonic() - start}
    records = [
        Record(i, c.config, c.origin, c.estimate.ms)
        for i, c in enumerate(space.candidates)
    ]
    own_pool = None
    if compilation is None:
        if pool is None and options.workers > 1:
            pool = own_pool = make_pool(options.workers)
        compilation = start_compiling(spec, space, options.arch, pool)
    try:
        t = time.monotonic()
        compile_deadline = (
            start + COMPILE_SHARE * options.budget_s if measurer is not None else None
        )
        with _bar(len(records), "compile", options.progress) as bar:
            results = compilation.results(lambda _: bar.update(1), compile_deadline)
        seconds["compile"] = time.monotonic() - t
    finally:
        if own_pool is not None:
            own_pool.shutdown(cancel_futures=True)
    problem = problem_of(spec)
    for c in results:
        _absorb(records[c.index], c, problem)
    ranked = sorted(
        (r for r in records if r.status == RANKED),
        key=lambda r: (r.predicted_ms, r.index),
    )
    for k, r in enumerate(ranked):
        r.rank = k + 1
    result = TuneResult(
        spec,
        gpu or (measurer.gpu if measurer else ""),
        options.arch,
        records,
        space.considered,
        space.over_capacity,
        seconds,
    )
    if measurer is not None:
        t = time.monotonic()
        _measure(result, measurer, ranked, options, deadline)
        if options.measure_cudnn and not measurer.broken:
            result.cudnn_ms = measurer.cudnn_ms()
        seconds["measure"] = time.monotonic() - t
    seconds["total"] = time.monotonic() - start
    return result


def start_compiling(
    spec: Spec, space: Space, arch: str, pool: ProcessPoolExecutor | None
) -> Compilation:
    """Submit the space's candidates to `pool` (compiled inline later if None)."""
    return Compilation(spec.to_text(), space.configs, arch, pool)


def _absorb(record: Record, c: Compiled, problem) -> None:
    """What compiling said: refused, failed, pruned, or ranked by the model."""
    record.compile_s = c.seconds
    if c.status != COMPILED:
        record.status, record.reason = c.status, c.reason
        return
    assert c.kernel is not None and c.resources is not None
    res = c.resources
    threads = math.prod(c.kernel.block)
    shared = res.shared_memory + c.kernel.shared_memory
    record.registers = res.registers
    record.spill_bytes = res.spill_stores + res.spill_loads
    record.stack_bytes = res.stack_frame
    record.ptxas_notes = res.advisories
    record.shared_memory = shared
    record.threads = threads
    record.instructions_per_compute = c.mix.per_compute if c.mix else None
    prediction = predict(
        problem, c.config, Facts(res.registers, threads, shared, c.mix)
    )
    record.predicted_ms = prediction.ms
    record.occupancy = prediction.occupancy
    record.bound = prediction.bound
    record.kernel = c.kernel
    # what a measurer without a GPU reports (affinec.tuning.model_measure)
    c.kernel.info["predicted_ms"] = prediction.ms
    if record.spill_bytes or record.stack_bytes:
        record.status = PRUNED
        record.reason = (
            f"ptxas: {record.spill_bytes} bytes of spills, {record.stack_bytes} bytes "
            f"of stack ({res.registers} registers)"
        )
    elif not prediction.feasible:
        record.status = PRUNED
        record.reason = (
            f"no block fits a multiprocessor ({res.registers} registers x "
            f"{threads} threads, {shared} bytes of shared memory)"
        )
    else:
        record.status = RANKED


def record_measurement(r: Record, m: Measurement) -> None:
    """A candidate's first measurement: its time, or why it failed."""
    r.measure_s, r.error = m.seconds, m.error
    if m.ok:
        r.status, r.measured_ms = MEASURED, m.ms
    else:
        r.status = LAUNCH_FAILED if m.reason.startswith("launch") else WRONG
        r.reason = m.reason


def record_final(r: Record, m: Measurement) -> None:
    """A finalist timed again: its final time, or WRONG when it fails now."""
    if m.ok:
        r.final_ms = m.ms
    else:  # right once, wrong now: never pick it
        r.status, r.reason = WRONG, m.reason


def end_screening(
    result: TuneResult, records: Iterable[Record], finalists: int
) -> list[Record]:
    """The `finalists` fastest candidates measured, to be timed again; the picks
    among `records` left unmeasured say why (the reason the measuring stopped)."""
    for r in records:
        if r.status == RANKED and r.picked_by:
            r.status = UNMEASURED
            r.reason = result.stopped or "not measured"
    timed = sorted(
        (r for r in result.measured if r.measured_ms is not None),
        key=lambda r: r.measured_ms or math.inf,
    )
    return timed[:finalists]


def _measure(
    result: TuneResult,
    measurer: Measurer,
    ranked: list[Record],
    options: TuneOptions,
    deadline: float,
) -> None:
    """Measure the baseline, the model's top picks, then random ones, in that order,
    until the budget runs out; then time the fastest again."""
    picks = choose_picks(result, ranked, options)
    # Finalists are timed again: keep time for them.
    reserve = options.finalists * 1.0
    with _bar(len(picks), "measure", options.progress) as bar:
        for k, r in enumerate(picks):
            if measurer.broken:
                result.stopped = "the GPU faulted (a kernel's launch failed)"
                break
            if k > 1 and time.monotonic() > deadline - reserve:
                result.stopped = f"the budget of {options.budget_s:g} s ran out"
                break
            assert r.kernel is not None
            record_measurement(r, measurer.measure(r.kernel))
            bar.update(1)
            best = result.best
            if best is not None:
                bar.set_postfix_str(f"best {best.ms:.4f} ms")
    for r in end_screening(result, picks, options.finalists):
        if measurer.broken:
            break
        assert r.kernel is not None
        record_final(r, measurer.measure(r.kernel, final=True))
    # A racy kernel can be right on one set of inputs: the winner is checked on
    # fresh ones before it is taken (and cached); a wrong one gives way to the next.
    while (best := result.best) is not None and not measurer.broken:
        assert best.kernel is not None
        m = measurer.confirm(best.kernel, options.confirm_runs)
        if m.ok:
            break
        best.status, best.reason = WRONG, m.reason


def choose_picks(
    result: TuneResult, ranked: list[Record], options: TuneOptions
) -> list[Record]:
    """What is measured, in order, each marked with `picked_by`: the baseline (if it
    compiled), its neighbours (`affinec.tuning.neighbours`), the model's top
    `options.top`, then `options.explore` at random (by
    `options.seed`) from the rest of the ranking."""
    picks: list[Record] = []
    baseline = result.baseline
    if baseline is not None and baseline.status in (RANKED, PRUNED):
        baseline.picked_by = "baseline"
        picks.append(baseline)
    for r in ranked:
        if r.origin.startswith("neighbour") and r not in picks:
            r.picked_by = "neighbour"
            picks.append(r)
    for r in ranked[: options.top]:
        if r not in picks:
            r.picked_by = "model"
            picks.append(r)
    rest = [r for r in ranked[options.top :] if r not in picks]
    for r in random.Random(options.seed).sample(rest, min(options.explore, len(rest))):
        r.picked_by = "explore"
        picks.append(r)
    return picks


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix_str(self, text: str) -> None:
        pass

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _bar(total: int, what: str, enabled: bool):
    """A tqdm progress bar on stderr (nothing if disabled)."""
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit="config", file=sys.stderr, leave=False)
