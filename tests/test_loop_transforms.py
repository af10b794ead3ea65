"""The loop utilities the affine passes are made of, one at a time: the summation-order
rule against brute force, default tile sizes, map composition, bound simplification,
normalization and canonicalization under the interpreter, and the pipeline checker
catching a pass that changes the result."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from affinec.base.locating_parser import parse_module
from affinec.base.spec import MatmulSpec
from affinec.dialects import affine
from affinec.dialects.affine_syntax import format_map
from affinec.driver.pipeline import CheckFailure, Pipeline
from affinec.frontend.naive import build
from affinec.interpreter import interpret
from affinec.ir.affine_exprs import drop_redundant_bounds
from affinec.ir.context import make_context
from affinec.passes.affine_loop_tile import (
    default_reduction_tile_sizes,
    default_tile_sizes,
)
from affinec.transforms.affine.analysis import compose_map, summation_order_kept
from affinec.transforms.affine.rewriting import set_map_slots


def tiled_order(extents: list[int], sizes: list[int]) -> list[tuple[int, ...]]:
    """The points of a band in the order its tiled loops (tile loops outside, point
    loops inside, partial tiles clipped) visit them."""
    tiles = [range(-(-e // t)) for e, t in zip(extents, sizes, strict=True)]
    order = []
    for outer in itertools.product(*tiles):
        points = [
            range(o * t, min(o * t + t, e))
            for o, t, e in zip(outer, sizes, extents, strict=True)
        ]
        order += list(itertools.product(*points))
    return order


@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=3).flatmap(
        lambda extents: st.tuples(
            st.just(extents),
            st.tuples(*(st.integers(1, e + 1) for e in extents)),
        )
    )
)
def test_summation_order_rule_matches_brute_force(case) -> None:
    extents, sizes = case
    natural = list(itertools.product(*(range(e) for e in extents)))
    kept = tiled_order(extents, list(sizes)) == natural
    assert summation_order_kept(extents, list(sizes)) == kept


@pytest.mark.parametrize(
    ("extents", "sizes"),
    [
        ((128, 64, 112, 112), (1, 1, 16, 16)),  # ResNet-50's first layer
        ((12, 12), (12, 12)),
        ((1024, 1024), (16, 16)),
        ((2, 5, 5, 8), (1, 5, 5, 8)),
        ((32, 224, 224, 64), (1, 1, 16, 16)),
        ((7,), (7,)),
        ((1000,), (16,)),
    ],
)
def test_default_tile_sizes(extents, sizes) -> None:
    assert default_tile_sizes(extents) == sizes
    volume = np.prod(sizes)
    assert volume <= 256


@pytest.mark.parametrize(
    ("extents", "sizes"),
    [
        ((4, 7, 7), (1, None, None)),  # ResNet-50: c in tiles of 1, as the reference
        ((1, 7, 7), (None, 7, None)),  # c = 1: r is the first with a choice
        ((64, 3, 3), (4, None, None)),
        ((12,), (12,)),
        ((1024,), (64,)),
        ((1, 1), (None, None)),
    ],
)
def test_default_reduction_tile_sizes_keep_the_order(extents, sizes) -> None:
    assert default_reduction_tile_sizes(extents) == sizes
    assert summation_order_kept(extents, list(sizes))


def test_compose_map_folds_substitutes_and_drops() -> None:
    module = parse_module(
        make_context(),
        """
func.func @f(%A: memref<64xf32>, %n: index) {
  %c3 = arith.constant 3 : index
  affine.parallel (%i, %j) = (0, 0) to (4, 4) {
    %x = affine.apply affine_map<(d0) -> (d0 * 2)>(%j)
    %v = affine.load %A[%i * 1 + %x + %i + symbol(%c3) + %j * 0] : memref<64xf32>
  }
  func.return
}
""",
    )
    load = next(op for op in module.walk() if isinstance(op, affine.LoadOp))
    parallel = next(op for op in module.walk() if isinstance(op, affine.ParallelOp))
    i, j = parallel.induction_variables
    m, operands = compose_map(load.map.data, list(load.indices))
    assert operands == [i, j]
    assert m == AffineMap(
        2, 0, (AffineExpr.dimension(0) * 2 + AffineExpr.dimension(1) * 2 + 3,)
    )
    # %i -> %i * 16 + %j, as tiling would with (%i, %j) as tile and point variables.
    tiled = (AffineExpr.dimension(0) * 16 + AffineExpr.dimension(1), [i, j])
    m, operands = compose_map(load.map.data, list(load.indices), {i: tiled})
    assert operands == [i, j]
    assert format_map(m) == "(d0, d1) -> (d0 * 32 + d1 * 4 + 3)"


def test_drop_redundant_bounds_prefers_constants() -> None:
    d0 = AffineExpr.dimension(0)
    sixteen = AffineExpr.constant(16)
    # A single tile: 16 and 16 - 16 * d0 are equal; the constant stays.
    assert drop_redundant_bounds([sixteen, d0 * -16 + 16], 1, 0, [(0, 0)]) == [sixteen]
    # A partial tile is possible: both stay.
    assert len(drop_redundant_bounds([sixteen, d0 * -16 + 100], 1, 0, [(0, 6)])) == 2
    # Unknown ranges decide nothing.
    assert len(drop_redundant_bounds([sixteen, d0 * -16 + 100], 1, 0, [None])) == 2


def run_f(module: ModuleOp, size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(size, dtype=np.float32)
    b = np.full(size, np.nan, np.float32)
    c = np.full(size, np.nan, np.float32)
    interpret(module, "f", a, b, c)
    return b, c


@given(
    st.integers(0, 20),
    st.integers(0, 30),
    st.integers(1, 4),
    st.integers(0, 20),
    st.integers(1, 3),
)
def test_normalize_keeps_every_loop(lo, extent, step, lo2, step2) -> None:
    """`affine-loop-normalize` on loops with any bounds and steps, a user without an
    affine map included: same stores, same values."""
    hi = lo + extent
    text = f"""
func.func @f(%A: memref<64xf32>, %B: memref<64xf32>, %C: memref<64xf32>) {{
  affine.parallel (%i) = ({lo}) to ({hi}) step ({step}) {{
    %v = affine.load %A[%i] : memref<64xf32>
    affine.store %v, %B[%i] : memref<64xf32>
  }}
  affine.for %j = {lo2} to 30 step {step2} {{
    %k = arith.index_cast %j : index to i64
    %w = arith.sitofp %k : i64 to f32
    affine.store %w, %C[%j] : memref<64xf32>
  }}
  func.return
}}
"""
    before = parse_module(make_context(), text)
    after = parse_module(make_context(), text)
    Pipeline.parse("affine-loop-normalize").run(after)
    for op in after.walk():
        if isinstance(op, affine.ForOp):
            assert op.step.value.data == 1
        if isinstance(op, affine.ParallelOp):
            assert op.step_values == [1]
    for x, y in zip(run_f(before), run_f(after), strict=True):
        assert np.array_equal(x, y, equal_nan=True)


@given(st.integers(0, 3), st.integers(1, 3), st.integers(0, 8))
def test_canonicalize_keeps_loops_and_conditions(lo, extent, threshold) -> None:
    """Single-iteration and empty loops, decided and undecided conditions."""
    text = f"""
func.func @f(%A: memref<64xf32>, %B: memref<64xf32>, %C: memref<64xf32>) {{
  affine.for %i = {lo} to {lo + extent} {{
    affine.for %j = 0 to 1 {{
      %x = affine.apply affine_map<(d0, d1) -> (d0 * 4 + d1)>(%i, %j)
      %v = affine.load %A[%x] : memref<64xf32>
      affine.if affine_set<(d0) : (d0 - {threshold} >= 0)>(%x) {{
        affine.store %v, %B[%x] : memref<64xf32>
      }} else {{
        affine.store %v, %C[%x] : memref<64xf32>
      }}
      affine.for %k = 3 to 3 {{
        affine.store %v, %C[%k] : memref<64xf32>
      }}
    }}
  }}
  func.return
}}
"""
    before = parse_module(make_context(), text)
    after = parse_module(make_context(), text)
    Pipeline.parse("affinec-canonicalize").run(after)
    assert not any(isinstance(op, affine.ApplyOp) for op in after.walk())
    loops = [op for op in after.walk() if isinstance(op, affine.ForOp)]
    assert len(loops) == (1 if extent > 1 else 0)
    for x, y in zip(run_f(before), run_f(after), strict=True):
        assert np.array_equal(x, y, equal_nan=True)


@dataclass(frozen=True)
class ShiftStores(ModulePass):
    """A broken pass: every affine.store writes one element further (out of bounds)."""

    name = "test-shift-stores"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for store in op.walk():
            if isinstance(store, affine.StoreOp) and store.indices:
                m = store.map.data
                shifted = (*m.results[:-1], m.results[-1] + 1)
                set_map_slots(
                    store,
                    [(AffineMap(m.num_dims, m.num_symbols, shifted), store.indices)],
                )


@dataclass(frozen=True)
class FirstColumn(ModulePass):
    """A broken pass: every load of %A reads its first column."""

    name = "test-first-column"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for load in op.walk():
            if isinstance(load, affine.LoadOp) and load.memref.name_hint == "A":
                m = load.map.data
                first = (m.results[0], AffineExpr.constant(0))
                set_map_slots(
                    load, [(AffineMap(m.num_dims, m.num_symbols, first), load.indices)]
                )


@pytest.mark.parametrize("broken", [ShiftStores(), FirstColumn()])
def test_the_checker_names_the_pass_that_changes_the_result(broken) -> None:
    module = build(MatmulSpec(m=3, n=4, k=5))
    pipeline = Pipeline([*Pipeline.parse("affine-loop-tile").passes, broken])
    with pytest.raises(CheckFailure) as info:
        pipeline.run(module, check=True)
    assert info.value.pass_ is broken
    assert f"pass '{broken.name}' changed the result" in str(info.value)
