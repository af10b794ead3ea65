"""Run pytest over its collected tests in N processes at once, each a shard of the
test ids, and report each shard's summary line (exit code: the worst shard's).

    python scripts/pytest_shards.py 8 tests -- -q -m gpu -p no:cacheprovider

(paths before `--`, pytest's options after it).

For the GPU machine, where compiling kernels on one core is most of the GPU tests'
time and device time is scarce; pytest-xdist is not installed there.
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit() or int(argv[0]) < 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        print("error: the first argument is the number of shards", file=sys.stderr)
        return 2
    shards = int(argv[0])
    rest = argv[1:]
    split = rest.index("--") if "--" in rest else len(rest)
    paths, options = rest[:split], rest[split + 1 :]
    selection = [o for o in options if o not in ("-q", "--quiet")]  # ids, one a line
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *selection, *paths],
        capture_output=True,
        text=True,
    )
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    if not ids:
        print(listed.stdout[-2000:], listed.stderr[-2000:])
        return listed.returncode or 5
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", *options, *ids[k::shards]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for k in range(min(shards, len(ids)))
    ]
    worst = 0
    for k, proc in enumerate(procs):
        out, _ = proc.communicate()
        failures = [line for line in out.splitlines() if line.startswith("FAILED")]
        print(f"shard {k}: {out.strip().splitlines()[-1] if out.strip() else ''}")
        for line in failures:
            print("  " + line)
        if proc.returncode:
            print(out[-6000:])
        worst = max(worst, proc.returncode)
    print(f"{len(ids)} tests in {len(procs)} shards")
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
