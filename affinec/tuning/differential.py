"""Differential testing: random specs × configurations from the tuner's space, each
compiled and run against float64.

A configuration the passes accept must give the right answer, whichever the tuner
(or a user) picks; the benchmark convolutions and `config_for`'s choices cover only a
corner of what is accepted. `random_pairs` draws convolutions of every layout,
dtype, stride, padding, dilation and epilogue, and for each a few configurations from
`search_space` (the tuner's candidates, `config_for`'s among them); `run_pair`
compiles one, runs it on fresh random inputs with a poisoned output, and compares it
with the float64 reference within the kernel's own tolerance.

    pairs = random_pairs(seed=0, count=300)
    outcomes = [run_pair(p) for p in pairs]       # on a GPU
    [o for o in outcomes if o.status == "wrong"]  # must be empty

`make gpu-test` runs a fixed few hundred (`tests/test_gpu_differential.py`);
`scripts/gpu_differential.py` runs as many as asked and writes a table and JSON.
Without a GPU, `compile_pair` stops at PTX (the compile-time checks still apply).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from affinec.base.diagnostics import OpError
from affinec.base.spec import DTYPES, EPILOGUES, FILTER_LAYOUTS, LAYOUTS, ConvSpec
from affinec.driver.config import KernelConfig

COMPILED = "compiled"
CORRECT = "correct"
WRONG = "wrong"
REFUSED = "refused"
"""The passes refused the configuration with a diagnostic (not a failure)."""
FAILED = "failed"
"""Anything else went wrong: a crash of the compiler or of the launch."""


@dataclass(frozen=True)
class Pair:
    spec: ConvSpec
    config: KernelConfig

    def describe(self) -> str:
        return f"{self.spec.to_text()} | {self.config.describe()}"


@dataclass
class Outcome:
    pair: Pair
    status: str
    error: float | None = None
    tolerance: float | None = None
    reason: str = ""
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.pair.spec.to_text(),
            "config": self.pair.config.describe(),
            "status": self.status,
            "error": self.error,
            "tolerance": self.tolerance,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
        }


COMPOSED_EPILOGUES = ("residual", "bias,residual,relu", "scale,bias,residual,relu6")
"""Epilogues of steps drawn beside the named ones (a ResNet block's last convolution,
a folded batch norm)."""


def random_spec(rng: random.Random) -> ConvSpec:
    """A convolution small enough to check on the CPU's float64 reference, with the
    channel counts the tensor cores take as often as not."""
    r, s = rng.choice([1, 1, 3, 3, 5, 7]), rng.choice([1, 1, 3, 3, 5])
    stride = (rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2]))
    dilation = (rng.choice([1, 1, 1, 2]), rng.choice([1, 1, 1, 2]))
    padding = (rng.randint(0, 3), rng.randint(0, 3))
    channels = [3, 4, 8, 16, 24, 32, 48, 64, 96, 128]
    while True:
        h, w = rng.randint(3, 24), rng.randint(3, 24)
        if (
            dilation[0] * (r - 1) + 1 <= h + 2 * padding[0]
            and dilation[1] * (s - 1) + 1 <= w + 2 * padding[1]
        ):
            break
    return ConvSpec(
        n=rng.choice([1, 1, 2, 3]),
        c=rng.choice(channels),
        h=h,
        w=w,
        k=rng.choice(channels),
        r=r,
        s=s,
        stride=stride,
        padding=padding,
        dilation=dilation,
        layout=rng.choice(LAYOUTS),
        filter_layout=rng.choice(FILTER_LAYOUTS),
        dtype=rng.choice(DTYPES),
        epilogue=rng.choice((*EPILOGUES, *COMPOSED_EPILOGUES)),
    )


def random_pairs(
    seed: int,
    count: int,
    per_spec: int = 4,
    arch: str = "sm_90",
    wgmma_only: bool = False,
) -> list[Pair]:
    """`count` (spec, configuration) pairs, `per_spec` configurations a spec drawn
    from its search space on `arch` (the first spec's baseline among them); with
    `wgmma_only`, only the space's Hopper kernels (sm_90a), of the specs that have
    some."""
    from affinec.tuning.space import search_space

    rng = random.Random(seed)
    pairs: list[Pair] = []
    while len(pairs) < count:
        spec = random_spec(rng)
        configs = search_space(spec, arch=arch).configs
        if wgmma_only:
            configs = tuple(c for c in configs if c.wgmma)
            if not configs:
                continue
        chosen = rng.sample(configs, min(per_spec, len(configs)))
        pairs += [Pair(spec, c) for c in chosen[: count - len(pairs)]]
    return pairs


def compile_pair(pair: Pair, arch: str) -> Outcome:
    """Compile `pair` to PTX for `arch`: `COMPILED` with the runtime kernel in
    `extra["kernel"]` (picklable, so a process pool can compile), `REFUSED` with the
    passes' diagnostic, or `FAILED` if the compiler crashed."""
    from affinec.driver.compiler import compile_to_ptx

    start = time.perf_counter()
    try:
        compiled = compile_to_ptx(pair.spec, pair.config, arch=arch)
    except OpError as e:
        return Outcome(
            pair, REFUSED, reason=str(e)[:300], seconds=time.perf_counter() - start
        )
    except Exception as e:  # a crash of the compiler: the caller reports it
        return Outcome(
            pair,
            FAILED,
            reason=f"{type(e).__name__}: {str(e)[:300]}",
            seconds=time.perf_counter() - start,
        )
    return Outcome(
        pair,
        COMPILED,
        tolerance=compiled.tolerance,
        seconds=time.perf_counter() - start,
        extra={"kernel": compiled.runtime_kernel()},
    )


def check_on_gpu(compiled: Outcome, seed: int = 0) -> Outcome:
    """Run a `COMPILED` outcome's kernel on fresh random inputs with a poisoned
    output and compare it with float64 within the kernel's tolerance."""
    from affinec.frontend.reference import (
        poisoned_output,
        random_inputs,
        reference,
        relative_error,
        verdict,
    )

    if compiled.status != COMPILED:
        return compiled
    pair, tolerance = compiled.pair, compiled.tolerance
    start = time.perf_counter()
    try:
        inputs = random_inputs(pair.spec, np.random.default_rng(seed))
        out = compiled.extra["kernel"](*inputs, poisoned_output(pair.spec))
    except Exception as e:
        return Outcome(
            pair,
            FAILED,
            tolerance=tolerance,
            reason=f"launch: {type(e).__name__}: {str(e)[:300]}",
            seconds=compiled.seconds + time.perf_counter() - start,
        )
    checked = verdict(
        pair.spec, relative_error(out, reference(pair.spec, *inputs)), tolerance
    )
    return Outcome(
        pair,
        CORRECT if checked.ok else WRONG,
        error=checked.error,
        tolerance=checked.tolerance,
        seconds=compiled.seconds + time.perf_counter() - start,
    )


def run_pair(pair: Pair, seed: int = 0, arch: str | None = None) -> Outcome:
    """Compile `pair` for `arch` (this GPU's by default), run it and check it
    against float64."""
    from affinec.backend.runtime import current_arch

    return check_on_gpu(compile_pair(pair, arch or current_arch()), seed)


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    return counts
