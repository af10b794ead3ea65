"""Which lane of a warp holds which matrix element: the fragment layouts of `mma.sync`
and the addressing of `ldmatrix`, from the PTX ISA ("Matrix Fragments for mma.m16n8k16
with floating point type", "... for mma.m16n8k8", "ldmatrix").

The one place these rules live: the interpreter executes `nvgpu.mma.sync` and
`nvgpu.ldmatrix` (and their nvvm forms) with them, and the MMA pass computes the lanes'
addresses with them, so a wrong rule gives a wrong answer on the CPU.

A lane's fragment is a 2-D vector `vector<R x E x T>` (`dialects/nvgpu.py`): R 32-bit
registers of E elements, register r and element e being the PTX ISA's `a{r*E + e}`.
With `g = lane // 4` (the "groupID") and `t = lane % 4` ("threadID_in_group"):

    m16n8k16 f16/bf16   A (16x16, row-major)  register r, element e -> row g + 8*(r % 2),
                                                                        col 2t + e + 8*(r // 2)
                        B (16x8, k x n)       register r, element e -> k 2t + e + 8r, n g
    m16n8k8 tf32        A (16x8)              register r            -> row g + 8*(r % 2),
                                                                        col t + 4*(r // 2)
                        B (8x8)               register r            -> k t + 4r, n g
    all three           C, D (16x8, f32)      register r, element e -> row g + 8r, col 2t + e

`ldmatrix` with `numTiles = N` loads N 8x8 tiles of 16-bit elements: lanes 8i to 8i+7
give the addresses of rows 0 to 7 of tile i (16 contiguous bytes each; lanes 8N and
up are ignored), and register i of lane l receives elements (l // 4, 2(l % 4) + e),
e = 0, 1, of tile i, or with `transpose` the elements (2(l % 4) + e, l // 4). So with
the right row addresses its registers *are* MMA fragments: `a_tile_address`,
`b_tile_address` give them.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from affinec.dialects.nvgpu import WARP_SIZE, MmaKind

LDMATRIX_ROWS = 8
"""An ldmatrix tile is 8 rows of 8 16-bit elements (16 bytes)."""


def _lane(lane: int) -> tuple[int, int]:
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"a lane is between 0 and {WARP_SIZE - 1}, got {lane}")
    return lane // 4, lane % 4


def _check(kind: MmaKind, what: str, register: int, element: int) -> None:
    registers, elements = getattr(kind, f"{what}_fragment")
    if not (0 <= register < registers and 0 <= element < elements):
        raise ValueError(
            f"{kind.describe()} has {registers} x {elements} {what.upper()} elements "
            f"per lane, not ({register}, {element})"
        )


# --------------------------------------------------------------------------------------
# mma.sync fragments
# --------------------------------------------------------------------------------------


def a_element(kind: MmaKind, lane: int, register: int, element: int) -> tuple[int, int]:
    """(row, col) in the m x k matrix A of element `element` of register `register`
    of `lane`'s A fragment."""
    _check(kind, "a", register, element)
    g, t = _lane(lane)
    if kind.operands == "tf32":
        return g + 8 * (register % 2), t + 4 * (register // 2)
    return g + 8 * (register % 2), 2 * t + element + 8 * (register // 2)


def b_element(kind: MmaKind, lane: int, register: int, element: int) -> tuple[int, int]:
    """(k, n) in the k x n matrix B of an element of `lane`'s B fragment."""
    _check(kind, "b", register, element)
    g, t = _lane(lane)
    if kind.operands == "tf32":
        return t + 4 * register, g
    return 2 * t + element + 8 * register, g


def c_element(kind: MmaKind, lane: int, register: int, element: int) -> tuple[int, int]:
    """(row, col) in the m x n accumulator C (and result D) of an element of
    `lane`'s C fragment."""
    _check(kind, "c", register, element)
    g, t = _lane(lane)
    return g + 8 * register, 2 * t + element


_ELEMENT = {"a": a_element, "b": b_element, "c": c_element}


@cache
def fragment_table(kind: MmaKind, operand: str) -> np.ndarray:
    """The coordinates of every lane's fragment elements of `operand` ("a", "b" or
    "c"), as an int array of shape (32, R, E, 2): `table[lane, r, e]` is (row, col).

    The interpreter gathers and scatters whole warps with it:
    `matrix[table[..., 0], table[..., 1]] = fragments` (fragments of shape (32, R, E)).
    """
    element = _ELEMENT[operand]
    registers, elements = getattr(kind, f"{operand}_fragment")
    table = np.array(
        [
            [
                [element(kind, lane, r, e) for e in range(elements)]
                for r in range(registers)
            ]
            for lane in range(WARP_SIZE)
        ],
        dtype=np.int64,
    )
    table.flags.writeable = False
    return table


# --------------------------------------------------------------------------------------
# ldmatrix
# --------------------------------------------------------------------------------------


def ldmatrix_row(lane: int, num_tiles: int) -> tuple[int, int] | None:
    """(tile, row) whose address `lane` gives to an ldmatrix of `num_tiles` tiles, or
    None for a lane whose address is ignored."""
    _lane(lane)
    if num_tiles not in (1, 2, 4):
        raise ValueError(f"ldmatrix loads 1, 2 or 4 tiles, not {num_tiles}")
    tile, row = divmod(lane, LDMATRIX_ROWS)
    return (tile, row) if tile < num_tiles else None


def ldmatrix_element(lane: int, element: int, transpose: bool) -> tuple[int, int]:
    """(row, col) within each 8x8 tile of element `element` (0 or 1) that `lane`
    receives in that tile's register."""
    g, t = _lane(lane)
    if element not in (0, 1):
        raise ValueError(f"an ldmatrix register holds elements 0 and 1, not {element}")
    return (2 * t + element, g) if transpose else (g, 2 * t + element)


@cache
def ldmatrix_table(transpose: bool) -> np.ndarray:
    """`ldmatrix_element` for every lane and element: shape (32, 2, 2), [lane, e]."""
    table = np.array(
        [[ldmatrix_element(lane, e, transpose) for e in (0, 1)] for lane in range(32)],
        dtype=np.int64,
    )
    table.flags.writeable = False
    return table


# --------------------------------------------------------------------------------------
# ldmatrix addresses that load MMA fragments
# --------------------------------------------------------------------------------------


def a_tile_address(lane: int) -> tuple[int, int]:
    """Where `lane` points an `ldmatrix {numTiles = 4, transpose = false}` so that
    the registers it loads are the m16n8k16 A fragment of the 16x16 row-major tile
    (rows m, columns k) starting there: (row, col) relative to the tile's origin.

    Tiles 0 to 3 are the quadrants rows 0-7/cols 0-7, rows 8-15/cols 0-7, rows
    0-7/cols 8-15, rows 8-15/cols 8-15: register r of the fragment.
    """
    tile, row = divmod(lane, LDMATRIX_ROWS)
    return row + 8 * (tile % 2), 8 * (tile // 2)


def b_tile_address(lane: int, num_tiles: int, k_contiguous: bool) -> tuple[int, int]:
    """Where `lane` points an ldmatrix of `num_tiles` (2 or 4) tiles so that it loads
    m16n8k16 B fragments: `num_tiles // 2` of them, for the n-columns 0-7 (registers
    0, 1) and, with 4 tiles, 8-15 (registers 2, 3).

    `k_contiguous`: the tile in shared memory is [n][k] (k contiguous, as a filter
    with its channels innermost): load it with `transpose = false`; the result is
    (n, k) relative to the tile's origin. Otherwise it is [k][n] (n contiguous): load
    with `transpose = true`; the result is (k, n).
    """
    if num_tiles not in (2, 4):
        raise ValueError(f"B fragments take 2 or 4 ldmatrix tiles, not {num_tiles}")
    tile, row = divmod(lane, LDMATRIX_ROWS)
    tile %= num_tiles
    k, n = 8 * (tile % 2), 8 * (tile // 2)
    if k_contiguous:
        return n + row, k
    return k + row, n


__all__ = [
    "LDMATRIX_ROWS",
    "a_element",
    "a_tile_address",
    "b_element",
    "b_tile_address",
    "c_element",
    "fragment_table",
    "ldmatrix_element",
    "ldmatrix_row",
    "ldmatrix_table",
]
