"""Whether a change to the compiler left the PTX it emits byte for byte the same:
a fixed set of about twenty kernels (`config_for`'s configuration of the five
benchmark convolutions in f16 for sm_90, as `benchmarks/compile.py` times them;
the same in bf16 and f32, some for sm_80; some of ResNet-50's layers at batch 1
and 32; matrix products; Hopper's route on the convolutions it takes; the small
default convolution) compiled to PTX, each
written to a folder with its configuration. Needs neither ptxas nor a GPU;
`scripts/kernel_digests.py` compares SASS where the PTX may differ.

    python scripts/ptx_identical.py --save /tmp/ptx-before      # before the change
    python scripts/ptx_identical.py --against /tmp/ptx-before   # after: what differs

`--save` writes each kernel's PTX and its configuration (as `KernelConfig`'s
fields); `--against` compiles the kernels with the configurations saved there
(so a change to `config_for` made meanwhile does not count as a change of the
PTX) and names the kernels whose PTX differs. Exit status 1 if any does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from affinec.base.spec import ConvSpec, MatmulSpec, Spec, parse_spec
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.kernel_config import KernelConfig
from affinec.frontend.networks import network


def kernels() -> Iterator[tuple[str, Spec, KernelConfig, str]]:
    """(label, spec, configuration, architecture) of every kernel of the set."""
    for name, spec in DESIGN_CONVOLUTIONS.items():
        typed = with_format(spec, "f16")
        yield f"{name}-f16-sm_90", typed, config_for(typed), "sm_90"
    for name, spec in list(DESIGN_CONVOLUTIONS.items())[:3]:
        for dtype, arch in (("bf16", "sm_80"), ("f32", "sm_90")):
            typed = with_format(spec, dtype)
            yield f"{name}-{dtype}-{arch}", typed, config_for(typed), arch
    for batch, picks in ((1, (0, 3, 9)), (32, (1, 5, 12, 20))):
        layers = network("resnet50", batch)
        for k in picks:
            if k < len(layers):
                layer = layers[k]
                label = f"resnet50-{layer.name}-b{batch}-f16-sm_90"
                yield label, layer.spec, config_for(layer.spec), "sm_90"
    for spec in (
        MatmulSpec(512, 512, 512, "f16", "bias-relu"),
        MatmulSpec(256, 384, 128, "f32"),
    ):
        yield (
            f"matmul-{spec.m}x{spec.n}x{spec.k}-{spec.dtype}",
            spec,
            config_for(spec),
            "sm_90",
        )
    # Hopper's route (TMA, wgmma's runs as inline PTX), where config_for takes it
    for name, spec in list(DESIGN_CONVOLUTIONS.items())[:5]:
        typed = with_format(spec, "f16")
        try:
            config = config_for(typed, arch="sm_90a", wgmma=True)
        except ValueError:
            continue
        yield f"{name}-f16-wgmma-sm_90a", typed, config, "sm_90a"
    default = ConvSpec(1, 8, 8, 8, 8, 3, 3, padding=1)
    yield "default-conv-f32-sm_80", default, config_for(default), "sm_80"
    yield "default-conv-knobs-sm_80", default, KernelConfig(), "sm_80"


def file_name(label: str) -> str:
    """`label` as a file name (a layer's name has spaces, slashes and `@`)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label) + ".ptx"


def config_fields(config: KernelConfig) -> dict:
    return {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)  # pyright: ignore[reportArgumentType]
    }


def config_from(fields: dict) -> KernelConfig:
    return KernelConfig(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", help="a folder to write the PTX to")
    group.add_argument("--against", help="a folder --save wrote: compare with it")
    args = parser.parse_args(argv)
    folder = Path(args.save or args.against)
    if args.save:
        folder.mkdir(parents=True, exist_ok=True)
        index = {}
        for label, spec, config, arch in kernels():
            ptx = compile_to_ptx(spec, config, arch=arch, verify_each=False).ptx
            (folder / file_name(label)).write_text(ptx)
            index[label] = {
                "spec": spec.to_text(),
                "arch": arch,
                "config": config_fields(config),
            }
            print(f"{label:<44} {len(ptx):8d} characters", flush=True)
        (folder / "index.json").write_text(json.dumps(index, indent=1))
        return 0
    index = json.loads((folder / "index.json").read_text())
    differ = 0
    for label, entry in index.items():
        config = config_from(entry["config"])
        spec = parse_spec(entry["spec"])
        ptx = compile_to_ptx(spec, config, arch=entry["arch"], verify_each=False).ptx
        same = ptx == (folder / file_name(label)).read_text()
        differ += not same
        print(f"{label:<44} {'identical' if same else 'DIFFERS'}", flush=True)
    print(f"\n{len(index) - differ} of {len(index)} kernels' PTX identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
