"""Measuring candidates: checked against float64 first, then timed on the GPU.

The tuner talks to a `Measurer`, so tests put a fake one in its place and no test
needs a GPU or times anything. `GpuMeasurer` is the real one, in process, with the
method of `affinec.driver.benchmark` (docs/BENCHMARKS.md): fresh random inputs on
the GPU, enough input sets that they do not sit in L2 together, the output poisoned
(NaN) and compared with torch's float64 result before anything is timed (a wrong
configuration is reported and never picked), then `affinec.backend.timing.time_launches`:
GPU time of back-to-back launches queued behind a spin kernel, the median of a few
batches. Screening takes few short batches; the finalists are timed again with the
benchmark's ten.

A kernel that faults (an illegal address) leaves the CUDA context unusable; the
measurer then says so (`broken`) and the tuner stops measuring, keeping what it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from affinec.backend.runtime import Kernel
from affinec.base.extras import install_hint
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.frontend.reference import Verdict, verdict

SCREEN_ROUNDS = 5
"""Batches timed per candidate while screening (the median is kept)."""
SCREEN_TARGET_MS = 5.0
"""Work per screening batch."""
FINAL_ROUNDS = 10
FINAL_TARGET_MS = 20.0


@dataclass(frozen=True)
class Measurement:
    """What measuring one kernel gave."""

    ok: bool
    """Right (within the dtype's tolerance of float64) and timed."""
    ms: float | None = None
    error: float | None = None
    """‖out − ref‖ / ‖ref‖ against float64 (inf for NaN or infinity)."""
    reason: str = ""
    """Why not ok."""
    seconds: float = 0.0
    """Wall time the measurement took (checking and timing)."""


class MeasurerUnavailable(ValueError):
    """This machine cannot measure (torch is missing); the message says why."""


class Measurer(Protocol):
    """Checks and times kernels of one spec on one GPU."""

    gpu: str
    """The GPU's name (part of the cache key)."""
    broken: bool
    """The GPU can no longer be used in this process (a kernel faulted)."""

    def measure(self, kernel: Kernel, final: bool = False) -> Measurement:
        """Check `kernel` against float64, then time it (more batches if `final`)."""
        ...

    def confirm(self, kernel: Kernel, runs: int) -> Measurement:
        """Check `kernel` against float64 on `runs` fresh sets of inputs, each with
        a poisoned output (ok only if every run is right)."""
        ...

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        """cuDNN's time for the spec in the same conditions (None if unknown)."""
        ...

    def close(self) -> None:
        """Free the inputs and outputs."""
        ...


def gpu_name() -> str:
    """The current GPU's name, as the cache keys it."""
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


class GpuMeasurer:
    """The in-process measurer for convolutions and matrix products (needs torch)."""

    def __init__(self, spec: Spec, seed: int = 0) -> None:
        from affinec.backend.runtime import require_gpu
        from affinec.driver.benchmark import require_torch_epilogue

        require_torch_epilogue(spec)
        require_gpu()
        try:
            import torch
        except ImportError:
            raise MeasurerUnavailable(
                "measuring on the GPU needs torch (the float64 reference runs on "
                "the GPU, as in affinec.driver.benchmark): "
                f"{install_hint('torch')}; --dry-run ranks without it"
            ) from None
        if not isinstance(spec, ConvSpec | MatmulSpec):
            raise MeasurerUnavailable(f"cannot measure a {spec.kind} spec")
        self.spec = spec
        self.seed = seed
        self.gpu = gpu_name()
        self.broken = False
        torch.backends.cudnn.benchmark = True
        generator = torch.Generator(device="cuda").manual_seed(seed)
        if isinstance(spec, ConvSpec):
            from affinec.driver.benchmark import input_sets, torch_tensors

            self.sets = input_sets(spec)
            self.data = [torch_tensors(spec, generator) for _ in range(self.sets)]
        else:
            self.sets = 2
            self.data = [_matmul_tensors(spec, generator) for _ in range(self.sets)]
        self.reference = self._reference()
        from affinec.driver.benchmark import torch_dtype

        dtype = torch_dtype(spec.dtype)
        self.outputs = [
            torch.empty(self.reference.shape, dtype=dtype, device="cuda")
            for _ in range(self.sets)
        ]
        self.arguments = [self._ours(*d) for d in self.data]

    def _reference(self, data: tuple | None = None) -> Any:
        """The float64 result for `data` (input set 0 by default), on the GPU, in
        our output layout."""
        spec = self.spec
        x, w, b = data if data is not None else self.data[0]
        if isinstance(spec, ConvSpec):
            from affinec.driver.benchmark import torch_conv

            ref = torch_conv(
                spec,
                x.double(),
                w.double(),
                None if b is None else b.double(),
                spec.epilogue != "none",
            )
            if spec.layout == "nhwc":
                ref = ref.permute(0, 2, 3, 1)
            return ref.contiguous()
        ref = x.double() @ w.double()
        if b is not None:
            ref = ref + b.double()
        return ref.clamp_min(0.0) if spec.epilogue != "none" else ref

    def _ours(self, x, w, b) -> list:
        if isinstance(self.spec, ConvSpec):
            from affinec.driver.benchmark import in_our_layout

            return in_our_layout(self.spec, x, w, b)
        return [t.contiguous() for t in (x, w, b) if t is not None]

    def measure(self, kernel: Kernel, final: bool = False) -> Measurement:
        import time

        import torch

        from affinec.backend.timing import time_launches

        start = time.perf_counter()
        try:
            bound = [
                kernel.check(*self.arguments[k], self.outputs[k])
                for k in range(self.sets)
            ]
            for arguments in bound:
                for a in arguments:
                    a.to_device()
            out = self.outputs[0]
            out.fill_(float("nan"))
            kernel.launch(bound[0])
            torch.cuda.synchronize()
            checked = self.verdict(kernel, _relative_error(out, self.reference))
            error = checked.error
            if not checked.ok:
                return Measurement(
                    False,
                    error=error,
                    reason=f"wrong: {checked.describe()}",
                    seconds=time.perf_counter() - start,
                )
            ms = time_launches(
                lambda k: kernel.launch(bound[k]),
                self.sets,
                rounds=FINAL_ROUNDS if final else SCREEN_ROUNDS,
                target_ms=FINAL_TARGET_MS if final else SCREEN_TARGET_MS,
            )
        except Exception as e:  # a launch that failed: the context may be gone
            self.broken = not _context_alive()
            return Measurement(
                False,
                reason=f"launch failed: {type(e).__name__}: {str(e)[:200]}",
                seconds=time.perf_counter() - start,
            )
        return Measurement(True, ms, error, seconds=time.perf_counter() - start)

    def verdict(self, kernel: Kernel, error: float) -> Verdict:
        """`error` held to the kernel's own tolerance where the compiler gave one
        (looser for tf32 arithmetic), else to its dtype's."""
        return verdict(self.spec, error, kernel.info.get("tolerance"))

    def confirm(self, kernel: Kernel, runs: int) -> Measurement:
        import time

        import torch

        start = time.perf_counter()
        generator = torch.Generator(device="cuda").manual_seed(self.seed + 1)
        worst = 0.0
        try:
            for run in range(runs):
                if isinstance(self.spec, ConvSpec):
                    from affinec.driver.benchmark import torch_tensors

                    data = torch_tensors(self.spec, generator)
                else:
                    data = _matmul_tensors(self.spec, generator)
                reference = self._reference(data)
                out = torch.full_like(self.outputs[0], float("nan"))
                kernel(*self._ours(*data), out)
                checked = self.verdict(kernel, _relative_error(out, reference))
                worst = max(worst, checked.error)
                if not checked.ok:
                    return Measurement(
                        False,
                        error=checked.error,
                        reason=f"wrong on fresh inputs (run {run + 1} of {runs}): "
                        f"{checked.describe()}",
                        seconds=time.perf_counter() - start,
                    )
        except Exception as e:
            self.broken = not _context_alive()
            return Measurement(
                False,
                reason=f"launch failed: {type(e).__name__}: {str(e)[:200]}",
                seconds=time.perf_counter() - start,
            )
        return Measurement(True, error=worst, seconds=time.perf_counter() - start)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> float | None:
        """cuDNN through torch on the same inputs, timed as `affinec.driver.benchmark` times
        it: the convolution alone (with `relu`, followed by torch's ReLU kernel);
        f32 exact unless `tf32`."""
        if not isinstance(self.spec, ConvSpec) or self.broken:
            return None
        from affinec.driver.benchmark import time_cudnn

        return time_cudnn(
            self.spec, self.data, relu=relu, tf32=tf32 or self.spec.dtype != "f32"
        )

    def close(self) -> None:
        import torch

        self.data = self.outputs = self.arguments = []
        self.reference = None
        torch.cuda.empty_cache()


def _matmul_tensors(spec: MatmulSpec, generator) -> tuple:
    import torch

    from affinec.driver.benchmark import torch_dtype

    dtype = torch_dtype(spec.dtype)
    a = torch.randn(spec.m, spec.k, generator=generator, device="cuda").to(dtype)
    b = torch.randn(spec.k, spec.n, generator=generator, device="cuda").to(dtype)
    bias = None
    if spec.epilogue == "bias-relu":
        bias = torch.randn(spec.n, generator=generator, device="cuda").to(dtype)
    return a, b, bias


def _relative_error(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 on the GPU; inf if `out` holds NaN or inf."""
    import torch

    out64 = out.double()
    if not bool(torch.isfinite(out64).all()):
        return float("inf")
    denom = float(torch.linalg.vector_norm(ref))
    diff = float(torch.linalg.vector_norm(out64 - ref))
    return diff / denom if denom else diff


def _context_alive() -> bool:
    try:
        import torch

        torch.cuda.synchronize()
        return True
    except Exception:
        return False
