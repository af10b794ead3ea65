"""MLIR's named linalg ops in: `affinec-lower-linalg` against a real mlir-opt's
reading of the same files (mlir-opt lowers them to affine loops, affinec's
interpreter runs both), the spec it records, and every refusal located at the op."""

import dataclasses
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlir_opt import mlir_opt, needs_mlir_opt, read_back_differently, same_ir
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException

from affinec.base.diagnostics import PassError, collecting_remarks, format_exception
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects.affinec import read_spec
from affinec.driver.pipeline import Pipeline
from affinec.frontend.reference import (
    TOLERANCE,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import Interpreter
from affinec.ir.context import make_context
from affinec.testing import conv_specs, matmul_specs

MEMREF = {"f32": "f32", "f16": "f16", "bf16": "bf16"}


def _memref(shape, dtype: str) -> str:
    return f"memref<{'x'.join(map(str, shape))}x{MEMREF[dtype]}>"


def linalg_text(spec, fill: bool = True) -> str:
    """The function an MLIR front end writes for `spec`: the output filled with
    zeros, then the named op (no padding: the front end pads the input)."""
    if isinstance(spec, MatmulSpec):
        shapes = [(spec.m, spec.k), (spec.k, spec.n), (spec.m, spec.n)]
        op, attrs = "linalg.matmul", ""
    else:
        shapes = linalg_shapes(spec)
        op = "linalg.conv_2d_" + ("nhwc_hwcf" if spec.layout == "nhwc" else "nchw_fchw")
        if spec.groups > 1 and spec.layout == "nhwc":
            op = "linalg.depthwise_conv_2d_nhwc_hwc"
        elif spec.groups > 1:
            op = (
                "linalg.depthwise_conv_2d_nchw_chw"
                if spec.groups == spec.c == spec.k
                else "linalg.conv_2d_ngchw_gfchw"
            )
        sh, sw = spec.stride
        dh, dw = spec.dilation
        attrs = (
            f" {{dilations = dense<[{dh}, {dw}]> : tensor<2xi64>, "
            f"strides = dense<[{sh}, {sw}]> : tensor<2xi64>}}"
        )
    x, w, y = (_memref(s, spec.dtype) for s in shapes)
    zero = (
        f"  %zero = arith.constant 0.0 : {MEMREF[spec.dtype]}\n"
        f"  linalg.fill ins(%zero : {MEMREF[spec.dtype]}) outs(%y : {y})\n"
        if fill
        else ""
    )
    return (
        f"func.func @f(%x: {x}, %w: {w}, %y: {y}) {{\n{zero}"
        f"  {op}{attrs} ins(%x, %w : {x}, {w}) outs(%y : {y})\n"
        "  func.return\n}\n"
    )


def linalg_shapes(spec: ConvSpec) -> list[tuple[int, ...]]:
    """The operands' shapes as linalg has them: a depthwise filter is R x S x C
    (NHWC), a grouped convolution's operands have a group dimension (NCHW)."""
    g = spec.groups
    if g > 1 and spec.layout == "nhwc":
        return [spec.input_shape, (spec.r, spec.s, spec.c), spec.output_shape]
    if g > 1 and g == spec.c == spec.k:  # NCHW depthwise: a C x R x S filter
        return [spec.input_shape, (spec.c, spec.r, spec.s), spec.output_shape]
    if g > 1:
        return [
            (spec.n, g, spec.c // g, spec.h, spec.w),
            (g, spec.k // g, spec.c // g, spec.r, spec.s),
            (spec.n, g, spec.k // g, spec.out_h, spec.out_w),
        ]
    return [spec.input_shape, spec.filter_shape, spec.output_shape]


def lowered(text: str):
    module = parse_module(make_context(), text, "model.mlir")
    Pipeline.parse("affinec-lower-linalg").run(module)
    return module


def run(module, spec, seed: int = 0) -> np.ndarray:
    inputs = random_inputs(spec, np.random.default_rng(seed))
    out = np.zeros_like(reference(spec, *inputs), dtype=inputs[0].dtype)
    Interpreter(module).run("f", *[x.copy() for x in inputs], out)
    return out


def _unpadded(s: ConvSpec) -> ConvSpec | None:
    """`s` without padding (a front end pads the input first), if that is a spec."""
    try:
        return dataclasses.replace(
            s, padding=(0, 0), dtype="f32", epilogue="none", groups=1,
            filter_layout="rsck" if s.layout == "nhwc" else "kcrs",
        )  # fmt: skip
    except ValueError:
        return None


@st.composite
def f32_cases(draw):
    return draw(
        st.one_of(
            conv_specs(max_channels=6, max_image=7).map(_unpadded).filter(bool),
            matmul_specs(10).map(lambda s: MatmulSpec(s.m, s.n, s.k, "f32")),
        )
    )


@needs_mlir_opt
@settings(max_examples=max(5, settings().max_examples // 2))
@given(f32_cases())
def test_the_naive_ir_computes_what_mlir_opt_makes_of_the_same_op(spec):
    # mlir-opt lowers the op to affine loops in the same order of summation: in
    # f32 the two agree bit for bit
    text = linalg_text(spec)
    ours = lowered(text)
    assert read_spec(ours) == spec
    theirs = parse_module(
        make_context(),
        mlir_opt(text, "--convert-linalg-to-affine-loops"),
        "mlir-opt.mlir",
    )
    np.testing.assert_array_equal(run(ours, spec), run(theirs, spec))


@st.composite
def depthwise_cases(draw):
    """Depthwise convolutions as MLIR writes them (NHWC or NCHW, f32, unpadded)."""
    c = draw(st.integers(2, 6))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers((r - 1) * dilation[0] + 1, 8))
    w = draw(st.integers((s - 1) * dilation[1] + 1, 8))
    layout = draw(st.sampled_from(["nhwc", "nchw"]))
    return ConvSpec(
        draw(st.integers(1, 2)), c, h, w, c, r, s, stride=stride, dilation=dilation,
        groups=c, layout=layout, filter_layout="rsck" if layout == "nhwc" else "kcrs",
    )  # fmt: skip


@needs_mlir_opt
@settings(max_examples=max(5, settings().max_examples // 2))
@given(depthwise_cases())
def test_a_depthwise_op_is_a_grouped_spec_that_computes_what_mlir_opt_makes_of_it(
    spec,
):
    # the same elements of the filter, R x S x C (C x R x S) for linalg,
    # R x S x 1 x C (C x 1 x R x S) for affinec's grouped convolution; in f32 the
    # two sums agree bit for bit
    text = linalg_text(spec)
    assert f"linalg.depthwise_conv_2d_{spec.layout}" in text
    with collecting_remarks() as remarks:
        ours = lowered(text)
    assert read_spec(ours) == spec
    filter_shape = "x".join(map(str, spec.filter_shape))
    assert any(f"takes its filter as {filter_shape}" in m for _, m in remarks)
    theirs = parse_module(
        make_context(),
        mlir_opt(text, "--convert-linalg-to-affine-loops"),
        "mlir-opt.mlir",
    )
    assert_same_as_mlir_opt(ours, theirs, spec)


def assert_same_as_mlir_opt(ours, theirs, spec: ConvSpec) -> None:
    """Both functions on the same elements (in linalg's shapes for mlir-opt's):
    the same f32 bits."""
    x, w = random_inputs(spec, np.random.default_rng(0))
    out = np.zeros(spec.output_shape, np.float32)
    Interpreter(ours).run("f", x.copy(), w.copy(), out)
    shapes = linalg_shapes(spec)
    expected = np.zeros(shapes[2], np.float32)
    Interpreter(theirs).run("f", x.reshape(shapes[0]), w.reshape(shapes[1]), expected)
    np.testing.assert_array_equal(out, expected.reshape(spec.output_shape))


@st.composite
def grouped_nchw_cases(draw):
    """Grouped convolutions as torch-mlir writes them (NCHW, f32, unpadded)."""
    # two channels a group at least: one each is the depthwise op
    g, c, k = draw(st.integers(2, 3)), draw(st.integers(2, 3)), draw(st.integers(1, 3))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers((r - 1) * dilation[0] + 1, 7))
    w = draw(st.integers((s - 1) * dilation[1] + 1, 7))
    return ConvSpec(
        draw(st.integers(1, 2)), g * c, h, w, g * k, r, s, stride=stride,
        dilation=dilation, groups=g, layout="nchw", filter_layout="kcrs",
    )  # fmt: skip


@needs_mlir_opt
@settings(max_examples=max(5, settings().max_examples // 2))
@given(grouped_nchw_cases())
def test_torch_mlirs_grouped_op_is_a_grouped_spec_computing_what_mlir_opt_makes_of_it(
    spec,
):
    text = linalg_text(spec)
    assert "linalg.conv_2d_ngchw_gfchw" in text
    with collecting_remarks() as remarks:
        ours = lowered(text)
    assert read_spec(ours) == spec
    assert any("where linalg's have a group dimension" in m for _, m in remarks)
    theirs = parse_module(
        make_context(),
        mlir_opt(text, "--convert-linalg-to-affine-loops"),
        "mlir-opt.mlir",
    )
    assert_same_as_mlir_opt(ours, theirs, spec)


@needs_mlir_opt
@settings(max_examples=max(3, settings().max_examples // 4))
@given(
    st.integers(1, 3), st.integers(1, 6), st.integers(1, 6), st.integers(1, 6),
    st.sampled_from(["f32", "f16"]),
)  # fmt: skip
def test_a_batched_product_is_its_naive_ir_without_a_spec(batch, m, n, k, dtype):
    t = MEMREF[dtype]
    a, b, c = (f"memref<{batch}x{x}x{y}x{t}>" for x, y in ((m, k), (k, n), (m, n)))
    text = (
        f"func.func @f(%a: {a}, %b: {b}, %c: {c}) {{\n"
        f"  %zero = arith.constant 0.0 : {t}\n"
        f"  linalg.fill ins(%zero : {t}) outs(%c : {c})\n"
        f"  linalg.batch_matmul ins(%a, %b : {a}, {b}) outs(%c : {c})\n"
        "  func.return\n}\n"
    )
    with collecting_remarks() as remarks:
        ours = lowered(text)
    assert read_spec(ours, required=False) is None
    said = [m for _, m in remarks]
    assert any("is no spec affinec knows" in m for m in said), said
    assert any("sums in f32" in m for m in said) == (dtype != "f32"), said
    theirs = parse_module(
        make_context(),
        mlir_opt(text, "--convert-linalg-to-affine-loops"),
        "mlir-opt.mlir",
    )
    rng = np.random.default_rng(batch * 100 + m * 10 + n)
    x = rng.standard_normal((batch, m, k)).astype(t.replace("f", "float"))
    y = rng.standard_normal((batch, k, n)).astype(x.dtype)
    out, expected = np.zeros((batch, m, n), x.dtype), np.zeros((batch, m, n), x.dtype)
    Interpreter(ours).run("f", x.copy(), y.copy(), out)
    exact = np.einsum("bmk,bkn->bmn", x.astype(np.float64), y.astype(np.float64))
    if dtype == "f32":  # the same order of summation: bit for bit
        Interpreter(theirs).run("f", x.copy(), y.copy(), expected)
        np.testing.assert_array_equal(out, expected)
    assert relative_error(out, exact) <= TOLERANCE[dtype]


def fhwc_text(spec: ConvSpec) -> str:
    """TOSA's convolution (`linalg.conv_2d_nhwc_fhwc`) of `spec`'s sizes: the
    filter F x R x S x C."""
    rsck = linalg_text(spec)
    f = _memref((spec.k, spec.r, spec.s, spec.c), spec.dtype)
    return rsck.replace(_memref(spec.filter_shape, spec.dtype), f).replace(
        "linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nhwc_fhwc"
    )


@st.composite
def fhwc_cases(draw):
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers((r - 1) * dilation[0] + 1, 7))
    w = draw(st.integers((s - 1) * dilation[1] + 1, 7))
    return ConvSpec(
        draw(st.integers(1, 2)), draw(st.integers(1, 5)), h, w,
        draw(st.integers(1, 5)), r, s, stride=stride, dilation=dilation,
        layout="nhwc", filter_layout="rsck", dtype=draw(st.sampled_from(["f32", "f16"])),
    )  # fmt: skip


@needs_mlir_opt
@settings(max_examples=max(5, settings().max_examples // 2))
@given(fhwc_cases())
def test_tosas_convolution_is_its_naive_ir_computing_what_mlir_opt_makes_of_it(spec):
    text = fhwc_text(spec)
    with collecting_remarks() as remarks:
        ours = lowered(text)
    assert read_spec(ours, required=False) is None
    said = [m for _, m in remarks]
    assert any("is no spec affinec knows" in m for m in said), said
    assert any("F x R x S x C, a layout no spec" in m for m in said), said
    x, w = random_inputs(spec, np.random.default_rng(spec.c * 10 + spec.k))
    fhwc = np.ascontiguousarray(
        w.transpose(3, 0, 1, 2)
    )  # R x S x C x F -> F x R x S x C
    expected = reference(spec, x, w)
    out = np.zeros(spec.output_shape, x.dtype)
    Interpreter(ours).run("f", x.copy(), fhwc.copy(), out)
    assert relative_error(out, expected) <= TOLERANCE[spec.dtype]
    if spec.dtype == "f32":  # the same order of summation: bit for bit
        theirs = parse_module(
            make_context(),
            mlir_opt(text, "--convert-linalg-to-affine-loops"),
            "mlir-opt.mlir",
        )
        mlirs = np.zeros_like(out)
        Interpreter(theirs).run("f", x.copy(), fhwc.copy(), mlirs)
        np.testing.assert_array_equal(out, mlirs)


def test_tosas_convolution_takes_the_default_pipeline_to_ptx():
    spec = ConvSpec(1, 4, 6, 6, 8, 3, 3, stride=(1, 2), layout="nhwc",
                    filter_layout="rsck")  # fmt: skip
    module = parse_module(make_context(), fhwc_text(spec), "model.mlir")
    pipeline = Pipeline.for_module("affinec-lower-linalg,affinec-default", module)
    pipeline.run(module)
    x, w = random_inputs(spec, np.random.default_rng(3))
    fhwc = np.ascontiguousarray(w.transpose(3, 0, 1, 2))
    out = np.zeros(spec.output_shape, x.dtype)
    Interpreter(module).run("f", x.copy(), fhwc, out)  # the llvm level
    assert relative_error(out, reference(spec, x, w)) <= TOLERANCE["f32"]


def test_a_depthwise_op_takes_the_default_pipeline():
    spec = ConvSpec(
        1, 16, 6, 6, 16, 3, 3, groups=16, layout="nhwc", filter_layout="rsck",
        dtype="f16",
    )  # fmt: skip
    module = parse_module(make_context(), linalg_text(spec), "model.mlir")
    Pipeline.for_module("affinec-lower-linalg,affinec-default", module).run(module)
    assert read_spec(module) == spec
    inputs = random_inputs(spec, np.random.default_rng(2))
    out = np.zeros(spec.output_shape, np.float16)
    Interpreter(module).run("f", *[x.copy() for x in inputs], out)
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE["f16"]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_16_bit_ops_sum_in_f32_and_say_so(dtype):
    spec = ConvSpec(
        1, 8, 6, 6, 8, 3, 3, layout="nhwc", filter_layout="rsck", dtype=dtype
    )
    with collecting_remarks() as remarks:
        module = lowered(linalg_text(spec))
    assert any(f"sums in f32 and rounds once to {dtype}" in m for _, m in remarks)
    inputs = random_inputs(spec, np.random.default_rng(1))
    out = run(module, spec, seed=1)
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE[dtype]


DEPTHWISE = """func.func @f(%x: memref<1x8x8x16xf32>, %w: memref<3x3x16xf32>, %y: memref<1x6x6x16xf32>) {
  linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : memref<1x8x8x16xf32>, memref<3x3x16xf32>) outs(%y : memref<1x6x6x16xf32>)
  func.return
}
"""
BATCHED = """func.func @f(%a: memref<2x8x16xf32>, %b: memref<2x16x4xf32>, %c: memref<2x8x4xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x8x16xf32>, memref<2x16x4xf32>) outs(%c : memref<2x8x4xf32>)
  func.return
}
"""
SMALL = ConvSpec(1, 4, 6, 6, 8, 3, 3, layout="nhwc", filter_layout="rsck")


NAMED_OPS = [
    linalg_text(ConvSpec(1, 4, 7, 7, 8, 3, 3, layout="nhwc", filter_layout="rsck")),
    linalg_text(ConvSpec(2, 4, 9, 9, 8, 3, 3, stride=2, dilation=(1, 2))),
    linalg_text(
        ConvSpec(
            1,
            4,
            9,
            9,
            4,
            3,
            3,
            stride=(3, 2),
            dilation=(1, 2),
            groups=4,
            layout="nhwc",
            filter_layout="rsck",
            dtype="bf16",
        )  # fmt: skip
    ),
    linalg_text(MatmulSpec(8, 4, 16, "f16")),
    linalg_text(
        ConvSpec(
            1,
            6,
            9,
            9,
            4,
            3,
            3,
            stride=(2, 1),
            dilation=(1, 2),
            groups=2,
            dtype="f16",
        )  # fmt: skip
    ),
    linalg_text(
        ConvSpec(
            1,
            5,
            8,
            8,
            5,
            3,
            3,
            stride=(1, 2),
            dilation=(2, 1),
            groups=5,
            dtype="bf16",
        )  # fmt: skip
    ),
    DEPTHWISE,
    BATCHED,
    fhwc_text(
        ConvSpec(
            1,
            3,
            9,
            9,
            8,
            3,
            3,
            stride=(2, 1),
            dilation=(1, 2),
            layout="nhwc",
            filter_layout="rsck",
            dtype="f16",
        )
    ),  # fmt: skip
    # no strides or dilations (MLIR's default, and no property then); an f32
    # product of f16 inputs (a body that extends them)
    DEPTHWISE.replace(
        "{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ",
        "",
    ),
    "func.func @f(%a: memref<8x16xf16>, %b: memref<16x4xf16>, %c: memref<8x4xf32>) {\n"
    "  linalg.matmul ins(%a, %b : memref<8x16xf16>, memref<16x4xf16>) "
    "outs(%c : memref<8x4xf32>)\n  func.return\n}\n",
    # integers: MLIR's body extends them with their sign (affinec-lower-linalg
    # refuses them, the dialect reads and prints them)
    "func.func @f(%a: memref<8x16xi8>, %b: memref<16x4xi8>, %c: memref<8x4xi32>) {\n"
    "  linalg.matmul ins(%a, %b : memref<8x16xi8>, memref<16x4xi8>) "
    "outs(%c : memref<8x4xi32>)\n  func.return\n}\n",
]


@needs_mlir_opt
def test_mlir_opt_reads_the_named_ops_as_affinec_prints_them():
    # both forms: in the generic one, the body MLIR builds for the op, a
    # convolution's memoized indexing maps, a product's indexing_maps property
    assert read_back_differently(NAMED_OPS) == []


@needs_mlir_opt
def test_the_generic_form_mlir_prints_enters_as_the_custom_one_does():
    for text in NAMED_OPS[:4]:
        generic = mlir_opt(text, "--mlir-print-op-generic")
        assert '"linalg.' in generic and "linalg.yield" in generic
        from_custom, from_generic = lowered(text), lowered(generic)
        assert read_spec(from_generic) == read_spec(from_custom)
        assert same_ir(str(from_generic), str(from_custom))


GENERIC_MATMUL = """"func.func"() <{function_type = (memref<8x16xf32>, memref<16x4xf32>, memref<8x4xf32>) -> (), sym_name = "f"}> ({
^bb0(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>):
  "linalg.matmul"(%a, %b, %c) <{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], operandSegmentSizes = array<i32: 2, 1>}> ({
  ^bb0(%x: f32, %y: f32, %z: f32):
    %p = "arith.mulf"(%x, %y) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %s = "arith.addf"(%z, %p) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    "linalg.yield"(%s) : (f32) -> ()
  }) : (memref<8x16xf32>, memref<16x4xf32>, memref<8x4xf32>) -> ()
  "func.return"() : () -> ()
}) : () -> ()
"""


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("arith.addf", "arith.subf", "the body must be the one MLIR builds"),
        ("(%x, %y) <{", "(%y, %x) <{", "the body must be the one MLIR builds"),
        (
            "(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)",
            "(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)",
            "the product's default indexing maps only",
        ),
    ],
)
def test_a_named_op_that_is_not_what_its_name_says_is_refused(old, new, message):
    assert parse_module(make_context(), GENERIC_MATMUL, "m.mlir")  # as it is: read
    wrong = GENERIC_MATMUL.replace(old, new, 1)
    with pytest.raises(DiagnosticException) as info:
        parse_module(make_context(), wrong, "m.mlir").verify()
    assert message in str(info.value)


def test_a_products_maps_in_mlirs_custom_form_are_read_and_checked():
    maps = (
        "indexing_maps = [affine_map<(d0, d1, d2) -> ({})>, "
        "affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]"
    )
    text = (
        "func.func @f(%a: memref<{a}xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>)"
        " {{\n  linalg.matmul {maps} ins(%a, %b : memref<{a}xf32>, memref<16x4xf32>) "
        "outs(%c : memref<8x4xf32>)\n  func.return\n}}\n"
    )
    default = text.format(a="8x16", maps=maps.format("d0, d2"))
    assert "indexing_maps" not in str(parse_module(make_context(), default, "m.mlir"))
    transposed = text.format(a="16x8", maps=maps.format("d2, d0"))
    with pytest.raises(DiagnosticException) as info:
        parse_module(make_context(), transposed, "m.mlir").verify()
    assert "the product's default indexing maps only" in str(info.value)


def test_a_convolutions_memoized_maps_must_be_its_own():
    module = parse_module(make_context(), linalg_text(SMALL), "m.mlir")
    generic = io.StringIO()
    Printer(generic, print_generic_format=True).print_op(module)
    memo = "linalg.memoized_indexing_maps = ["
    assert memo in generic.getvalue()
    wrong = generic.getvalue().replace(memo, memo + "affine_map<(d0) -> (d0)>, ")
    with pytest.raises(DiagnosticException) as info:
        parse_module(make_context(), wrong, "m.mlir").verify()
    assert "'linalg.memoized_indexing_maps' are not the op's indexing maps" in str(
        info.value
    )


def test_the_default_pipeline_starts_from_linalg():
    spec = ConvSpec(
        1, 16, 6, 6, 16, 3, 3, layout="nhwc", filter_layout="rsck", dtype="f16"
    )
    module = parse_module(make_context(), linalg_text(spec), "model.mlir")
    pipeline = Pipeline.for_module("affinec-lower-linalg,affinec-default", module)
    assert any(p.name == "affinec-mma-sync" for p in pipeline.passes)  # config_for's
    pipeline.run(module)
    assert read_spec(module) == spec


@pytest.mark.parametrize(
    "text, line, message",
    [
        (linalg_text(SMALL, fill=False), 2, "adds to what %y holds"),
        (
            linalg_text(SMALL)
            .replace("xf32>) outs(%y", "xf32>) outs(%y")
            .replace("func.return", "%one = arith.constant 1.0 : f32\n  func.return"),
            4,
            "whose body is a zero fill of the output, one named linalg op",
        ),
        (
            linalg_text(MatmulSpec(8, 4, 16, "f16"))
            .replace("%y: memref<8x4xf16>", "%y: memref<8x4xf32>")
            .replace("outs(%y : memref<8x4xf16>)", "outs(%y : memref<8x4xf32>)")
            .replace("arith.constant 0.0 : f16", "arith.constant 0.0 : f32")
            .replace("ins(%zero : f16)", "ins(%zero : f32)"),
            4,
            "inputs and output of one element type",
        ),
        (
            linalg_text(SMALL) + linalg_text(SMALL).replace("@f", "@g"),
            10,
            "a second named linalg op in the module",
        ),
    ],
)
def test_what_it_cannot_take_is_refused_at_the_op(text, line, message):
    module = parse_module(make_context(), text, "model.mlir")
    with pytest.raises(PassError) as info:
        Pipeline.parse("affinec-lower-linalg").run(module)
    text_of_error = format_exception(info.value)
    assert text_of_error.startswith(f"model.mlir:{line}:3: error: 'linalg."), (
        text_of_error
    )
    assert message in text_of_error


def test_the_tensor_form_is_refused_where_it_is_read():
    text = (
        "func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>, %c: tensor<8x4xf32>)"
        " -> tensor<8x4xf32> {\n"
        "  %r = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x4xf32>) "
        "outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>\n"
        "  func.return %r : tensor<8x4xf32>\n}\n"
    )
    with pytest.raises(Exception) as info:
        parse_module(make_context(), text, "model.mlir")
    message = format_exception(info.value)
    assert "model.mlir:2:" in message and "bufferize to memrefs first" in message


# -- linalg.generic ---------------------------------------------------------------------


@needs_mlir_opt
@settings(max_examples=max(5, settings().max_examples // 2))
@given(f32_cases())
def test_a_generalized_named_op_is_the_same_spec_and_the_same_naive_ir(spec):
    # what MLIR's own generalization makes of the named op (the fill too) is read
    # as the same spec, and becomes the same naive IR, bit for bit
    text = linalg_text(spec)
    generic = mlir_opt(text, "--linalg-generalize-named-ops")
    assert "linalg.generic" in generic and "linalg.conv" not in generic
    from_generic = lowered(generic)
    assert read_spec(from_generic) == spec
    np.testing.assert_array_equal(run(from_generic, spec), run(lowered(text), spec))


GENERIC_TN = """#a = affine_map<(d0, d1, d2) -> (d2, d0)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d1, d0)>
func.func @f(%x: memref<16x8xf32>, %w: memref<16x4xf32>, %y: memref<4x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<4x8xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %w : memref<16x8xf32>, memref<16x4xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %q, %p : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  }
  func.return
}
"""


def test_a_contraction_that_is_no_spec_still_becomes_its_naive_ir():
    # y[j, i] = sum_p x[p, i] * w[p, j]: a product of transposes, no spec of affinec's
    with collecting_remarks() as remarks:
        module = lowered(GENERIC_TN)
    assert read_spec(module, required=False) is None
    assert any("is no spec affinec knows" in m for _, m in remarks)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    y = np.full((4, 8), np.nan, np.float32)
    Interpreter(module).run("f", x, w, y)
    expected = (w.astype(np.float64).T @ x.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(y, expected, rtol=1e-5)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("%s = arith.addf %m, %acc", "%s = arith.subf %m, %acc", r"out \+ in0 \* in1"),
        ("(d1, d0)>\nfunc", "(d1, d1)>\nfunc", "name each parallel dimension once"),
        (
            '"parallel", "parallel", "reduction"',
            '"parallel", "reduction", "reduction"',
            "name each parallel dimension once",
        ),
    ],
)
def test_a_generic_affinec_cannot_take_is_refused_at_it(old, new, message):
    text = GENERIC_TN.replace(old, new, 1)
    assert text != GENERIC_TN
    with pytest.raises(DiagnosticException, match=message):
        lowered(text)
