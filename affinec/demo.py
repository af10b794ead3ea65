"""The main job (`make demo`, `affinec demo`): the default convolution walked through
every stage — naive → tiled → split → sunk → gpu → llvm + nvvm → PTX — with the
interpreter's agreement at each stage, ptxas's resources, and, where a GPU is
present, the kernel run on it, checked, and timed against cuDNN.

`StageChecker` is also what `affinec check` prints with.
"""

from __future__ import annotations

import functools
import io
import sys
import time
from typing import TextIO

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.frontend import build, contraction_of
from affinec.interpreter import Interpreter
from affinec.pipeline import pass_text
from affinec.reference import (
    TOLERANCE,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.spec import ConvSpec, Spec

DEFAULT_CONV = ConvSpec(n=1, c=8, h=8, w=8, k=8, r=3, s=3, padding=(1, 1))
"""The demo's convolution: small enough to interpret at every level in seconds."""

SHOWN_STAGES = {
    "affinec-canonicalize": "tiled, split and sunk (affinec-tile-split-sink)",
    "gpu-kernel-outlining": "the gpu level (affinec-convert-parallel-to-gpu, "
    "gpu-kernel-outlining)",
}
"""Stages whose IR the demo prints (the others it checks only)."""


class StageChecker:
    """Interprets a module at each stage on one set of random inputs, against the
    float64 reference and against the previous stage."""

    def __init__(self, spec: Spec, seed: int, out: TextIO | None = None) -> None:
        self.spec = spec
        self.function = contraction_of(spec).name
        self.inputs = random_inputs(spec, np.random.default_rng(seed))
        self.expected = reference(spec, *self.inputs)
        self.previous: np.ndarray | None = None
        self.ok = True
        self.out = out or sys.stdout
        print(f"{'stage':<44} {'rel. error':>10}  vs previous stage", file=self.out)

    def stage(self, name: str, module: ModuleOp, reorders: bool = False) -> None:
        """Interpret `module` and print its line; `reorders` says the stage may
        change the order of summation (so bit-identity is not expected)."""
        result = poisoned_output(self.spec)
        Interpreter(module).run(self.function, *[x.copy() for x in self.inputs], result)
        error = relative_error(result, self.expected)
        if self.previous is None:
            versus = "-"
        elif np.array_equal(result, self.previous, equal_nan=True):
            versus = "bit-identical"
        elif reorders:
            versus = "differs (the pass may reorder the summation)"
        else:
            versus = "DIFFERS"
            self.ok = False
        self.ok &= error <= TOLERANCE[self.spec.dtype]
        self.previous = result
        print(f"{name:<44} {error:>10.2e}  {versus}", file=self.out)

    def verdict(self) -> str:
        tolerance = TOLERANCE[self.spec.dtype]
        word = "ok" if self.ok else "FAILED"
        return (
            f"{word}: every stage within {tolerance:g} of float64 ({self.spec.dtype})"
        )


def run_demo(spec: ConvSpec = DEFAULT_CONV, out: TextIO | None = None) -> bool:
    """Walk `spec` through every stage, printing as it goes; True if all agree."""
    from affinec.compiler import compile_to_ptx
    from affinec.runtime import cuda_available, current_arch

    out = out or sys.stdout
    say = functools.partial(print, file=out)
    macs = spec.flops // 2
    say(f"== the default convolution: {spec.describe()} ({macs:,} multiply-adds)")
    say(f"   {contraction_of(spec)}\n")
    module = build(spec)
    say("== 1. the naive IR (affinec gen conv ...)\n", module, "", sep="\n")

    table = io.StringIO()
    checker = StageChecker(spec, seed=0, out=table)
    start = time.perf_counter()
    checker.stage("naive", module)
    interpret_seconds = time.perf_counter() - start
    shown: list[tuple[str, str]] = []

    def after(p: ModulePass, m: ModuleOp, seconds: float) -> None:
        checker.stage(pass_text(p), m, getattr(p, "reorders_summation", False))
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
    say(f"launch: grid {compiled.launch.grid}, block {compiled.launch.block}\n")

    say("== the interpreter after every pass, against numpy in float64\n")
    say(table.getvalue(), end="")
    say(f"(the naive IR ran at {macs / interpret_seconds:,.0f} multiply-adds/s)")
    say(checker.verdict())
    say()

    if not cuda_available():
        say("== GPU: no CUDA GPU here; the PTX above runs where one is (`affinec run`)")
        return checker.ok
    return _run_on_gpu(spec, compiled, checker, say) and checker.ok


def _run_on_gpu(spec, compiled, checker: StageChecker, say) -> bool:
    kernel = compiled.runtime_kernel()
    out = kernel(*checker.inputs, poisoned_output(spec))
    error = relative_error(out, checker.expected)
    same = np.array_equal(out, checker.previous, equal_nan=True)
    ok = error <= TOLERANCE[spec.dtype]
    say("== on the GPU")
    say(
        f"relative error {error:.2e} ({'ok' if ok else 'FAILED'}); "
        f"{'bit-identical to' if same else 'differs from'} the interpreter"
    )
    try:
        import torch  # noqa: F401
    except ImportError:
        return ok
    from affinec.benchmark import bench_conv, format_table

    say(format_table([bench_conv("demo", spec, kernel=kernel)]))
    return ok
