"""The interpreter: every op any pipeline emits, rounding like the IR's types, and
loud errors for out-of-bounds accesses and bad arguments."""

import numpy as np
import pytest

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter, InterpreterError, interpret
from affinec.ir.context import make_context


def run(body: str, *args, signature: str = "", results: str = ""):
    """Interpret `body` as the function `@f(signature) -> results`; return results."""
    text = f"func.func @f({signature}) {results} {{\n{body}\n}}"
    module = parse_module(make_context(), text)
    verify(module)
    it = Interpreter(module)
    it.run("f", *args)
    return it.call("f", *args)


def test_interpreting_twice_is_bit_identical():
    spec = ConvSpec(1, 3, 6, 6, 4, 3, 3, padding=1, dtype="f16", epilogue="relu")
    inputs = random_inputs(spec, np.random.default_rng(0))
    it = Interpreter(build(spec))
    a, b = poisoned_output(spec), poisoned_output(spec)
    it.run("conv", *inputs, a)
    it.run("conv", *inputs, b)
    assert a.dtype == np.float16
    np.testing.assert_array_equal(a, b)


def test_float32_arithmetic_rounds_like_float32():
    x = np.float32(16777216.0)  # 2**24: adding 1 is lost in float32, not in float64
    (r,) = run(
        "%one = arith.constant 1.0 : f32\n"
        "%s = arith.addf %x, %one : f32\n"
        "func.return %s : f32",
        x,
        signature="%x: f32",
        results="-> f32",
    )
    assert isinstance(r, np.float32) and r == x


def test_float16_arithmetic_rounds_like_float16():
    (r,) = run(
        "%a = arith.truncf %x : f32 to f16\n"
        "%b = arith.mulf %a, %a : f16\n"
        "func.return %b : f16",
        np.float32(1.1),
        signature="%x: f32",
        results="-> f16",
    )
    assert isinstance(r, np.float16)
    assert r == np.float16(1.1) * np.float16(1.1)


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        ("maximumf", np.nan, 1.0, np.nan),
        ("maximumf", -0.0, 0.0, 0.0),
        ("minimumf", -0.0, 0.0, -0.0),
        ("maxnumf", np.nan, 1.0, 1.0),
        ("minnumf", 2.0, np.nan, 2.0),
        ("divf", 1.0, 0.0, np.inf),
        ("subf", 1.0, 3.0, -2.0),
    ],
)
def test_float_ops_follow_ieee_semantics(op, a, b, expected):
    (r,) = run(
        f"%r = arith.{op} %a, %b : f32\nfunc.return %r : f32",
        np.float32(a),
        np.float32(b),
        signature="%a: f32, %b: f32",
        results="-> f32",
    )
    if np.isnan(expected):
        assert np.isnan(r)
    else:
        assert r == expected and np.signbit(r) == np.signbit(expected)


@pytest.mark.parametrize(
    ("predicate", "a", "b", "expected"),
    [
        ("olt", 1.0, 2.0, True),
        ("olt", np.nan, 2.0, False),
        ("ult", np.nan, 2.0, True),
        ("oeq", 2.0, 2.0, True),
        ("une", np.nan, np.nan, True),
        ("ord", 1.0, np.nan, False),
    ],
)
def test_cmpf_predicates(predicate, a, b, expected):
    (r,) = run(
        f"%r = arith.cmpf {predicate}, %a, %b : f32\nfunc.return %r : i1",
        np.float32(a),
        np.float32(b),
        signature="%a: f32, %b: f32",
        results="-> i1",
    )
    assert r is expected


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        ("addi", 2**31 - 1, 1, -(2**31)),
        ("muli", 2**30, 4, 0),
        ("divsi", -7, 2, -3),
        ("remsi", -7, 2, -1),
        ("floordivsi", -7, 2, -4),
        ("ceildivsi", -7, 2, -3),
        ("divui", -2, 2, 2**31 - 1),
        ("shrui", -1, 28, 15),
        ("maxsi", -3, 2, 2),
    ],
)
def test_i32_arithmetic_wraps_and_divides_like_c(op, a, b, expected):
    (r,) = run(
        f"%r = arith.{op} %a, %b : i32\nfunc.return %r : i32",
        a,
        b,
        signature="%a: i32, %b: i32",
        results="-> i32",
    )
    assert r == expected


def test_affine_floordiv_and_mod_floor_negative_values():
    (q, m, c) = run(
        "%q = affine.apply affine_map<(d0) -> (d0 floordiv 4)>(%i)\n"
        "%m = affine.apply affine_map<(d0) -> (d0 mod 4)>(%i)\n"
        "%c = affine.apply affine_map<(d0) -> (d0 ceildiv 4)>(%i)\n"
        "func.return %q, %m, %c : index, index, index",
        -7,
        signature="%i: index",
        results="-> (index, index, index)",
    )
    assert (q, m, c) == (-2, 1, -1)


def test_loops_with_min_max_bounds_steps_and_iter_args():
    (total,) = run(
        "%zero = arith.constant 0 : index\n"
        "%r = affine.for %i = max affine_map<()[s0] -> (1, s0 - 10)>()[%n] "
        "to min affine_map<()[s0] -> (20, s0)>()[%n] step 3 "
        "iter_args(%acc = %zero) -> (index) {\n"
        "  %next = arith.addi %acc, %i : index\n"
        "  affine.yield %next : index\n"
        "}\n"
        "func.return %r : index",
        14,
        signature="%n: index",
        results="-> index",
    )
    assert total == sum(range(max(1, 14 - 10), min(20, 14), 3))


def test_parallel_reductions():
    (s, m) = run(
        "%s, %m = affine.parallel (%i, %j) = (0, 0) to (3, 4) "
        'reduce ("addf", "maximumf") -> (f32, f32) {\n'
        "  %v = affine.load %A[%i, %j] : memref<3x4xf32>\n"
        "  affine.yield %v, %v : f32, f32\n"
        "}\n"
        "func.return %s, %m : f32, f32",
        np.arange(12, dtype=np.float32).reshape(3, 4),
        signature="%A: memref<3x4xf32>",
        results="-> (f32, f32)",
    )
    assert (s, m) == (66.0, 11.0)


def test_scf_and_cf_control_flow():
    (r,) = run(
        "%c0 = arith.constant 0 : index\n"
        "%c1 = arith.constant 1 : index\n"
        "%c5 = arith.constant 5 : index\n"
        "%sum = scf.for %i = %c0 to %c5 step %c1 iter_args(%a = %c0) -> (index) {\n"
        "  %odd = arith.remsi %i, %c1 : index\n"
        "  %b = arith.addi %a, %i : index\n"
        "  scf.yield %b : index\n"
        "}\n"
        "%big = arith.cmpi sgt, %sum, %c5 : index\n"
        "cf.cond_br %big, ^yes(%sum : index), ^no\n"
        "^yes(%v: index):\n"
        "  %w = scf.if %big -> (index) {\n"
        "    scf.yield %v : index\n"
        "  } else {\n"
        "    scf.yield %c0 : index\n"
        "  }\n"
        "  func.return %w : index\n"
        "^no:\n"
        "  func.return %c0 : index",
        results="-> index",
    )
    assert r == 10


def test_function_calls():
    text = """
    func.func @twice(%x: f32) -> f32 {
      %y = arith.addf %x, %x : f32
      func.return %y : f32
    }
    func.func @f(%x: f32) -> f32 {
      %y = func.call @twice(%x) : (f32) -> f32
      %z = func.call @twice(%y) : (f32) -> f32
      func.return %z : f32
    }
    """
    it = Interpreter(parse_module(make_context(), text))
    assert it.call("f", np.float32(1.5)) == (np.float32(6.0),)


def test_fresh_buffers_are_poisoned():
    out = np.zeros(2, np.float32)
    run(
        "%t = memref.alloc() : memref<2xf32>\n"
        "%c0 = arith.constant 0 : index\n"
        "%v = memref.load %t[%c0] : memref<2xf32>\n"
        "memref.store %v, %out[%c0] : memref<2xf32>\n"
        "func.return",
        out,
        signature="%out: memref<2xf32>",
    )
    assert np.isnan(out[0])


@pytest.mark.parametrize(
    ("access", "index"),
    [
        ("affine.load %A[%i + 1] : memref<4xf32>", "[4]"),
        ("affine.load %A[%i - 1] : memref<4xf32>", "[-1]"),
        ("memref.load %A[%i] : memref<4xf32>", "[7]"),
    ],
)
def test_out_of_bounds_access_names_the_op_and_indices(access, index):
    i = 7 if access.startswith("memref") else (3 if "+" in access else 0)
    with pytest.raises(InterpreterError) as info:
        run(
            f"%v = {access}\nfunc.return",
            np.zeros(4, np.float32),
            i,
            signature="%A: memref<4xf32>, %i: index",
        )
    message = str(info.value)
    assert access.split(" ")[0] in message
    assert f"index {index} is out of bounds for a memref of shape [4]" in message
    assert "in @f" in message


def test_padded_load_reads_zero_outside():
    (r,) = run(
        "%v = affinec.padded_load %A[%i - 5] : memref<4xf32>\nfunc.return %v : f32",
        np.ones(4, np.float32),
        2,
        signature="%A: memref<4xf32>, %i: index",
        results="-> f32",
    )
    assert r == 0.0 and isinstance(r, np.float32)


def test_subview_is_a_checked_view():
    A = np.arange(16, dtype=np.float32).reshape(4, 4)
    (r,) = run(
        "%s = memref.subview %A[1, 2] [2, 2] [1, 1] : memref<4x4xf32> to "
        "memref<2x2xf32, strided<[4, 1], offset: 6>>\n"
        "%c1 = arith.constant 1 : index\n"
        "%v = memref.load %s[%c1, %c1] : memref<2x2xf32, strided<[4, 1], offset: 6>>\n"
        "func.return %v : f32",
        A,
        signature="%A: memref<4x4xf32>",
        results="-> f32",
    )
    assert r == A[2, 3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros((3,), np.float32),), "takes 2 arguments, 1 were given"),
        (
            (np.zeros((3,), np.float64), 1),
            r"expected an array of shape \(4,\) and dtype float32",
        ),
        ((np.zeros((4, 1), np.float32), 1), r"got shape \(4, 1\)"),
        (([0.0] * 4, 1), "expected a numpy array"),
        ((np.zeros(4, np.float32), 1.5), "expected an integer for index"),
    ],
)
def test_bad_arguments_are_named(args, message):
    module = parse_module(
        make_context(),
        "func.func @f(%A: memref<4xf32>, %i: index) {\nfunc.return\n}",
    )
    with pytest.raises(InterpreterError, match=message):
        interpret(module, "f", *args)


def test_unknown_function_is_named():
    module = parse_module(make_context(), "func.func @g() {\nfunc.return\n}")
    with pytest.raises(InterpreterError, match="no function @f in the module"):
        interpret(module, "f")
