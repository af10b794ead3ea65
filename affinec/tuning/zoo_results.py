"""What tuning a zoo gave (`affinec.tuning.many`; over a Ray cluster,
`affinec.tuning.distributed`): a `ShapeTuning` per spec and GPU model, the
`ZooTuning` that gathers them, its table and each spec's line as it finishes."""

from __future__ import annotations

from dataclasses import dataclass

from affinec.base.spec import Spec
from affinec.tuning.cache import Entry
from affinec.tuning.ray_workers import COST_MODEL
from affinec.tuning.tune_result import TuneResult


@dataclass
class SpecTuning:
    """What became of one spec: `cached` (left as the cache had it), `tuned`,
    `ranked` (no GPU), `refused` (no candidate compiled), `failed` (nothing
    measured was right) or `skipped` (the budget was spent first)."""

    spec: Spec
    outcome: str
    result: TuneResult | None = None
    entry: Entry | None = None


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


def line_of(t: ShapeTuning) -> str:
    """The line of a spec once it is finished: its outcome, its time, and what
    measuring it took."""
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
