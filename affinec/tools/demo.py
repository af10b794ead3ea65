"""The main job (`make demo`, `affinec demo`): the default convolution walked through
every stage — naive → tiled → split → sunk → promoted → mapped → gpu → llvm + nvvm →
PTX — with the interpreter's agreement at each stage, ptxas's resources, and, where
a GPU is present, the kernel run on it, checked, and timed against cuDNN.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import TextIO

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.spec import ConvSpec
from affinec.driver.checking import Checker
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import (
    poisoned_output,
    relative_error,
    verdict,
)

DEFAULT_CONV = ConvSpec(n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=(1, 1))
"""The demo's convolution: small enough to interpret at every level in seconds."""

SHOWN_STAGES = {
    "affinec-canonicalize": "tiled, split and sunk (affinec-tile-split-sink)",
    "affine-data-copy-generate": "the promoted level: shared-memory copies "
    "(affine-data-copy-generate)",
    "affinec-map-threads": "the mapped level: buffers placed, barriers, threads "
    "with register tiles (affinec-place-buffers, affinec-insert-barriers, "
    "affinec-map-threads)",
    "gpu-kernel-outlining": "the gpu level (affinec-convert-parallel-to-gpu, "
    "gpu-kernel-outlining)",
}
"""Stages whose IR the demo prints (the others it checks only)."""


def run_demo(spec: ConvSpec = DEFAULT_CONV, out: TextIO | None = None) -> bool:
    """Walk `spec` through every stage, printing as it goes; True if all agree."""
    from affinec.backend.runtime import cuda_available, current_arch
    from affinec.driver.compiler import compile_to_ptx

    out = out or sys.stdout
    say = functools.partial(print, file=out)
    macs = spec.flops // 2
    say(f"== the default convolution: {spec.describe()} ({macs:,} multiply-adds)")
    say(f"   {contraction_of(spec)}\n")
    module = build(spec)
    say("== 1. the naive IR (affinec gen conv ...)\n", module, "", sep="\n")

    checker = Checker(spec, seed=0)
    start = time.perf_counter()
    results = [checker.check("naive", module)]
    interpret_seconds = time.perf_counter() - start
    shown: list[tuple[str, str]] = []

    def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
        results.append(checker.check_pass(p, m))
        if p.name in SHOWN_STAGES:
            shown.append((SHOWN_STAGES[p.name], str(m)))

    arch = current_arch()
    compiled = compile_to_ptx(module, arch=arch, callback=after)
    for k, (title, text) in enumerate(shown, start=2):
        say(f"== {k}. {title}\n", text, "", sep="\n")
    ptx = compiled.ptx.splitlines()
    say(f"== {len(shown) + 2}. PTX for {arch} ({len(ptx)} lines; the first 40)\n")
    say(*ptx[:40], "   ...\n", sep="\n")
    say(f"pipeline: {compiled.pipeline}")
    say(f"compile time (passes, LLVM, PTX): {compiled.seconds:.2f} s")
    try:
        say(f"ptxas: {compiled.resources().describe()}")
    except Exception as e:  # no ptxas here: the PTX is still printed above
        say(f"ptxas: not run ({e})")
    for launch in compiled.launches:
        say(f"launch: grid {launch.grid_text}, block {launch.block}\n")

    say("== the interpreter after every pass, against numpy in float64\n")
    say(f"{'stage':<44} {'rel. error':>10}  vs previous stage")
    for r in results:
        say(r.row())
    say(f"(the naive IR ran at {macs / interpret_seconds:,.0f} multiply-adds/s)")
    ok = all(r.ok for r in results)
    say(checker.verdict(ok))
    say()

    if not cuda_available():
        say("== GPU: no CUDA GPU here; the PTX above runs where one is (`affinec run`)")
        return ok
    return _run_on_gpu(spec, compiled, checker, say) and ok


def _run_on_gpu(spec, compiled, checker: Checker, say) -> bool:
    kernel = compiled.runtime_kernel()
    out = kernel(*checker.inputs, poisoned_output(spec))
    checked = verdict(spec, relative_error(out, checker.expected), compiled.tolerance)
    same = np.array_equal(out, checker.previous, equal_nan=True)
    ok = checked.ok
    say("== on the GPU")
    say(
        f"{checked.describe()}; "
        f"{'bit-identical to' if same else 'differs from'} the interpreter"
    )
    try:
        import torch  # noqa: F401
    except ImportError:
        return ok
    from affinec.driver.benchmark import bench_conv, format_table

    say(format_table([bench_conv("demo", spec, compiled=compiled)]))
    return ok
