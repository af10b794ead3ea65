"""Our convolution against cuDNN's, timed in the same run (`affinec bench`,
`benchmarks/conv.py`).

Method (the device README's METHOD.md): inputs are fresh random data on the GPU,
several input sets rotate so repeated runs do not measure a warm cache, every kernel
is warmed up first and timed with CUDA events around each launch, and the median of
the repeats is reported. Before timing, our output is poisoned and checked against
float64 (torch's float64 convolution on the GPU where torch is present); a wrong
kernel is reported as such and never timed.

cuDNN runs through torch in channels_last (NHWC) with `cudnn.benchmark = True`, in
the spec's dtype; with a ReLU epilogue it is timed both as cuDNN's convolution alone
and with the ReLU as a second kernel, as DESIGN.md's table gives it.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from affinec.reference import TOLERANCE, relative_error
from affinec.spec import ConvSpec

DESIGN_CONVOLUTIONS: dict[str, ConvSpec] = {
    "resnet50-conv1": ConvSpec(128, 4, 224, 224, 64, 7, 7, stride=2, padding=3),
    "conv3x3-64-relu": ConvSpec(32, 64, 224, 224, 64, 3, 3, padding=1, epilogue="relu"),
    "conv3x3-256-512": ConvSpec(256, 256, 14, 14, 512, 3, 3, padding=1),
    "conv3x3-128": ConvSpec(32, 128, 28, 28, 128, 3, 3, padding=1),
    "conv1x1-256-64": ConvSpec(32, 256, 56, 56, 64, 1, 1),
}
"""The five convolutions of DESIGN.md's speed table (NCHW f32 here; `with_format`
sets layout and dtype)."""


def with_format(spec: ConvSpec, dtype: str, layout: str = "nhwc") -> ConvSpec:
    """`spec` in another dtype and layout (NHWC pairs with RSCK filters)."""
    import dataclasses

    filter_layout = "rsck" if layout == "nhwc" else "kcrs"
    return dataclasses.replace(
        spec, dtype=dtype, layout=layout, filter_layout=filter_layout
    )


@dataclass
class Row:
    name: str
    spec: str
    error: float
    ours_ms: float | None
    cudnn_ms: float
    cudnn_relu_ms: float | None
    tflops_ours: float | None
    tflops_cudnn: float
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """cuDNN's time over ours: 1.0 is cuDNN's speed, higher is faster."""
        return None if self.ours_ms is None else self.cudnn_ms / self.ours_ms


def _time_launches(
    launch, sets: int, rounds: int = 10, budget_ms: float = 5.0
) -> float:
    """Milliseconds per `launch(k)`: the median over `rounds` of a batch of
    back-to-back launches between two CUDA events (k rotates over the input sets).

    Batching keeps the GPU's queue full, so the host's launch overhead (tens of
    microseconds in Python) does not show up as idle GPU time between the events.
    The batch is as long as it takes to fill about `budget_ms` (1 to 20 launches),
    after a warm-up of as many launches, so slow kernels don't take minutes.
    """
    import torch

    def timed(batch: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(batch):
            launch(k % sets)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / batch

    first = max(timed(1), 1e-3)  # also loads the kernel and picks cuDNN's algorithm
    batch = max(1, min(20, round(budget_ms / first)))
    timed(batch)  # warm-up
    return statistics.median(timed(batch) for _ in range(rounds))


def _torch_tensors(spec: ConvSpec, generator, device="cuda"):
    """Input, filter, (bias) as torch tensors in cuDNN's preferred layout, plus the
    same data viewed in the spec's layout for our kernel."""
    import torch

    dtype = torch.float16 if spec.dtype == "f16" else torch.float32
    x = torch.randn(spec.n, spec.c, spec.h, spec.w, generator=generator, device=device)
    w = torch.randn(spec.k, spec.c, spec.r, spec.s, generator=generator, device=device)
    x = x.to(dtype).contiguous(memory_format=torch.channels_last)
    w = w.to(dtype).contiguous(memory_format=torch.channels_last)
    b = None
    if spec.epilogue == "bias-relu":
        b = torch.randn(spec.k, generator=generator, device=device).to(dtype)
    return x, w, b


def _ours_layout(spec: ConvSpec, x, w, b):
    """The same tensors as contiguous arrays in the spec's layouts."""
    xs = x.permute(0, 2, 3, 1) if spec.layout == "nhwc" else x
    ws = w.permute(2, 3, 1, 0) if spec.filter_layout == "rsck" else w
    args = [xs.contiguous(), ws.contiguous()]
    if b is not None:
        args.append(b.contiguous())
    return args


def _torch_conv(spec: ConvSpec, x, w, b, relu: bool):
    import torch.nn.functional as F

    y = F.conv2d(
        x, w, b, stride=spec.stride, padding=spec.padding, dilation=spec.dilation
    )
    return F.relu(y) if relu else y


def bench_conv(
    name: str,
    spec: ConvSpec,
    *,
    kernel=None,
    sets: int = 3,
    rounds: int = 10,
    seed: int = 0,
) -> Row:
    """Check and time our kernel for `spec` (compiled if not given) and cuDNN's."""
    import torch

    from affinec import compile as compile_kernel

    torch.backends.cudnn.benchmark = True
    generator = torch.Generator(device="cuda").manual_seed(seed)
    data = [_torch_tensors(spec, generator) for _ in range(sets)]
    relu = spec.epilogue != "none"

    # float64 reference of set 0, and our result on it, output poisoned first
    x, w, b = data[0]
    ref = _torch_conv(
        spec, x.double(), w.double(), None if b is None else b.double(), relu
    )
    if spec.layout == "nhwc":
        ref = ref.permute(0, 2, 3, 1)
    ref = ref.contiguous().cpu().numpy()
    kernel = kernel or compile_kernel(spec)
    out_dtype = torch.float16 if spec.dtype == "f16" else torch.float32
    outputs = [
        torch.full(ref.shape, float("nan"), dtype=out_dtype, device="cuda")
        for _ in range(sets)
    ]
    bound = [
        kernel.check(*_ours_layout(spec, *data[k]), outputs[k]) for k in range(sets)
    ]
    for arguments in bound:
        for a in arguments:
            a.to_device()
    kernel.launch(bound[0])
    torch.cuda.synchronize()
    error = relative_error(outputs[0].cpu().numpy(), ref)
    ok = error <= TOLERANCE[spec.dtype]

    ours_ms = None
    if ok:
        ours_ms = _time_launches(lambda k: kernel.launch(bound[k]), sets, rounds)
    cudnn_ms = _time_launches(
        lambda k: _torch_conv(spec, *data[k], relu=False), sets, rounds
    )
    cudnn_relu_ms = None
    if relu:
        cudnn_relu_ms = _time_launches(
            lambda k: _torch_conv(spec, *data[k], relu=True), sets, rounds
        )
    tflops = lambda ms: spec.flops / (ms * 1e-3) / 1e12  # noqa: E731
    return Row(
        name=name,
        spec=spec.to_text(),
        error=error,
        ours_ms=ours_ms,
        cudnn_ms=cudnn_ms,
        cudnn_relu_ms=cudnn_relu_ms,
        tflops_ours=None if ours_ms is None else tflops(ours_ms),
        tflops_cudnn=tflops(cudnn_ms),
        note="" if ok else f"WRONG: error {error:.2e} over {TOLERANCE[spec.dtype]:g}",
    )


def format_table(rows: list[Row]) -> str:
    lines = [
        f"{'convolution':<22} {'dtype':<5} {'ours ms':>9} {'TFLOP/s':>8} "
        f"{'cuDNN ms':>9} {'TFLOP/s':>8} {'+ReLU ms':>9} {'cuDNN/ours':>10} {'rel.err':>9}"
    ]
    for r in rows:
        dtype = "f16" if "dtype=f16" in r.spec else "f32"
        ours = (
            f"{r.ours_ms:9.3f} {r.tflops_ours:8.1f}"
            if r.ours_ms
            else f"{'-':>9} {'-':>8}"
        )
        relu = f"{r.cudnn_relu_ms:9.3f}" if r.cudnn_relu_ms else f"{'-':>9}"
        ratio = f"{r.ratio:10.3f}" if r.ratio else f"{'-':>10}"
        lines.append(
            f"{r.name:<22} {dtype:<5} {ours} {r.cudnn_ms:9.3f} {r.tflops_cudnn:8.1f} "
            f"{relu} {ratio} {r.error:9.1e} {r.note}"
        )
    return "\n".join(lines)


def device_description() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "gpu": props.name,
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "date": time.strftime("%Y-%m-%d"),
    }


def write_json(path: str, rows: list[Row], extra: dict[str, Any]) -> None:
    payload = {
        **extra,
        "rows": [asdict(r) | {"cudnn_over_ours": r.ratio} for r in rows],
    }
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)


__all__ = [
    "DESIGN_CONVOLUTIONS",
    "Row",
    "bench_conv",
    "device_description",
    "format_table",
    "with_format",
    "write_json",
]


def run_benchmarks(
    only: list[str] | None, dtypes: list[str], layout: str, json_path: str | None
) -> int:
    """Run, print the table, write JSON; exit code 1 if any kernel was wrong."""
    from affinec.runtime import require_gpu

    require_gpu()
    rows = []
    for name, spec in DESIGN_CONVOLUTIONS.items():
        if only and name not in only:
            continue
        for dtype in dtypes:
            rows.append(bench_conv(name, with_format(spec, dtype, layout)))
            print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    info = device_description()
    print(
        f"\n{info['gpu']}, cuDNN {info['cudnn']}, torch {info['torch']}, {info['date']}"
    )
    print(format_table(rows))
    if json_path:
        write_json(json_path, rows, info)
    return 0 if all(r.ours_ms is not None for r in rows) else 1
