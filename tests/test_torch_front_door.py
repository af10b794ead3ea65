"""`affinec.torch`: the spec of a torch convolution, the fallback to torch where
affinec does not run, and `convert` on ResNet-50 and MobileNetV2 (batch norms
folded, activations fused) checked against the models in float64. The GPU cases
(`make gpu-test`) run the kernels against torch's."""

import dataclasses
import warnings
from collections import Counter

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import affinec.torch as at  # noqa: E402
from affinec.base.spec import ConvSpec  # noqa: E402
from affinec.frontend import networks  # noqa: E402
from affinec.torch.networks import (  # noqa: E402
    mobilenet_v2,
    randomize_batch_norms,
    resnet50,
)

CL = torch.channels_last


def test_the_spec_of_a_torch_convolution():
    x = torch.empty(2, 8, 9, 11)
    w = torch.empty(16, 4, 3, 5)
    spec = at.spec_of(x, w, torch.empty(16), stride=(2, 1), padding=(1, 2), groups=2)
    assert spec == ConvSpec(
        2, 8, 9, 11, 16, 3, 5, stride=(2, 1), padding=(1, 2), layout="nchw",
        filter_layout="kcrs", dtype="f32", epilogue="bias", groups=2,
    )  # fmt: skip
    half = x.half().to(memory_format=CL)
    spec = at.spec_of(half, w.half(), None, padding="same", dilation=2, groups=2,
                      activation="relu6")  # fmt: skip
    assert (spec.layout, spec.filter_layout, spec.dtype) == ("nhwc", "rsck", "f16")
    assert spec.padding == (2, 4) and spec.epilogue == "relu6"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"x": torch.empty(2, 8, 9, 9, dtype=torch.float64)}, "dtype torch.float64"),
        ({"w": torch.empty(16, 8, 3, 3, dtype=torch.float16)}, "not the input's dtype"),
        ({"x": torch.empty(2, 9, 9, 8).permute(0, 3, 2, 1)}, "neither contiguous"),
        ({"groups": 3}, "groups=3 does not divide"),
        ({"padding": "same", "stride": 2}, "pads unevenly"),
        ({"padding": "full"}, "padding='full'"),
        ({"x": torch.empty(8, 9, 9)}, "input is not a 4-D tensor"),
        ({"w": torch.empty(16, 8, 3, 3, requires_grad=True)}, "requires grad"),
        ({"x": torch.empty(1, 8, 2, 2)}, "larger than the padded input"),
    ],
)
def test_what_affinec_does_not_run_is_said(change, reason):
    args = {"x": torch.empty(2, 8, 9, 9), "w": torch.empty(16, 8, 3, 3)}
    args.update(change)
    x, w = args.pop("x"), args.pop("w")
    with pytest.raises(at.Unsupported, match=reason):
        at.spec_of(x, w, None, **args)


def test_on_the_cpu_conv2d_is_torchs_after_a_warning():
    x, w, b = torch.randn(2, 8, 9, 9), torch.randn(16, 8, 3, 3), torch.randn(16)
    with pytest.warns(UserWarning, match="the tensors are on the CPU; running torch"):
        y = at.conv2d(x, w, b, padding=1)
    assert torch.equal(y, F.conv2d(x, w, b, padding=1))


def test_folding_a_batch_norm_is_exact_in_float64():
    conv = torch.nn.Conv2d(6, 10, 3, padding=1, bias=True).double()
    bn = randomize_batch_norms(torch.nn.BatchNorm2d(10)).double().eval()
    weight, bias = at.fold_batch_norm(conv, bn)
    x = torch.randn(2, 6, 7, 7, dtype=torch.float64)
    with torch.no_grad():
        expected = bn(conv(x))
    got = F.conv2d(x, weight, bias, padding=1)
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12)


def _converted(make):
    model = randomize_batch_norms(make()).double().eval()
    fast = at.convert(model)
    return model, fast


@pytest.mark.parametrize(
    ("make", "convolutions", "fused", "residuals"),
    [
        (resnet50, 53, {"relu": 49, None: 4}, 16),  # each block's add and ReLU
        (mobilenet_v2, 52, {"relu6": 35, None: 17}, 10),  # the blocks' additions
    ],
)
def test_a_converted_model_computes_what_the_model_does(
    make, convolutions, fused, residuals
):
    model, fast = _converted(make)
    layers = at.convolutions(fast)
    assert len(layers) == convolutions
    assert Counter(c.activation for c in layers) == fused
    calls = [n for n in fast.graph.nodes if n.op == "call_module"]
    assert sum(len(n.args) == 2 for n in calls) == residuals
    assert not any(n.target in ("add", "iadd") or "add" in str(n.target)
                   for n in fast.graph.nodes if n.op == "call_function")  # fmt: skip
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in fast.modules())
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # on the CPU every convolution is torch's
        expected, got = model(x), fast(x)
    assert float((got - expected).norm() / expected.norm()) < 1e-12


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_the_torch_models_have_the_networks_convolutions(name):
    """The specs the converted model's convolutions ask affinec for, at 224×224 in
    f16 NHWC, are `affinec.frontend.networks`' list (epilogues aside)."""
    make = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}[name]
    fast = at.convert(make().eval())
    seen: list[ConvSpec] = []

    def record(module, inputs, _output):
        x = inputs[0]  # (a fused skip connection's tensor follows)
        like = torch.empty(x.shape, dtype=torch.float16).to(memory_format=CL)
        spec = at.spec_of(like, module.weight.half(), None, module.stride,
                          module.padding, module.dilation, module.groups)  # fmt: skip
        seen.append(spec)

    for layer in at.convolutions(fast):
        layer.register_forward_hook(record)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        fast(torch.randn(1, 3, 224, 224))
    expected = Counter()
    for layer in networks.network(name, batch=1):
        expected[layer.spec] += layer.count
    assert Counter(dataclasses.replace(s, epilogue="none") for s in seen) == expected


def test_a_padding_mode_other_than_zeros_is_left_to_torch():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
    ).eval()
    with pytest.warns(UserWarning, match="pads with 'reflect'; left to torch"):
        fast = at.convert(model)
    assert not at.convolutions(fast)


def test_an_integer_input_is_refused_not_run_with_truncated_weights():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1)).eval()
    x = torch.ones(1, 3, 5, 5, dtype=torch.int32)
    with pytest.raises(RuntimeError):
        model(x)  # torch refuses it: its weights are floats
    with pytest.raises(TypeError, match="takes floating-point inputs, got torch.int32"):
        at.convert(model)(x)


@pytest.mark.parametrize("model", [None, "resnet50", F.relu])
def test_convert_takes_a_module(model):
    with pytest.raises(TypeError, match="convert takes an nn.Module, got"):
        at.convert(model)


def test_convert_leaves_the_callers_model_as_it_was():
    model = randomize_batch_norms(resnet50())  # in training mode, as made
    with pytest.warns(UserWarning, match="is in training mode; the converted model"):
        fast = at.convert(model, graphs=False)
    assert model.training and all(m.training for m in model.modules())
    assert sum(isinstance(m, torch.nn.Conv2d) for m in model.modules()) == 53
    assert not any(isinstance(m, at.AffinecConv2d) for m in model.modules())
    assert not fast.training and len(at.convolutions(fast)) == 53
    x = torch.randn(1, 3, 32, 32)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # on the CPU every convolution is torch's
        got = fast(x)
        expected = model.eval()(x)
    assert float((got - expected).norm() / expected.norm()) < 1e-5


class _Branching(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x) if x.sum() > 0 else -self.conv(x)


def test_a_model_that_branches_on_values_is_refused_with_what_to_do():
    with pytest.raises(
        at.Unsupported,
        match=r"cannot trace _Branching: .*control flow.* convert its parts",
    ):
        at.convert(_Branching().eval())


def test_a_graphed_model_runs_eagerly_where_no_graph_can_be_captured():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    fast = at.convert(model)
    assert isinstance(fast, at.GraphedModel) and fast.graphs
    assert [n.op for n in fast.graph.nodes] == ["placeholder", "call_module", "output"]
    (call,) = [n for n in fast.graph.nodes if n.op == "call_module"]
    assert isinstance(fast.get_submodule(call.target), at.AffinecConv2d)
    x = torch.randn(2, 3, 8, 8)
    with pytest.warns(UserWarning, match="on the CPU"), torch.no_grad():
        got = fast(x)  # a CPU input: no graph
    assert fast.captured == 0 and torch.allclose(got, model(x))
    eager = at.convert(model, graphs=False)
    assert isinstance(eager, torch.fx.GraphModule)


# -- on the GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d_on_cuda_tensors_matches_torch(dtype, channels_last):
    from affinec.frontend.reference import TOLERANCE

    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(2, 32, 14, 14, device="cuda", dtype=dtype, generator=g)
    if channels_last:
        x = x.to(memory_format=CL)
    w = torch.randn(64, 16, 3, 3, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(64, device="cuda", dtype=dtype, generator=g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback
        y = at.conv2d(x, w, b, stride=2, padding=1, groups=2)
    expected = F.conv2d(x.double(), w.double(), b.double(), 2, 1, 1, 2)
    assert y.is_contiguous(
        memory_format=CL if channels_last else torch.contiguous_format
    )
    error = float((y.double() - expected).norm() / expected.norm())
    assert error <= TOLERANCE[at.DTYPES[dtype]]


@pytest.mark.gpu
@pytest.mark.parametrize("make", [resnet50, mobilenet_v2])
def test_a_converted_model_runs_on_the_gpu(make):
    model = randomize_batch_norms(make()).eval().cuda()
    x = torch.randn(2, 3, 224, 224, device="cuda")
    with torch.no_grad():
        expected = model.double()(x.double())
        fast = at.convert(model.half()).to(memory_format=CL)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = fast(x.half().to(memory_format=CL))
    assert float((got.double() - expected).norm() / expected.norm()) < 2e-2


def test_a_skip_connection_is_the_kernels_residual_input():
    x, w = torch.empty(2, 8, 9, 9), torch.empty(16, 8, 3, 3)
    out = torch.empty(2, 16, 9, 9)
    spec = at.spec_of(x, w, torch.empty(16), padding=1, activation="relu", residual=out)
    assert spec.epilogue == "bias,residual,relu"
    with pytest.raises(at.Unsupported, match="not of the output's shape"):
        at.spec_of(x, w, None, residual=out)  # unpadded: a 7x7 output
    with pytest.raises(at.Unsupported, match="not in the input's memory format"):
        at.spec_of(x, w, None, padding=1, residual=out.to(memory_format=CL))


def test_kernels_of_any_batch_are_one_per_batch_bucket():
    """`any_batch`: the batches of a bucket share one compiled kernel (it compiles
    on the CPU too; the GPU case below runs it)."""
    from affinec.driver.compiler import compile_to_ptx

    x, w = torch.empty(5, 16, 7, 7).to(memory_format=CL), torch.empty(32, 16, 3, 3)
    spec = at.spec_of(x, w, None, padding=1)
    assert at.kernel_spec(spec, any_batch=False) == spec
    shared = {
        at.kernel_spec(dataclasses.replace(spec, n=n), any_batch=True)
        for n in (4, 5, 7)
    }
    assert shared == {dataclasses.replace(spec, n=4, dynamic_batch=True)}
    (any_batch,) = shared
    assert compile_to_ptx(any_batch).launches[0].batch_grid is not None
    model = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3)).eval()
    fast = at.convert(model, any_batch=True)
    (module,) = at.convolutions(fast)
    assert module.any_batch and "any_batch=True" in repr(module)
    with pytest.warns(UserWarning, match="on the CPU"):  # torch's, on the CPU
        assert fast(torch.randn(3, 16, 7, 7)).shape == (3, 32, 5, 5)


@pytest.mark.gpu
def test_a_model_of_any_batch_compiles_once_per_bucket():
    import copy

    model = randomize_batch_norms(resnet50()).eval().cuda()
    reference = copy.deepcopy(model).double()
    fast = at.convert(model.half(), any_batch=True).to(memory_format=CL)
    compiled = []
    for batch in (4, 5, 7):
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            got = fast(x.half().to(memory_format=CL))
            expected = reference(x.double())
        error = (got.double() - expected).norm() / expected.norm()
        assert float(error) < 2e-2, batch
        compiled.append(at._kernel.cache_info().currsize)
    assert compiled[0] == compiled[1] == compiled[2]  # 5 and 7 compiled nothing


@pytest.mark.gpu
@pytest.mark.parametrize("make", [resnet50, mobilenet_v2])
@pytest.mark.parametrize("batch", [1, 32])
def test_a_graphed_model_is_the_eager_model_is_torch(make, batch):
    """Replayed as a CUDA graph, the converted model computes what it computes
    eagerly (the same kernels), and both agree with torch in f16 as
    torch's own f16 model does."""
    import copy

    model = randomize_batch_norms(make()).eval().cuda()
    reference = copy.deepcopy(model).double()
    half = model.half().to(memory_format=CL)
    graphed = at.convert(half)
    eager = at.convert(half, graphs=False)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    x16 = x.half().to(memory_format=CL)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, no refused capture
        expected = reference(x.double())
        ours = half(x16)
        eager_out = eager(x16)
        first = graphed(x16)
        again = graphed(x16)
    assert graphed.captured == 1

    def apart(a, b):  # cuBLAS may pick another algorithm for the classifier
        return float((a.double() - b.double()).norm() / b.double().norm())

    assert apart(first, eager_out) <= 1e-3 and torch.equal(again, first)
    error = float((first.double() - expected).norm() / expected.norm())
    torch_error = float((ours.double() - expected).norm() / expected.norm())
    assert error <= max(2 * torch_error, 2e-3), (error, torch_error)
    # another input of the shape: the graph reads it, not the first one's copy
    y = torch.randn_like(x16)
    with torch.no_grad():
        assert apart(graphed(y), eager(y)) <= 1e-3


@pytest.mark.gpu
def test_a_model_with_forward_hooks_runs_eagerly_so_the_hooks_run():
    """A replayed graph calls no module's hooks: with a hook on any module the model
    runs as it is, and every hook sees every call."""
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3), torch.nn.ReLU())
    fast = at.convert(model.eval().cuda().half())
    x = torch.randn(2, 8, 9, 9, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        fast(x)
        assert fast.captured == 1
        seen = []
        (conv,) = at.convolutions(fast)
        hook = conv.register_forward_hook(lambda m, args, out: seen.append(out))
        fast(x)
        fast(x)
        hook.remove()
        fast(x)  # replayed again
    assert len(seen) == 2 and fast.captured == 1
