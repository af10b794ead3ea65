"""The bf16 storage dtype, end to end on the CPU: specs, IR round trips, the
interpreter's rounding (once, to nearest even, as the GPU rounds), the default
pipeline proven with `Pipeline.run(check=True)`, PTX through ptxas for sm_80 and
sm_90, the runtime's argument checks and the command lines.

bf16 keeps 8 significant bits (f16 11) and f32's exponent range; products and sums
are f32's, as for f16, so a result's error is its final rounding to bf16."""

import io
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.printer import Printer

from affinec.backend.llvm_bfloat import BFloatType
from affinec.backend.ptxas import assemble
from affinec.backend.runtime import (
    Kernel,
    KernelArgumentError,
    Parameter,
    cuda_available,
    transferable,
)
from affinec.base.diagnostics import verify
from affinec.base.dtypes import BFLOAT16, round_to_bfloat16
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec, parse_spec
from affinec.driver.benchmark import Row, format_table, summary
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes, map_to_gpu_passes
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import (
    TOLERANCE,
    UNIT_ROUNDOFF,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import Interpreter
from affinec.interpreter.support import fused_multiply_add
from affinec.ir.context import make_context
from affinec.tools.cli import main as affinec

BF16 = BFLOAT16.type


def _bits(values) -> np.ndarray:
    return np.asarray(values, BFLOAT16).view(np.uint16)


def _nearest_bf16(x: Fraction) -> float:
    """The bf16 nearest the exact value `x`, ties to the even significand: an
    independent reference (exact rationals, no float conversion decides)."""
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    x = abs(x)
    exponent = math.floor(math.log2(x))
    while Fraction(2) ** exponent > x:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= x:
        exponent += 1
    exponent = max(exponent, -126)  # subnormals share the smallest binade's ulp
    ulp = Fraction(2) ** (exponent - 7)
    units, rest = divmod(x, ulp)
    if rest * 2 > ulp or (rest * 2 == ulp and units % 2 == 1):
        units += 1
    return sign * float(units * ulp)


# -- specs and IR -------------------------------------------------------------------------


def test_specs_take_bf16_and_its_text_round_trips():
    spec = ConvSpec(1, 3, 6, 6, 4, 3, 3, padding=1, dtype="bf16", epilogue="bias-relu")
    assert parse_spec(spec.to_text()) == spec
    assert "dtype=bf16" in spec.to_text() and spec.describe().endswith(
        "bf16 +bias-relu"
    )
    assert parse_spec("matmul m=2 n=3 k=4 dtype=bf16 epilogue=none").dtype == "bf16"
    assert OuterSpec(2, 3, "bf16").dtype == "bf16"


def test_the_naive_ir_stores_bf16_and_computes_in_f32():
    text = str(build(ConvSpec(1, 3, 5, 5, 4, 3, 3, dtype="bf16", epilogue="bias-relu")))
    assert "%input: memref<1x3x5x5xbf16>" in text and "%bias: memref<4xbf16>" in text
    assert "arith.extf %a : bf16 to f32" in text
    assert "arith.extf %bval : bf16 to f32" in text
    assert "arith.mulf %a32, %b32 : f32" in text
    assert "arith.truncf %relu : f32 to bf16" in text
    assert "memref.alloca() : memref<f32>" in text


def _generic(module) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def _assert_round_trips(module) -> None:
    ctx = make_context()
    custom = str(module)
    reparsed = parse_module(ctx, custom)
    verify(reparsed)
    assert str(reparsed) == custom
    generic = _generic(module)
    assert str(parse_module(ctx, generic)) == custom


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 16, 5, 5, 6, 3, 3, padding=1, dtype="bf16", epilogue="bias-relu"),
        MatmulSpec(9, 10, 17, "bf16", "relu"),
    ],
    ids=["conv", "matmul"],
)
def test_every_level_of_a_bf16_kernel_round_trips(spec):
    """Naive, mma (warp fragments of bf16) and llvm + nvvm (`bf16` registers and
    i32-packed MMA operands) print and re-parse, custom and generic."""
    config = config_for(spec)
    module = build(spec)
    _assert_round_trips(module)
    passes = default_passes(config)
    mma_level = passes.index(map_to_gpu_passes(config)[-1]) + 1
    Pipeline(passes[:mma_level]).run(module)
    assert "vector<4x2xbf16>" in str(module)
    _assert_round_trips(module)
    Pipeline(passes[mma_level:]).run(module)
    assert "#nvvm.mma_type<bf16>" in str(module)
    _assert_round_trips(module)


# -- the interpreter rounds bf16 once, to nearest even ----------------------------------


def _interpret(body: str, signature: str, results: str, *args):
    text = f"func.func @f({signature}) -> ({results}) {{\n{body}\n}}"
    module = parse_module(make_context(), text)
    verify(module)
    return Interpreter(module).call("f", *args)


def _f32_patterns(seed: int) -> np.ndarray:
    """Random float32 bit patterns (NaN left out), with every kind of tie: the low
    16 bits exactly half, just under and just over, on even and odd bf16 bits."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    low = np.array([0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF], np.uint32)
    bits[: 5 * 400] = (bits[: 5 * 400] & 0xFFFF0000) | np.repeat(low, 400)
    bits = np.concatenate(
        [bits, np.array([0x7F7FFFFF, 0xFF7F8000, 0x00008000], np.uint32)]
    )
    values = bits.view(np.float32)
    return values[~np.isnan(values)]


def test_truncf_from_f32_rounds_to_nearest_even_like_the_gpu():
    """`arith.truncf` f32 → bf16 is PTX's `cvt.rn.bf16.f32`: the high 16 bits,
    rounded to nearest, ties to even (checked on the bits, not through ml_dtypes),
    and `arith.extf` takes it back exactly."""
    x = _f32_patterns(0)
    n = len(x)
    body = (
        f"affine.for %i = 0 to {n} {{\n"
        f"  %v = affine.load %x[%i] : memref<{n}xf32>\n"
        "  %t = arith.truncf %v : f32 to bf16\n"
        f"  affine.store %t, %y[%i] : memref<{n}xbf16>\n"
        "  %e = arith.extf %t : bf16 to f32\n"
        f"  affine.store %e, %z[%i] : memref<{n}xf32>\n"
        "}\nfunc.return"
    )
    text = (
        f"func.func @f(%x: memref<{n}xf32>, %y: memref<{n}xbf16>, "
        f"%z: memref<{n}xf32>) {{\n{body}\n}}"
    )
    y = np.zeros(n, BFLOAT16)
    z = np.zeros(n, np.float32)
    Interpreter(parse_module(make_context(), text)).run("f", x, y, z)
    bits = x.view(np.uint32).astype(np.uint64)
    expected = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(_bits(y), expected)
    np.testing.assert_array_equal(_bits(y), _bits(x.astype(BFLOAT16)))  # ml_dtypes
    np.testing.assert_array_equal(
        z.view(np.uint32), expected.astype(np.uint32) << np.uint32(16)
    )


def test_a_float64_rounds_to_bf16_once():
    """1 + 2**-8 + 2**-30 is above the midpoint of 1 and 1 + 2**-7: rounding once
    gives 1 + 2**-7. Through float32 (as ml_dtypes converts) it would be the
    midpoint, a tie, and 1. `arith.truncf` and `llvm.fptrunc` round once, as the
    GPU's `cvt.rn.bf16.f64` (sm_90) and LLVM's round-to-odd expansion (sm_80) do;
    so do the emitter's constants."""
    x = 1 + 2**-8 + 2**-30
    body = (
        "%t = arith.truncf %x : f64 to bf16\n"
        "%l = llvm.fptrunc %x : f64 to bf16\n"
        "func.return %t, %l : bf16, bf16"
    )
    t, low = _interpret(body, "%x: f64", "bf16, bf16", np.float64(x))
    assert isinstance(t, BF16) and float(t) == 1 + 2**-7 and float(low) == 1 + 2**-7
    assert BFloatType().format_constant(x) == "0xR3F81"
    assert BFloatType().format_constant(-2.5) == "0xRC020"


@given(st.floats(allow_nan=False, width=64))
def test_round_to_bfloat16_is_the_nearest_bf16(x):
    rounded = round_to_bfloat16(x)
    assert isinstance(rounded, BF16)
    if math.isinf(x) or abs(x) >= 2.0**128 - 2.0**119:  # past bf16's overflow midpoint
        assert math.isinf(float(rounded)) and math.copysign(1, float(rounded)) == (
            math.copysign(1, x)
        )
    else:
        assert float(rounded) == _nearest_bf16(Fraction(x))


@pytest.mark.parametrize("op", ["addf", "subf", "mulf", "divf"])
def test_bf16_arithmetic_rounds_the_exact_result_once(op):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(200).astype(BFLOAT16)
    b = rng.standard_normal(200).astype(BFLOAT16)
    body = f"%r = arith.{op} %a, %b : bf16\nfunc.return %r : bf16"
    module = parse_module(
        make_context(), f"func.func @f(%a: bf16, %b: bf16) -> (bf16) {{\n{body}\n}}"
    )
    it = Interpreter(module)
    exact = {
        "addf": lambda p, q: p + q,
        "subf": lambda p, q: p - q,
        "mulf": lambda p, q: p * q,
        "divf": lambda p, q: p / q,
    }[op]
    for p, q in zip(a, b, strict=True):
        (r,) = it.call("f", p, q)
        assert isinstance(r, BF16)
        assert float(r) == _nearest_bf16(exact(Fraction(float(p)), Fraction(float(q))))


def test_a_bf16_fma_rounds_once():
    """1.0625 * 1.0625 = 1 + 2**-3 + 2**-8, a bf16 midpoint with an even lower
    neighbour; adding 2**-30 puts it just above, so `fma.rn.bf16` gives 1 + 2**-3 +
    2**-7. A float32 in between would drop the 2**-30 and round the tie down."""
    a, b, c = BF16(1.0625), BF16(1.0625), BF16(2.0**-30)
    body = (
        "%m = math.fma %a, %b, %c : bf16\n"
        '%l = llvm.call_intrinsic "llvm.fma.bf16"(%a, %b, %c) : (bf16, bf16, bf16) '
        "-> bf16\n"
        "func.return %m, %l : bf16, bf16"
    )
    m, low = _interpret(body, "%a: bf16, %b: bf16, %c: bf16", "bf16, bf16", a, b, c)
    assert float(m) == float(low) == 1 + 2**-3 + 2**-7


@given(
    st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, width=32).map(BF16),
        min_size=3,
        max_size=3,
    )
)
def test_bf16_fma_is_the_exact_sum_rounded_once(operands):
    a, b, c = operands
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    assert float(fused_multiply_add(a, b, c)) == _nearest_bf16(exact)


def test_bf16_constants_are_bf16_values():
    (k,) = _interpret(
        "%k = arith.constant 1.0039062500001 : bf16\nfunc.return %k : bf16", "", "bf16"
    )
    assert isinstance(k, BF16) and float(k) == 1 + 2**-7


# -- reference and tolerance ----------------------------------------------------------


def test_reference_arrays_are_bf16():
    spec = MatmulSpec(4, 5, 6, "bf16", "bias-relu")
    inputs = random_inputs(spec, np.random.default_rng(0))
    assert [a.dtype for a in inputs] == [BFLOAT16] * 3
    out = poisoned_output(spec)
    assert out.dtype == BFLOAT16 and np.isnan(out.astype(np.float32)).all()
    assert relative_error(out, reference(spec, *inputs)) == math.inf


def test_the_tolerance_is_f16s_in_units_of_roundoff():
    assert TOLERANCE["bf16"] / UNIT_ROUNDOFF["bf16"] == pytest.approx(
        TOLERANCE["f16"] / UNIT_ROUNDOFF["f16"]
    )
    assert TOLERANCE["bf16"] == pytest.approx(0.08)


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(2, 5, 7, 6, 6, 3, 3, padding=1, dtype="bf16"),
        ConvSpec(1, 3, 6, 6, 4, 3, 3, padding=1, dtype="bf16", epilogue="bias-relu"),
        MatmulSpec(12, 9, 40, "bf16"),
    ],
    ids=["conv", "conv-bias-relu", "matmul"],
)
def test_the_naive_result_errs_by_its_final_rounding_only(spec):
    """Products and sums in f32, one rounding to bf16 at the store: the relative
    error is within bf16's unit roundoff (plus f32's accumulation), far inside the
    tolerance."""
    inputs = random_inputs(spec, np.random.default_rng(2))
    out = poisoned_output(spec)
    Interpreter(build(spec)).run(contraction_of(spec).name, *inputs, out)
    error = relative_error(out, reference(spec, *inputs))
    assert 0 < error <= UNIT_ROUNDOFF["bf16"] * 1.01


# -- the default pipeline -------------------------------------------------------------


def test_bf16_takes_f16s_route():
    for spec in [
        ConvSpec(
            1, 16, 14, 14, 32, 3, 3, padding=1, layout="nhwc", filter_layout="rsck"
        ),
        ConvSpec(1, 1, 9, 9, 8, 3, 3),  # one channel: no tensor cores
        ConvSpec(1, 4, 9, 9, 8, 3, 3, layout="nhwc", filter_layout="rsck"),
        MatmulSpec(64, 64, 64),
        OuterSpec(5, 7),
    ]:
        f16 = config_for(type(spec)(**{**spec.__dict__, "dtype": "f16"}))
        bf16 = config_for(type(spec)(**{**spec.__dict__, "dtype": "bf16"}))
        assert bf16 == f16, spec.to_text()
    assert config_for(MatmulSpec(64, 64, 64, "bf16")).mma


@pytest.mark.parametrize(
    ("spec", "tensor_cores"),
    [
        (
            ConvSpec(
                1, 16, 4, 4, 6, 3, 3, padding=1, dtype="bf16", epilogue="bias-relu"
            ),
            True,
        ),
        (
            ConvSpec(
                2,
                16,
                5,
                4,
                5,
                2,
                3,
                stride=(2, 1),
                layout="nhwc",
                filter_layout="rsck",
                dtype="bf16",
                epilogue="relu",
            ),
            True,
        ),
        (
            ConvSpec(
                2,
                3,
                6,
                5,
                5,
                2,
                3,
                stride=(2, 1),
                layout="nhwc",
                filter_layout="rsck",
                dtype="bf16",
                epilogue="relu",
            ),
            False,
        ),
        (ConvSpec(1, 1, 5, 5, 3, 3, 3, dilation=2, padding=2, dtype="bf16"), False),
        (MatmulSpec(9, 10, 17, "bf16", "bias-relu"), True),
        (OuterSpec(5, 7, "bf16"), False),
    ],
    ids=[
        "conv-mma",
        "conv-nhwc-strided-mma",
        "conv-few-channels",
        "conv-one-channel",
        "matmul-mma",
        "outer",
    ],
)
def test_the_default_pipeline_keeps_a_bf16_result(spec, tensor_cores):
    """Every pass checked against the one before (bit for bit where the order of
    summation is kept) and against float64 within bf16's tolerance, on both routes."""
    config = config_for(spec)
    assert config.mma == tensor_cores
    module = build(spec)
    Pipeline(default_passes(config)).run(module, check=True)


# -- PTX --------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1, dtype="bf16", epilogue="bias-relu"),
        ConvSpec(1, 1, 6, 6, 3, 3, 3, dtype="bf16", epilogue="relu"),
        MatmulSpec(32, 16, 32, "bf16"),
    ],
    ids=["conv-mma", "conv-simt", "matmul-mma"],
)
def test_bf16_kernels_assemble_for_sm80_and_sm90(spec, arch):
    compiled = compile_to_ptx(spec, arch=arch)
    ptx = compiled.ptx
    assert f".target {arch}" in ptx
    assert re.search(
        r"cvt\.rn\.bf16(x2)?\.f32", ptx
    )  # the output's rounding (in pairs)
    if compiled.config is not None and compiled.config.mma:
        assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx
    else:
        assert re.search(r"cvt\.f32\.bf16|shl\.b32", ptx)  # the inputs' extension
    assert compiled.name in assemble(ptx, arch)


# -- runtime ----------------------------------------------------------------------------


def _bf16_kernel() -> Kernel:
    return Kernel.single(
        ptx="",
        name="k",
        grid=(1, 1, 1),
        block=(32, 1, 1),
        parameters=[
            Parameter("in", (8,), BFLOAT16),
            Parameter("out", (8,), BFLOAT16, output=True),
        ],
    )


class FakeDeviceArray:
    """A device array as torch shows one: `__cuda_array_interface__` and a dtype."""

    def __init__(self, typestr: str, dtype: str | None, pointer: int = 0x1000):
        self.__cuda_array_interface__ = {
            "shape": (8,),
            "typestr": typestr,
            "strides": None,
            "data": (pointer, False),
            "version": 3,
        }
        if dtype is not None:
            self.dtype = dtype


@pytest.mark.skipif(cuda_available(), reason="fake device pointers fail the GPU check")
@pytest.mark.parametrize("typestr", ["<f2", "<V2"])
def test_torch_bfloat16_tensors_are_accepted_whatever_their_typestr(typestr):
    # torch 2.4-2.9 gives bfloat16 tensors "<f2", later ones "<V2".
    device_in = FakeDeviceArray(typestr, "torch.bfloat16")
    device_out = FakeDeviceArray(typestr, "torch.bfloat16", pointer=0x2000)
    checked = _bf16_kernel().check(device_in, device_out)
    assert [a.parameter.dtype for a in checked] == [BFLOAT16, BFLOAT16]


@pytest.mark.parametrize(
    ("kernel_dtype", "argument", "message"),
    [
        (BFLOAT16, np.zeros(8, np.float16), "got a numpy array .* dtype float16"),
        (BFLOAT16, np.zeros(8, np.float32), "got a numpy array .* dtype float32"),
        (
            BFLOAT16,
            FakeDeviceArray("<f2", "torch.float16"),
            "got a device array .* dtype float16",
        ),
        (BFLOAT16, FakeDeviceArray("<V2", None), r"got a device array .* dtype \|V2"),
        (
            np.dtype(np.float16),
            FakeDeviceArray("<f2", "torch.bfloat16"),
            "expected an array of shape .* and dtype float16, got a device array of "
            r"shape \(8,\) and dtype bfloat16",
        ),
        (
            np.dtype(np.float16),
            np.zeros(8, BFLOAT16),
            "got a numpy array .* dtype bfloat16",
        ),
        (BFLOAT16, FakeDeviceArray("<x9", None), "unknown typestr '<x9'"),
    ],
    ids=[
        "f16-numpy",
        "f32-numpy",
        "torch-f16",
        "opaque-2-bytes",
        "torch-bf16-as-f16",
        "bf16-numpy-as-f16",
        "bad-typestr",
    ],
)
def test_wrong_dtypes_are_named(kernel_dtype, argument, message):
    kernel = Kernel.single(
        ptx="",
        name="k",
        grid=(1, 1, 1),
        block=(32, 1, 1),
        parameters=[Parameter("in", (8,), kernel_dtype)],
    )
    with pytest.raises(KernelArgumentError, match=f"argument 'in': .*{message}"):
        kernel.check(argument)


def test_a_refused_array_interface_is_an_argument_error():
    class RequiresGrad:
        dtype = "torch.bfloat16"

        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable")

    with pytest.raises(
        KernelArgumentError,
        match="argument 'in': its __cuda_array_interface__ is refused: Can't get",
    ):
        _bf16_kernel().check(RequiresGrad())


def test_bf16_numpy_arrays_are_checked_and_travel_as_their_bytes():
    from numba.cuda.cudadrv import driver

    x = np.arange(8).astype(BFLOAT16)
    (arg_in, arg_out) = _bf16_kernel().check(x)
    assert arg_in.host is x and arg_out.host.dtype == BFLOAT16
    # numba copies through the buffer protocol, which numpy refuses for bf16.
    with pytest.raises(ValueError, match="cannot include dtype"):
        memoryview(x)
    view = transferable(x)
    assert driver.host_pointer(view, readonly=True) == x.ctypes.data
    assert view.nbytes == x.nbytes and np.shares_memory(view, x)
    assert transferable(np.zeros(3, np.float16)).dtype == np.float16


# -- command lines ----------------------------------------------------------------------

CONV = ["conv", "--n", "1", "--c", "16", "--h", "6", "--w", "6", "--k", "8"]
CONV += ["--r", "3", "--s", "3", "--pad", "1", "--dtype", "bf16"]


def test_gen_and_check_take_bf16(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    assert affinec(["gen", *CONV, "-o", str(path)]) == 0
    text = path.read_text()
    assert "memref<1x16x6x6xbf16>" in text and "dtype=bf16" in text
    assert affinec(["check", str(path)]) == 0
    assert "bf16" in capsys.readouterr().out


def test_compile_takes_bf16(tmp_path):
    path = tmp_path / "conv.ptx"
    assert affinec(["compile", *CONV, "--arch", "sm_90", "-o", str(path)]) == 0
    ptx = path.read_text()
    assert ".target sm_90" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in ptx


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize(
    "argv",
    [["run", *CONV], ["bench", "--only", "conv3x3-128", "--dtype", "bf16"]],
    ids=["run", "bench"],
)
def test_gpu_commands_take_bf16(argv, capsys):
    # The flag is accepted; without a GPU the command then says so.
    assert affinec(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no CUDA GPU available") and "Traceback" not in err


def test_an_unknown_dtype_is_a_usage_error(capsys):
    # One error line and exit code 1, as every error of `affinec`.
    assert affinec(["bench", "--dtype", "f8"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "invalid choice: 'f8'" in err


def test_bench_takes_a_known_architecture_only(capsys):
    from affinec.tools.cli import build_parser

    assert build_parser().parse_args(["bench", "--arch", "sm_90a"]).arch == "sm_90a"
    assert affinec(["bench", "--arch", "sm_70"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "invalid choice: 'sm_70'" in err


def test_benchmark_tables_label_bf16_rows():
    def row(dtype: str, ours: float, cudnn: float) -> Row:
        spec = ConvSpec(32, 128, 28, 28, 128, 3, 3, padding=1, dtype=dtype)
        return Row("conv3x3-128", spec.to_text(), 1e-3, ours, cudnn, None, None, 1, 1)

    rows = [row("bf16", 0.05, 0.025), row("f16", 0.04, 0.02)]
    lines = format_table(rows).splitlines()
    assert lines[1].split()[:2] == ["conv3x3-128", "bf16"]
    assert lines[2].split()[:2] == ["conv3x3-128", "f16"]
    assert summary(rows).splitlines() == [
        "f16: geomean cuDNN/ours 0.500 over 1",
        "bf16: geomean cuDNN/ours 0.500 over 1",
    ]
