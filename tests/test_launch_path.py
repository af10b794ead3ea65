"""The launch path that checks a layout of arguments once: layout keys, the plan a
first call keeps, the checks a later call still passes through, the parameters
packed into bytes — on the CPU with arrays that only carry
`__cuda_array_interface__` — and, on a GPU, repeated calls from numba and torch.
"""

import struct

import numpy as np
import pytest

from affinec.backend.kernel_arguments import (
    ParameterBlock,
    addresses_admitted,
    layout_of,
    memory_vouched,
)
from affinec.backend.runtime import (
    Kernel,
    KernelArgumentError,
    NoCudaGPU,
    Parameter,
    cuda_available,
)

F32 = np.dtype(np.float32)


class Fake:
    """A device array as far as `__cuda_array_interface__` says."""

    def __init__(self, shape, pointer, typestr="<f4", strides=None, readonly=False):
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "strides": strides,
            "data": (pointer, readonly),
            "version": 3,
        }


def two_launch_kernel() -> Kernel:
    """A split reduction's shape: a kernel taking (in, ws) and one taking (ws, out),
    whose PTX is never loaded here."""
    from affinec.backend.runtime import Launch

    parameters = [
        Parameter("in", (1000,), F32),
        Parameter("out", (1000,), F32, output=True),
        Parameter("ws", (2, 1000), F32, workspace=True),
    ]
    return Kernel(
        "",
        [
            Launch("partial", (8, 2, 1), (128, 1, 1), 0, ("in", "ws")),
            Launch("sum", (8, 1, 1), (128, 1, 1), 0, ("ws", "out")),
        ],
        parameters,
    )


def _batched() -> Kernel:
    from xdsl.ir.affine import AffineExpr, AffineMap

    from affinec.backend.runtime import Launch

    grid_of = AffineMap(1, 0, (AffineExpr.dimension(0) * 4,))
    return Kernel(
        "",
        [Launch("k", (0, 1, 1), (32, 1, 1), 0, ("in", "out"), batch_grid=grid_of)],
        [Parameter("in", (-1, 8), F32), Parameter("out", (-1, 8), F32, True)],
    )


def scale() -> Kernel:
    return Kernel.single(
        "",
        "scale",
        (8, 1, 1),
        (128, 1, 1),
        [Parameter("in", (1000,), F32), Parameter("out", (1000,), F32, True)],
    )


# -- layouts ---------------------------------------------------------------------------


def test_a_layout_is_all_but_the_address():
    a, b = Fake((1000,), 0x10000), Fake((1000,), 0x20000)
    assert layout_of(a)[0] == layout_of(b)[0]
    assert layout_of(a)[1] == 0x10000 and layout_of(b)[1] == 0x20000
    for other in (
        Fake((999,), 0x10000),
        Fake((1000,), 0x10000, "<f2"),
        Fake((1000,), 0x10000, strides=(8,)),
        Fake((1000,), 0x10000, readonly=True),
    ):
        assert layout_of(other)[0] != layout_of(a)[0]
    assert layout_of(np.zeros(3)) is None  # numpy goes through the full checks
    assert layout_of([1.0]) is None
    assert not memory_vouched(a)  # its memory is asked of the driver at each call


def test_torch_tensors_have_layouts_of_their_own():
    torch = pytest.importorskip("torch")
    cpu = torch.zeros(4, 4)
    assert layout_of(cpu) is None  # a CPU tensor: the checks say what is wrong
    assert layout_of(torch.zeros(4, requires_grad=True)) is None


# -- plans -----------------------------------------------------------------------------


def test_a_checked_call_keeps_a_plan_a_repeated_layout_finds():
    kernel = scale()
    plan = kernel.prepare(Fake((1000,), 0x10000), Fake((1000,), 0x20000))
    assert plan is not None
    assert plan.names == ("in", "out") and plan.sizes == (4000, 4000)
    assert plan.output == 1 and plan.allocate is None and plan.grids == ((8, 1, 1),)
    found = kernel.planned((Fake((1000,), 0x30000), Fake((1000,), 0x40000)), {})
    assert found is not None and found[0] is plan and found[2] == [0x30000, 0x40000]
    # by name, it is another layout of the call: not planned yet
    assert kernel.planned((), {"in": Fake((1000,), 0x30000)}) is None


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ((Fake((999,), 0x30000), Fake((1000,), 0x40000)), r"shape \(999,\)"),
        ((Fake((1000,), 0x30000, "<f2"), Fake((1000,), 0x40000)), "float16"),
        ((Fake((1000,), 0x30004), Fake((1000,), 0x40000)), "not 16-byte aligned"),
        ((Fake((1000,), 0x30000), Fake((1000,), 0x30000 + 3984)), "shares memory"),
        ((np.zeros(1000, np.float32), Fake((1000,), 0x40000)), None),
    ],
)
@pytest.mark.skipif(cuda_available(), reason="fake device pointers fail the GPU check")
def test_a_wrong_array_after_a_right_one_is_refused_as_before(arrays, message):
    """What a plan does not cover goes to the full checks, with their words."""
    kernel = scale()
    kernel.prepare(Fake((1000,), 0x10000), Fake((1000,), 0x20000))
    assert kernel.planned(arrays, {}) is None
    if message is not None:
        with pytest.raises(KernelArgumentError, match=message):
            kernel.prepare(*arrays)


def test_numpy_calls_keep_no_plan():
    assert scale().prepare(np.zeros(1000, np.float32)) is None


def test_a_missing_output_is_allocated_at_each_call():
    kernel = scale()
    if not cuda_available():
        with pytest.raises(NoCudaGPU):
            kernel.prepare(Fake((1000,), 0x10000))  # allocating it needs a GPU
        return
    plan = kernel.prepare(Fake((1000,), 0x10000))
    assert plan is not None and plan.output == -1 and plan.allocate.name == "out"


def test_a_batch_is_part_of_the_layout():
    kernel = _batched()
    plan = kernel.prepare(Fake((3, 8), 0x10000), Fake((3, 8), 0x20000))
    assert plan.grids == ((12, 1, 1),)
    assert kernel.planned((Fake((5, 8), 0x10000), Fake((5, 8), 0x20000)), {}) is None
    plan5 = kernel.prepare(Fake((5, 8), 0x10000), Fake((5, 8), 0x20000))
    assert plan5.grids == ((20, 1, 1),)


# -- the checks of addresses ------------------------------------------------------------


def test_addresses_pass_aligned_and_apart():
    sizes = (4000, 4000)
    assert addresses_admitted([0x10000, 0x20000], sizes, 1, (False, False))
    assert not addresses_admitted([0x10008, 0x20000], sizes, 1, (False, False))
    assert not addresses_admitted([0x10000, 0x10000 + 3984], sizes, 1, (False, False))
    assert addresses_admitted([0x10000, 0x10000 + 4000], sizes, 1, (False, False))
    # an input overlapping another input is no one's business
    assert addresses_admitted([0x10000, 0x10000, 0x20000], (*sizes, 8), 2, (False,) * 3)
    assert addresses_admitted([0x10000], (4000,), -1, (False,))  # output allocated


# -- packing ---------------------------------------------------------------------------


def test_a_parameter_block_holds_each_address_by_value():
    block = ParameterBlock(3)
    for k, pointer in enumerate((0x7F0000001000, 0x10, 0xFFFF_FFFF_FFFF_FFF0)):
        block.set_pointer(k, pointer)
    assert [block.parameter_bytes(k) for k in range(3)] == [
        struct.pack("<Q", 0x7F0000001000),
        struct.pack("<Q", 0x10),
        struct.pack("<Q", 0xFFFF_FFFF_FFFF_FFF0),
    ]
    # a parameter by value from elsewhere: the block points at its bytes
    import ctypes

    elsewhere = (ctypes.c_uint8 * 128)(*range(128))
    block.point_at(1, ctypes.addressof(elsewhere))
    assert block.parameter_bytes(1, 128) == bytes(range(128))
    assert block.parameter_bytes(0) == struct.pack("<Q", 0x7F0000001000)


def test_a_plan_packs_each_launch_with_its_own_parameters():
    kernel = two_launch_kernel()
    plan = kernel.prepare(Fake((1000,), 0x10000), Fake((1000,), 0x20000))
    assert len(plan.blocks) == 2 and plan.grids == ((8, 2, 1), (8, 1, 1))
    kernel.pack(plan, {"in": 0x10000, "out": 0x20000, "ws": 0x90000})
    partial, total = plan.blocks
    assert partial.parameter_bytes(0) == struct.pack("<Q", 0x10000)
    assert partial.parameter_bytes(1) == struct.pack("<Q", 0x90000)
    assert total.parameter_bytes(0) == struct.pack("<Q", 0x90000)
    assert total.parameter_bytes(1) == struct.pack("<Q", 0x20000)
    # a second call's addresses replace the first's
    kernel.pack(plan, {"in": 0x50000, "out": 0x60000, "ws": 0x90000})
    assert partial.parameter_bytes(0) == struct.pack("<Q", 0x50000)
    assert total.parameter_bytes(1) == struct.pack("<Q", 0x60000)


def test_a_kernels_plans_are_bounded():
    from affinec.backend.runtime import MAX_PLANS

    kernel = _batched()
    for batch in range(1, MAX_PLANS + 5):
        kernel.prepare(Fake((batch, 8), 0x10000), Fake((batch, 8), 0x20000))
    assert 0 < len(kernel._plans) <= MAX_PLANS


# -- on the GPU ------------------------------------------------------------------------


def _conv_kernel(dtype: str = "f16", splits: int = 1):
    """A 3x3 64->64 convolution on 14x14, NHWC, as the torch front door runs it (or
    split `splits` ways: two kernels and a workspace)."""
    import affinec
    from affinec.backend.runtime import current_arch
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    spec = ConvSpec(
        1, 64, 14, 14, 64, 3, 3, padding=1, dtype=dtype, layout="nhwc",
        filter_layout="rsck", epilogue="bias-relu",
    )  # fmt: skip
    if splits == 1:
        return spec, affinec.compile(spec)
    compiled = compile_to_ptx(
        spec, config_for(spec, splits=splits), arch=current_arch()
    )
    return spec, compiled.runtime_kernel()


@pytest.mark.gpu
@pytest.mark.parametrize("splits", [1, 4])
def test_repeated_torch_calls_give_the_first_calls_result(splits):
    torch = pytest.importorskip("torch")
    from affinec.frontend.reference import TOLERANCE, random_inputs, reference

    spec, kernel = _conv_kernel(splits=splits)
    inputs = random_inputs(spec, np.random.default_rng(3))
    tensors = [torch.as_tensor(a, device="cuda") for a in inputs]
    expected = reference(spec, *inputs)
    first = kernel(*tensors)
    assert len(kernel._plans) == 1
    results = [kernel(*tensors) for _ in range(5)]  # the planned path
    out = torch.empty_like(first)
    assert kernel(*tensors, out) is out  # a given output: another layout of call
    assert kernel(*tensors, out) is out
    torch.cuda.synchronize()
    error = np.linalg.norm(first.double().cpu().numpy() - expected)
    assert error / np.linalg.norm(expected) <= TOLERANCE["f16"]
    for again in (*results, out):
        assert torch.equal(again, first)


@pytest.mark.gpu
def test_a_wrong_array_after_a_right_one_is_still_refused_on_the_gpu():
    torch = pytest.importorskip("torch")
    spec, kernel = _conv_kernel()
    x = torch.randn(1, 14, 14, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(3, 3, 64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, device="cuda", dtype=torch.float16)
    out = torch.empty(1, 14, 14, 64, device="cuda", dtype=torch.float16)
    kernel(x, w, b, out)
    kernel(x, w, b, out)
    with pytest.raises(KernelArgumentError, match=r"argument 'input'.*shape"):
        kernel(x[:, :13], w, b, out)
    with pytest.raises(KernelArgumentError, match="dtype"):
        kernel(x.float(), w, b, out)
    with pytest.raises(KernelArgumentError, match="shares memory"):
        kernel(x, w, b, x)
    unaligned = torch.empty(1 + x.numel(), device="cuda", dtype=torch.float16)
    with pytest.raises(KernelArgumentError, match="not 16-byte aligned"):
        kernel(unaligned[1:].view(x.shape), w, b, out)
    with pytest.raises(KernelArgumentError, match="got Tensor"):
        kernel(x.cpu(), w, b, out)
    kernel(x, w, b, out)  # and the right one still runs


@pytest.mark.gpu
def test_torch_calls_run_on_torchs_current_stream():
    torch = pytest.importorskip("torch")
    spec, kernel = _conv_kernel()
    x = torch.randn(1, 14, 14, 64, device="cuda", dtype=torch.float16)
    w = torch.randn(3, 3, 64, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(64, device="cuda", dtype=torch.float16)
    expected = kernel(x, w, b)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph = torch.cuda.CUDAGraph()
        kernel(x, w, b)
        side.synchronize()
    # a launch outside the capturing stream would fail the capture
    with torch.cuda.graph(graph):
        captured = kernel(x, w, b)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["numba", "torch"])
def test_bf16_comes_back_as_the_callers_kind(kind):
    from numba import cuda

    from affinec.backend.kernel_arguments import transferable
    from affinec.frontend.reference import TOLERANCE, random_inputs, reference

    spec, kernel = _conv_kernel("bf16")
    inputs = random_inputs(spec, np.random.default_rng(5))
    expected = reference(spec, *inputs)
    if kind == "numba":
        arrays = [cuda.to_device(transferable(a)) for a in inputs]
        out = kernel(*arrays)
        assert isinstance(out, cuda.cudadrv.devicearray.DeviceNDArray)
        assert out.dtype == np.uint16  # bf16's bits, as the inputs came
        got = out.copy_to_host().view(inputs[0].dtype).astype(np.float64)
        again = kernel(*arrays).copy_to_host()  # the planned path
        assert again.tobytes() == out.copy_to_host().tobytes()
    else:
        torch = pytest.importorskip("torch")
        arrays = [
            torch.as_tensor(a.astype(np.float32), device="cuda").bfloat16()
            for a in inputs
        ]
        out = kernel(*arrays)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
        got = out.double().cpu().numpy()
        assert torch.equal(kernel(*arrays), out)
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert error <= TOLERANCE["bf16"]


def test_a_tensor_map_parameter_points_at_its_encoding(monkeypatch):
    """A Hopper kernel's parameter block: the tensor maps' 128 bytes where they
    lie, encoded once per address; the output's address in its own slot."""
    import ctypes

    from affinec.backend import runtime
    from affinec.base.spec import MatmulSpec
    from affinec.driver.compiler import compile_to_ptx

    class Encoded:
        def __init__(self, address: int) -> None:
            self.bytes = (ctypes.c_uint8 * 128)(*(address >> 20 & 0xFF,) * 128)

        def getPtr(self) -> int:
            return ctypes.addressof(self.bytes)

    encoded = []
    monkeypatch.setattr(
        runtime.TiledTensorMap,
        "encode",
        lambda self, address: encoded.append(address) or Encoded(address),
    )
    spec = MatmulSpec(128, 64, 64, "f16")
    kernel = compile_to_ptx(spec, arch="sm_90a", wgmma=True).runtime_kernel()
    assert kernel.launches[0].takes_tensor_maps
    a, b = (
        Fake(p.shape, 0x100000 * (k + 1), "<f2")
        for k, p in enumerate(kernel.arguments[:2])
    )
    c = Fake(kernel.arguments[2].shape, 0x300000, "<f2")
    plan = kernel.prepare(a, b, c)
    for _ in range(2):
        kernel.pack(plan, {"A": 0x100000, "B": 0x200000, "C": 0x300000})
    assert encoded == [0x100000, 0x200000]  # once per address
    block = plan.blocks[0]
    assert block.parameter_bytes(0, 128) == bytes([0x01] * 128)  # A's map
    assert block.parameter_bytes(1, 128) == bytes([0x02] * 128)  # B's
    assert block.parameter_bytes(2) == struct.pack("<Q", 0x300000)


def test_a_copied_parameter_block_points_into_itself():
    import copy

    block = ParameterBlock(2)
    block.set_pointer(0, 0x1000)
    twin = copy.deepcopy(block)
    twin.set_pointer(0, 0x2000)
    assert block.parameter_bytes(0) == struct.pack("<Q", 0x1000)
    assert twin.parameter_bytes(0) == struct.pack("<Q", 0x2000)


@pytest.mark.skipif(cuda_available(), reason="fake device pointers fail the GPU check")
def test_a_call_launches_its_packed_parameters_first_and_again(monkeypatch):
    """The whole call without a GPU: the driver's launch stood in for, what each
    launch passes read back from the parameter blocks."""
    from affinec.backend import runtime

    launched = []

    def launch(function, grid, block, shared, stream, parameters):
        import ctypes

        addresses = (ctypes.c_void_p * 2).from_address(parameters)
        values = [ctypes.c_uint64.from_address(a).value for a in addresses]
        launched.append((function, grid, block, stream, values))

    monkeypatch.setattr(runtime, "launch_parameters", launch)
    monkeypatch.setattr(runtime, "require_gpu", lambda: None)
    kernel = two_launch_kernel()
    monkeypatch.setitem(kernel.__dict__, "functions", {"partial": "P", "sum": "S"})
    monkeypatch.setattr(
        kernel, "_workspace_addresses", lambda stream, device: {"ws": 0x90000}
    )
    out = Fake((1000,), 0x20000)
    assert kernel(Fake((1000,), 0x10000), out) is out
    out2 = Fake((1000,), 0x40000)
    assert kernel(Fake((1000,), 0x30000), out=out2) is out2  # another layout
    assert kernel(Fake((1000,), 0x50000), out=Fake((1000,), 0x60000)) is not out2
    assert len(kernel._plans) == 2
    assert launched == [
        ("P", (8, 2, 1), (128, 1, 1), 0, [0x10000, 0x90000]),
        ("S", (8, 1, 1), (128, 1, 1), 0, [0x90000, 0x20000]),
        ("P", (8, 2, 1), (128, 1, 1), 0, [0x30000, 0x90000]),
        ("S", (8, 1, 1), (128, 1, 1), 0, [0x90000, 0x40000]),
        ("P", (8, 2, 1), (128, 1, 1), 0, [0x50000, 0x90000]),
        ("S", (8, 1, 1), (128, 1, 1), 0, [0x90000, 0x60000]),
    ]
    with pytest.raises(KernelArgumentError, match="shares memory"):
        kernel(Fake((1000,), 0x70000), out=Fake((1000,), 0x70000))
    assert len(launched) == 6  # refused before launch


class _Device:
    type, index = "cuda", 0


class FakeTensor(Fake):
    """What the launch path reads of a CUDA tensor of torch's."""

    requires_grad, is_cuda, device, dtype = False, True, _Device(), "torch.float32"

    def __init__(self, pointer: int) -> None:
        super().__init__((1000,), pointer)
        self.shape = (1000,)

    def stride(self):
        return (1,)

    def get_device(self):
        return self.device.index

    def data_ptr(self):
        return self.__cuda_array_interface__["data"][0]


FakeTensor.__module__ = "torch"


@pytest.mark.skipif(cuda_available(), reason="fake device pointers fail the GPU check")
def test_torch_tensors_launch_on_torchs_current_stream(monkeypatch):
    from affinec.backend import runtime

    streams = []
    monkeypatch.setattr(
        runtime,
        "launch_parameters",
        lambda function, grid, block, shared, stream, parameters: streams.append(
            stream
        ),
    )
    monkeypatch.setattr(runtime, "require_gpu", lambda: None)
    monkeypatch.setattr(runtime, "torch_stream", lambda device: 0xABC0 + device)
    kernel = scale()
    monkeypatch.setitem(kernel.__dict__, "functions", {"scale": "F"})
    for _ in range(2):
        kernel(FakeTensor(0x10000), FakeTensor(0x20000))
    assert streams == [0xABC0, 0xABC0]
    (plan,) = kernel._plans.values()
    assert plan.torch_device == 0 and plan.asked == (False, False)
    kernel(FakeTensor(0x10000), FakeTensor(0x20000), stream=0x77)  # given: it
    assert streams[-1] == 0x77


@pytest.mark.parametrize(
    "capability, arch",
    [((8, 0), "sm_80"), ((8, 9), "sm_80"), ((9, 0), "sm_90a"), ((10, 0), "sm_90")],
)
def test_the_target_is_the_gpus_own_with_its_architecture_specific_features(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], arch: str
) -> None:
    """An H100 (9.0) compiles for sm_90a, where the warpgroup MMA is; a GPU affinec
    has no target for takes the newest one below it."""
    from types import SimpleNamespace

    from numba import cuda

    from affinec.backend import cuda_launch

    monkeypatch.setattr(cuda_launch, "cuda_available", lambda: True)
    monkeypatch.setattr(
        cuda,
        "get_current_device",
        lambda: SimpleNamespace(compute_capability=capability),
    )
    assert cuda_launch.current_arch() == arch
