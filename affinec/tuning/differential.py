"""Differential testing: random specs × configurations from the tuner's space, each
compiled and run against float64.

A configuration the passes accept must give the right answer, whichever the tuner
(or a user) picks; the benchmark convolutions and `config_for`'s choices cover only a
corner of what is accepted. `random_pairs` draws convolutions of every layout,
dtype, stride, padding, dilation and epilogue (residuals among them), grouped and
depthwise ones, kernels of any batch (run at a batch they were not compiled for) and
matrix products, and for each a few configurations from `search_space` (the tuner's
candidates, `config_for`'s among them), one of each route the space offers first
(SIMT, mma.sync, the coalesced k, split-K, flattened pixels, Hopper's wgmma on
sm_90a); some bf16 pairs run on torch tensors. `run_pair` compiles one, runs it on
fresh random inputs with a poisoned output, and compares it with the float64
reference within the kernel's own tolerance.

    pairs = random_pairs(seed=0, count=300)
    outcomes = [run_pair(p) for p in pairs]       # on a GPU
    [o for o in outcomes if o.status == "wrong"]  # must be empty

`make gpu-test` runs a fixed few hundred (`tests/test_gpu_differential.py`);
`scripts/gpu_differential.py` runs as many as asked and writes a table and JSON.
Without a GPU, `compile_pair` stops at PTX (the compile-time checks still apply).
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from affinec.base.diagnostics import OpError
from affinec.base.spec import (
    DTYPES,
    EPILOGUES,
    FILTER_LAYOUTS,
    LAYOUTS,
    ConvSpec,
    MatmulSpec,
    Spec,
)
from affinec.driver.config import KernelConfig
from affinec.tuning.differential_hopper import (  # noqa: F401 (public here too)
    HOPPER_DRAWS,
    HOPPER_SHARES,
    TAPS_SS,
    TAPS_SS_RULE,
    WARP_SPECIALIZE,
    hopper_counts,
)

COMPILED = "compiled"
CORRECT = "correct"
WRONG = "wrong"
REFUSED = "refused"
"""The passes refused the configuration with a diagnostic (not a failure)."""
FAILED = "failed"
"""Anything else went wrong: a crash of the compiler or of the launch."""


@dataclass(frozen=True)
class Pair:
    spec: Spec
    config: KernelConfig
    run_batch: int = 0
    """A kernel of any batch (`spec.dynamic_batch`) runs at this batch (0: `spec.n`)."""
    torch_inputs: bool = False
    """Hand the kernel torch tensors on the GPU (and a torch output) instead of numpy
    arrays: the output must come back as a torch tensor of the spec's dtype."""
    label: str = ""
    """The route the configuration was drawn for, where its knobs alone do not name
    it (`TAPS_SS`, `TAPS_SS_RULE`): `route` answers it."""

    def run_spec(self) -> Spec:
        """The spec the kernel runs: `spec` at `run_batch`."""
        if self.run_batch and isinstance(self.spec, ConvSpec):
            return dataclasses.replace(self.spec, n=self.run_batch)
        return self.spec

    def describe(self) -> str:
        at = f" | run at batch {self.run_batch}" if self.run_batch else ""
        on = " | torch tensors" if self.torch_inputs else ""
        return f"{self.spec.to_text()} | {self.config.describe()}{at}{on}"

    def route(self) -> str:
        """The kernel's route: the route it was drawn for (`label`: `wgmma-taps-ss`,
        the descriptor route of a convolution with taps, `wgmma-taps-ss-rule`, that
        route's block rule), `warp-specialize` (`affinec-wgmma` with a producer
        warpgroup), `wgmma` (the Hopper kernel of `affinec-wgmma-gemm`), `wgmma-pass`
        (the tensor-core route on `affinec-wgmma`), `coalesced` (the k of a filter
        row's columns and channels, padded channels among them), `mma` or `simt`."""
        c = self.config
        if self.label:
            return self.label
        if c.warp_specialize:
            return WARP_SPECIALIZE
        if c.wgmma:
            return "wgmma"
        if c.mma and c.tensor_core == "wgmma":
            return "wgmma-pass"
        if c.coalesce_reduction or c.pad_channels > 1:
            return "coalesced"
        return "mma" if c.mma else "simt"

    def knobs(self) -> list[str]:
        """What else the pair exercises, beside its route."""
        spec, c = self.spec, self.config
        out = []
        if isinstance(spec, MatmulSpec):
            out.append("product")
        if c.splits > 1:
            out.append("split-k")
        if c.flatten_pixels:
            out.append("flattened")
        if isinstance(spec, ConvSpec) and spec.groups > 1:
            out.append("depthwise" if spec.groups == spec.c == spec.k else "grouped")
        if isinstance(spec, ConvSpec) and spec.dynamic_batch:
            out.append("any-batch")
        if "residual" in spec.epilogue:
            out.append("residual")
        if self.torch_inputs:
            out.append("torch")
        if self.label in (TAPS_SS, TAPS_SS_RULE):
            out.append("tma" if c.tma else "cp.async")
            if isinstance(spec, ConvSpec) and tuple(spec.stride) != (1, 1):
                out.append("strided")
        return out


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
            "route": self.pair.route(),
            "label": self.pair.label or None,
            "knobs": self.pair.knobs(),
            "run_batch": self.pair.run_batch or None,
            "torch_inputs": self.pair.torch_inputs,
            "status": self.status,
            "error": self.error,
            "tolerance": self.tolerance,
            "reason": self.reason,
            "seconds": round(self.seconds, 3),
        }


COMPOSED_EPILOGUES = ("residual", "bias,residual,relu", "scale,bias,residual,relu6")
"""Epilogues of steps drawn beside the named ones (a ResNet block's last convolution,
a folded batch norm)."""


PRODUCT_SHARE = 0.2
"""Of the specs drawn, the matrix products (Hopper's wgmma route's own)."""
GROUPED_SHARE, DEPTHWISE_SHARE = 0.12, 0.08
ANY_BATCH_SHARE = 0.15
POINTWISE_SHARE = 0.15
"""Of the convolutions, the 1x1, stride-1, unpadded NHWC ones whose pixels flatten
into a product (and Hopper's kernel takes)."""
TORCH_SHARE = 0.4
"""Of the bf16 pairs, those run on torch tensors."""
ANY_BATCHES = (1, 2, 3, 5, 7)


def random_spec(rng: random.Random) -> Spec:
    """A convolution (or a matrix product) small enough to check on the CPU's float64
    reference, with the channel counts the tensor cores take as often as not; some
    grouped or depthwise, some of any batch, some 1x1 layers whose pixels flatten."""
    if rng.random() < PRODUCT_SHARE:
        return MatmulSpec(
            m=rng.randint(1, 320),
            n=rng.choice([8, 16, 24, 32, 48, 64, 96, 128, 192, 256]),
            k=rng.choice([16, 32, 48, 64, 96, 128, 192, 256, 320, 512]),
            dtype=rng.choice(DTYPES),
            epilogue=rng.choice(("none", "bias", "residual", "bias,residual,relu")),
        )
    spec = _random_conv(rng)
    kind = rng.random()
    if kind < DEPTHWISE_SHARE:
        spec = dataclasses.replace(spec, k=spec.c, groups=spec.c)
    elif kind < DEPTHWISE_SHARE + GROUPED_SHARE:
        both = [g for g in (2, 3, 4, 8) if spec.c % g == 0 and spec.k % g == 0]
        if both:
            spec = dataclasses.replace(spec, groups=rng.choice(both))
    if rng.random() < ANY_BATCH_SHARE:
        spec = dataclasses.replace(spec, dynamic_batch=True)
    return spec


def _random_conv(rng: random.Random) -> ConvSpec:
    if rng.random() < POINTWISE_SHARE:
        return ConvSpec(
            n=rng.choice([1, 2, 3]),
            c=rng.choice([16, 32, 48, 64, 96, 128]),
            h=rng.randint(2, 14),
            w=rng.randint(2, 14),
            k=rng.choice([8, 16, 32, 64, 96, 128]),
            r=1,
            s=1,
            layout="nhwc",
            filter_layout="rsck",
            dtype=rng.choice(DTYPES),
            epilogue=rng.choice((*EPILOGUES, *COMPOSED_EPILOGUES)),
        )
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
    torch_share: float = TORCH_SHARE,
    hopper_routes: bool = True,
) -> list[Pair]:
    """`count` (spec, configuration) pairs, `per_spec` configurations a spec drawn
    from its search space on `arch`: one of each kind the space offers first (route,
    split or not, flattened or not), then at random. A kernel of any batch runs at
    another batch than it was compiled for; a share of the bf16 pairs run on torch
    tensors (`torch_share`). With `wgmma_only`, only the space's Hopper kernels
    (sm_90a: `affinec-wgmma-gemm`'s and `affinec-wgmma`'s), of the specs that have
    some. On a chip with wgmma (and `hopper_routes`), the last `hopper_counts` pairs
    are the routes the space does not offer (`hopper_pairs`); the ones before them
    are the first of what the seed draws without them."""
    from affinec.tuning.space import search_space

    rng = random.Random(seed)
    extra = hopper_counts(count, arch) if hopper_routes else {}
    hopper = hopper_pairs(seed, extra, arch, torch_share)
    pairs: list[Pair] = []
    while len(pairs) < count - len(hopper):
        spec = random_spec(rng)
        configs = search_space(spec, arch=arch).configs
        if wgmma_only:
            configs = tuple(c for c in configs if c.wgmma or c.tensor_core == "wgmma")
            if not configs:
                continue
        kinds: dict[tuple, list[KernelConfig]] = {}
        for config in configs:
            kind = (
                Pair(spec, config).route(),
                config.splits > 1,
                config.flatten_pixels,
            )
            kinds.setdefault(kind, []).append(config)
        chosen = [rng.choice(group) for group in kinds.values()]
        rng.shuffle(chosen)
        rest = [c for c in configs if c not in chosen]
        chosen = chosen[:per_spec]
        chosen += rng.sample(rest, min(per_spec - len(chosen), len(rest)))
        for config in chosen[: count - len(hopper) - len(pairs)]:
            run_batch = 0
            if isinstance(spec, ConvSpec) and spec.dynamic_batch:
                run_batch = rng.choice([b for b in ANY_BATCHES if b != spec.n])
            torch_inputs = spec.dtype == "bf16" and rng.random() < torch_share
            pairs.append(Pair(spec, config, run_batch, torch_inputs))
    return pairs + hopper


def hopper_pairs(
    seed: int, counts: dict[str, int], arch: str, torch_share: float = TORCH_SHARE
) -> list[Pair]:
    """`counts[route]` pairs of each of `HOPPER_SHARES`' routes on `arch`, from a
    stream of `seed` of their own: NHWC/RSCK f16/bf16 convolutions with taps (or a
    stride of 2) of 64 channels a step by descriptor (`TAPS_SS`: TMA or cp.async, a
    block of `SS_TILES` with `pixel_tile`'s, `pixel_box`'s or a random box), the
    block rule's choice for larger ones (`TAPS_SS_RULE`), and products or 1x1
    convolutions through their flattened pixels with a producer warpgroup
    (`WARP_SPECIALIZE`)."""
    rng = random.Random(f"hopper routes {seed}")
    epilogues = (*EPILOGUES, *COMPOSED_EPILOGUES)
    pairs = []
    for route, n in counts.items():
        for _ in range(n):
            spec, config, label = HOPPER_DRAWS[route](rng, arch, epilogues)
            torch_inputs = spec.dtype == "bf16" and rng.random() < torch_share
            pairs.append(Pair(spec, config, torch_inputs=torch_inputs, label=label))
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
    spec = pair.run_spec()
    start = time.perf_counter()
    try:
        inputs = random_inputs(spec, np.random.default_rng(seed))
        if pair.torch_inputs:
            out = _run_on_torch(compiled.extra["kernel"], spec, inputs)
        else:
            out = compiled.extra["kernel"](*inputs, poisoned_output(spec))
    except Exception as e:
        return Outcome(
            pair,
            FAILED,
            tolerance=tolerance,
            reason=f"launch: {type(e).__name__}: {str(e)[:300]}",
            seconds=compiled.seconds + time.perf_counter() - start,
        )
    checked = verdict(spec, relative_error(out, reference(spec, *inputs)), tolerance)
    return Outcome(
        pair,
        CORRECT if checked.ok else WRONG,
        error=checked.error,
        tolerance=checked.tolerance,
        seconds=compiled.seconds + time.perf_counter() - start,
    )


def _run_on_torch(kernel, spec: Spec, inputs: list[np.ndarray]) -> np.ndarray:
    """`kernel` on `inputs` as torch tensors on the GPU with a poisoned torch output;
    the result as float64, after checking it came back as the caller's kind."""
    import torch

    from affinec.driver.benchmark import to_numpy, torch_dtype

    kind = torch_dtype(spec.dtype)
    # torch reads no ml_dtypes bf16: through float32, exactly
    tensors = [
        torch.as_tensor(a.astype(np.float32), device="cuda").to(kind) for a in inputs
    ]
    poisoned = _output_shape(spec)
    out = kernel(
        *tensors, torch.full(poisoned, float("nan"), dtype=kind, device="cuda")
    )
    if (
        not isinstance(out, torch.Tensor)
        or out.dtype != kind
        or out.device.type != "cuda"
    ):
        raise TypeError(
            f"torch tensors in, {type(out).__name__} "
            f"{getattr(out, 'dtype', '')} out: expected a CUDA tensor of {kind}"
        )
    return to_numpy(out)


def _output_shape(spec: Spec) -> tuple[int, ...]:
    from affinec.frontend.contraction import contraction_of

    return tuple(contraction_of(spec).output.shape)


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
