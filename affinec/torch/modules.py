"""`AffinecConv2d`: the inference `nn.Conv2d` that `affinec.torch.convert` puts in a
model, on affinec's kernels, with its activation and skip connection fused; what a
call of given shapes needs (spec, laid-out filter, kernel) is decided once and kept.
"""

from __future__ import annotations

import torch
from torch import nn

from affinec.torch.functional import _conv2d, _run, filter_for


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
