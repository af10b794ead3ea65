"""The autotuner: enumerate, prune, compile in parallel, rank, measure, keep the best.

    from affinec.tuning import GpuMeasurer, TuneOptions, tune
    result = tune(spec, GpuMeasurer(spec), TuneOptions(budget_s=120, top=24))
    result.best.config          # the fastest right configuration measured
    print(result.report())      # counts, the model's rank correlation, the savings

The steps, each recorded per configuration (`Record`, written as JSON lines by
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
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from affinec.backend.runtime import Kernel
from affinec.base.spec import Spec
from affinec.driver.config import KernelConfig
from affinec.hardware.chips import ARCHS
from affinec.tuning.compiling import (
    COMPILED,
    FAILED,
    REFUSED,
    SKIPPED,
    Compilation,
    Compiled,
    config_to_json,
    default_jobs,
    make_pool,
)
from affinec.tuning.cost import Facts, predict
from affinec.tuning.measure import Measurement, Measurer
from affinec.tuning.problem import problem_of
from affinec.tuning.space import MAX_CANDIDATES, Space, search_space
from affinec.tuning.stats import spearman

COMPILE_SHARE = 0.5
"""Of the budget, the most compiling may take before the rest is dropped."""

PRUNED = "pruned"
RANKED = "ranked"
MEASURED = "measured"
WRONG = "wrong"
LAUNCH_FAILED = "launch-failed"
UNMEASURED = "unmeasured"


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


@dataclass
class Record:
    """One configuration and what became of it."""

    index: int
    config: KernelConfig
    origin: str
    estimate_ms: float
    """The model's time before compiling (registers estimated)."""
    status: str = "pending"
    reason: str = ""
    compile_s: float | None = None
    registers: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    ptxas_notes: tuple[str, ...] = ()
    """ptxas's notes of what it did at a cost (`Resources.advisories`: wgmma
    serialized, waits inserted), logged for reading the measurements."""
    shared_memory: int | None = None
    """Static plus dynamic bytes per block."""
    threads: int | None = None
    occupancy: float | None = None
    instructions_per_compute: float | None = None
    """Instructions per FMA (SIMT) or per MMA in the innermost loop of the PTX."""
    predicted_ms: float | None = None
    bound: str = ""
    rank: int | None = None
    """1 for the configuration the model likes best."""
    picked_by: str = ""
    """`baseline`, `model` or `explore`, for those measured."""
    measured_ms: float | None = None
    final_ms: float | None = None
    """Timed again with the full method (the finalists)."""
    error: float | None = None
    measure_s: float | None = None
    kernel: Kernel | None = field(default=None, repr=False)
    """The compiled kernel, kept for measuring (not logged)."""

    @property
    def ms(self) -> float | None:
        """The best timing there is: the final one, else the screening one."""
        return self.final_ms if self.final_ms is not None else self.measured_ms

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": config_to_json(self.config),
            "describe": self.config.describe(),
        }
        for name in (
            "origin",
            "status",
            "reason",
            "compile_s",
            "registers",
            "spill_bytes",
            "stack_bytes",
            "ptxas_notes",
            "shared_memory",
            "threads",
            "occupancy",
            "instructions_per_compute",
            "estimate_ms",
            "predicted_ms",
            "bound",
            "rank",
            "picked_by",
            "measured_ms",
            "final_ms",
            "error",
            "measure_s",
        ):
            value = getattr(self, name)
            out[name] = (
                None if isinstance(value, float) and math.isinf(value) else value
            )
        return out


@dataclass
class TuneResult:
    """Everything one tuning found."""

    spec: Spec
    gpu: str
    arch: str
    records: list[Record]
    considered: int
    over_capacity: int
    seconds: dict[str, float] = field(default_factory=dict)
    cudnn_ms: float | None = None
    stopped: str = ""
    """Why measuring stopped early (the budget, a faulted GPU), if it did."""

    @property
    def measured(self) -> list[Record]:
        return [r for r in self.records if r.status == MEASURED]

    @property
    def best(self) -> Record | None:
        timed = [r for r in self.measured if r.ms is not None]
        return min(timed, key=lambda r: r.ms or math.inf) if timed else None

    @property
    def baseline(self) -> Record | None:
        return next((r for r in self.records if r.origin == "baseline"), None)

    @property
    def spearman(self) -> float | None:
        """Rank correlation of the predicted and the measured (screening) times."""
        pairs = [
            (r.predicted_ms, r.measured_ms)
            for r in self.measured
            if r.predicted_ms is not None and r.measured_ms is not None
        ]
        return spearman([p for p, _ in pairs], [m for _, m in pairs])

    def counts(self) -> Counter[str]:
        return Counter(r.status for r in self.records)

    def savings(self) -> dict[str, float | int | None]:
        """How much the pruning spared: configurations not compiled (the model's cut
        of the enumeration), not measured (refused, pruned, ranked low), and the GPU
        seconds measuring them would have taken at the mean cost of a measurement."""
        counts = self.counts()
        compiled = sum(1 for r in self.records if r.registers is not None)
        measured_or_tried = [r for r in self.records if r.measure_s is not None]
        mean = (
            sum(r.measure_s or 0.0 for r in measured_or_tried) / len(measured_or_tried)
            if measured_or_tried
            else None
        )
        not_measured = self.considered - len(measured_or_tried)
        compile_times = [r.compile_s for r in self.records if r.compile_s is not None]
        mean_compile = (
            sum(compile_times) / len(compile_times) if compile_times else None
        )
        return {
            "considered": self.considered,
            "candidates": len(self.records),
            "compiled": compiled,
            "refused": counts[REFUSED],
            "failed": counts[FAILED],
            "pruned": counts[PRUNED],
            "measured": len(measured_or_tried),
            "not_measured_fraction": not_measured / self.considered
            if self.considered
            else None,
            "mean_measure_s": mean,
            "gpu_seconds_saved": None if mean is None else mean * not_measured,
            "mean_compile_s": mean_compile,
            "cpu_seconds_saved": None
            if mean_compile is None
            else mean_compile * (self.considered - len(self.records)),
        }

    def model_quality(self) -> dict[str, float | int | None]:
        """Spearman's rho, the model's rank of the best, and the best found by the
        model's picks against the best of the random ones."""
        best = self.best

        def fastest(picked_by: str) -> float | None:
            times = [r.ms for r in self.measured if r.picked_by == picked_by and r.ms]
            return min(times) if times else None

        return {
            "spearman": self.spearman,
            "pairs": sum(1 for r in self.measured if r.predicted_ms is not None),
            "best_rank": best.rank if best else None,
            "best_of_model_ms": fastest("model"),
            "best_of_explore_ms": fastest("explore"),
        }

    def summary(self) -> dict[str, Any]:
        best, baseline = self.best, self.baseline
        return {
            "spec": self.spec.to_text(),
            "gpu": self.gpu,
            "arch": self.arch,
            "best": best.to_json() if best else None,
            "best_ms": best.ms if best else None,
            "baseline_ms": baseline.ms if baseline else None,
            "cudnn_ms": self.cudnn_ms,
            "flops": self.spec.flops,
            "savings": self.savings(),
            "model": self.model_quality(),
            "seconds": self.seconds,
            "stopped": self.stopped,
        }

    def report(self) -> str:
        """A few lines for people: the best, the counts, the model's quality."""
        gpu = self.gpu or "none (ranked by the cost model only)"
        lines = [f"spec: {self.spec.to_text()}", f"gpu: {gpu}, {self.arch}"]
        s = self.savings()
        c = self.counts()
        tried = len(self.measured) + c[WRONG] + c[LAUNCH_FAILED]
        parts = [
            f"{s['considered']} enumerated",
            f"{len(self.records)} kept by the cost model for compiling",
            f"{c[REFUSED]} refused by the passes or ptxas",
            f"{c[PRUNED]} pruned (spills, residency)",
            f"{tried} measured ({c[WRONG]} wrong, {c[LAUNCH_FAILED]} failed to launch)",
        ]
        if c[FAILED]:
            parts.insert(3, f"{c[FAILED]} broke the compiler")
        if c[SKIPPED]:
            parts.insert(3, f"{c[SKIPPED]} not compiled in time")
        lines.append("configurations: " + ", ".join(parts))
        best, baseline = self.best, self.baseline
        if best is not None:
            line = (
                f"best: {best.config.describe()}: {best.ms:.4f} ms, "
                f"{self.spec.flops / (best.ms * 1e-3) / 1e12:.1f} TFLOP/s"  # pyright: ignore
            )
            if baseline is not None and baseline.ms:
                line += (
                    f"; config_for: {baseline.ms:.4f} ms ({baseline.ms / best.ms:.2f}x)"  # pyright: ignore
                )
            if self.cudnn_ms:
                line += (
                    f"; cuDNN: {self.cudnn_ms:.4f} ms ({self.cudnn_ms / best.ms:.2f}x)"  # pyright: ignore
                )
            lines.append(line)
        elif self.measured or c[WRONG] or c[LAUNCH_FAILED]:
            lines.append("best: none (no measured configuration was right)")
        q = self.model_quality()
        if q["spearman"] is not None:
            lines.append(
                f"cost model: Spearman rho {q['spearman']:.2f} over {q['pairs']} "
                f"measured; the best was the model's #{q['best_rank']}"
                + (
                    f"; best of the model's picks {q['best_of_model_ms']:.4f} ms, of "
                    f"the random picks {q['best_of_explore_ms']:.4f} ms"
                    if q["best_of_model_ms"] and q["best_of_explore_ms"]
                    else ""
                )
            )
        if s["gpu_seconds_saved"] is not None:
            lines.append(
                f"pruning: {s['measured']} of {s['considered']} enumerated "
                f"configurations measured ({100 * (s['not_measured_fraction'] or 0):.2f}"
                f"% spared; {s['measured']} of the {s['compiled']} compiled): measuring "
                f"them all would take about {s['gpu_seconds_saved']:.0f} s more of "
                f"the GPU at {s['mean_measure_s']:.2f} s each"
                + (
                    f", and compiling them about {s['cpu_seconds_saved']:.0f} s more of "
                    f"one core at {s['mean_compile_s']:.2f} s each"
                    if s["cpu_seconds_saved"] is not None
                    else ""
                )
            )
        if self.stopped:
            lines.append(f"stopped early: {self.stopped}")
        timing = ", ".join(f"{k} {v:.1f} s" for k, v in self.seconds.items())
        lines.append(f"time: {timing}")
        return "\n".join(lines)


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
