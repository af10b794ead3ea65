"""MLIR's affine syntax: expressions print stably, every op we define or re-syntax
round-trips in custom and generic form, and malformed ops get verifier errors."""

import io
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.ir.affine import AffineBinaryOpKind, AffineExpr, AffineMap
from xdsl.printer import Printer

from affinec.base.diagnostics import VerificationError, verify
from affinec.base.locating_parser import parse_module
from affinec.base.semi_affine import add, divide, multiply
from affinec.dialects.affine_syntax import format_expr, format_map
from affinec.frontend.naive import build
from affinec.interpreter import interpret
from affinec.ir.context import make_context
from strategies import specs

FLOORDIV, CEILDIV, MOD = (
    AffineBinaryOpKind.FloorDiv,
    AffineBinaryOpKind.CeilDiv,
    AffineBinaryOpKind.Mod,
)


def affine_exprs(num_dims: int = 3, num_syms: int = 2):
    """Expressions built as the parser builds them (`affinec.base.semi_affine`: MLIR's
    rules, which simplify as they go)."""
    leaves = st.one_of(
        st.integers(-9, 9).map(AffineExpr.constant),
        st.integers(0, num_dims - 1).map(AffineExpr.dimension),
        st.integers(0, num_syms - 1).map(AffineExpr.symbol),
    )

    def extend(children):
        constants = st.integers(-5, 5)
        positive = st.integers(1, 7)
        return st.one_of(
            st.tuples(children, children).map(lambda t: add(t[0], t[1])),
            st.tuples(children, children).map(
                lambda t: add(t[0], multiply(t[1], AffineExpr.constant(-1)))
            ),
            st.tuples(children, constants).map(
                lambda t: multiply(t[0], AffineExpr.constant(t[1]))
            ),
            st.tuples(children, positive).map(
                lambda t: divide(FLOORDIV, t[0], AffineExpr.constant(t[1]))
            ),
            st.tuples(children, positive).map(
                lambda t: divide(MOD, t[0], AffineExpr.constant(t[1]))
            ),
            st.tuples(children, positive).map(
                lambda t: divide(CEILDIV, t[0], AffineExpr.constant(t[1]))
            ),
            children.map(lambda e: multiply(e, AffineExpr.constant(-1))),
        )

    return st.recursive(leaves, extend, max_leaves=8)


def _parse_map(text: str) -> AffineMap:
    module = parse_module(
        make_context(),
        f"func.func @f(%a: index, %b: index, %c: index, %s: index, %t: index) {{\n"
        f"  %r = affine.apply affine_map<{text}>(%a, %b, %c)[%s, %t]\n"
        "  func.return\n}",
    )
    apply = next(op for op in module.walk() if op.name == "affine.apply")
    return apply.map.data  # pyright: ignore[reportAttributeAccessIssue]


@given(affine_exprs(), st.lists(st.integers(-20, 20), min_size=5, max_size=5))
def test_expression_printing_is_stable_and_faithful(expr, point):
    m = AffineMap(3, 2, (expr,))
    text = format_map(m)
    reparsed = _parse_map(text)
    assert format_map(reparsed) == text
    dims, syms = point[:3], point[3:]
    assert reparsed.eval(dims, syms) == m.eval(dims, syms)


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (AffineExpr.dimension(0) * 2 + AffineExpr.dimension(1) - 3, "d0 * 2 + d1 - 3"),
        (AffineExpr.symbol(0) - AffineExpr.dimension(1), "-d1 + s0"),
        (-AffineExpr.dimension(0), "-d0"),
        ((AffineExpr.dimension(0) + 1) // 4, "(d0 + 1) floordiv 4"),
        (AffineExpr.dimension(0) - AffineExpr.dimension(1) * 2, "d0 - d1 * 2"),
        (-(AffineExpr.dimension(0) // 2), "-(d0 floordiv 2)"),
    ],
)
def test_expressions_print_like_mlir(expr, text):
    assert format_expr(expr) == text


ALL_OPS = """
func.func @syntax(%A: memref<8x8xf32>, %n: index) {
  affine.for %i = 0 to 8 {
    affine.for %j = max affine_map<(d0) -> (0, d0 - 2)>(%i) to min affine_map<(d0)[s0] -> (8, d0 + 3, s0)>(%i)[%n] step 2 {
      %v = affine.load %A[%i, %j + symbol(%n) - 3] : memref<8x8xf32>
      affine.store %v, %A[%j, %i] : memref<8x8xf32>
      %x = affine.apply affine_map<(d0, d1)[s0] -> (d0 * 2 + d1 - 3)>(%i, %j)[%n]
      %y = affine.max affine_map<(d0, d1)[s0] -> (d0 floordiv 4, s0 - d1)>(%i, %j)[%n]
      %z = affine.min affine_map<(d0) -> (d0 mod 3, d0 ceildiv 2)>(%i)
      %p = affinec.padded_load %A[%i * 2 - 1, %j] : memref<8x8xf32>
    }
  }
  %r = affine.parallel (%a, %b) = (0, max(%n, 2)) to (8, min(%n + 4, 16)) step (1, 2) reduce ("addf") -> (f32) {
    %v = affine.load %A[%a, %b] : memref<8x8xf32>
    affine.yield %v : f32
  } {affinec.mapping = "grid"}
  affine.parallel (%a, %b) = (0, 0) to (8, 8) {
    affine.if affine_set<(d0, d1)[s0] : (d0 - d1 >= 0, s0 - 3 == 0)>(%a, %b)[%n] {
      %v = affine.load %A[%a, %b] : memref<8x8xf32>
    } else {
      %v = affine.load %A[%b, %a] : memref<8x8xf32>
    }
  }
  %s = affine.for %i = 0 to %n iter_args(%acc = %r) -> (f32) {
    %w = affine.if affine_set<(d0) : (d0 - 4 >= 0)>(%i) -> (f32) {
      affine.yield %acc : f32
    } else {
      %u = arith.addf %acc, %acc : f32
      affine.yield %u : f32
    }
    affine.yield %w : f32
  }
  func.return
}
"""


def _generic(module) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def _assert_round_trips(text: str) -> None:
    ctx = make_context()
    module = parse_module(ctx, text)
    verify(module)
    custom = str(module)
    assert str(parse_module(ctx, custom)) == custom
    generic = _generic(module)
    from_generic = parse_module(ctx, generic)
    assert str(from_generic) == custom
    assert _generic(from_generic) == generic


def test_every_op_round_trips_in_custom_and_generic_form():
    _assert_round_trips(ALL_OPS)


@given(specs())
def test_naive_ir_round_trips(spec):
    _assert_round_trips(str(build(spec)))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "%v = affine.load %A[%i] : memref<8x8xf32>",
            "affine map num results must equal memref rank (the map has 1",
        ),
        (
            "%v = affinec.padded_load %A[%i, %i, %i] : memref<8x8xf32>",
            "affine map num results must equal memref rank (the map has 3",
        ),
        (
            '"affine.for"() <{lowerBoundMap = affine_map<() -> (0)>, upperBoundMap = '
            "affine_map<() -> (8)>, step = 0 : index, operandSegmentSizes = "
            'array<i32: 0, 0, 0>}> ({\n^bb0(%k: index):\n"affine.yield"() : () -> ()'
            "\n}) : () -> ()",
            "step must be positive",
        ),
        (
            '"affine.apply"(%i) <{map = affine_map<(d0, d1) -> (d0)>}> : '
            "(index) -> index",
            "operand count and affine map dimension and symbol count must match "
            "(the map takes 2 dims and 0 symbols, 1 operands were given)",
        ),
        (
            '"affine.parallel"() <{reductions = [16 : i64], lowerBoundsMap = '
            "affine_map<() -> (0)>, lowerBoundsGroups = dense<1> : tensor<1xi32>, "
            "upperBoundsMap = affine_map<() -> (4)>, upperBoundsGroups = dense<1> : "
            "tensor<1xi32>, steps = [1 : i64]}> ({\n^bb0(%k: index):\n"
            '%c = arith.constant 0.0 : f32\n"affine.yield"(%c) : (f32) -> ()\n}) : '
            "() -> f32",
            "reduction 16 is not one of MLIR's",
        ),
    ],
)
def test_malformed_ops_fail_verification_with_a_reason(text, message):
    module = parse_module(
        make_context(),
        "func.func @f(%A: memref<8x8xf32>, %i: index) {\n" + text + "\nfunc.return\n}",
    )
    with pytest.raises(VerificationError, match=re.escape(message)) as info:
        verify(module)
    assert info.value.op is not None


def test_mlir_syntax_inputs_interpret_correctly():
    """affine.parallel with max/min bounds and steps, affine.if, affine.min/max and
    symbol operands, checked against numpy."""
    text = """
    func.func @f(%A: memref<10x10xf32>, %B: memref<10x10xf32>, %n: index) {
      affine.parallel (%i, %j) = (0, max(%n - 8, 1)) to (10, min(%n, 9)) step (1, 2) {
        %m = affine.min affine_map<(d0)[s0] -> (d0, s0 - 1)>(%i)[%n]
        %x = affine.max affine_map<(d0) -> (d0 - 1, 0)>(%j)
        affine.if affine_set<(d0)[s0] : (d0 - s0 floordiv 2 >= 0)>(%i)[%n] {
          // %m and %x are neither dims nor symbols (MLIR's rule): not affine indices
          %k = affine.apply affine_map<(d0)[s0] -> (d0 + s0 - 7)>(%x)[%n]
          %v = memref.load %A[%m, %k] : memref<10x10xf32>
          affine.store %v, %B[%i, %j] : memref<10x10xf32>
        } else {
          %c = arith.constant -1.0 : f32
          affine.store %c, %B[%i, %j] : memref<10x10xf32>
        }
      }
      func.return
    }
    """
    module = parse_module(make_context(), text)
    verify(module)
    A = np.arange(100, dtype=np.float32).reshape(10, 10)
    B = np.zeros((10, 10), np.float32)
    n = 8
    interpret(module, "f", A, B, n)
    expected = np.zeros((10, 10), np.float32)
    for i in range(10):
        for j in range(max(n - 8, 1), min(n, 9), 2):
            if i - n // 2 >= 0:
                expected[i, j] = A[min(i, n - 1), max(j - 1, 0) + n - 7]
            else:
                expected[i, j] = -1.0
    np.testing.assert_array_equal(B, expected)
