"""Plots of a tuning, as PNG, when matplotlib is installed (the `plots` extra:
`pip install -e '.[plots]'` in affinec's checkout): without it `plots_available()` is False and the tools say so
instead of plotting.

- `plot_tuning`: every configuration measured for each spec, its time against the
  model's prediction (log-log: a model that ranks well puts them on a rising
  band), the model's picks apart from the random ones, the baseline and cuDNN as
  lines;
- `plot_roofline`: the H100's roofline (HBM bandwidth, the FP32 FMA peak and the f16
  `mma.sync` ceiling) with each convolution's tuned kernel and cuDNN's at their
  arithmetic intensity (FLOPs over the bytes every kernel must move).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affinec.base.extras import missing_extra
from affinec.tuning.cost import H100, Machine


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    try:
        import matplotlib
    except ModuleNotFoundError as error:
        raise missing_extra(error, "the tuner's plots") from None

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class SpecTimes:
    """What one spec's panel of `plot_tuning` shows."""

    title: str
    records: list[dict[str, Any]]
    """Log lines of its configurations (`Record.to_json()`)."""
    cudnn_ms: float | None = None


def plot_tuning(specs: Sequence[SpecTimes], path: str | Path) -> Path:
    """Measured against predicted time of every configuration measured, a panel per
    spec."""
    plt = _pyplot()
    n = max(1, len(specs))
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(6.4 * cols, 4.6 * rows), squeeze=False
    )
    styles = {
        "model": ("tab:blue", "o", "model's picks"),
        "explore": ("tab:orange", "s", "random picks"),
        "baseline": ("tab:green", "D", "config_for"),
    }
    for ax, s in zip(axes.flat, specs, strict=False):
        for picked, (color, marker, label) in styles.items():
            mine = [
                r
                for r in s.records
                if r.get("picked_by") == picked and r.get("predicted_ms")
            ]
            ok = [r for r in mine if r.get("measured_ms")]
            ax.scatter(
                [r["predicted_ms"] for r in ok],
                [r.get("final_ms") or r["measured_ms"] for r in ok],
                c=color,
                marker=marker,
                s=22,
                label=label,
                alpha=0.8,
            )
            bad = [r for r in mine if r.get("status") in ("wrong", "launch-failed")]
            if bad:
                ax.scatter(
                    [r["predicted_ms"] for r in bad],
                    [_top(s.records)] * len(bad),
                    c="tab:red",
                    marker="x",
                    s=30,
                    label="wrong or failed" if picked == "model" else None,
                )
        if s.cudnn_ms:
            ax.axhline(s.cudnn_ms, color="black", ls="--", lw=1, label="cuDNN")
        _scale(ax)
        ax.set_xlabel("predicted ms")
        ax.set_ylabel("measured ms")
        ax.set_title(s.title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(specs) :]:
        ax.axis("off")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scale(ax) -> None:
    """Log axes where the data spans a decade or more, linear ones otherwise (log
    axes over a narrow range label every minor tick)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = limits
        if low > 0 and high / low >= 10:
            (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(NullFormatter())


def _top(records: list[dict[str, Any]]) -> float:
    """Where wrong configurations are drawn: above the slowest measured."""
    times = [
        r.get("final_ms") or r["measured_ms"] for r in records if r.get("measured_ms")
    ]
    return 1.5 * max(times) if times else 1.0


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel on the roofline."""

    label: str
    dtype: str
    flops: int
    dram_bytes: int
    """The bytes every kernel of the spec must move (inputs, filter, output)."""
    ours_ms: float | None
    cudnn_ms: float | None

    @property
    def intensity(self) -> float:
        return self.flops / self.dram_bytes


def plot_roofline(
    points: Sequence[RooflinePoint], path: str | Path, machine: Machine = H100
) -> Path:
    """The machine's roofline with our tuned kernels and cuDNN's."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    lo, hi = 1.0, 10000.0
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    bandwidth = machine.dram_bytes_per_s / 1e12
    for peak, name, style in (
        (machine.mma_tflops, "f16 mma.sync", "-"),
        (machine.fp32_tflops, "FP32 FMA", "--"),
    ):
        ax.plot(
            xs,
            [min(peak, x * bandwidth) for x in xs],
            color="gray",
            ls=style,
            lw=1.2,
            label=f"{name} {peak:g} TFLOP/s, HBM {bandwidth:g} TB/s",
        )
    markers = {"f16": "o", "f32": "s", "bf16": "D"}
    for p in points:
        marker = markers.get(p.dtype, "^")
        if p.ours_ms:
            y = p.flops / (p.ours_ms * 1e-3) / 1e12
            ax.scatter(p.intensity, y, c="tab:blue", marker=marker, s=40, zorder=3)
            ax.annotate(
                f"{p.label} {p.dtype}",
                (p.intensity, y),
                fontsize=6,
                xytext=(4, -8),
                textcoords="offset points",
            )
        if p.cudnn_ms:
            y = p.flops / (p.cudnn_ms * 1e-3) / 1e12
            ax.scatter(
                p.intensity,
                y,
                facecolors="none",
                edgecolors="tab:red",
                marker=marker,
                s=40,
                zorder=3,
            )
    # Legend entries for the two series and the two dtypes.
    ax.scatter(
        [], [], c="tab:blue", marker="o", label="affinec tuned (f16 o, f32 s, bf16 D)"
    )
    ax.scatter(
        [], [], facecolors="none", edgecolors="tab:red", marker="o", label="cuDNN"
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(1.0, machine.mma_tflops * 2.5)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of compulsory HBM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{machine.name}: the benchmark convolutions", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
