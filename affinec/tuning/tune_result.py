"""What a tuning found: each configuration's `Record` (its status, compiled facts,
predicted and measured times) and the `TuneResult` of one spec, with its counts,
the model's quality, what the pruning spared and its report for people.

A record's status is one of compiling's (`refused`, `failed`, `skipped`) or of the
tuner's steps below (`affinec.tuning.tuner`): `pruned`, `ranked`, `measured`,
`wrong`, `launch-failed`, `unmeasured`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from affinec.backend.runtime import Kernel
from affinec.base.spec import Spec
from affinec.driver.config import KernelConfig
from affinec.tuning.compiling import FAILED, REFUSED, SKIPPED, config_to_json
from affinec.tuning.stats import spearman

PRUNED = "pruned"
RANKED = "ranked"
MEASURED = "measured"
WRONG = "wrong"
LAUNCH_FAILED = "launch-failed"
UNMEASURED = "unmeasured"


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
