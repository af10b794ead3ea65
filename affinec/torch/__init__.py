"""PyTorch's front door: affinec's kernels under `torch.nn.functional.conv2d` and
under a model's `nn.Conv2d`s.

    import affinec.torch
    y = affinec.torch.conv2d(x, w, b, stride=1, padding=1)   # as F.conv2d
    fast = affinec.torch.convert(model)                     # inference: every
    y = fast(x)                                             # Conv2d on affinec

`conv2d` takes what `torch.nn.functional.conv2d` takes, on CUDA tensors of f16,
bf16 or f32 in either memory format: contiguous (NCHW, with the filter as it is,
KCRS) or channels_last (NHWC: the filter is laid out RSCK for it, once per weight in
a converted model). Each shape is compiled once per device and kept (`affinec.compile`:
the tuning cache's configuration where `affinec tune` left one, else `config_for`'s).
What affinec does not cover — CPU tensors, other dtypes or memory formats, a string
padding other than what it spells, a machine without a GPU — runs
`torch.nn.functional.conv2d` instead, after a one-line warning saying why.

`convert(model)` traces the model (`torch.fx`), and replaces every `nn.Conv2d` by an
`AffinecConv2d`, folding a `BatchNorm2d` that follows it into its filter and bias,
and fusing into the kernel's epilogue an addition that follows (a skip connection:
the other operand becomes the kernel's residual input) and a ReLU or ReLU6 after
that (inference only: the batch norm's running statistics are folded). It works
on a copy: the caller's model keeps its mode and modules. On CUDA inputs the
converted model's forward pass is captured once per input shape as a CUDA graph
and replayed (`affinec.torch.graphs`; `convert(model, graphs=False)` for none).
Off the GPU the converted model still runs (each convolution falls back to torch
with its folded weights), so the folding is checked anywhere.

A convolution checks its input's shapes once: later calls of the same shapes go
straight to the compiled kernel, whose own launch path checks each layout of
arrays once too (`affinec.backend.runtime.Kernel`) and launches on torch's current
stream.
"""

from __future__ import annotations

import copy
import functools
import operator
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from affinec.base.extras import missing_extra

try:
    import torch
    import torch.nn.functional as F
    from torch import fx, nn
except ModuleNotFoundError as error:
    raise missing_extra(error, "affinec.torch") from None

from affinec.base.spec import ConvSpec, epilogue_text
from affinec.torch.graphs import GraphedModel

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


class AffinecConv2d(nn.Module):
    """An inference `nn.Conv2d` on affinec's kernels, with the activation that
    followed it fused (`convert` makes them; the weights are buffers, not
    parameters: nothing here trains)."""

    def __init__(
        self,
        conv: nn.Conv2d,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        activation: str | None = None,
        any_batch: bool = False,
    ) -> None:
        super().__init__()
        self.any_batch = any_batch
        self.stride, self.padding = conv.stride, conv.padding
        self.dilation, self.groups = conv.dilation, conv.groups
        self.activation = activation
        self.register_buffer("weight", weight.detach().clone())
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self._filters: dict[tuple, torch.Tensor] = {}
        self._calls: dict[tuple, tuple] = {}
        """What a call of given shapes needs, decided by its first call: its spec,
        the filter laid out for it, the compiled kernel."""

    def __getstate__(self) -> dict:
        # a copy (deepcopy, pickle) derives its own: the kernels hold the GPU's
        state = self.__dict__.copy()
        state["_filters"], state["_calls"] = {}, {}
        return state

    def _apply(self, fn, *args, **kwargs):
        # the weights move or change type: what was derived from them goes
        self._filters.clear()
        self._calls.clear()
        return super()._apply(fn, *args, **kwargs)

    def extra_repr(self) -> str:
        k, c, r, s = self.weight.shape
        return (
            f"{c * self.groups}, {k}, kernel_size=({r}, {s}), stride={self.stride}, "
            f"padding={self.padding}, groups={self.groups}, "
            f"activation={self.activation}"
            + (", any_batch=True" if self.any_batch else "")
        )

    def forward(
        self, input: torch.Tensor, residual: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The convolution of `input`, plus `residual` (a fused skip connection:
        `convert` passes it) before the activation. The weights take the input's
        floating-point type (an f32 model runs an f16 input in f16)."""
        if not input.is_floating_point():
            # torch refuses too (the weights are floats): cast to the input's
            # integers, they would be truncated
            raise TypeError(
                f"AffinecConv2d takes floating-point inputs, got {input.dtype}"
            )
        weight = self.weight.to(input.dtype)
        bias = None if self.bias is None else self.bias.to(input.dtype)
        key = (
            input.shape,
            input.stride(),
            input.dtype,
            input.device,
            input.requires_grad,
            None if residual is None else (residual.shape, residual.stride(),
                                           residual.dtype, residual.device),
        )  # fmt: skip
        known = self._calls.get(key)
        if known is not None:
            spec, filter, kernel = known
            return _run(spec, input, filter, bias, residual, self.any_batch, kernel)
        layout = "nhwc" if _channels_last(input) else "nchw"
        filter_key = (layout, input.dtype, input.device)
        if filter_key not in self._filters:  # the filter laid out once per layout
            self._filters[filter_key] = filter_for(weight, layout)
        return _conv2d(
            input,
            weight,
            bias,
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
            self.activation,
            residual,
            filter=self._filters[filter_key],
            any_batch=self.any_batch,
            record=self._calls,
            key=key,
        )


def _channels_last(t: torch.Tensor) -> bool:
    return not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last)


# -- converting a model -----------------------------------------------------------------------


def fold_batch_norm(
    conv: nn.Conv2d, bn: nn.BatchNorm2d
) -> tuple[torch.Tensor, torch.Tensor]:
    """The filter and bias of `bn(conv(x))` as one convolution (inference: the
    running statistics), computed in float64 and returned in the filter's dtype."""
    if bn.running_mean is None or bn.running_var is None:
        raise Unsupported("the batch norm keeps no running statistics")
    w = conv.weight.detach().double()
    mean, var = bn.running_mean.double(), bn.running_var.double()
    gamma = (
        bn.weight.detach().double() if bn.weight is not None else torch.ones_like(var)
    )
    beta = bn.bias.detach().double() if bn.bias is not None else torch.zeros_like(var)
    scale = gamma / torch.sqrt(var + bn.eps)
    b = conv.bias.detach().double() if conv.bias is not None else torch.zeros_like(var)
    dtype = conv.weight.dtype
    return (
        (w * scale.reshape(-1, 1, 1, 1)).to(dtype),
        ((b - mean) * scale + beta).to(dtype),
    )


_RELU = {F.relu: "relu", torch.relu: "relu", F.relu6: "relu6"}


def _activation(node: fx.Node, modules: dict[str, nn.Module]) -> str | None:
    """`relu` or `relu6` if `node` applies one to its one input, else None."""
    if node.op == "call_module":
        m = modules[str(node.target)]
        if isinstance(m, nn.ReLU6):
            return "relu6"
        if isinstance(m, nn.ReLU):
            return "relu"
        return None
    if node.op == "call_function" and node.target in _RELU and len(node.args) == 1:
        return _RELU[node.target]  # pyright: ignore[reportArgumentType]
    if node.op == "call_method" and node.target in ("relu", "relu_"):
        return "relu"
    return None


_ADD = (operator.add, operator.iadd, torch.add)


def _added_to(node: fx.Node, tail: fx.Node) -> fx.Node | None:
    """The other tensor `node` adds to `tail` (a skip connection), if it is one."""
    is_add = (node.op == "call_function" and node.target in _ADD) or (
        node.op == "call_method" and node.target in ("add", "add_")
    )
    if not is_add or len(node.args) != 2 or node.kwargs:
        return None
    a, b = node.args
    other = b if a is tail else a if b is tail else None
    return other if isinstance(other, fx.Node) and other is not tail else None


def _only_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def convert(
    model: nn.Module, *, any_batch: bool = False, graphs: bool = True
) -> nn.Module:
    """A copy of `model`, for inference, with every `nn.Conv2d` on affinec: a batch
    norm that follows one folded into it, an addition of a skip connection and a
    ReLU or ReLU6 after that fused (see the module docstring). A convolution affinec
    cannot take as such (a padding mode other than zeros) is left to torch, with a
    warning. With `any_batch`, each convolution runs kernels of any batch, one per
    batch bucket (`kernel_spec`): a new batch size compiles nothing new within its
    bucket.

    `model` itself is left as it was, its mode included: the conversion works on a
    copy, in eval mode (batch norms by their running statistics, dropout off); a
    model in training mode is converted so, with a warning saying it. A model that
    cannot be copied is put in eval mode itself, with a warning.

    With `graphs` (the default), the result is a `GraphedModel`: on CUDA inputs its
    forward pass is captured once per input layout as a CUDA graph and replayed
    (`affinec.torch.graphs`; `graphs=False`, or setting `.graphs = False` on it,
    runs it eagerly); without, the converted `torch.fx.GraphModule` itself. Either
    way `.graph` is the converted model's fx graph.

    The model must be traceable by `torch.fx.symbolic_trace`: a forward pass that
    branches or loops on tensor values is refused (`Unsupported`, saying what to
    do)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert takes an nn.Module, got {type(model).__name__}")
    if model.training:
        warnings.warn(
            f"affinec.torch.convert: {type(model).__name__} is in training mode; the "
            "converted model runs inference (eval mode: batch norms by their running "
            "statistics, folded into the convolutions); the model itself is "
            "left as it is",
            stacklevel=2,
        )
    try:
        model = copy.deepcopy(model)
    except Exception as e:  # a module holding something deepcopy refuses
        warnings.warn(
            f"affinec.torch.convert: {type(model).__name__} cannot be copied ({e}); "
            "putting the model itself in eval mode",
            stacklevel=2,
        )
    model = model.eval()
    try:
        graph_module = fx.symbolic_trace(model)
    except fx.proxy.TraceError as e:
        raise Unsupported(
            f"affinec.torch.convert cannot trace {type(model).__name__}: {e}. "
            "torch.fx traces one graph for every input, so a forward pass that "
            "branches or loops on tensor values (if x.sum() > 0, ...) cannot be "
            "converted whole: convert its parts that can be (model.backbone = "
            "affinec.torch.convert(model.backbone, graphs=False)), or call "
            "affinec.torch.conv2d in its forward"
        ) from None
    modules = dict(graph_module.named_modules())
    for node in list(graph_module.graph.nodes):
        if node.op != "call_module":
            continue
        conv = modules[str(node.target)]
        if not isinstance(conv, nn.Conv2d) or isinstance(conv, AffinecConv2d):
            continue
        if conv.padding_mode != "zeros":
            warnings.warn(
                f"affinec.torch.convert: {node.target} pads with "
                f"'{conv.padding_mode}'; left to torch",
                stacklevel=2,
            )
            continue
        weight = conv.weight.detach()
        bias = None if conv.bias is None else conv.bias.detach()
        absorbed = []
        tail = node
        user = _only_user(tail)
        if (
            user is not None
            and user.op == "call_module"
            and isinstance(modules[str(user.target)], nn.BatchNorm2d)
        ):
            weight, bias = fold_batch_norm(conv, modules[str(user.target)])  # pyright: ignore
            absorbed.append(user)
            tail = user
        user = _only_user(tail)
        residual = None if user is None else _added_to(user, tail)
        if residual is not None:
            absorbed.append(user)
            tail = user
        user = _only_user(tail)
        activation = None if user is None else _activation(user, modules)
        if activation is not None:
            absorbed.append(user)
            tail = user
        replacement = AffinecConv2d(conv, weight, bias, activation, any_batch)
        _set_module(graph_module, str(node.target), replacement)
        fused = node
        if residual is not None:
            # the skip connection is computed after the convolution: the fused
            # call takes the addition's place
            with graph_module.graph.inserting_before(absorbed[-1]):
                fused = graph_module.graph.call_module(
                    str(node.target), (node.args[0], residual)
                )
        tail.replace_all_uses_with(fused)
        for dead in reversed(absorbed):
            graph_module.graph.erase_node(dead)
        if fused is not node:
            graph_module.graph.erase_node(node)
    graph_module.graph.lint()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    if graphs:
        return GraphedModel(graph_module)
    return graph_module


def _set_module(root: nn.Module, path: str, module: nn.Module) -> None:
    *parents, name = path.split(".")
    parent = functools.reduce(getattr, parents, root)
    setattr(parent, name, module)


def convolutions(model: nn.Module) -> list[AffinecConv2d]:
    """The affinec convolutions of a converted model, in order."""
    return [m for m in model.modules() if isinstance(m, AffinecConv2d)]


__all__ = [
    "AffinecConv2d",
    "GraphedModel",
    "Unsupported",
    "conv2d",
    "convert",
    "convolutions",
    "filter_for",
    "fold_batch_norm",
    "spec_of",
]
