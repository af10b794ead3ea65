"""Wall time of warm compiles of config_for's five f16 kernels (sm_90, or the
`--arch` given: sm_90a, an H100's default, puts them on Hopper's routes), this tree
against another commit's, in interleaved rounds: the comparison a change to the
compiler's speed needs on a machine whose load varies (each round runs both trees,
in alternating order, each in a fresh process that compiles every kernel once
before it is timed).

    python benchmarks/compile_ab.py --base HEAD~3 [--rounds 5] [--repeat 3] [--arch sm_90a]
        [--json benchmarks/results/compile_ab.json]
    python benchmarks/compile_ab.py --base-tree /tmp/old-affinec   # a tree as such
    python benchmarks/compile_ab.py --base HEAD~3 --head HEAD   # two commits

`--head` measures a commit's tree (extracted as the base's is) in place of this
checkout's files: the comparison of two commits while the checkout changes.

The other commit's tree is extracted with `git archive` into a temporary folder
(or given as a folder, where this copy has no git history) and imported in place
of this one (through the editable install's mapping of
`affinec`, `affinec.dialects` and `affinec.passes`). Prints, per kernel, each
tree's median over every timed compile with its fastest and slowest, the
median over the five kernels, in wall time and in CPU time (both threads of a
compile: steadier than wall time where other work shares the cores), and each
round's ratio of the two trees' medians (the two runs of a round share its
load); the JSON has every time and the load average before each run.
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
repeat, arch = int(sys.argv[2]), sys.argv[3]
specs = {n: with_format(s, "f16") for n, s in DESIGN_CONVOLUTIONS.items()}
configs = {n: config_for(s, arch=arch) for n, s in specs.items()}
for n, s in specs.items():
    compile_to_ptx(s, configs[n], arch=arch)
times = {n: [] for n in specs}
cpu = {n: [] for n in specs}
for _ in range(repeat):
    for n, s in specs.items():
        start, used = time.perf_counter(), time.process_time()
        compile_to_ptx(s, configs[n], arch=arch)
        times[n].append(time.perf_counter() - start)
        cpu[n].append(time.process_time() - used)
print(json.dumps({"wall": times, "cpu": cpu}))
"""


def run(tree: Path, repeat: int, arch: str) -> dict[str, dict[str, list[float]]]:
    """Per kernel, the wall and CPU times (all of the process's threads) of its
    timed compiles in a fresh process importing `tree`."""
    # Without PYTHONPATH (scripts/gpu_python.sh puts this tree on it): `affinec`
    # comes from the editable install's mapping, which RUNNER points at `tree`.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tree), str(repeat), arch],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=env,
    )
    if done.returncode:
        sys.exit(f"{tree}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def extract(commit: str, folder: Path) -> None:
    """The tree of `commit` of this repository, written into `folder`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    base_group = parser.add_mutually_exclusive_group(required=True)
    base_group.add_argument("--base", help="the commit to compare with")
    base_group.add_argument("--base-tree", help="a folder holding that commit's tree")
    parser.add_argument(
        "--head", help="the commit to measure in place of this checkout's files"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--arch",
        default="sm_90",
        choices=["sm_80", "sm_90", "sm_90a"],
        help="the target config_for plans for and the kernels compile to",
    )
    parser.add_argument("--repeat", type=int, default=3, help="compiles a kernel a run")
    parser.add_argument("--json", default="benchmarks/results/compile_ab.json")
    args = parser.parse_args(argv)

    with (
        tempfile.TemporaryDirectory(prefix="affinec-base-") as base,
        tempfile.TemporaryDirectory(prefix="affinec-head-") as head,
    ):
        if args.base_tree:
            base = str(Path(args.base_tree).resolve())
        else:
            extract(args.base, Path(base))
        tree, label = ROOT, "this tree"
        if args.head:
            extract(args.head, Path(head))
            tree, label = Path(head), f"head ({args.head})"
        trees = {f"base ({args.base or base})": Path(base), label: tree}
        times: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
        cpu: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
        loads = []
        per_round: dict[str, list[float]] = {}
        for k in range(args.rounds):
            order = list(trees.items())
            for label, tree in order if k % 2 == 0 else order[::-1]:
                loads.append(os.getloadavg()[0])
                measured = run(tree, args.repeat, args.arch)
                per_round.setdefault(label, []).append(
                    statistics.median(
                        statistics.median(ts) for ts in measured["wall"].values()
                    )
                )
                for name, ts in measured["wall"].items():
                    times[label].setdefault(name, []).extend(ts)
                for name, ts in measured["cpu"].items():
                    cpu[label].setdefault(name, []).extend(ts)

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
    # CPU time counts the work of both threads (LLVM's beside the checks) and
    # moves less than wall time where other work shares the cores
    cpu_medians = [
        statistics.median(statistics.median(cpu[label][n]) for n in names)
        for label in labels
    ]
    print(f"{'  (CPU time)':<20}" + "".join(f"{m * 1000:>26.0f}" for m in cpu_medians))
    print(
        f"{labels[1]} / base: {medians[1] / medians[0]:.3f} (CPU time "
        f"{cpu_medians[1] / cpu_medians[0]:.3f}); load average (1 min) "
        f"before the runs {min(loads):.2f}-{max(loads):.2f}, {os.cpu_count()} CPUs"
    )
    # each round's two runs side by side: the load that moves between rounds
    # moves both
    ratios = [
        head / base
        for base, head in zip(per_round[labels[0]], per_round[labels[1]], strict=True)
    ]
    print(
        f"per round, median of the five, {labels[1]} / base: "
        + " ".join(f"{r:.3f}" for r in ratios)
        + f" (median {statistics.median(ratios):.3f})"
    )
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "base": args.base or args.base_tree,
                "head": args.head,
                "arch": args.arch,
                "times": times,
                "cpu_times": cpu,
                "loads": loads,
            },
            indent=1,
        )
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
