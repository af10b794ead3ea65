"""Specs, the naive IR the frontend builds, and the float64 reference."""

import numpy as np
import pytest
from hypothesis import given
from xdsl.ir.affine import AffineExpr

from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec, parse_spec
from affinec.dialects.affinec import SPEC
from affinec.frontend.contraction import Access, Contraction, contraction_of
from affinec.frontend.naive import build, build_naive
from affinec.frontend.reference import (
    TOLERANCE,
    contraction_reference,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import interpret
from strategies import conv_specs, matmul_specs, outer_specs, specs

CONV = {"n": 1, "c": 2, "h": 5, "w": 5, "k": 3, "r": 3, "s": 3}


def _interpret(spec, rng):
    inputs = random_inputs(spec, rng)
    out = poisoned_output(spec)
    interpret(build(spec), contraction_of(spec).name, *inputs, out)
    return inputs, out


@given(conv_specs())
def test_naive_convolution_matches_float64(spec):
    inputs, out = _interpret(spec, np.random.default_rng(0))
    error = relative_error(out, reference(spec, *inputs))
    assert error <= TOLERANCE[spec.dtype], spec.to_text()


@given(matmul_specs())
def test_naive_matmul_matches_float64(spec):
    inputs, out = _interpret(spec, np.random.default_rng(1))
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE[spec.dtype]


@given(outer_specs())
def test_naive_outer_product_matches_float64(spec):
    inputs, out = _interpret(spec, np.random.default_rng(2))
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE[spec.dtype]


@given(specs())
def test_fast_references_agree_with_the_definition(spec):
    """The conv/matmul fast paths against the contraction evaluated point by point."""
    inputs = random_inputs(spec, np.random.default_rng(3))
    fast = reference(spec, *inputs)
    slow = contraction_reference(contraction_of(spec), *inputs)
    np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-12)


@given(specs())
def test_spec_text_round_trips_and_is_recorded(spec):
    assert parse_spec(spec.to_text()) == spec
    module = build(spec)
    assert module.attributes[SPEC].data == spec.to_text()  # pyright: ignore


def test_naive_ir_has_the_reference_designs_shape():
    text = str(build(ConvSpec(**CONV, padding=1)))
    assert "affine.parallel (%n, %k, %oh, %ow) = (0, 0, 0, 0) to (1, 3, 5, 5)" in text
    assert "memref.alloca() : memref<f32>" in text
    assert "affinec.padded_load %input[%n, %c, %oh + %r - 1, %ow + %s - 1]" in text
    assert "affine.load %filter[%k, %c, %r, %s]" in text


def test_padded_load_only_where_an_access_can_leave_its_operand():
    unpadded = str(build(ConvSpec(**CONV)))
    assert "padded_load" not in unpadded
    assert "affine.load %input[%n, %c, %oh + %r, %ow + %s]" in unpadded


def test_f16_extends_to_f32_and_truncates_the_result():
    text = str(build(ConvSpec(**CONV, dtype="f16", epilogue="bias-relu")))
    assert "arith.extf %a : f16 to f32" in text
    assert "arith.maximumf" in text
    assert "arith.truncf %relu : f32 to f16" in text
    assert "%bias: memref<3xf16>" in text


def test_contraction_prints_in_tile_syntax():
    c = contraction_of(ConvSpec(**CONV, stride=2, padding=1, dilation=(1, 2)))
    assert str(c) == (
        "output[n, k, oh, ow] = "
        "+(input[n, c, oh * 2 + r - 1, ow * 2 + s * 2 - 1] * filter[k, c, r, s])"
    )
    assert str(contraction_of(OuterSpec(3, 4))) == "c[i, j] = a[i] * b[j]"


def test_a_specs_contraction_is_built_once_and_shared():
    first = contraction_of(ConvSpec(**CONV, padding=1))
    assert contraction_of(ConvSpec(**CONV, padding=1)) is first  # an equal spec
    assert contraction_of(ConvSpec(**CONV, padding=2)) is not first
    assert contraction_of(MatmulSpec(4, 5, 6)) == contraction_of(MatmulSpec(4, 5, 6))
    with pytest.raises(
        TypeError, match=r"a spec \(ConvSpec, MatmulSpec or OuterSpec\)"
    ):
        contraction_of([1, 2])  # pyright: ignore[reportArgumentType]


def test_a_custom_contraction_builds_and_interprets():
    """Anything in the Tile style works, not just the three named kinds: here a 1-D
    correlation with a stride, `O[i] = +(X[2 i + t - 1] * K[t])`, zero padded."""
    i, t = AffineExpr.dimension(0), AffineExpr.dimension(1)
    c = Contraction(
        name="corr",
        output_index=(("i", 6),),
        reduction_index=(("t", 3),),
        factors=(Access("X", (11,), (i * 2 + t - 1,)), Access("K", (3,), (t,))),
        output=Access("O", (6,), (i,)),
    )
    rng = np.random.default_rng(4)
    x = rng.standard_normal(11).astype(np.float32)
    k = rng.standard_normal(3).astype(np.float32)
    out = np.full(6, np.nan, np.float32)
    interpret(build_naive(c), "corr", x, k, out)
    expected = [
        sum(x[2 * j + u - 1] * k[u] for u in range(3) if 0 <= 2 * j + u - 1 < 11)
        for j in range(6)
    ]
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(contraction_reference(c, x, k), expected, rtol=1e-6)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n": 0}, r"ConvSpec\.n must be a positive integer, got 0"),
        ({"c": -1}, r"ConvSpec\.c must be a positive integer"),
        ({"h": 2.5}, r"ConvSpec\.h must be a positive integer"),
        ({"k": True}, r"ConvSpec\.k must be a positive integer"),
        ({"stride": (0, 1)}, r"ConvSpec\.stride must be at least 1"),
        ({"padding": -1}, r"ConvSpec\.padding must be at least 0"),
        ({"dilation": (1, 2, 3)}, r"ConvSpec\.dilation must be an integer or a pair"),
        ({"layout": "chwn"}, r"ConvSpec\.layout must be one of nchw, nhwc"),
        ({"filter_layout": "ckrs"}, r"ConvSpec\.filter_layout must be one of"),
        ({"dtype": "f8"}, r"ConvSpec\.dtype must be one of f32, f16, bf16, got .f8."),
        ({"epilogue": "gelu"}, r"ConvSpec\.epilogue: unknown epilogue step .gelu."),
        ({"groups": 3}, r"ConvSpec\.groups: 3 groups do not divide"),
        ({"r": 7}, r"ConvSpec\.r: the dilated filter extent 7 is larger than"),
        ({"s": 3, "dilation": 3}, r"ConvSpec\.r: the dilated filter extent 7"),
    ],
)
def test_invalid_conv_specs_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        ConvSpec(**(CONV | changes))


@pytest.mark.parametrize(("dtype", "size"), [("f32", 4), ("f16", 2), ("bf16", 2)])
def test_operands_past_64_bit_offsets_are_counted_in_their_own_bytes(dtype, size):
    elements = 2**62 // size  # the largest operand that fits, in elements
    ConvSpec(elements // 2**30, 2**30, 1, 1, 1, 1, 1, dtype=dtype)
    too_many = 2 * elements
    with pytest.raises(ValueError, match=f"takes {too_many * size:,} bytes, more"):
        ConvSpec(too_many // 2**30, 2**30, 1, 1, 1, 1, 1, dtype=dtype)


def test_invalid_matmul_and_outer_specs_name_the_field():
    with pytest.raises(ValueError, match=r"MatmulSpec\.k must be a positive"):
        MatmulSpec(2, 2, 0)
    with pytest.raises(ValueError, match=r"OuterSpec\.dtype must be one of"):
        OuterSpec(2, 2, "f64")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "a spec starts with one of conv, matmul, outer"),
        ("conv n=1", "incomplete conv spec"),
        ("matmul m=1 n=2 k=x", r"MatmulSpec\.k: not an integer"),
        ("outer m=1 n=2 color=red", "unknown outer spec field 'color'"),
        (
            "conv n=1 c=1 h=4 w=4 k=1 r=1 s=1 stride=a",
            r"ConvSpec\.stride: not integers",
        ),
    ],
)
def test_malformed_spec_text_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


def test_relative_error_never_passes_nan():
    ref = np.ones(4)
    assert relative_error(np.array([1, 1, np.nan, 1], np.float32), ref) == np.inf
    assert relative_error(np.array([1, 1, np.inf, 1], np.float32), ref) == np.inf
    assert relative_error(np.ones(4, np.float32), ref) == 0.0
