"""The fragment layouts against the PTX ISA's formulas and figures, the ldmatrix
addresses that load MMA fragments, and the MMA's numerics (exact sums rounded once)."""

import itertools
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from affinec.dialects.nvgpu import MMA_KINDS, MmaKind
from affinec.interpreter.warps import exact_dot, ldmatrix, mma, tf32
from affinec.ir.mma_layouts import (
    a_element,
    a_tile_address,
    b_element,
    b_tile_address,
    c_element,
    fragment_table,
    ldmatrix_element,
    ldmatrix_row,
)

F16, BF16, TF32 = MMA_KINDS


@pytest.mark.parametrize(
    ("lane", "register", "element", "expected"),
    [
        # PTX ISA, "mma.m16n8k16 fragment layout for matrix A with .f16/.bf16":
        # a0..a7 of lane 0 are (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9).
        (0, 0, 0, (0, 0)),
        (0, 0, 1, (0, 1)),
        (0, 1, 0, (8, 0)),
        (0, 2, 1, (0, 9)),
        (0, 3, 0, (8, 8)),
        (5, 0, 0, (1, 2)),
        (5, 3, 1, (9, 11)),
        (31, 3, 1, (15, 15)),
    ],
)
def test_f16_a_fragment(lane, register, element, expected):
    assert a_element(F16, lane, register, element) == expected
    assert a_element(BF16, lane, register, element) == expected


@pytest.mark.parametrize(
    ("kind", "what", "lane", "register", "element", "expected"),
    [
        (F16, "b", 0, 0, 1, (1, 0)),  # b1 of lane 0: row (k) 1, column (n) 0
        (F16, "b", 0, 1, 0, (8, 0)),  # b2
        (F16, "b", 31, 0, 0, (6, 7)),
        (F16, "b", 31, 1, 1, (15, 7)),
        (F16, "c", 0, 1, 1, (8, 1)),  # c3 of lane 0
        (F16, "c", 31, 1, 1, (15, 7)),
        (F16, "c", 6, 0, 0, (1, 4)),
        (TF32, "a", 0, 1, 0, (8, 0)),  # tf32 a1: row groupID + 8
        (TF32, "a", 0, 2, 0, (0, 4)),  # tf32 a2: column threadID_in_group + 4
        (TF32, "a", 31, 3, 0, (15, 7)),
        (TF32, "b", 0, 1, 0, (4, 0)),
        (TF32, "b", 31, 1, 0, (7, 7)),
        (TF32, "c", 13, 1, 0, (11, 2)),
    ],
)
def test_other_fragments(kind, what, lane, register, element, expected):
    fn = {"a": a_element, "b": b_element, "c": c_element}[what]
    assert fn(kind, lane, register, element) == expected


@pytest.mark.parametrize("kind", MMA_KINDS, ids=MmaKind.describe)
@pytest.mark.parametrize("operand", ["a", "b", "c"])
def test_every_element_belongs_to_exactly_one_lane(kind, operand):
    table = fragment_table(kind, operand)
    rows, cols = {"a": (kind.m, kind.k), "b": (kind.k, kind.n), "c": (kind.m, kind.n)}[
        operand
    ]
    seen = np.zeros((rows, cols), int)
    np.add.at(seen, (table[..., 0], table[..., 1]), 1)
    assert (seen == 1).all()


def test_out_of_range_lanes_and_registers_are_refused():
    with pytest.raises(ValueError, match="a lane is between 0 and 31"):
        a_element(F16, 32, 0, 0)
    with pytest.raises(ValueError, match=r"4 x 2 A elements per lane, not \(4, 0\)"):
        a_element(F16, 0, 4, 0)
    with pytest.raises(ValueError, match="1, 2 or 4 tiles"):
        ldmatrix_row(0, 3)


def test_ldmatrix_rows_and_elements():
    assert ldmatrix_row(9, 2) == (1, 1)
    assert ldmatrix_row(16, 2) is None
    assert ldmatrix_element(6, 1, transpose=False) == (1, 5)
    assert ldmatrix_element(6, 1, transpose=True) == (5, 1)


def _warp_ldmatrix(matrix, stride, addresses, tiles, transpose):
    """Run `warps.ldmatrix` on `matrix` (16-bit, rows padded to `stride`) with each
    lane pointing at `addresses[lane]` (row, col)."""
    rows, cols = matrix.shape
    flat = np.zeros(rows * stride, matrix.dtype)
    flat.reshape(rows, stride)[:, :cols] = matrix
    pointers = [(flat, r * stride + c) for r, c in addresses]
    state = SimpleNamespace(thread=0)
    return ldmatrix(None, pointers, tiles, transpose, state, 0)


def _numbered(rows, cols):
    return np.arange(rows * cols, dtype=np.float16).reshape(rows, cols)


def test_a_tile_addresses_load_the_a_fragment():
    a = _numbered(16, 16)
    got = _warp_ldmatrix(a, 24, [a_tile_address(x) for x in range(32)], 4, False)
    for lane, r, e in itertools.product(range(32), range(4), range(2)):
        assert got[lane, r, e] == a[a_element(F16, lane, r, e)]


@pytest.mark.parametrize("tiles", [2, 4])
@pytest.mark.parametrize("k_contiguous", [True, False])
def test_b_tile_addresses_load_b_fragments(tiles, k_contiguous):
    n = 8 * tiles // 2
    b = _numbered(16, n)  # (k, n)
    stored = b.T.copy() if k_contiguous else b
    addresses = [b_tile_address(x, tiles, k_contiguous) for x in range(32)]
    got = _warp_ldmatrix(stored, 24, addresses, tiles, transpose=not k_contiguous)
    for lane, r, e in itertools.product(range(32), range(tiles), range(2)):
        k, col = b_element(F16, lane, r % 2, e)
        assert got[lane, r, e] == b[k, col + 8 * (r // 2)]


# -- numerics ------------------------------------------------------------------------


def _rounded_to_f32(x: Fraction) -> np.float32:
    """The f32 nearest to `x`, ties to even, decided exactly."""
    f = np.float32(float(x))
    neighbours = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.inf)]

    def distance(c):
        return abs(Fraction(float(c)) - x), int(np.float32(c).view(np.uint32)) & 1

    return np.float32(min(neighbours, key=distance))


def _fragments(kind, A, B, C):
    ta, tb, tc = (fragment_table(kind, x) for x in "abc")
    return (
        A[ta[..., 0], ta[..., 1]],
        B[tb[..., 0], tb[..., 1]],
        C[tc[..., 0], tc[..., 1]],
    )


def _d_matrix(kind, d):
    tc = fragment_table(kind, "c")
    D = np.empty((kind.m, kind.n), np.float32)
    D[tc[..., 0], tc[..., 1]] = d
    return D


@pytest.mark.parametrize("seed", range(3))
def test_mma_is_the_exact_sum_rounded_once(seed):
    rng = np.random.default_rng(seed)
    scale = 2.0 ** rng.integers(-12, 12, (16, 16))
    A = (rng.uniform(-1, 1, (16, 16)) * scale).astype(np.float16)
    B = rng.uniform(-1, 1, (16, 8)).astype(np.float16)
    C = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    D = _d_matrix(F16, mma(F16, *_fragments(F16, A, B, C)))
    for i, j in itertools.product(range(16), range(8)):
        exact = sum(
            Fraction(float(A[i, x])) * Fraction(float(B[x, j])) for x in range(16)
        )
        assert D[i, j] == _rounded_to_f32(exact + Fraction(float(C[i, j])))


def test_a_warpgroups_sums_at_f32_midpoints_are_rounded_once_to_even():
    # small f16 integers and halves: every sum is exact in float64, many of them
    # halfway between two f32 (C near 2**24, where f32 steps by 2), some tied
    # sums of zeros; each must round to even, as the exact sum does
    rng = np.random.default_rng(5)
    A = (rng.integers(-8, 9, (64, 16)) / 2).astype(np.float16).astype(np.float64)
    B = rng.integers(-3, 4, (16, 32)).astype(np.float16).astype(np.float64)
    C = (2.0**24 + rng.integers(-64, 64, (64, 32))).astype(np.float64)
    C[:8] = 0.0
    D = exact_dot(A, B, C)
    for i, j in itertools.product(range(64), range(32)):
        exact = sum(Fraction(A[i, x]) * Fraction(B[x, j]) for x in range(16))
        assert D[i, j] == _rounded_to_f32(exact + Fraction(C[i, j])), (i, j)


def test_cancellation_that_float64_order_loses_is_exact():
    # 2**30 - 2**30 + 2**-24: float64, summing in order, loses the 2**-24.
    A = np.zeros((16, 16), np.float16)
    B = np.zeros((16, 8), np.float16)
    A[0, :3] = [2.0**15, 2.0**-12, -(2.0**15)]
    B[:3, 0] = [2.0**15, 2.0**-12, 2.0**15]
    D = exact_dot(A.astype(np.float64), B.astype(np.float64), np.zeros((16, 8)))
    assert D[0, 0] == np.float32(2.0**-24)


def test_a_sum_at_an_f32_midpoint_is_not_rounded_twice():
    # 1 + 2**-24 is the midpoint between 1 and 1 + 2**-23; the exact sum is above
    # it by C = 2**-149, which float64 cannot hold next to 1: rounding through
    # float64 would give 1, the single rounding gives 1 + 2**-23.
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    C = np.zeros((16, 8))
    A[0, :2] = [1.0, 2.0**-12]
    B[:2, 0] = [1.0, 2.0**-12]
    C[0, 0] = float(np.float32(2.0**-149))
    D = exact_dot(A, B, C)
    assert D[0, 0] == np.float32(1 + 2.0**-23)


def test_nan_propagates_and_tf32_drops_low_bits():
    A = np.ones((16, 16), np.float16)
    B = np.ones((16, 8), np.float16)
    A[3, 5] = np.nan
    D = _d_matrix(F16, mma(F16, *_fragments(F16, A, B, np.zeros((16, 8), np.float32))))
    assert np.isnan(D[3]).all() and not np.isnan(np.delete(D, 3, axis=0)).any()
    assert tf32(np.array([1 + 2.0**-20, np.nan], np.float32))[0] == 1.0
    assert np.isnan(tf32(np.array([np.nan], np.float32))[0])
    A32 = np.zeros((16, 8), np.float32)
    B32 = np.zeros((8, 8), np.float32)
    A32[0, 0] = 1 + 2.0**-20
    B32[0, 0] = 1.0
    D = _d_matrix(
        TF32, mma(TF32, *_fragments(TF32, A32, B32, np.zeros((16, 8), np.float32)))
    )
    assert D[0, 0] == 1.0
