"""Compiled convolutions on the GPU (`make gpu-test`; skipped without a GPU).

Every case: fresh random inputs, the output poisoned (NaN) before the run, the result
compared with the float64 reference as ‖out − ref‖ / ‖ref‖ (f32 far under 1e-5, f16
under 1e-2, bf16 under 8e-2, NaN never passes), and cross-checked against torch's cuDNN convolution
where torch is present. The five benchmark convolutions run at full
size.
"""

import dataclasses

import numpy as np
import pytest

import affinec
from affinec.backend.runtime import transferable
from affinec.base.dtypes import BFLOAT16
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec
from affinec.driver.benchmark import (
    DESIGN_CONVOLUTIONS,
    to_numpy,
    torch_dtype,
    with_format,
)
from affinec.driver.config import UNPROMOTED, KernelConfig
from affinec.frontend.contraction import contraction_of
from affinec.frontend.reference import (
    TOLERANCE,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import Interpreter

pytestmark = pytest.mark.gpu

BASE = ConvSpec(n=2, c=5, h=11, w=9, k=7, r=3, s=3)

MATRIX = {
    "nchw-kcrs": {},
    "nhwc-rsck": {"layout": "nhwc", "filter_layout": "rsck"},
    "nchw-rsck": {"filter_layout": "rsck"},
    "nhwc-kcrs": {"layout": "nhwc"},
    "stride2": {"stride": 2},
    "stride-2x1": {"stride": (2, 1)},
    "pad1": {"padding": 1},
    "pad-2x0": {"padding": (2, 0)},
    "dilation2": {"dilation": 2, "padding": 2},
    "relu": {"epilogue": "relu"},
    "bias-relu": {"epilogue": "bias-relu"},
    "1x1": {"r": 1, "s": 1},
    "5x5-stride2-pad2": {"r": 5, "s": 5, "stride": 2, "padding": 2},
    "everything": {
        "stride": 2,
        "padding": 1,
        "dilation": (1, 2),
        "layout": "nhwc",
        "filter_layout": "rsck",
        "epilogue": "bias-relu",
    },
}

# Tile choices that do not divide the extents (partial tiles), fast/slow paths, and
# more block iterations than threads.
TILINGS = {
    "default": {},
    "unpromoted": {"config": UNPROMOTED},
    "odd-tiles": {"tile_sizes": (1, 3, 4, 5), "threads_per_block": 32},
    "odd-register-tiles": {"tile_sizes": (1, 4, 4, 6), "register_tile": (1, 2, 3, 4)},
    "separate": {"tile_sizes": (1, 4, 4, 4), "separate": True},
    "index32": {"index_bitwidth": 32},
}


def _check(spec, rng, **options):
    kernel = affinec.compile(spec, **options)
    inputs = random_inputs(spec, rng)
    out = kernel(*inputs, poisoned_output(spec))
    error = relative_error(out, reference(spec, *inputs))
    assert error <= TOLERANCE[spec.dtype], f"{spec.to_text()} {options}: {error:.3g}"
    return inputs, out


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", list(MATRIX))
def test_spec_matrix_matches_float64(case, dtype):
    spec = dataclasses.replace(BASE, dtype=dtype, **MATRIX[case])
    rng = np.random.default_rng(abs(hash((case, dtype))) % 2**32)
    for options in TILINGS.values():
        _check(spec, rng, **options)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("case", list(MATRIX))
def test_tensor_core_route_matches_float64(case, dtype):
    """f16 and bf16 with enough channels take the tensor cores (ldmatrix, mma.sync,
    pipelined asynchronous copies): the same matrix of layouts and shapes."""
    spec = dataclasses.replace(BASE, c=20, k=12, dtype=dtype, **MATRIX[case])
    from affinec.driver.config import config_for

    assert config_for(spec).mma
    _check(spec, np.random.default_rng(abs(hash((case, dtype))) % 2**32))


@pytest.mark.parametrize(
    "case", ["nchw-kcrs", "nhwc-rsck", "pad1", "dilation2", "5x5-stride2-pad2"]
)
def test_tensor_core_steps_over_the_filter_window(case):
    """With channels in multiples of 16, a reduction step spans the filter's taps
    (the input tile's halo copied once for all of them)."""
    from affinec.driver.config import config_for

    spec = dataclasses.replace(BASE, c=32, k=16, dtype="f16", **MATRIX[case])
    tiles = config_for(spec).reduction_tile_sizes
    assert max(tiles) < 32 and sorted(tiles)[1] == spec.s  # r or 1 rows, s columns
    _check(spec, np.random.default_rng(abs(hash(case)) % 2**32))


@pytest.mark.parametrize(
    "dtype, changes",
    [
        ("f16", {"c": 4, "r": 7, "s": 7, "stride": 2, "padding": 3}),
        ("bf16", {"c": 4, "r": 5, "s": 5, "stride": 2, "epilogue": "bias-relu"}),
        ("f16", {"c": 8, "k": 20, "padding": 1, "epilogue": "relu"}),
        ("f16", {"c": 2, "stride": (1, 4), "padding": (2, 0)}),
        ("f32", {"c": 4, "r": 7, "s": 7, "stride": 2, "padding": 3}),
    ],
)
def test_coalesced_tensor_cores_match_float64(dtype, changes):
    """Fewer channels than k: a filter row's columns x channels as the MMA's k
    (affinec-coalesce-reduction), f32 in tf32."""
    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    spec = dataclasses.replace(
        BASE, dtype=dtype, layout="nhwc", filter_layout="rsck", h=23, w=21, **changes
    )
    config = config_for(spec, tf32=dtype == "f32")
    assert config.coalesce_reduction
    compiled = compile_to_ptx(spec, config, arch=current_arch())
    inputs = random_inputs(spec, np.random.default_rng(11))
    out = compiled.runtime_kernel()(*inputs, poisoned_output(spec))
    error = relative_error(out, reference(spec, *inputs))
    assert error <= compiled.tolerance, f"{spec.to_text()}: {error:.3g}"


@pytest.mark.parametrize(
    "case", ["nchw-kcrs", "pad1", "1x1", "5x5-stride2-pad2", "everything"]
)
def test_tf32_tensor_cores_match_float64_to_tf32s_tolerance(case):
    """f32 on the tensor cores, opt-in (`tf32=True`): m16n8k8 with operands rounded
    to tf32, held to tf32's tolerance, not f32's."""
    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    spec = dataclasses.replace(BASE, c=32, k=12, dtype="f32", **MATRIX[case])
    compiled = compile_to_ptx(spec, config_for(spec, tf32=True), arch=current_arch())
    assert compiled.tolerance == TOLERANCE["tf32"]
    inputs = random_inputs(spec, np.random.default_rng(7))
    out = compiled.runtime_kernel()(*inputs, poisoned_output(spec))
    error = relative_error(out, reference(spec, *inputs))
    assert error <= TOLERANCE["tf32"], f"{spec.to_text()}: {error:.3g}"


@pytest.mark.parametrize(
    "spec",
    [
        MatmulSpec(33, 17, 29),
        MatmulSpec(64, 48, 80, "f16", "bias-relu"),
        MatmulSpec(64, 48, 80, "bf16", "bias-relu"),
        OuterSpec(37, 19),
        OuterSpec(37, 19, "bf16"),
    ],
    ids=[
        "matmul",
        "matmul-f16-bias-relu",
        "matmul-bf16-bias-relu",
        "outer",
        "outer-bf16",
    ],
)
def test_matmul_and_outer_product(spec):
    _check(spec, np.random.default_rng(7))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gpu_result_is_bit_identical_to_the_interpreter(dtype):
    """The interpreter rounds like the GPU, its fused multiply-add too, so the kernel
    reproduces the CPU interpreter's result (of the kernel's own IR) bit for bit."""
    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 3, 7, 7, 4, 3, 3, padding=1, epilogue="relu", dtype=dtype)
    compiled = compile_to_ptx(spec, arch=current_arch())
    inputs = random_inputs(spec, np.random.default_rng(3))
    out = compiled.runtime_kernel()(*inputs, poisoned_output(spec))
    expected = poisoned_output(spec)
    Interpreter(compiled.module).run("conv", *[x.copy() for x in inputs], expected)
    np.testing.assert_array_equal(out, expected)


def test_fresh_inputs_each_run():
    spec = ConvSpec(2, 4, 8, 8, 4, 3, 3, padding=1, dtype="f16")
    kernel = affinec.compile(spec)
    rng = np.random.default_rng(11)
    results = []
    for _ in range(3):
        inputs = random_inputs(spec, rng)
        out = kernel(*inputs, poisoned_output(spec))
        assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE["f16"]
        results.append(out)
    assert not np.array_equal(results[0], results[1])


def _tensor(torch, a):
    """A numpy array (or a tensor) as a CUDA tensor of the same values and dtype;
    torch cannot read `ml_dtypes`' bf16, so bf16 goes through float32 (exactly)."""
    if isinstance(a, np.ndarray) and a.dtype == BFLOAT16:
        return torch.as_tensor(a.astype(np.float32), device="cuda").bfloat16()
    return torch.as_tensor(a, device="cuda")


def _torch_reference(torch, spec, x, w, b):
    import torch.nn.functional as F

    xs = _tensor(torch, x)
    ws = _tensor(torch, w)
    if spec.layout == "nhwc":
        xs = xs.permute(0, 3, 1, 2)
    if spec.filter_layout == "rsck":
        ws = ws.permute(3, 2, 0, 1)
    bias = None if b is None else _tensor(torch, b)
    y = F.conv2d(
        xs, ws, bias, stride=spec.stride, padding=spec.padding, dilation=spec.dilation
    )
    if spec.epilogue != "none":
        y = F.relu(y)
    if spec.layout == "nhwc":
        y = y.permute(0, 2, 3, 1)
    return y.contiguous()


@pytest.mark.parametrize("case", ["nchw-kcrs", "everything", "dilation2"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_agrees_with_cudnn_on_torch_tensors(case, dtype):
    """Torch tensors in and out (no copies), checked against cuDNN in the same dtype
    (torch.bfloat16 tensors are told from float16 ones by their dtype)."""
    torch = pytest.importorskip("torch")
    spec = dataclasses.replace(BASE, dtype=dtype, **MATRIX[case])
    inputs = random_inputs(spec, np.random.default_rng(5))
    tensors = [_tensor(torch, a) for a in inputs]
    out = torch.full(contraction_of(spec).output.shape, float("nan"), device="cuda")
    out = out.to(tensors[0].dtype)
    affinec.compile(spec)(*tensors, out)
    cudnn = _torch_reference(
        torch, spec, *inputs[:2], inputs[2] if len(inputs) > 2 else None
    )
    ref = reference(spec, *inputs)
    assert relative_error(to_numpy(out), ref) <= TOLERANCE[dtype]
    # Both are within tolerance of float64, hence of each other.
    assert relative_error(to_numpy(cudnn), ref) <= TOLERANCE[dtype]


def test_bf16_and_f16_tensors_are_told_apart():
    """torch's typestr does not tell bfloat16 from float16 (or calls it opaque):
    each kernel takes its own dtype's tensors and refuses the other's."""
    torch = pytest.importorskip("torch")
    from affinec.backend.runtime import KernelArgumentError

    for dtype, other in (("f16", torch.bfloat16), ("bf16", torch.float16)):
        spec = dataclasses.replace(BASE, dtype=dtype)
        kernel = affinec.compile(spec)
        c = contraction_of(spec)
        shapes = [a.shape for a in (*c.factors, c.output)]
        own = [torch.zeros(s, dtype=torch_dtype(dtype), device="cuda") for s in shapes]
        kernel.check(*own)
        wrong = [torch.zeros(s, dtype=other, device="cuda") for s in shapes]
        with pytest.raises(KernelArgumentError, match="argument 'input': expected"):
            kernel.check(*wrong)


@pytest.mark.parametrize("dtype", ["f16", "f32", "bf16"])
@pytest.mark.parametrize("name", list(DESIGN_CONVOLUTIONS))
def test_design_convolutions_at_full_size(name, dtype):
    """the five benchmark convolutions, full size, against torch's float64 convolution
    on the GPU (a numpy float64 reference would take minutes on the CPU)."""
    torch = pytest.importorskip("torch")
    spec = with_format(DESIGN_CONVOLUTIONS[name], dtype)
    kernel = affinec.compile(spec)
    generator = torch.Generator(device="cuda").manual_seed(0)
    storage = torch_dtype(dtype)
    c = contraction_of(spec)
    x, w = (
        torch.randn(a.shape, generator=generator, device="cuda").to(storage)
        for a in c.factors
    )
    out = torch.full(c.output.shape, float("nan"), device="cuda").to(storage)
    kernel(x, w, out)
    ref = _torch_reference(torch, spec, x.double(), w.double(), None)
    error = torch.linalg.norm(out.double() - ref) / torch.linalg.norm(ref)
    assert not torch.isnan(out).any()
    assert error.item() <= TOLERANCE[dtype], f"{name} {dtype}: {error.item():.3g}"


def test_dynamic_shared_memory_past_48_kib():
    """Three stages of a window step (91584 bytes of shared tiles): dynamic shared
    memory, opted into at load, sized by the launch record."""
    from affinec.driver.config import config_for

    spec = ConvSpec(
        2, 48, 6, 32, 64, 3, 3, padding=1, dtype="f16", layout="nhwc",
        filter_layout="rsck", epilogue="bias-relu",
    )  # fmt: skip
    config = dataclasses.replace(config_for(spec), stages=3)
    kernel = affinec.compile(spec, config=config)
    assert kernel.shared_memory > 48 * 1024
    inputs = random_inputs(spec, np.random.default_rng(5))
    out = kernel(*inputs, poisoned_output(spec))
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE["f16"]


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_output_comes_back_as_the_inputs_kind(dtype):
    """torch in, a torch tensor out (same device and dtype, bf16 included); numba in,
    numba out; numpy in, numpy out."""
    torch = pytest.importorskip("torch")
    from numba import cuda

    spec = dataclasses.replace(BASE, dtype=dtype, epilogue="bias-relu")
    kernel = affinec.compile(spec)
    inputs = random_inputs(spec, np.random.default_rng(7))
    ref = reference(spec, *inputs)
    out = kernel(*[_tensor(torch, a) for a in inputs])
    assert isinstance(out, torch.Tensor) and out.dtype == torch_dtype(dtype)
    assert out.device.type == "cuda"
    assert relative_error(to_numpy(out), ref) <= TOLERANCE[dtype]
    out = kernel(*[cuda.to_device(transferable(a)) for a in inputs])
    assert isinstance(out, cuda.cudadrv.devicearray.DeviceNDArray)
    out = kernel(*inputs)
    assert isinstance(out, np.ndarray) and out.dtype == inputs[0].dtype
    assert relative_error(out, ref) <= TOLERANCE[dtype]


@pytest.mark.parametrize("case", ["first", "second"])
def test_more_stages_than_tiles_on_the_gpu(case):
    """The two configurations that returned wrong answers (relative error 0.54 and
    0.32) when their stages outnumbered their reduction tiles, at the sizes the GPU found them."""
    first = (
        ConvSpec(
            n=1, c=32, h=9, w=6, k=32, r=3, s=3, padding=(3, 0), layout="nhwc",
            filter_layout="rsck", dtype="f16",
        ),
        {
            "tile_sizes": (1, 16, 2, 32), "reduction_tile_sizes": (3, 3, 16),
            "reassociate": True, "stages": 4, "mma": True, "warp_grid": (1, 2),
            "unroll_taps": True,
        },
    )  # fmt: skip
    second = (
        ConvSpec(
            n=1, c=128, h=20, w=35, k=128, r=1, s=1, stride=(3, 1), padding=(0, 1),
            layout="nhwc", filter_layout="rsck", dtype="f16", epilogue="bias-relu",
        ),
        {
            "tile_sizes": (1, 7, 8, 32), "reduction_tile_sizes": (1, 1, 64),
            "reassociate": True, "stages": 4, "mma": True, "warp_grid": (4, 1),
        },
    )  # fmt: skip
    spec, knobs = first if case == "first" else second
    for seed in range(5):  # a race shows on some runs only
        _check(spec, np.random.default_rng(seed), config=KernelConfig(**knobs))


@pytest.mark.parametrize(
    ("spec", "splits"),
    [
        (
            ConvSpec(
                1, 512, 7, 7, 512, 3, 3, padding=1, dtype="f16", layout="nhwc",
                filter_layout="rsck", epilogue="bias-relu",
            ),
            8,
        ),
        (ConvSpec(1, 1024, 14, 14, 256, 1, 1, dtype="f16", layout="nhwc",
                  filter_layout="rsck"), 4),
        (dataclasses.replace(BASE, c=13, epilogue="bias-relu"), 3),  # SIMT, padded
        (MatmulSpec(33, 17, 100, dtype="bf16"), 7),
    ],
)  # fmt: skip
def test_split_reductions_match_float64_and_are_deterministic(spec, splits):
    """Split-K: two kernels and the runtime's workspace; the same bits on every run
    (no atomics), on fresh inputs each time."""
    from affinec.backend.runtime import current_arch
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    compiled = compile_to_ptx(
        spec, config_for(spec, splits=splits), arch=current_arch()
    )
    assert len(compiled.launches) == 2
    kernel = compiled.runtime_kernel()
    for seed in range(3):
        inputs = random_inputs(spec, np.random.default_rng(seed))
        first = kernel(*inputs, poisoned_output(spec))
        again = kernel(*inputs, poisoned_output(spec))
        assert first.tobytes() == again.tobytes()
        error = relative_error(first, reference(spec, *inputs))
        assert error <= TOLERANCE[spec.dtype], f"{spec.to_text()}: {error:.3g}"


def _hopper() -> bool:
    from numba import cuda

    return cuda.get_current_device().compute_capability == (9, 0)


@pytest.mark.parametrize(
    ("spec", "knobs"),
    [
        (MatmulSpec(512, 512, 512, "f16"), {}),
        (MatmulSpec(300, 200, 328, "bf16", "bias-relu"), {}),  # edges in m, n, k
        (
            MatmulSpec(1000, 520, 776, "f16", "scale,bias,residual,relu6"),
            {"wgmma_schedule": "specialized"},
        ),
        (MatmulSpec(4096, 1024, 1024, "f16"), {"wgmma_tile": (64, 256)}),
        (
            MatmulSpec(4096, 2048, 1024, "f16", "bias-relu"),
            {"wgmma_tile": (128, 256), "wgmma_schedule": "cooperative", "stages": 2},
        ),
        (MatmulSpec(256, 256, 1024, "f16"), {"wgmma_schedule": "waited"}),
        (
            ConvSpec(32, 256, 14, 14, 1024, 1, 1, dtype="f16", layout="nhwc",
                     filter_layout="rsck", epilogue="bias-relu"),
            {},
        ),
        (  # tap by tap: each tap's pixels a 4-D TMA box, the padding its zero fill
            ConvSpec(8, 256, 28, 28, 256, 3, 3, padding=1, dtype="f16",
                     layout="nhwc", filter_layout="rsck", epilogue="bias-relu"),
            {},
        ),
        (
            ConvSpec(2, 72, 13, 11, 40, 5, 3, padding=(2, 0), dilation=(1, 2),
                     dtype="bf16", layout="nhwc", filter_layout="rsck",
                     epilogue="bias,residual,relu"),
            {"wgmma_schedule": "specialized"},
        ),
        (
            ConvSpec(1, 16, 7, 7, 24, 3, 3, padding=2, dtype="f16", layout="nhwc",
                     filter_layout="rsck"),
            {"wgmma_tile": (64, 32)},
        ),
        (  # two consumers, each its part of the pixel box
            ConvSpec(8, 128, 28, 28, 256, 3, 3, padding=1, dtype="bf16",
                     layout="nhwc", filter_layout="rsck", epilogue="bias-relu"),
            {"wgmma_tile": (128, 128), "wgmma_schedule": "cooperative"},
        ),
        (  # split-K: 4 layers of blocks, their partials added by a second kernel
            ConvSpec(1, 512, 7, 7, 512, 3, 3, padding=1, dtype="f16",
                     layout="nhwc", filter_layout="rsck", epilogue="bias-relu"),
            {"splits": 4},
        ),
        (  # strided: each tap's box one phase of the stride
            ConvSpec(8, 256, 28, 28, 512, 3, 3, stride=2, padding=1, dtype="f16",
                     layout="nhwc", filter_layout="rsck", epilogue="bias-relu"),
            {},
        ),
        (
            ConvSpec(4, 512, 28, 28, 1024, 1, 1, stride=2, dtype="bf16",
                     layout="nhwc", filter_layout="rsck"),
            {},
        ),
    ],
)  # fmt: skip
def test_hopper_kernels_match_float64(spec, knobs):
    """TMA, mbarriers and wgmma (`affinec-wgmma-gemm`) on sm_90a: fresh inputs a run,
    the output poisoned, the same bits on every run."""
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    if not _hopper():
        pytest.skip("wgmma needs an H100 (sm_90a)")
    config = dataclasses.replace(config_for(spec, arch="sm_90a", wgmma=True), **knobs)
    kernel = compile_to_ptx(spec, config, arch="sm_90a").runtime_kernel()
    for seed in range(2):
        inputs = random_inputs(spec, np.random.default_rng(seed))
        first = kernel(*inputs, poisoned_output(spec))
        assert first.tobytes() == kernel(*inputs, poisoned_output(spec)).tobytes()
        error = relative_error(first, reference(spec, *inputs))
        assert error <= TOLERANCE[spec.dtype], f"{spec.to_text()}: {error:.3g}"


def test_hopper_kernels_take_torch_tensors():
    torch = pytest.importorskip("torch")
    if not _hopper():
        pytest.skip("wgmma needs an H100 (sm_90a)")
    spec = MatmulSpec(384, 256, 512, "bf16")
    kernel = affinec.compile(spec, arch="sm_90a", wgmma=True)
    a, b = random_inputs(spec, np.random.default_rng(0))
    ta, tb = (_tensor(torch, x) for x in (a, b))
    out = kernel(ta, tb)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    expected = (ta.double() @ tb.double()).float()
    error = float((out.float() - expected).norm() / expected.norm())
    assert error <= TOLERANCE["bf16"]
