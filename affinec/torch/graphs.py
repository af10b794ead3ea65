"""A converted model replayed as CUDA graphs: `GraphedModel` captures the model's
forward pass once per input layout (shape, strides, dtype, device) with
`torch.cuda.graph` and replays it at every later call, so that the host launches
one graph instead of every kernel and torch operation of the model.

The first call of a layout runs the model twice on a side stream (compiling each
convolution's kernel, checking its arguments once, laying out its filters), then
captures a third run. Everything the captured run allocates — activations, the
output, the split-K workspaces of affinec's kernels (taken from torch's allocator on
the capturing stream) — comes from the graph's own memory pool. A replay copies the
input into the graph's input and returns a copy of its output (the graph's own is
overwritten by the next replay).

What is not replayed runs the model as it is: a CPU input, an input that requires
grad, a call during another capture, several inputs or keyword arguments, a model
with forward hooks on any of its modules (a replay would not call them), a layout
whose capture failed (said once, in a warning), and every call with
`graphs = False`. Moving the model or changing its type (`.to()`, `.half()`,
`.cuda()`) drops the captured graphs: they read the old weights.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx, nn


@dataclass
class Capture:
    """One layout's graph: its input and output tensors, which each replay reads
    and writes."""

    graph: torch.cuda.CUDAGraph
    input: torch.Tensor
    output: Any


def _copy(output: Any) -> Any:
    """`output` with every tensor in it copied (tuples, lists and dicts kept)."""
    if isinstance(output, torch.Tensor):
        return output.clone()
    if isinstance(output, (tuple, list)):
        return type(output)(_copy(o) for o in output)
    if isinstance(output, dict):
        return {k: _copy(v) for k, v in output.items()}
    return output


class GraphedModel(nn.Module):
    """A converted model (`affinec.torch.convert`) whose forward pass is a CUDA
    graph per input layout (see the module docstring); `graphs = False` runs it
    eagerly. The converted `fx.GraphModule` is `converted`; `graph` and `code` are
    its."""

    def __init__(self, converted: fx.GraphModule, warmup: int = 2) -> None:
        super().__init__()
        self.converted = converted
        self.graphs = True
        self.warmup = warmup
        self._captures: dict[tuple, Capture] = {}
        self._refused: dict[tuple, str] = {}
        self._hook_tables: list[dict] | None = None

    @property
    def graph(self) -> fx.Graph:
        return self.converted.graph

    @property
    def code(self) -> str:
        return self.converted.code

    def get_submodule(self, target: str) -> nn.Module:
        """A submodule by the converted model's path (what its fx graph's nodes
        name), or by this module's own."""
        if target:
            try:
                return self.converted.get_submodule(target)
            except AttributeError:
                pass
        return super().get_submodule(target)

    @property
    def captured(self) -> int:
        """How many input layouts have a graph."""
        return len(self._captures)

    def __getstate__(self) -> dict:
        # a copy (deepcopy, pickle) captures its own graphs
        state = self.__dict__.copy()
        state["_captures"], state["_refused"] = {}, {}
        state["_hook_tables"] = None  # the copy's modules have their own
        return state

    def _apply(self, fn, *args, **kwargs):
        # the weights move or change type: the graphs would read the old ones
        self._captures.clear()
        self._refused.clear()
        self._hook_tables = None
        return super()._apply(fn, *args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not self.graphs or kwargs or len(args) != 1:
            return self.converted(*args, **kwargs)
        (x,) = args
        if (
            not isinstance(x, torch.Tensor)
            or not x.is_cuda
            or x.requires_grad
            or torch.cuda.is_current_stream_capturing()
            or self._hooked()
        ):
            return self.converted(x)
        key = (x.shape, x.stride(), x.dtype, x.device)
        capture = self._captures.get(key)
        if capture is None:
            if key in self._refused:
                return self.converted(x)
            capture = self._capture(x, key)
            if capture is None:
                return self.converted(x)
        capture.input.copy_(x)
        capture.graph.replay()
        return _copy(capture.output)

    def _hooked(self) -> bool:
        """Whether a forward hook is registered on any module of the model, or on
        every module (torch's global hooks): those run only when the model does.
        Called before every replay, so it reads the modules' hook dictionaries,
        gathered once, rather than walking the module tree (88 us a call on
        ResNet-50's 106 modules against under 2 us)."""
        if (
            nn.modules.module._global_forward_hooks
            or nn.modules.module._global_forward_pre_hooks
        ):
            return True
        if self._hook_tables is None:
            self._hook_tables = [
                table
                for m in self.converted.modules()
                for table in (m._forward_hooks, m._forward_pre_hooks)
            ]
        return any(self._hook_tables)

    def _capture(self, x: torch.Tensor, key: tuple) -> Capture | None:
        device = x.device
        static = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device)
        static.copy_(x)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(self.warmup):  # errors of the model itself surface here
                self.converted(static)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.no_grad(), torch.cuda.graph(graph):
                output = self.converted(static)
        except Exception as e:  # a capture the driver or torch refuses
            self._refused[key] = f"{type(e).__name__}: {e}"
            warnings.warn(
                f"affinec.torch: the forward pass at input shape {tuple(x.shape)} "
                f"could not be captured as a CUDA graph ({self._refused[key]}); "
                "it runs eagerly",
                stacklevel=3,
            )
            return None
        self._captures[key] = Capture(graph, static, output)
        return self._captures[key]
