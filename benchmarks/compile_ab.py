"""Wall time of warm compiles of config_for's five f16 kernels (sm_90), this tree
against another commit's, in interleaved rounds: the comparison a change to the
compiler's speed needs on a machine whose load varies (each round runs both trees,
in alternating order, each in a fresh process that compiles every kernel once
before it is timed).

    python benchmarks/compile_ab.py --base HEAD~3 [--rounds 5] [--repeat 3]
        [--json benchmarks/results/compile_ab.json]
    python benchmarks/compile_ab.py --base-tree /tmp/old-affinec   # a tree as such

The other commit's tree is extracted with `git archive` into a temporary folder
(or given as a folder, where this copy has no git history) and imported in place
of this one (through the editable install's mapping of
`affinec`, `affinec.dialects` and `affinec.passes`). Prints, per kernel, each
tree's median over every timed compile with its fastest and slowest, and the
median over the five kernels; the JSON has every time and the load average
before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUNNER = """
import json, sys, time
root = sys.argv[1]
for finder in sys.meta_path:
    mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
    if isinstance(mapping, dict) and "affinec" in mapping:
        mapping.update({"affinec": f"{root}/affinec",
                        "affinec.dialects": f"{root}/dialects",
                        "affinec.passes": f"{root}/passes"})
        break
else:
    sys.exit("affinec is not installed in editable mode: cannot switch trees")
import affinec
assert affinec.__file__.startswith(root), affinec.__file__
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
repeat = int(sys.argv[2])
specs = {n: with_format(s, "f16") for n, s in DESIGN_CONVOLUTIONS.items()}
configs = {n: config_for(s) for n, s in specs.items()}
for n, s in specs.items():
    compile_to_ptx(s, configs[n], arch="sm_90")
times = {n: [] for n in specs}
for _ in range(repeat):
    for n, s in specs.items():
        start = time.perf_counter()
        compile_to_ptx(s, configs[n], arch="sm_90")
        times[n].append(time.perf_counter() - start)
print(json.dumps(times))
"""


def run(tree: Path, repeat: int) -> dict[str, list[float]]:
    # Without PYTHONPATH (scripts/gpu_python.sh puts this tree on it): `affinec`
    # comes from the editable install's mapping, which RUNNER points at `tree`.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tree), str(repeat)],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    if done.returncode:
        sys.exit(f"{tree}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    base_group = parser.add_mutually_exclusive_group(required=True)
    base_group.add_argument("--base", help="the commit to compare with")
    base_group.add_argument("--base-tree", help="a folder holding that commit's tree")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="compiles a kernel a run")
    parser.add_argument("--json", default="benchmarks/results/compile_ab.json")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="affinec-base-") as base:
        if args.base_tree:
            base = str(Path(args.base_tree).resolve())
        else:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.base],
                capture_output=True,
                check=True,
            )
            subprocess.run(["tar", "-x", "-C", base], input=archive.stdout, check=True)
        trees = {f"base ({args.base or base})": Path(base), "this tree": ROOT}
        times: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
        loads = []
        for k in range(args.rounds):
            order = list(trees.items())
            for label, tree in order if k % 2 == 0 else order[::-1]:
                loads.append(os.getloadavg()[0])
                for name, ts in run(tree, args.repeat).items():
                    times[label].setdefault(name, []).extend(ts)

    labels = list(trees)
    names = list(times[labels[0]])
    print(f"{'kernel':<20}" + "".join(f"{label:>26}" for label in labels))
    for name in names:
        row = ""
        for label in labels:
            ts = times[label][name]
            row += (
                f"{statistics.median(ts) * 1000:>12.0f} "
                f"({min(ts) * 1000:4.0f}-{max(ts) * 1000:5.0f})"
            )
        print(f"{name:<20}" + row)
    medians = [
        statistics.median(statistics.median(times[label][n]) for n in names)
        for label in labels
    ]
    print(
        f"{'median of the five':<20}" + "".join(f"{m * 1000:>26.0f}" for m in medians)
    )
    print(
        f"this tree / base: {medians[1] / medians[0]:.3f}; load average (1 min) "
        f"before the runs {min(loads):.2f}-{max(loads):.2f}, {os.cpu_count()} CPUs"
    )
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"base": args.base or args.base_tree, "times": times, "loads": loads},
            indent=1,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
