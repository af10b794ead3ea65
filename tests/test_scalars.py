"""Integer and float semantics, once (`affinec.interpreter.scalars`): arith and llvm
agree with each other and with two's complement hardware, and what LLVM calls
undefined (division by zero, over-wide shifts, a NaN converted to an integer) is a
located error, never a Python traceback or a hang."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from affinec.base.diagnostics import format_exception, verify
from affinec.base.locating_parser import parse_module
from affinec.interpreter import Interpreter, InterpreterError
from affinec.ir.context import make_context

ARITH_TO_LLVM = {
    "arith.addi": "llvm.add",
    "arith.subi": "llvm.sub",
    "arith.muli": "llvm.mul",
    "arith.andi": "llvm.and",
    "arith.ori": "llvm.or",
    "arith.xori": "llvm.xor",
    "arith.shli": "llvm.shl",
    "arith.shrsi": "llvm.ashr",
    "arith.shrui": "llvm.lshr",
    "arith.divsi": "llvm.sdiv",
    "arith.remsi": "llvm.srem",
    "arith.divui": "llvm.udiv",
    "arith.remui": "llvm.urem",
}


def binary(op: str, a: int, b: int, t: str = "i32"):
    """`op` of `a` and `b`, interpreted; the text it was parsed from is `op`'s line."""
    text = (
        f"func.func @f(%a: {t}, %b: {t}) -> {t} {{\n"
        f"  %r = {op} %a, %b : {t}\n"
        f"  func.return %r : {t}\n}}\n"
    )
    module = parse_module(make_context(), text, "scalars.mlir")
    verify(module)
    return Interpreter(module).call("f", a, b)


def numpy_reference(op: str, a: int, b: int) -> int | None:
    """What 32-bit hardware gives, where LLVM defines it (None where it does not)."""
    x, y = np.int32(a), np.int32(b)
    ux, uy = np.uint32(a & 0xFFFFFFFF), np.uint32(b & 0xFFFFFFFF)
    with np.errstate(all="ignore"):
        match op:
            case "arith.addi":
                return int(x + y)
            case "arith.subi":
                return int(x - y)
            case "arith.muli":
                return int(x * y)
            case "arith.andi":
                return int(x & y)
            case "arith.ori":
                return int(x | y)
            case "arith.xori":
                return int(x ^ y)
            case "arith.shli" | "arith.shrsi" | "arith.shrui" if not 0 <= b < 32:
                return None
            case "arith.shli":
                return int(np.int32(ux << uy))
            case "arith.shrsi":
                return int(x >> y)
            case "arith.shrui":
                return int(np.int32(ux >> uy))
            case "arith.divsi" | "arith.remsi" | "arith.divui" | "arith.remui" if (
                b == 0
            ):
                return None
            case "arith.divsi":
                return int(np.int32(np.fix(a / b))) if a != -(2**31) else None
            case "arith.remsi":
                return int(np.fmod(x, y)) if a != -(2**31) else None
            case "arith.divui":
                return int(np.int32(ux // uy))
            case "arith.remui":
                return int(np.int32(ux % uy))
    raise AssertionError(op)


i32 = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([0, 1, -1, 2, 31, 32, -(2**31), 2**31 - 1]),
)


@given(st.sampled_from(sorted(ARITH_TO_LLVM)), i32, i32)
def test_arith_and_llvm_agree_with_32_bit_hardware(op, a, b):
    expected = numpy_reference(op, a, b)
    results = []
    for name in (op, ARITH_TO_LLVM[op]):
        try:
            (r,) = binary(name, a, b)
            results.append(r)
        except InterpreterError as e:
            assert expected is None, f"{name}({a}, {b}): {e}"
            results.append("error")
    assert results[0] == results[1]
    if expected is not None:
        assert results[0] == expected


@pytest.mark.parametrize(
    ("op", "a", "b", "message"),
    [
        ("arith.divsi", 7, 0, "integer division by zero"),
        ("arith.remsi", 7, 0, "integer division by zero"),
        ("arith.divui", 7, 0, "integer division by zero"),
        ("arith.remui", 7, 0, "integer division by zero"),
        ("arith.floordivsi", 7, 0, "integer division by zero"),
        ("arith.ceildivsi", 7, 0, "integer division by zero"),
        ("llvm.sdiv", 7, 0, "integer division by zero"),
        ("llvm.urem", 7, 0, "integer division by zero"),
        ("arith.shli", 1, 32, r"shift by 32 of an i32 value \(poison\)"),
        ("arith.shrsi", 1, -1, r"shift by 4294967295 of an i32 value"),
        ("llvm.lshr", 1, 99, "shift by 99 of an i32 value"),
    ],
)
def test_undefined_integer_operations_are_located_errors(op, a, b, message):
    with pytest.raises(InterpreterError, match=message) as info:
        binary(op, a, b)
    assert info.value.op is not None and info.value.op.name == op
    located = format_exception(info.value)
    assert located.startswith(f"scalars.mlir:2:8: error: '%r = {op} %a, %b : i32'")


def test_index_values_wrap_at_64_bits():
    """Squaring an index in a loop used to grow Python ints without bound (a hang)."""
    big = 2**62 + 12345
    (r,) = binary("arith.muli", big, big, "index")
    assert r == (big * big + 2**63) % 2**64 - 2**63
    (r,) = binary("arith.addi", 2**63 - 1, 1, "index")
    assert r == -(2**63)


def test_wide_integer_types_are_refused_not_hung():
    """An `i1000000000000` once made every wrap build a number of 10**12 bits."""
    with pytest.raises(InterpreterError, match="integers of 1 to 64 bits"):
        binary("arith.addi", 1, 2, "i1000000000000")


def test_sign_extension_of_i1_is_minus_one():
    text = (
        "func.func @f(%a: i1) -> (i32, i32) {\n"
        "  %s = arith.extsi %a : i1 to i32\n"
        "  %z = arith.extui %a : i1 to i32\n"
        "  func.return %s, %z : i32, i32\n}\n"
    )
    module = parse_module(make_context(), text)
    assert Interpreter(module).call("f", True) == (-1, 1)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 3e9])
def test_float_to_int_of_what_does_not_fit_is_an_error(value):
    text = (
        "func.func @f(%a: f32) -> i32 {\n"
        "  %i = arith.fptosi %a : f32 to i32\n"
        "  func.return %i : i32\n}\n"
    )
    module = parse_module(make_context(), text)
    with pytest.raises(InterpreterError, match="does not fit a signed i32"):
        Interpreter(module).run("f", np.float32(value))


def _convert(op: str, source: str, target: str, value):
    text = (
        f"func.func @f(%a: {source}) -> {target} {{\n"
        f"  %r = {op} %a : {source} to {target}\n"
        f"  func.return %r : {target}\n}}\n"
    )
    module = parse_module(make_context(), text)
    verify(module)
    (result,) = Interpreter(module).call("f", value)
    return result


@pytest.mark.parametrize(
    ("op", "source", "value", "target", "rounded_once"),
    [
        # Through float64 first, 2**60 + 2**52 + 1 becomes the tie 2**60 + 2**52
        # and then 2**60 in bf16; rounded once it is 2**60 + 2**53.
        ("arith.sitofp", "i64", 2**60 + 2**52 + 1, "bf16", 2**60 + 2**53),
        ("arith.sitofp", "i64", 2**62 + 2**38 + 1, "f32", 2**62 + 2**39),
        ("arith.uitofp", "i64", -1, "bf16", 2**64),  # all ones: 2**64 - 1
        ("arith.uitofp", "i64", -1, "f16", float("inf")),
        ("arith.sitofp", "i32", -(2**31), "f16", float("-inf")),
    ],
)
def test_integers_convert_to_floats_rounded_once(
    op, source, value, target, rounded_once
):
    assert float(_convert(op, source, target, value)) == rounded_once


def test_a_bf16_converts_to_a_64_bit_integer():
    from affinec.base.dtypes import BFLOAT16

    big = BFLOAT16.type(2.0**62)
    assert _convert("arith.fptosi", "bf16", "i64", big) == 2**62
    with pytest.raises(InterpreterError, match="does not fit an unsigned i64"):
        _convert("arith.fptoui", "bf16", "i64", BFLOAT16.type(2.0**65))


@pytest.mark.parametrize(
    ("a", "b", "c"),
    [
        (0.1, 0.1, -0.01),  # the product's rounding error is the whole result
        (1.0 + 2**-52, 1.0 - 2**-53, -1.0),
        (1e308, 10.0, -1e308),  # the product overflows, the sum does not fit either
        (-0.0, 1.0, -0.0),
        (3.0, -0.0, 0.0),
    ],
)
def test_an_f64_fma_rounds_once(a, b, c):
    from fractions import Fraction

    text = (
        "func.func @f(%a: f64, %b: f64, %c: f64) -> f64 {\n"
        "  %r = math.fma %a, %b, %c : f64\n"
        "  func.return %r : f64\n}\n"
    )
    module = parse_module(make_context(), text)
    (got,) = Interpreter(module).call("f", np.float64(a), np.float64(b), np.float64(c))
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        # -0 only for the sum of two -0s
        want = -0.0 if np.signbit(a * b) and np.signbit(c) else 0.0
        assert got == 0 and np.signbit(got) == np.signbit(want)
    elif abs(exact) > Fraction(np.finfo(np.float64).max):
        assert got == float("inf") * (1 if exact > 0 else -1)
    else:
        assert got == float(exact)


@pytest.mark.parametrize(
    ("source", "value", "target", "want"),
    [
        ("i32", 0x3F800000, "f32", 1.0),
        ("i16", -0x4000, "f16", -2.0),  # 0xC000
        ("i16", 0x3F80, "bf16", 1.0),
        ("f64", np.float64(-0.0), "i64", -(2**63)),
    ],
)
def test_arith_bitcast_reinterprets_the_bits(source, value, target, want):
    assert _convert("arith.bitcast", source, target, value) == want


def test_an_array_of_integers_converts_to_bf16_rounded_once():
    from affinec.base.dtypes import BFLOAT16
    from affinec.interpreter.scalars import int_to_float

    # ml_dtypes' cast rounds through float32: 2**30 + 2**22 + 1 becomes 2**30
    got = int_to_float(np.array([2**30 + 2**22 + 1, -3], np.int32), BFLOAT16.type)
    assert got.dtype == BFLOAT16 and [float(x) for x in got] == [2**30 + 2**23, -3.0]


def test_math_fma_on_a_vector_rounds_each_element_once():
    # it stopped with a TypeError (the scalar fma of an array)
    text = (
        "func.func @f(%a: vector<2xf32>) -> vector<2xf32> {\n"
        "  %r = math.fma %a, %a, %a : vector<2xf32>\n"
        "  func.return %r : vector<2xf32>\n}\n"
    )
    module = parse_module(make_context(), text)
    verify(module)
    a = np.array([1.0 + 2**-23, 3.0], np.float32)
    (got,) = Interpreter(module).call("f", a)
    want = [np.float32(float(x) * float(x) + float(x)) for x in a]  # exact in float64
    assert got.tolist() == want


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_ceildivui_rounds_the_unsigned_quotient_up(bits):
    """`arith.ceildivui` reads both operands as unsigned, on one thread and on a
    band's lanes alike (the lanes' 64-bit case must not overflow)."""
    from affinec.interpreter import lane_scalars, scalars

    top = 2**bits - 1
    pairs = [(7, 2), (6, 3), (0, 5), (top, 2), (top, top), (1, top), (top - 1, 3)]
    signed = [(scalars.wrap(a, bits), scalars.wrap(b, bits)) for a, b in pairs]
    want = [scalars.wrap(-(-a // b), bits) for a, b in pairs]
    assert [scalars.ceildivu(a, b, bits) for a, b in signed] == [
        w % 2**bits for w in want
    ]
    a, b = (np.array(column, np.int64) for column in zip(*signed, strict=True))
    assert lane_scalars.ceildivu(a, b, bits).tolist() == want
    text = (
        f"func.func @f(%a: i{bits}, %b: i{bits}) -> i{bits} {{\n"
        f"  %q = arith.ceildivui %a, %b : i{bits}\n"
        f"  func.return %q : i{bits}\n}}\n"
    )
    module = parse_module(make_context(), text)
    assert [Interpreter(module).call("f", a, b)[0] for a, b in signed] == want


@pytest.mark.parametrize(
    ("op", "a", "b", "want"),
    [
        ("maximum", 1.0, float("nan"), float("nan")),
        ("maximum", -0.0, 0.0, 0.0),
        ("minimum", -0.0, 0.0, -0.0),
        ("minimum", float("-inf"), 2.0, float("-inf")),
        ("maxnum", 1.0, float("nan"), 1.0),
        ("minnum", float("nan"), -3.0, -3.0),
    ],
)
def test_mlirs_intrinsic_ops_at_the_llvm_level_are_interpreted(op, a, b, want):
    """`llvm.intr.maximum` and the others, as MLIR's lowerings write them: NaN
    propagates through maximum and minimum, not through maxnum and minnum; -0 is
    below +0 for maximum and minimum."""
    text = (
        "func.func @f(%a: f32, %b: f32) -> f32 {\n"
        f"  %r = llvm.intr.{op}(%a, %b) : (f32, f32) -> f32\n"
        "  func.return %r : f32\n}\n"
    )
    module = parse_module(make_context(), text)
    verify(module)
    (got,) = Interpreter(module).call("f", np.float32(a), np.float32(b))
    assert np.array_equal(got, np.float32(want), equal_nan=True)
    assert np.signbit(got) == np.signbit(want)


def test_mlirs_fma_op_rounds_once():
    text = (
        "func.func @f(%a: f32, %b: f32, %c: f32) -> f32 {\n"
        "  %r = llvm.intr.fma(%a, %b, %c) : (f32, f32, f32) -> f32\n"
        "  func.return %r : f32\n}\n"
    )
    a = np.float32(1.0 + 2.0**-12)
    (got,) = Interpreter(parse_module(make_context(), text)).call(
        "f", a, a, np.float32(-1.0)
    )
    # a * a = 1 + 2**-11 + 2**-24: the last bit is lost if the product is rounded
    assert got == np.float32(2.0**-11 + 2.0**-24)


def test_an_aggregate_built_from_mlirs_poison_reads_back_its_members():
    """`llvm.mlir.poison`, as MLIR's lowerings start a struct they fill."""
    text = (
        "func.func @f(%a: f32, %b: i32) -> (f32, i32) {\n"
        "  %s = llvm.mlir.poison : !llvm.struct<(f32, i32)>\n"
        "  %t = llvm.insertvalue %a, %s[0] : !llvm.struct<(f32, i32)>\n"
        "  %u = llvm.insertvalue %b, %t[1] : !llvm.struct<(f32, i32)>\n"
        "  %x = llvm.extractvalue %u[0] : !llvm.struct<(f32, i32)>\n"
        "  %y = llvm.extractvalue %u[1] : !llvm.struct<(f32, i32)>\n"
        "  func.return %x, %y : f32, i32\n}\n"
    )
    module = parse_module(make_context(), text)
    verify(module)
    assert Interpreter(module).call("f", np.float32(2.5), -7) == (2.5, -7)
