"""The machine a benchmark ran on, for its JSON: the same code has compiled three
times faster on one of this project's 2-core development machines than on another,
so every figure names its processor. Imports nothing of affinec (the Triton
benchmark runs in an environment of its own)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The processor's name (Linux's /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, str | int | None]:
    return {
        "platform": platform.platform(),
        "processor": cpu_model(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
