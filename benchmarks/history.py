"""The version history of the five benchmark convolutions on the GPU, from the JSON of
each benchmark run (`affinec bench --json`), as the Markdown table of
docs/BENCHMARKS.md: our time per convolution and dtype, and the geomean of cuDNN's
time over ours (cuDNN measured in the same run).

    python benchmarks/history.py v1=docs/results/...-v1-promoted.json v7=docs/results/v7/bench.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys

SHORT = {
    "resnet50-conv1": "conv1",
    "conv3x3-64-relu": "3x3-64",
    "conv3x3-256-512": "256-512",
    "conv3x3-128": "3x3-128",
    "conv1x1-256-64": "1x1",
}


def dtype_of(row: dict) -> str:
    if "dtype=f32" in row["spec"] and "tf32=true" in (row.get("config") or ""):
        return "tf32"
    return row["spec"].split("dtype=")[1].split()[0]


def ratio(row: dict) -> float | None:
    if dtype_of(row) == "tf32":
        return row.get("tf32_over_ours")
    return row.get("cudnn_over_ours")


def table(runs: list[tuple[str, dict]], dtype: str) -> str:
    names = list(SHORT)
    lines = [
        f"| version ({dtype}) | "
        + " | ".join(SHORT[n] for n in names)
        + " | geomean cuDNN/ours |",
        "|---" + "|---:" * (len(names) + 1) + "|",
    ]
    for label, run in runs:
        rows = {r["name"]: r for r in run["rows"] if dtype_of(r) == dtype}
        if not rows:
            continue
        cells = [f"{rows[n]['ours_ms']:.3f}" if n in rows else "–" for n in names]
        ratios = [x for r in rows.values() if (x := ratio(r))]
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        lines.append(
            f"| {label} | " + " | ".join(cells) + f" | {mean:.3f} |"
            if mean
            else f"| {label} | " + " | ".join(cells) + " | – |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", nargs="+", metavar="LABEL=JSON", help="a run's label and its JSON"
    )
    args = parser.parse_args(argv)
    runs = []
    for arg in args.runs:
        label, equals, path = arg.partition("=")
        if not equals or not label or not path:
            parser.error(f"{arg!r}: expected LABEL=PATH")
        try:
            with open(path) as f:
                runs.append((label, json.load(f)))
        except (OSError, json.JSONDecodeError) as e:
            parser.error(f"{path}: {e}")
    for dtype in ("f16", "f32", "tf32"):
        print(table(runs, dtype))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
