"""`affinec.torch.conv2d`, as `torch.nn.functional.conv2d`: the spec of a torch
convolution (`spec_of`, `Unsupported` where there is none), its filter as the spec
lays it out (`filter_for`), the kernel compiled once per spec and device, the call
of the kernel on torch tensors, and the fallback to torch with a warning saying why.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F

from affinec.base.spec import ConvSpec, epilogue_text

DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}
ACTIVATIONS = ("relu", "relu6")


class Unsupported(Exception):
    """Why affinec does not run a convolution (torch then does), or why `convert`
    cannot take a model."""


def _pair(value: int | Sequence[int], what: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    if len(value) == 2 and all(isinstance(v, int) for v in value):
        return (int(value[0]), int(value[1]))
    raise Unsupported(f"{what}={value!r} is not an int or a pair of ints")


def _padding(
    padding: str | int | Sequence[int],
    stride: tuple[int, int],
    dilation: tuple[int, int],
    kernel: tuple[int, int],
) -> tuple[int, int]:
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        if stride != (1, 1) or any(
            (d * (k - 1)) % 2 for d, k in zip(dilation, kernel, strict=True)
        ):
            raise Unsupported(
                "padding='same' pads unevenly here (a stride, or an even window)"
            )
        return (dilation[0] * (kernel[0] - 1) // 2, dilation[1] * (kernel[1] - 1) // 2)
    if isinstance(padding, str):
        raise Unsupported(f"padding={padding!r}")
    return _pair(padding, "padding")


_MEMORY_FORMATS = {"nchw": torch.contiguous_format, "nhwc": torch.channels_last}


def _layout(t: torch.Tensor) -> str:
    """`nchw` (contiguous) or `nhwc` (channels_last) for a 4-D tensor."""
    if t.is_contiguous():
        return "nchw"
    if t.is_contiguous(memory_format=torch.channels_last):
        return "nhwc"
    raise Unsupported("the input is neither contiguous nor channels_last")


def spec_of(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
    activation: str | None = None,
    residual: torch.Tensor | None = None,
) -> ConvSpec:
    """The spec affinec compiles for `F.conv2d(input, weight, bias, ...)`, plus
    `residual` (a tensor of the output's shape and memory format) where given, then
    `activation` (None, `relu`, `relu6`); `Unsupported` says why there is none."""
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4:
            raise Unsupported(f"{name} is not a 4-D tensor")
    if input.dtype not in DTYPES:
        raise Unsupported(f"dtype {input.dtype}")
    for name, t in (("weight", weight), ("bias", bias), ("residual", residual)):
        if t is not None and (t.dtype != input.dtype or t.device != input.device):
            raise Unsupported(f"the {name} is not the input's dtype and device")
    if input.requires_grad or weight.requires_grad:
        raise Unsupported("a tensor requires grad (affinec runs inference only)")
    if activation not in (None, *ACTIVATIONS):
        raise Unsupported(f"activation {activation!r}")
    n, c, h, w = input.shape
    k, per_group, r, s = weight.shape
    if groups < 1 or c != per_group * groups or k % groups:
        raise Unsupported(f"groups={groups} does not divide the channels")
    stride_, dilation_ = _pair(stride, "stride"), _pair(dilation, "dilation")
    steps = (
        *(("bias",) if bias is not None else ()),
        *(("residual",) if residual is not None else ()),
        *((activation,) if activation else ()),
    )
    try:
        spec = ConvSpec(
            n, c, h, w, k, r, s,
            stride=stride_,
            padding=_padding(padding, stride_, dilation_, (r, s)),
            dilation=dilation_,
            layout=(layout := _layout(input)),
            filter_layout="rsck" if layout == "nhwc" else "kcrs",
            dtype=DTYPES[input.dtype],
            epilogue=epilogue_text(steps),
            groups=groups,
        )  # fmt: skip
    except ValueError as e:  # a shape the spec refuses (an empty output, ...)
        raise Unsupported(str(e)) from None
    if residual is not None:
        shape = (n, k, spec.out_h, spec.out_w)
        if tuple(residual.shape) != shape or residual.dim() != 4:
            raise Unsupported(f"the residual is not of the output's shape {shape}")
        if not residual.is_contiguous(memory_format=_MEMORY_FORMATS[layout]):
            raise Unsupported("the residual is not in the input's memory format")
    return spec


@functools.cache
def _kernel(spec: ConvSpec, device: int) -> Any:
    import affinec

    with torch.cuda.device(device):
        return affinec.compile(spec)


def _affinec_runs(input: torch.Tensor) -> None:
    from affinec.backend.runtime import cuda_available

    if not input.is_cuda:
        raise Unsupported("the tensors are on the CPU")
    if not cuda_available():
        raise Unsupported("numba.cuda finds no GPU")


def filter_for(weight: torch.Tensor, layout: str) -> torch.Tensor:
    """`weight` (torch's K x C/G x R x S) as the spec's filter: as it is for NCHW
    (KCRS), laid out R x S x C/G x K (RSCK) for NHWC."""
    if layout == "nhwc":
        return weight.permute(2, 3, 1, 0).contiguous()
    return weight.contiguous()


def kernel_spec(spec: ConvSpec, any_batch: bool) -> ConvSpec:
    """The spec whose kernel runs `spec`: itself, or with `any_batch` the kernel of
    any batch configured for its batch bucket (`affinec.tuning.cache.batch_bucket`:
    batches 8 to 15 share one), so a new batch compiles nothing."""
    if not any_batch:
        return spec
    from affinec.tuning.cache import batch_bucket

    return replace(spec, n=batch_bucket(spec.n), dynamic_batch=True)


def _run(
    spec: ConvSpec,
    input: torch.Tensor,
    filter: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    any_batch: bool = False,
    kernel: Any = None,
) -> torch.Tensor:
    if kernel is None:
        kernel = _kernel(kernel_spec(spec, any_batch), input.device.index or 0)
    out = torch.empty(
        (spec.n, spec.k, spec.out_h, spec.out_w),
        dtype=input.dtype,
        device=input.device,
        memory_format=_MEMORY_FORMATS[spec.layout],
    )

    def as_laid_out(t: torch.Tensor) -> torch.Tensor:
        """A 4-D tensor as the kernel reads it: its memory order, NHWC or NCHW."""
        return t.permute(0, 2, 3, 1) if spec.layout == "nhwc" else t

    arrays = {"input": as_laid_out(input), "filter": filter, "output": as_laid_out(out)}
    if bias is not None:
        arrays["bias"] = bias.contiguous()
    if residual is not None:
        arrays["residual"] = as_laid_out(residual)
    kernel(**arrays)
    return out


def _fallback(reason: Unsupported) -> None:
    warnings.warn(
        f"affinec.torch: {reason}; running torch.nn.functional.conv2d instead",
        stacklevel=4,
    )


def _torch_conv(
    input, weight, bias, stride, padding, dilation, groups, activation, residual
) -> torch.Tensor:
    out = F.conv2d(input, weight, bias, stride, padding, dilation, groups)
    if residual is not None:
        out = out + residual
    if activation == "relu":
        return F.relu(out)
    if activation == "relu6":
        return F.relu6(out)
    return out


def conv2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
    *,
    any_batch: bool = False,
) -> torch.Tensor:
    """`torch.nn.functional.conv2d` on affinec's kernels (see the module docstring);
    the output in the input's memory format. With `any_batch`, one kernel serves
    every batch of a batch bucket (`kernel_spec`)."""
    return _conv2d(
        input,
        weight,
        bias,
        stride,
        padding,
        dilation,
        groups,
        None,
        any_batch=any_batch,
    )


def _conv2d(
    input,
    weight,
    bias,
    stride,
    padding,
    dilation,
    groups,
    activation,
    residual=None,
    filter=None,
    any_batch=False,
    record: dict | None = None,
    key: tuple | None = None,
) -> torch.Tensor:
    """`conv2d` with an activation and a residual; where `record` is given, what a
    call of the same shapes needs (spec, filter, kernel) is kept there under
    `key` once affinec takes it."""
    args = (input, weight, bias, stride, padding, dilation, groups, activation)
    try:
        spec = spec_of(*args, residual)
        _affinec_runs(input)
    except Unsupported as reason:
        _fallback(reason)
        return _torch_conv(*args, residual)
    if filter is None:
        filter = filter_for(weight, spec.layout)
    kernel = _kernel(kernel_spec(spec, any_batch), input.device.index or 0)
    if record is not None:
        record[key] = (spec, filter, kernel)
    return _run(spec, input, filter, bias, residual, any_batch, kernel)
