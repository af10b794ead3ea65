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

The names are all importable from here; they live in `affinec.torch.functional`
(`conv2d`, `spec_of`, `filter_for`, `Unsupported`), `affinec.torch.modules`
(`AffinecConv2d`), `affinec.torch.conversion` (`convert`, `fold_batch_norm`,
`convolutions`) and `affinec.torch.graphs` (`GraphedModel`).
"""

from __future__ import annotations

from affinec.base.extras import missing_extra

try:
    # the modules below need these: without them, the error names the extra
    import torch  # noqa: F401
    import torch.fx  # noqa: F401
    import torch.nn.functional  # noqa: F401
except ModuleNotFoundError as error:
    raise missing_extra(error, "affinec.torch") from None

from affinec.torch.conversion import convert, convolutions, fold_batch_norm
from affinec.torch.functional import ACTIVATIONS as ACTIVATIONS
from affinec.torch.functional import DTYPES as DTYPES
from affinec.torch.functional import Unsupported, conv2d, filter_for, spec_of
from affinec.torch.functional import _kernel as _kernel  # the kernels (benchmarks)
from affinec.torch.functional import kernel_spec as kernel_spec
from affinec.torch.graphs import GraphedModel
from affinec.torch.modules import AffinecConv2d

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
