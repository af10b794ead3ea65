"""MLIR's own invalid-IR test cases through `affinec-opt --verify-diagnostics`, and
through a real `mlir-opt` for comparison: how many of the cases' `expected-error`
lines each tool meets.

    python scripts/mlir_invalid_cases.py --mlir-test DIR [--mlir-opt PATH] [--json F]

`DIR` is the `mlir/test` folder of an LLVM source tree (LLVM's release tarballs and
Debian's `llvm-toolchain-22` source package have it); nothing of it is kept in this
repository. Each file is split at `// -----` as `-split-input-file` does, and each
chunk that expects errors is run alone, by both tools, with the flags of the file's
RUN line that affinec-opt shares (`-allow-unregistered-dialect`). A chunk is met
when the tool reports exactly the expected diagnostics (MLIR's rule); the table
counts chunks and expected-error lines. Not part of `make test`: it needs the LLVM
sources.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from affinec.tools.opt import main as affinec_opt

FILES = (
    "Dialect/Affine/invalid.mlir",
    "Dialect/Affine/load-store-invalid.mlir",
    "Dialect/GPU/invalid.mlir",
    "Dialect/NVGPU/invalid.mlir",
    "Dialect/Linalg/invalid.mlir",
)
"""The files measured; those the tree lacks are left out of the table."""
SHARED_FLAGS = ("allow-unregistered-dialect",)
EXPECTED_ERROR = re.compile(r"expected-error")


@dataclass
class Tally:
    chunks: int = 0
    lines: int = 0
    met_chunks: dict[str, int] = field(default_factory=dict)
    met_lines: dict[str, int] = field(default_factory=dict)
    missed: dict[str, list[int]] = field(default_factory=dict)
    internal_errors: list[int] = field(default_factory=list)


def run_flags(text: str) -> list[str]:
    """The RUN line's flags affinec-opt shares, spelled with two dashes."""
    run = next((line for line in text.splitlines() if "RUN:" in line), "")
    return [f"--{flag}" for flag in SHARED_FLAGS if f"-{flag}" in run]


def affinec_meets(path: Path, flags: list[str]) -> tuple[bool, bool]:
    """Whether affinec-opt met the chunk's expectations; whether it reported an
    internal error (a bug, whatever the expectations)."""
    argv = [str(path), "--verify-diagnostics", *flags]
    errors = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
        try:
            code = affinec_opt(argv)
        except SystemExit as e:
            code = e.code
    return code == 0, "internal error" in errors.getvalue()


def mlir_meets(mlir_opt: str, path: Path, flags: list[str]) -> bool:
    argv = [mlir_opt, str(path), "--verify-diagnostics", *flags]
    return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0


def measure(mlir_test: Path, mlir_opt: str | None) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in FILES:
            if not (mlir_test / name).is_file():
                continue
            text = (mlir_test / name).read_text()
            flags = run_flags(text)
            tally = tallies.setdefault(name, Tally())
            tools = ["affinec-opt"] + (["mlir-opt"] if mlir_opt else [])
            for tool in tools:
                tally.met_chunks[tool] = tally.met_lines[tool] = 0
                tally.missed[tool] = []
            first_line = 1
            for chunk in text.split("// -----"):
                expected = len(EXPECTED_ERROR.findall(chunk))
                if expected:
                    # Blank lines keep the chunk's line numbers the file's.
                    path = Path(folder) / "chunk.mlir"
                    path.write_text("\n" * (first_line - 1) + chunk)
                    tally.chunks += 1
                    tally.lines += expected
                    for tool in tools:
                        if tool == "affinec-opt":
                            met, internal = affinec_meets(path, flags)
                            if internal:
                                tally.internal_errors.append(first_line)
                        else:
                            met = mlir_meets(mlir_opt, path, flags)
                        if met:
                            tally.met_chunks[tool] += 1
                            tally.met_lines[tool] += expected
                        else:
                            tally.missed[tool].append(first_line)
                first_line += chunk.count("\n")
    return tallies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlir-test", type=Path, required=True)
    parser.add_argument("--mlir-opt", default=shutil.which("mlir-opt"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--missed", action="store_true", help="list missed chunks")
    args = parser.parse_args(argv)
    tallies = measure(args.mlir_test, args.mlir_opt)
    tools = ["affinec-opt"] + (["mlir-opt"] if args.mlir_opt else [])
    print(f"{'file':44} {'cases':>6} {'errors':>6}", *(f"{t:>18}" for t in tools))
    for name, tally in tallies.items():
        cells = [
            f"{tally.met_chunks[t]:>4} ({tally.met_lines[t]:>3} lines)" for t in tools
        ]
        print(f"{name:44} {tally.chunks:>6} {tally.lines:>6}", *cells)
        if tally.internal_errors:
            print(f"  affinec-opt: internal errors at lines {tally.internal_errors}")
        if args.missed:
            for t in tools:
                print(f"  {t} missed the cases at lines {tally.missed[t]}")
    if args.json:
        args.json.write_text(
            json.dumps({name: vars(t) for name, t in tallies.items()}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
