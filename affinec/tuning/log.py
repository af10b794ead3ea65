"""The tuner's log: one JSON line per configuration tried, then one with the summary
(`affinec tune --log`, `benchmarks/tune_all.py`), and reading it back."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from affinec.tuning.tune_result import TuneResult


def write_log(result: TuneResult, path: str | Path, append: bool = True) -> None:
    """One JSON line per configuration tried, then one with the summary."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"spec": result.spec.to_text(), "gpu": result.gpu, "arch": result.arch}
    with path.open("a" if append else "w") as f:
        for r in result.records:
            f.write(json.dumps({"kind": "config", **head, **r.to_json()}) + "\n")
        f.write(json.dumps({"kind": "summary", **result.summary()}) + "\n")


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The lines `write_log` wrote (a ValueError naming a line that is not JSON)."""
    out = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not a JSON line ({e.msg})") from None
    return out


def records_by_spec(lines: Iterable[dict[str, Any]]) -> dict[str, list[dict]]:
    """The configuration lines of a log, grouped by spec text."""
    out: dict[str, list[dict]] = {}
    for line in lines:
        if line.get("kind") == "config":
            out.setdefault(line["spec"], []).append(line)
    return out
