"""Hopper's shared-memory tiles as `wgmma` reads them and TMA writes them: the swizzle,
the 64-bit matrix descriptor, the canonical operand layouts and the accumulator
fragment of a warpgroup (PTX ISA, "Asynchronous Warpgroup Level Matrix Shared
Memory Layout" and "Matrix Descriptor Format").

The one place these rules live: the interpreter runs `nvgpu.tma.async.load` and
`nvgpu.warpgroup.mma` with them, and the lowering computes the descriptors with
them, so a wrong rule is a wrong answer on the CPU.

**Swizzle.** A tile with a swizzle span of S bytes (32, 64 or 128) is stored in rows
of S bytes; within each group of 8 rows the 16-byte chunks of row r are permuted by
XOR with r mod (S/16). On addresses: bits [4, 4+b) ^= bits [7, 7+b), b = log2(S/16).
The pattern is computed on the shared-memory address itself, so a swizzled tile
starts on a multiple of 8·S bytes (1024 for 128 B).

**Descriptor** (64 bits): start address, leading byte offset (LBO) and stride byte
offset (SBO), each stored as `(bytes & 0x3FFFF) >> 4`, in bits 0–13, 16–29 and 32–45;
base offset in bits 49–51 (0: tiles start on a pattern boundary); swizzle mode in bits
62–63 (0 none, 1 128 B, 2 64 B, 3 32 B).

**Operands.** A (m × k) is read K-major: row i of A is k contiguous elements.
B (k × n) is read either K-major (column j of B is k contiguous elements, PTX's
non-transposed B) or MN-major (row k of B is n contiguous elements, PTX's transposed
B, as a row-major k × n tile). With swizzle span S, element size e and T = S/e:

    K-major   (row i, k)   start + (i // 8)·SBO + (i % 8)·S + k·e
    MN-major  (k, j)       start + (j // T)·LBO + (k // 8)·SBO + (k % 8)·S + (j % T)·e

then swizzled. Without swizzle, tiles are made of 8 × 16-byte core matrices:

    K-major   (row i, k)   start + (i // 8)·SBO + (k·e // 16)·LBO + (i % 8)·16 + k·e % 16
    MN-major  (k, j)       start + (j·e // 16)·SBO + (k // 8)·LBO + (k % 8)·16 + j·e % 16

**Accumulator** (m64nN, f32): thread t of the warpgroup (warp w = t // 32, lane
l = t % 32) holds N/2 registers; register j is element

    row 16w + l // 4 + 8·((j // 2) % 2),   col 8·(j // 4) + 2·(l % 4) + j % 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

# numpy is imported where the arrays are built: the nvgpu and nvvm dialects take
# this module's constants, and reading IR should not pay for numpy.
if TYPE_CHECKING:
    import numpy as np

WARPGROUP_SIZE = 128
"""Threads of a warpgroup: four consecutive warps, the first a multiple of four."""

WGMMA_M = 64
"""Rows of one `wgmma` instruction's A and D."""

WGMMA_MAX_N = 256
"""The widest N of one `wgmma` instruction."""


def is_wgmma_n(n: int) -> bool:
    """Whether one `wgmma` instruction can be `n` columns wide: 8, 16, ..., 256."""
    return 8 <= n <= WGMMA_MAX_N and n % 8 == 0


SWIZZLE_SPANS = {"none": 0, "swizzle_32b": 32, "swizzle_64b": 64, "swizzle_128b": 128}
"""The tensor map's swizzle modes (MLIR's names) and their spans in bytes."""

_MODE_OF_SPAN = {0: 0, 128: 1, 64: 2, 32: 3}
_SPAN_OF_MODE = {v: k for k, v in _MODE_OF_SPAN.items()}
_FIELD = 0x3FFFF


def swizzled(address, span: int):
    """The address (an int or an integer array) where a tile swizzled with span
    `span` bytes (0: none) stores what its unswizzled layout puts at `address`."""
    if span == 0:
        return address
    bits = span.bit_length() - 5
    mask = ((1 << bits) - 1) << 4
    return address ^ ((address >> 3) & mask)


def swizzle_alignment(span: int) -> int:
    """The alignment a tile swizzled with `span` bytes must start on."""
    return 8 * span if span else 16


@dataclass(frozen=True)
class MatrixDescriptor:
    """A `wgmma` shared-memory matrix descriptor, field by field (bytes)."""

    start: int
    leading: int
    stride: int
    swizzle: int
    """The swizzle span in bytes: 0, 32, 64 or 128."""
    base_offset: int = 0

    def encode(self) -> int:
        """The 64-bit value `wgmma.mma_async` takes."""
        return (
            ((self.start & _FIELD) >> 4)
            | (((self.leading & _FIELD) >> 4) << 16)
            | (((self.stride & _FIELD) >> 4) << 32)
            | ((self.base_offset & 7) << 49)
            | (_MODE_OF_SPAN[self.swizzle] << 62)
        )

    @staticmethod
    def decode(value: int) -> MatrixDescriptor:
        """The fields of a 64-bit descriptor (addresses below 256 KiB, as shared
        memory's are)."""
        value &= (1 << 64) - 1
        return MatrixDescriptor(
            start=(value & 0x3FFF) << 4,
            leading=((value >> 16) & 0x3FFF) << 4,
            stride=((value >> 32) & 0x3FFF) << 4,
            swizzle=_SPAN_OF_MODE[(value >> 62) & 3],
            base_offset=(value >> 49) & 7,
        )

    def advanced(self, nbytes: int) -> MatrixDescriptor:
        """The descriptor of the tile `nbytes` further (the start address moves; a
        k-step inside a swizzled row is such a move)."""
        return MatrixDescriptor(
            self.start + nbytes,
            self.leading,
            self.stride,
            self.swizzle,
            self.base_offset,
        )


@dataclass(frozen=True)
class TileLayout:
    """A shared tile of `rows` × `cols` elements of `element_bytes` as TMA writes it
    with swizzle span S = `swizzle`: slabs of S bytes' worth of columns (T = S/e),
    one after the other, each `rows` rows of S bytes, swizzled. Element (r, c) is at

        (c // T)·rows·S + swizzled(r·S + (c % T)·e)

    (one TMA box a slab). `wgmma` reads it K-major (rows M or N, columns K) or
    MN-major (rows K, columns N); the descriptors and steps follow."""

    rows: int
    cols: int
    element_bytes: int
    swizzle: int

    @property
    def slab_columns(self) -> int:
        return self.swizzle // self.element_bytes

    @property
    def slab_bytes(self) -> int:
        return self.rows * self.swizzle

    def check(self) -> str | None:
        """Why `wgmma` cannot read this tile, or None."""
        if self.swizzle == 0:
            return "wgmma reads tiles TMA swizzled (32, 64 or 128 B); this one is not"
        if self.cols * self.element_bytes % self.swizzle:
            return (
                f"a row of the tile is {self.cols * self.element_bytes} bytes, not a "
                f"multiple of the {self.swizzle}-byte swizzle span"
            )
        if self.rows % 8:
            return f"the tile has {self.rows} rows, not a multiple of 8"
        return None

    def addresses(self) -> np.ndarray:
        """The byte offset of every element, a (rows, cols) array."""
        import numpy as np

        r = np.arange(self.rows)[:, None]
        c = np.arange(self.cols)[None, :]
        t = self.slab_columns
        inner = swizzled(r * self.swizzle + (c % t) * self.element_bytes, self.swizzle)
        return (c // t) * self.slab_bytes + inner

    def k_major(self) -> MatrixDescriptor:
        """The descriptor (start 0) of the tile read K-major: row groups of 8 are
        `8·S` bytes apart (the leading offset is unused; 16 by convention)."""
        return MatrixDescriptor(0, 16, 8 * self.swizzle, self.swizzle)

    def mn_major(self) -> MatrixDescriptor:
        """The descriptor (start 0) of the tile read MN-major: groups of 8 k are
        `8·S` bytes apart, the next slab of N a slab further."""
        return MatrixDescriptor(0, self.slab_bytes, 8 * self.swizzle, self.swizzle)

    def k_offset(self, k: int, k_major: bool) -> int:
        """Where the sub-tile starting at column (K-major) or row (MN-major) `k`
        starts; a K-major step stays inside one slab."""
        if not k_major:
            return k * self.swizzle
        t = self.slab_columns
        return (k // t) * self.slab_bytes + (k % t) * self.element_bytes

    def m_offset(self, m: int) -> int:
        """Where rows from `m` (a multiple of 8) of a K-major tile start."""
        return (m // 8) * 8 * self.swizzle


def operand_addresses(
    descriptor: MatrixDescriptor, rows: int, k: int, element_bytes: int, k_major: bool
) -> np.ndarray:
    """The byte address of every element of a `wgmma` operand: A (`rows` = m) or B
    (`rows` = n) as a (rows, k) array, read as the descriptor says."""
    import numpy as np

    d = descriptor
    i = np.arange(rows)[:, None]
    c = np.arange(k)[None, :]
    e = element_bytes
    if k_major:
        if d.swizzle:
            address = d.start + (i // 8) * d.stride + (i % 8) * d.swizzle + c * e
        else:
            address = (
                d.start
                + (i // 8) * d.stride
                + (c * e // 16) * d.leading
                + (i % 8) * 16
                + c * e % 16
            )
    elif not d.swizzle:
        t = 16 // e
        address = (
            d.start
            + (i // t) * d.stride
            + (c // 8) * d.leading
            + (c % 8) * 16
            + (i % t) * e
        )
    else:
        t = d.swizzle // e
        address = (
            d.start
            + (i // t) * d.leading
            + (c // 8) * d.stride
            + (c % 8) * d.swizzle
            + (i % t) * e
        )
    return swizzled(address, d.swizzle)


@cache
def accumulator_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols): arrays of shape (128, n/2) giving the element of the m64 × n
    accumulator that register j of thread t of the warpgroup holds."""
    import numpy as np

    t = np.arange(WARPGROUP_SIZE)[:, None]
    j = np.arange(n // 2)[None, :]
    w, lane = t // 32, t % 32
    rows = 16 * w + lane // 4 + 8 * ((j // 2) % 2)
    cols = 8 * (j // 4) + 2 * (lane % 4) + j % 2
    return rows, cols


__all__ = [
    "SWIZZLE_SPANS",
    "WARPGROUP_SIZE",
    "WGMMA_M",
    "MatrixDescriptor",
    "TileLayout",
    "accumulator_table",
    "operand_addresses",
    "swizzle_alignment",
    "swizzled",
]
