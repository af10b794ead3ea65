"""Whether a change to the compiler changed the kernels it emits: a fixed set of
kernels compiled, each one's PTX digest, ptxas's registers and spills, and where
cuobjdump is found (`affinec.backend.sass`) its SASS (the instructions without
their addresses and encodings: a digest, the count, the memory and MMA
instructions by kind). A change that should leave the kernels alone (a faster
pass, a different LLVM IR for the same thing) shows here as "SASS identical"
without a GPU; one that changes them shows what moved, before any GPU time is
spent.

    python scripts/kernel_digests.py --json /tmp/before.json     # before the change
    python scripts/kernel_digests.py --against /tmp/before.json  # after: what differs

The kernels: `config_for`'s configuration of the five benchmark convolutions in f16,
bf16 and f32 for sm_80 and sm_90, of ResNet-50's distinct layers at batch 32 in f16
for sm_90, and Hopper's route for sm_90a (the convolutions it takes, and a 1024^3
matrix product in 128 x 128 tiles under each schedule). `--only TEXT` keeps the
kernels whose label contains TEXT. A kernel the compiler refuses is recorded as
refused. Times nothing.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from xdsl.utils.exceptions import DiagnosticException

from affinec.backend.ptxas import assemble
from affinec.backend.sass import disassemble, sass_available
from affinec.base.spec import MatmulSpec, Spec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.kernel_config import KernelConfig
from affinec.frontend.networks import network
from affinec.transforms.gpu.wgmma_plan import SCHEDULES

KINDS = ("HMMA", "HGMMA", "LDSM", "LDGSTS", "UTMALDG", "LDG", "STG", "LDS", "STS")
"""The instructions counted by kind (the memory and MMA traffic of a kernel)."""


def kernels() -> Iterator[tuple[str, Spec, KernelConfig, str]]:
    """(label, spec, configuration, architecture) of every kernel of the set."""
    for name, spec in DESIGN_CONVOLUTIONS.items():
        for dtype in ("f16", "bf16", "f32"):
            typed = with_format(spec, dtype)
            for arch in ("sm_80", "sm_90"):
                yield f"{name} {dtype} {arch}", typed, config_for(typed), arch
    for layer in network("resnet50", 32):
        yield (
            f"resnet50 {layer.name} f16 sm_90",
            layer.spec,
            config_for(layer.spec),
            "sm_90",
        )
    for name, spec in DESIGN_CONVOLUTIONS.items():
        typed = with_format(spec, "f16")
        try:
            config = config_for(typed, arch="sm_90a", wgmma=True)
        except ValueError:  # the route refuses it (say, 4 input channels)
            continue
        yield f"{name} f16 wgmma sm_90a", typed, config, "sm_90a"
    product = MatmulSpec(1024, 1024, 1024, "f16", "bias-relu")
    base = config_for(product, arch="sm_90a", wgmma=True)
    for schedule in SCHEDULES:
        config = dataclasses.replace(
            base, wgmma_schedule=schedule, wgmma_tile=(128, 128)
        )
        yield f"matmul 1024^3 f16 {schedule} sm_90a", product, config, "sm_90a"


def digest(spec: Spec, config: KernelConfig, arch: str) -> dict:
    compiled = compile_to_ptx(spec, config, arch=arch, verify_each=False)
    with tempfile.TemporaryDirectory(prefix="affinec-digest-") as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        (resources,) = assemble(compiled.ptx, arch, cubin=cubin).values()
        instructions = disassemble(cubin) if sass_available() else None
    row = {
        "ptx": hashlib.sha256(compiled.ptx.encode()).hexdigest()[:16],
        "registers": resources.registers,
        "spill_bytes": resources.spill_stores + resources.spill_loads,
    }
    if instructions is not None:
        opcodes = collections.Counter(i.split()[0].split(".")[0] for i in instructions)
        row |= {
            "sass": hashlib.sha256("\n".join(instructions).encode()).hexdigest()[:16],
            "instructions": len(instructions),
            **{kind: opcodes[kind] for kind in KINDS},
        }
    return row


def differences(before: dict, after: dict) -> list[str]:
    """What differs between two runs, kernel by kernel, in words."""
    lines = []
    for label in sorted(before.keys() | after.keys()):
        old, new = before.get(label), after.get(label)
        if old is None or new is None:
            lines.append(f"{label}: only {'after' if old is None else 'before'}")
            continue
        if old == new:
            continue
        if "refused" in old or "refused" in new:
            when, why = ("before", old) if "refused" in old else ("after", new)
            if "refused" in old and "refused" in new:
                when = "before and after"
            lines.append(f"{label}: refused {when} ({why['refused']})")
            continue
        if old.get("sass") and old.get("sass") == new.get("sass"):
            lines.append(f"{label}: PTX differs, SASS identical")
            continue
        changed = [
            f"{key} {old[key]} -> {new[key]}"
            for key in ("registers", "spill_bytes", "instructions", *KINDS)
            if key in old and key in new and old[key] != new[key]
        ]
        lines.append(f"{label}: differs ({', '.join(changed) or 'the same counts'})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the digests here")
    parser.add_argument("--against", help="an earlier run's JSON: print what differs")
    parser.add_argument("--only", help="the kernels whose label contains this")
    args = parser.parse_args(argv)
    before = None
    if args.against:  # read first: a wrong path should not wait for 61 compiles
        try:
            before = json.loads(Path(args.against).read_text())
        except (OSError, ValueError) as e:
            parser.error(f"--against {args.against}: {e}")
    if args.json and not Path(args.json).parent.is_dir():
        parser.error(f"--json {args.json}: no directory {Path(args.json).parent}")
    rows = {}
    for label, spec, config, arch in kernels():
        if args.only and args.only not in label:
            continue
        try:
            rows[label] = row = digest(spec, config, arch)
        except (DiagnosticException, ValueError) as e:  # refused: say so, go on
            rows[label] = {"refused": str(e).splitlines()[0]}
            print(f"{label:<52} refused: {rows[label]['refused']}", flush=True)
            continue
        print(
            f"{label:<52} {row['registers']:4d} registers "
            f"{row.get('instructions', '-'):>6} SASS  {row.get('sass', row['ptx'])}",
            flush=True,
        )
    if not any("sass" in row for row in rows.values()):
        print("(no cuobjdump/nvdisasm: PTX digests and ptxas's report only)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if before is not None:
        if args.only:
            before = {k: v for k, v in before.items() if args.only in k}
        found = differences(before, rows)
        print(f"\nagainst {args.against}: {len(found)} of {len(rows)} kernels differ")
        for line in found:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
