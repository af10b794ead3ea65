"""`affinec.torch.convert`: a model traced by `torch.fx` with every `nn.Conv2d`
replaced by an `AffinecConv2d`, a batch norm that follows folded into its filter and
bias, an addition of a skip connection and a ReLU or ReLU6 after that fused, and the
result wrapped for CUDA-graph replay (`affinec.torch.graphs`); `convolutions` lists
a converted model's.
"""

from __future__ import annotations

import copy
import functools
import operator
import warnings

import torch
import torch.nn.functional as F
from torch import fx, nn

from affinec.torch.functional import Unsupported
from affinec.torch.graphs import GraphedModel
from affinec.torch.modules import AffinecConv2d


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
