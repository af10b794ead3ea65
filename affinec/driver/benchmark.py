"""Our convolution against cuDNN's, timed in the same run (`affinec bench`,
`benchmarks/conv.py`).

Method (the device README's METHOD.md): inputs are fresh random data on the GPU;
enough input sets rotate that they do not fit in the L2 cache together (at least
twice its 50 MB), so repeated runs do not measure a warm cache; before timing, our
output is poisoned and checked against torch's float64 convolution, and a wrong
kernel is reported as such and never timed. Kernels are timed with
`affinec.backend.timing.time_launches`: batches of back-to-back launches queued behind a
spin kernel, between two CUDA events, so the figure is GPU time and not Python's
launch overhead; the median of 10 batches is reported. `benchmarks/timing_check.py`
compares these figures with Nsight Compute's `gpu__time_duration`.

cuDNN runs through torch in channels_last (NHWC) with `cudnn.benchmark = True`, in
the spec's dtype (bf16 as `torch.bfloat16`, accumulating in f32 as ours). For f32
it runs twice: with TF32 off (`allow_tf32 = False`, exact f32, the fair comparison
for our exact kernel) and with TF32 on (torch's default, about 10 bits of
mantissa). With a ReLU epilogue it is also timed with the ReLU as a second kernel,
as the table of the benchmark convolutions (docs/BENCHMARKS.md) gives it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from affinec.backend.ptxas import resident_blocks
from affinec.base.extras import missing_extra
from affinec.base.spec import DTYPES, ConvSpec, Spec, parse_spec

DESIGN_CONVOLUTIONS: dict[str, ConvSpec] = {
    "resnet50-conv1": ConvSpec(128, 4, 224, 224, 64, 7, 7, stride=2, padding=3),
    "conv3x3-64-relu": ConvSpec(32, 64, 224, 224, 64, 3, 3, padding=1, epilogue="relu"),
    "conv3x3-256-512": ConvSpec(256, 256, 14, 14, 512, 3, 3, padding=1),
    "conv3x3-128": ConvSpec(32, 128, 28, 28, 128, 3, 3, padding=1),
    "conv1x1-256-64": ConvSpec(32, 256, 56, 56, 64, 1, 1),
}
"""The five benchmark convolutions (NCHW f32 here; `with_format`
sets layout and dtype)."""

L2_BYTES = 50 * 2**20
MAX_SETS = 16


def with_format(spec: ConvSpec, dtype: str, layout: str = "nhwc") -> ConvSpec:
    """`spec` in another dtype and layout (NHWC pairs with RSCK filters)."""
    filter_layout = "rsck" if layout == "nhwc" else "kcrs"
    return replace(spec, dtype=dtype, layout=layout, filter_layout=filter_layout)


@dataclass
class Row:
    name: str
    spec: str
    error: float
    ours_ms: float | None
    cudnn_ms: float
    """cuDNN in the spec's dtype; for f32 with TF32 off (exact)."""
    cudnn_tf32_ms: float | None
    """cuDNN for f32 with TF32 on (torch's default); None for f16 and bf16."""
    cudnn_relu_ms: float | None
    tflops_ours: float | None
    tflops_cudnn: float
    config: str = ""
    registers: int | None = None
    shared_memory: int | None = None
    block: int | None = None
    occupancy: float | None = None
    """Theoretical: resident warps over the multiprocessor's 64."""
    note: str = ""

    @property
    def dtype(self) -> str:
        """The spec's storage dtype, or tf32 for f32 on the tensor cores."""
        return "tf32" if "tf32=true" in self.config else parse_spec(self.spec).dtype

    @property
    def ratio(self) -> float | None:
        """cuDNN's time over ours: 1.0 is cuDNN's speed, higher is faster."""
        return None if self.ours_ms is None else self.cudnn_ms / self.ours_ms

    @property
    def ratio_tf32(self) -> float | None:
        if self.ours_ms is None or self.cudnn_tf32_ms is None:
            return None
        return self.cudnn_tf32_ms / self.ours_ms


def occupancy(registers: int, threads: int, shared_bytes: int) -> float:
    """Resident warps over 64 (`ptxas.resident_blocks`: an H100 multiprocessor)."""
    return resident_blocks(registers, threads, shared_bytes) * -(-threads // 32) / 64


def torch_dtype(dtype: str):
    """The torch dtype of a spec's storage dtype."""
    import torch

    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]


def to_numpy(tensor):
    """A torch tensor as a float64 numpy array (torch has no numpy bfloat16)."""
    return tensor.detach().double().cpu().numpy()


def input_sets(spec: ConvSpec) -> int:
    """How many sets of inputs timing rotates through: enough that the GPU's L2
    cannot hold them all (a kernel timed on one set measures the cache)."""
    element = 4 if spec.dtype == "f32" else 2
    per_set = element * (
        spec.n * spec.c * spec.h * spec.w + spec.k * spec.c * spec.r * spec.s
    )
    return max(2, min(MAX_SETS, -(-2 * L2_BYTES // per_set)))


def torch_tensors(spec: ConvSpec, generator, device="cuda"):
    """Input, filter, (bias) as torch tensors in cuDNN's preferred layout."""
    import torch

    dtype = torch_dtype(spec.dtype)
    x = torch.randn(spec.n, spec.c, spec.h, spec.w, generator=generator, device=device)
    cg = spec.c // spec.groups
    w = torch.randn(spec.k, cg, spec.r, spec.s, generator=generator, device=device)
    x = x.to(dtype).contiguous(memory_format=torch.channels_last)
    w = w.to(dtype).contiguous(memory_format=torch.channels_last)
    b = None
    if spec.epilogue == "bias-relu":
        b = torch.randn(spec.k, generator=generator, device=device).to(dtype)
    return x, w, b


def in_our_layout(spec: ConvSpec, x, w, b):
    """The same tensors as contiguous arrays in the spec's layouts."""
    xs = x.permute(0, 2, 3, 1) if spec.layout == "nhwc" else x
    ws = w.permute(2, 3, 1, 0) if spec.filter_layout == "rsck" else w
    args = [xs.contiguous(), ws.contiguous()]
    if b is not None:
        args.append(b.contiguous())
    return args


def torch_conv(spec: ConvSpec, x, w, b, relu: bool):
    import torch.nn.functional as F

    y = F.conv2d(
        x,
        w,
        b,
        stride=spec.stride,
        padding=spec.padding,
        dilation=spec.dilation,
        groups=spec.groups,
    )
    return F.relu(y) if relu else y


def time_cudnn(spec: ConvSpec, data: list, relu: bool, tf32: bool) -> float:
    """cuDNN's time for the convolution on `data` (its algorithm as torch's
    `cudnn.benchmark` setting picks it)."""
    import torch

    from affinec.backend.timing import time_launches

    torch.backends.cudnn.allow_tf32 = tf32
    try:
        return time_launches(lambda k: torch_conv(spec, *data[k], relu=relu), len(data))
    finally:
        torch.backends.cudnn.allow_tf32 = True


TORCH_EPILOGUES = ("none", "relu", "bias-relu")
"""The epilogues the torch side of timing (cuDNN, and the tuner's references on the
GPU) computes; `affinec run` checks any epilogue against the float64 reference."""


def require_torch_epilogue(spec: Spec) -> None:
    """Refuse a spec whose epilogue the torch side does not compute."""
    epilogue = getattr(spec, "epilogue", "none")
    if epilogue not in TORCH_EPILOGUES:
        raise ValueError(
            f"epilogue {epilogue!r}: benchmarking and tuning against torch take "
            f"{', '.join(TORCH_EPILOGUES)} (`affinec run` checks any epilogue)"
        )


def bench_conv(name: str, spec: ConvSpec, *, compiled=None, seed: int = 0) -> Row:
    """Check and time our kernel for `spec` (compiled if not given) and cuDNN's."""
    require_torch_epilogue(spec)
    try:
        import torch
    except ModuleNotFoundError as error:
        raise missing_extra(error, "timing against cuDNN") from None

    from affinec.backend.runtime import current_arch
    from affinec.backend.timing import time_launches
    from affinec.driver.compiler import compile_to_ptx
    from affinec.frontend.reference import relative_error, verdict

    torch.backends.cudnn.benchmark = True
    generator = torch.Generator(device="cuda").manual_seed(seed)
    sets = input_sets(spec)
    data = [torch_tensors(spec, generator) for _ in range(sets)]
    relu = spec.epilogue != "none"

    # float64 reference of set 0, and our result on it, output poisoned first
    x, w, b = data[0]
    ref = torch_conv(
        spec, x.double(), w.double(), None if b is None else b.double(), relu
    )
    if spec.layout == "nhwc":
        ref = ref.permute(0, 2, 3, 1)
    ref = to_numpy(ref.contiguous())
    compiled = compiled or compile_to_ptx(spec, arch=current_arch())
    kernel = compiled.runtime_kernel()
    out_dtype = torch_dtype(spec.dtype)
    outputs = [
        torch.full(ref.shape, float("nan"), dtype=out_dtype, device="cuda")
        for _ in range(sets)
    ]
    bound = [
        kernel.check(*in_our_layout(spec, *data[k]), outputs[k]) for k in range(sets)
    ]
    for arguments in bound:
        for a in arguments:
            a.to_device()
    kernel.launch(bound[0])
    torch.cuda.synchronize()
    checked = verdict(
        spec, relative_error(to_numpy(outputs[0]), ref), compiled.tolerance
    )
    ok, error = checked.ok, checked.error

    ours_ms = None
    if ok:
        ours_ms = time_launches(lambda k: kernel.launch(bound[k]), sets)
    f32 = spec.dtype == "f32"
    cudnn_ms = time_cudnn(spec, data, relu=False, tf32=not f32)
    cudnn_tf32_ms = time_cudnn(spec, data, relu=False, tf32=True) if f32 else None
    cudnn_relu_ms = time_cudnn(spec, data, relu=True, tf32=not f32) if relu else None
    resources = compiled.resources()
    threads = compiled.launch.block[0] * compiled.launch.block[1]
    tflops = lambda ms: spec.flops / (ms * 1e-3) / 1e12  # noqa: E731
    # ptxas reports the static shared memory; the launch gives the dynamic.
    shared = resources.shared_memory + compiled.launch.dynamic_shared_memory
    return Row(
        name=name,
        spec=spec.to_text(),
        error=error,
        ours_ms=ours_ms,
        cudnn_ms=cudnn_ms,
        cudnn_tf32_ms=cudnn_tf32_ms,
        cudnn_relu_ms=cudnn_relu_ms,
        tflops_ours=None if ours_ms is None else tflops(ours_ms),
        tflops_cudnn=tflops(cudnn_ms),
        config=compiled.config.describe() if compiled.config else compiled.pipeline,
        registers=resources.registers,
        shared_memory=shared,
        block=threads,
        occupancy=occupancy(resources.registers, threads, shared),
        note="" if ok else checked.describe(),
    )


def format_table(rows: list[Row]) -> str:
    lines = [
        f"{'convolution':<16} {'dtype':<5} {'ours ms':>8} {'TFLOP/s':>7} "
        f"{'cuDNN ms':>8} {'TF32 ms':>8} {'+ReLU ms':>8} {'cuDNN/ours':>10} "
        f"{'TF32/ours':>9} {'rel.err':>8} {'regs':>4} {'smem':>6} {'thr':>4} {'occ':>4}"
    ]
    for r in rows:
        dtype = r.dtype
        ours = (
            f"{r.ours_ms:8.3f} {r.tflops_ours:7.1f}"
            if r.ours_ms and r.tflops_ours
            else f"{'-':>8} {'-':>7}"
        )

        def opt(v: float | None, width: int, fmt: str) -> str:
            return f"{v:{width}{fmt}}" if v is not None else f"{'-':>{width}}"

        lines.append(
            f"{r.name:<16} {dtype:<5} {ours} {r.cudnn_ms:8.3f} "
            f"{opt(r.cudnn_tf32_ms, 8, '.3f')} {opt(r.cudnn_relu_ms, 8, '.3f')} "
            f"{opt(r.ratio, 10, '.3f')} {opt(r.ratio_tf32, 9, '.3f')} "
            f"{r.error:8.1e} {opt(r.registers, 4, 'd')} {opt(r.shared_memory, 6, 'd')} "
            f"{opt(r.block, 4, 'd')} {opt(r.occupancy, 4, '.2f')} {r.note}"
        )
    return "\n".join(lines)


def geomean(values: list[float]) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(rows: list[Row]) -> str:
    """The geometric means of cuDNN's time over ours, per dtype (f32 against cuDNN
    with TF32 off and on; our tf32 rows against cuDNN's TF32)."""
    lines = []
    for dtype in (*DTYPES, "tf32"):
        mine = [r for r in rows if r.dtype == dtype and r.ratio]
        if not mine:
            continue
        exact = geomean([r.ratio for r in mine if r.ratio])
        tf32 = [r.ratio_tf32 for r in mine if r.ratio_tf32]
        if dtype == "tf32":
            line = f"tf32: geomean cuDNN TF32/ours {geomean(tf32):.3f}"
        else:
            line = f"{dtype}: geomean cuDNN/ours {exact:.3f}"
            if tf32:
                line += f" (TF32 off); {geomean(tf32):.3f} against TF32"
        lines.append(line + f" over {len(mine)}")
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
        "rows": [
            asdict(r) | {"cudnn_over_ours": r.ratio, "tf32_over_ours": r.ratio_tf32}
            for r in rows
        ],
    }
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)


def run_benchmarks(
    only: list[str] | None,
    dtypes: list[str],
    layout: str,
    json_path: str | None,
    wgmma: bool = False,
    arch: str | None = None,
) -> int:
    """Run, print the table, write JSON; exit code 1 if any kernel was wrong. The
    dtype `tf32` is f32 storage on the tensor cores (`config_for(spec, tf32=True)`),
    against cuDNN's TF32. With `wgmma`, the convolutions the wgmma route takes are
    compiled on it for sm_90a (`config_for(spec, wgmma=True)`), the others as
    without. `arch` is the target of the rest (default: the GPU's, `current_arch`)."""
    from affinec.backend.runtime import current_arch, require_gpu
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    require_gpu()
    rows = []
    for name, spec in DESIGN_CONVOLUTIONS.items():
        if only and name not in only:
            continue
        for dtype in dtypes:
            tf32 = dtype == "tf32"
            stored = with_format(spec, "f32" if tf32 else dtype, layout)
            target = arch or current_arch()
            config = config_for(stored, tf32=True, arch=target) if tf32 else None
            if wgmma and not tf32:
                try:
                    config = config_for(stored, arch="sm_90a", wgmma=True)
                    target = "sm_90a"
                except ValueError as e:
                    print(f"{name} {dtype}: not on the wgmma route: {e}", flush=True)
            compiled = compile_to_ptx(stored, config, arch=target)
            rows.append(bench_conv(name, stored, compiled=compiled))
            print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    info = device_description()
    print(
        f"\n{info['gpu']}, cuDNN {info['cudnn']}, torch {info['torch']}, {info['date']}"
    )
    print(format_table(rows))
    print(summary(rows))
    if json_path:
        write_json(json_path, rows, info)
    return 0 if all(r.ours_ms is not None for r in rows) else 1
