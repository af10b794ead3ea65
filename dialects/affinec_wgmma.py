"""affinec's step of warpgroup MMA on the pipeline's own shared tiles (A and B from
shared memory, or A from the threads' registers: `affinec.warpgroup_mma_registers`,
`WarpgroupMmaRegistersOp`), and the proxy fence that orders the copies' writes
before it:

    affinec.warpgroup_mma %fragments, %A_shared[%stage, %row], %B_shared[%stage]
        : memref<1x16x4xf32, 5>, memref<2x128x32xf16, 3>, memref<2x32x128xf16, 3>
    nvvm.fence.proxy.async.shared_cta

`affinec.warpgroup_mma` is what `affinec-wgmma` writes where `affinec-mma-sync`
writes its warp tiles: the warpgroup of 128 threads computes D = A × B + C, with A
the 64 rows of the tile `%A_shared` from row `%row` (its leading indices pick the
pipeline stage), B the whole tile `%B_shared`, K the tiles' common extent, and C
and D each thread's registers of the m64nN accumulator in its private
`%fragments` (N/8 × 4 floats: register j of `wgmma`'s fragment is element
[0, j / 4, j % 4], the layout of N/8 `mma.sync` m16n8 fragments of its warp).
It is synchronous — every `wgmma` it issues has finished when it returns — unless
`{pending = 1}`: then its `wgmma`s may still run (reading the tiles) until the
warpgroup's next step returns or an `nvvm.wgmma.wait.group.sync.aligned 0`; its
registers are the accumulator's all the same (the next step accumulates on them).

A tile is read in one of three layouts, told by its rank (the leading indices plus
2, 3 or 4):

- row-major `[.., R, C]`: as the promotion copied it (no `wgmma` can read it: the
  step is only interpreted in it, until the shared-memory planner lays it out);
- interleaved `[.., R/8, C/8, P, 8]` (P ≥ 8): element (r, c) at `[r / 8, c / 8,
  r % 8, c % 8]`, 8 × 8 core matrices of 16-byte rows, P × 16 bytes apart (P = 8:
  packed; more: the core matrices padded against bank conflicts), `wgmma`'s layout
  without swizzle (`interleaved_offset`), which `affinec-plan-shared-memory` gives
  the tiles this op reads;
- column slabs `[.., C/T, R, T]`: element (r, c) at `[c / T, r, c % T]`, what a
  TMA box of R rows and T columns writes, one box a slab, which
  `affinec-tma-copies` gives the tiles it loads. T = 8 (16-byte rows): the core
  matrices of a column of them one after the other, no swizzle; T = 16, 32 or 64
  (rows of 32, 64 or 128 bytes): each slab swizzled with that span as TMA and
  `wgmma` swizzle it (`affinec.hardware.wgmma_layouts`), the element's bytes
  permuted within each 8 rows (`slab_offset`).

A is K-major (R = M, C = K). B is K × N, MN-major (R = K, C = N: `wgmma`'s
transposed B) unless `b_k_major` is set, when it is N × K (R = N, C = K).
"""

from __future__ import annotations

import math
from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    traits_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.nvvm_intrinsics import IntrinsicOp
from affinec.hardware.wgmma_layouts import swizzled

CORE = 8
"""Rows and columns of a core matrix of 16-bit elements (8 rows of 16 bytes)."""

WGMMA_ROWS = 64
"""Rows of A one `wgmma` reads (m64)."""

WGMMA_STEP = 16
"""K of one f16/bf16 `wgmma` instruction."""

SLABS = -16
"""The pitch `tile_shape` gives a tile in unswizzled column slabs (`[.., C/8, R, 8]`);
a tile in slabs swizzled with span S bytes has pitch -S (`slab_span`)."""


_SLAB_WIDTHS = (8, 16, 32, 64)
"""The columns of a slab: 16-byte rows (no swizzle), or 32, 64, 128 (swizzled)."""


def slab_span(pitch: int) -> int:
    """The bytes of a slab's row for a tile in column slabs (16: unswizzled; 32, 64
    or 128: the swizzle span), 0 for any other layout."""
    return -pitch if pitch < 0 else 0


PRIVATE = 5
SHARED = 3


def interleaved_shape(rows: int, cols: int, pitch: int = CORE) -> list[int]:
    """The interleaved layout's dimensions for a `rows` × `cols` tile whose core
    matrices are `pitch` 16-byte rows apart."""
    return [rows // CORE, cols // CORE, pitch, CORE]


def interleaved_offset(r, c, cols: int, pitch: int = CORE):
    """Where element (r, c) (ints, or integer arrays) of an interleaved tile of
    `cols` columns, core matrices `pitch` rows apart, lies, in elements from its
    start."""
    return (
        ((r // CORE) * (cols // CORE) + c // CORE) * pitch * CORE
        + (r % CORE) * CORE
        + c % CORE
    )


def slab_offset(r, c, rows: int, span: int = 2 * CORE):
    """Where element (r, c) (ints, or integer arrays) of a 16-bit tile of `rows`
    rows in column slabs of `span`-byte rows (swizzled past 16) lies, in elements
    from its start (itself on a multiple of 8 `span` bytes)."""
    t = span // 2
    inner = swizzled(r * span + (c % t) * 2, span if span > 2 * CORE else 0) // 2
    return (c // t) * rows * t + inner


def tile_offset(r, c, rows: int, cols: int, pitch: int):
    """Where element (r, c) of a `rows` x `cols` tile of the layout `pitch` tells
    (`tile_shape`) lies, in elements from its start."""
    if pitch < 0:
        return slab_offset(r, c, rows, slab_span(pitch))
    if pitch:
        return interleaved_offset(r, c, cols, pitch)
    return r * cols + c


def _space(t: MemRefType) -> int:
    space = t.memory_space
    value = getattr(space, "value", None)
    if value is None:
        return 0
    return int(getattr(value, "data", value))


def tile_shape(t: MemRefType, leading: int) -> tuple[int, int, int] | None:
    """(rows, columns, pitch) of the tile `t` holds past its `leading` dimensions:
    the pitch of its core matrices in 16-byte rows when interleaved, 0 when
    row-major, `SLABS` in column slabs; None when its shape fits none."""
    shape = list(t.get_shape())[leading:]
    if len(shape) == 2:
        return shape[0], shape[1], 0
    if len(shape) == 3 and shape[2] in _SLAB_WIDTHS and shape[1] % CORE == 0:
        return shape[1], shape[0] * shape[2], -2 * shape[2]
    if len(shape) == 4 and shape[3] == CORE and shape[2] >= CORE:
        return shape[0] * CORE, shape[1] * CORE, shape[2]
    return None


def _verify_fragments(f: Attribute) -> None:
    """A thread's registers of an m64nN f32 accumulator."""
    shape = f.get_shape() if isinstance(f, MemRefType) else []
    if (
        not isinstance(f, MemRefType)
        or _space(f) not in (0, PRIVATE)
        or not isinstance(f.get_element_type(), Float32Type)
        or len(shape) != 3
        or shape[0] != 1
        or shape[2] != 4
        or not 1 <= shape[1] <= 32
    ):
        raise VerifyException(
            f"the fragments are a thread's own memref<1xN/8x4xf32> (N from 8 "
            f"to 256), got {f}"
        )


class _AccumulatorStep:
    """What both steps read of their operands: the accumulator's N, the runs left
    in flight."""

    @property
    def groups_left(self) -> int:
        """`pending`, 0 when absent."""
        pending = getattr(self, "pending")  # noqa: B009 (an IRDL property)
        return 0 if pending is None else pending.value.data

    @property
    def n(self) -> int:
        t = getattr(self, "fragments").type  # noqa: B009 (an IRDL operand)
        assert isinstance(t, MemRefType)
        return 2 * t.get_shape()[1] * t.get_shape()[2]

    def _verify_pending(self) -> None:
        if self.groups_left not in (0, 1):
            raise VerifyException(
                f"pending is 0 or 1 (runs left in flight), got {self.groups_left}"
            )


@irdl_op_definition
class WarpgroupMmaStepOp(_AccumulatorStep, IRDLOperation):
    """`affinec.warpgroup_mma %fragments, %a[%lead.., %row], %b[%lead..]`: the
    warpgroup's D = A × B + C over the tiles' K, in each thread's registers (see
    the module)."""

    name = "affinec.warpgroup_mma"
    FEATURE: ClassVar[str] = "wgmma"

    fragments = operand_def(MemRefType)
    a = operand_def(MemRefType)
    a_indices = var_operand_def(IndexType)
    b = operand_def(MemRefType)
    b_indices = var_operand_def(IndexType)
    b_k_major = opt_prop_def(UnitAttr)
    pending = opt_prop_def(IntegerAttr)
    """Steps of the warpgroup left in flight when it returns (0 or 1; absent: 0)."""

    traits = traits_def(
        AccessesOperands(reads=("fragments", "a", "b"), writes=("fragments",))
    )
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    assembly_format = (
        "$fragments `,` $a `[` $a_indices `]` `,` $b `[` $b_indices `]` attr-dict "
        "`:` type($fragments) `,` type($a) `,` type($b)"
    )

    def __init__(
        self,
        fragments: SSAValue,
        a: SSAValue,
        a_indices,
        b: SSAValue,
        b_indices,
        b_k_major: bool = False,
        pending: int = 0,
    ):
        super().__init__(
            operands=[fragments, a, list(a_indices), b, list(b_indices)],
            properties={
                "b_k_major": UnitAttr() if b_k_major else None,
                "pending": IntegerAttr(pending, i64) if pending else None,
            },
        )

    def a_tile(self) -> tuple[int, int, int]:
        """(M rows present, K, pitch: 0 if row-major, `SLABS` in column slabs) of
        A's tile."""
        t = self.a.type
        assert isinstance(t, MemRefType)
        shape = tile_shape(t, len(self.a_indices) - 1)
        assert shape is not None
        return shape

    def b_tile(self) -> tuple[int, int, int]:
        """(rows, columns, pitch: 0 if row-major, `SLABS` in column slabs) of B's
        tile: K x N, or N x K when `b_k_major`."""
        t = self.b.type
        assert isinstance(t, MemRefType)
        shape = tile_shape(t, len(self.b_indices))
        assert shape is not None
        return shape

    def leading_indices(self, buffer: SSAValue) -> list[SSAValue] | None:
        """The indices that pick the part of `buffer` (a tile) the op reads whole
        (the pipeline's stage), or None for an operand that is no tile."""
        if buffer is self.a:
            return list(self.a_indices)[:-1]
        if buffer is self.b:
            return list(self.b_indices)
        return None

    @property
    def k(self) -> int:
        return self.a_tile()[1]

    def verify_(self) -> None:
        f, a, b = (v.type for v in (self.fragments, self.a, self.b))
        assert isinstance(a, MemRefType) and isinstance(b, MemRefType)
        _verify_fragments(f)
        element: Attribute | None = None
        for what, t, leading in (
            ("A", a, len(self.a_indices) - 1),
            ("B", b, len(self.b_indices)),
        ):
            if _space(t) != SHARED:
                raise VerifyException(f"{what} must be a shared tile, got {t}")
            e = t.get_element_type()
            if not isinstance(e, Float16Type | BFloat16Type):
                raise VerifyException(
                    f"wgmma takes f16 or bf16 operands, {what} is {t}"
                )
            if element is not None and e != element:
                raise VerifyException("A and B must have one element type")
            element = e
            if leading < 0 or tile_shape(t, leading) is None:
                raise VerifyException(
                    f"{what} ({t}) is no row-major, interleaved or slab tile past "
                    f"its {max(leading, 0)} leading indices"
                )
        self._verify_pending()
        rows_a, k, _ = self.a_tile()
        rows_b, cols_b, _ = self.b_tile()
        kb, nb = (cols_b, rows_b) if self.b_k_major else (rows_b, cols_b)
        if rows_a < WGMMA_ROWS or k % WGMMA_STEP:
            raise VerifyException(
                f"A's tile is {rows_a}x{k}: at least {WGMMA_ROWS} rows, and K a "
                f"multiple of {WGMMA_STEP}"
            )
        if kb != k:
            raise VerifyException(f"A has K = {k}, B has {kb}")
        if nb != self.n:
            raise VerifyException(
                f"B has N = {nb} columns, the fragments hold {self.n}"
            )


@irdl_op_definition
class WarpgroupMmaRegistersOp(_AccumulatorStep, IRDLOperation):
    """`affinec.warpgroup_mma_registers %fragments, (%a..), %b[%lead..] {taps = T}
    : memref<1xN/8x4xf32, 5>, memref<..xf16, 3>, (vector<4x2xf16>, ..)`:
    the warpgroup's D = A × B + C with A from registers: a run of k16 `wgmma`s,
    step s reading A from the threads' fragments `%a`#s (warp w of the warpgroup
    holds rows 16 w to 16 w + 15 of the step's m64 x k16 A in `mma.sync`
    m16n8k16's A layout, as `ldmatrix` x4 loads it) and B from the tile `%b`
    past its leading indices: T tap dimensions, then the K x N tile (N x K with
    `b_k_major`), row-major, interleaved or in slabs as `affinec.warpgroup_mma`'s
    B. The steps walk the taps row-major, then K by 16: step s reads the tap
    s // (K / 16), rows 16 (s % (K / 16)) on. Synchronous (every `wgmma` has
    finished when it returns) unless `{pending = 1}`: then its run may still read
    B until the warpgroup's next run returns or a wait, as
    `affinec.warpgroup_mma`'s."""

    name = "affinec.warpgroup_mma_registers"
    FEATURE: ClassVar[str] = "wgmma"

    fragments = operand_def(MemRefType)
    a = var_operand_def(VectorType)
    b = operand_def(MemRefType)
    b_indices = var_operand_def(IndexType)
    taps = prop_def(IntegerAttr)
    b_k_major = opt_prop_def(UnitAttr)
    pending = opt_prop_def(IntegerAttr)
    """Runs of the warpgroup left in flight when it returns (0 or 1; absent: 0),
    as `affinec.warpgroup_mma`'s."""

    traits = traits_def(
        AccessesOperands(reads=("fragments", "b"), writes=("fragments",))
    )
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())

    assembly_format = (
        "$fragments `,` `(` $a `)` `,` $b `[` $b_indices `]` attr-dict "
        "`:` type($fragments) `,` type($b) `,` `(` type($a) `)`"
    )

    def __init__(
        self,
        fragments: SSAValue,
        a,
        b: SSAValue,
        b_indices,
        taps: int,
        b_k_major: bool = False,
        pending: int = 0,
    ):
        super().__init__(
            operands=[fragments, list(a), b, list(b_indices)],
            properties={
                "taps": IntegerAttr(taps, i64),
                "b_k_major": UnitAttr() if b_k_major else None,
                "pending": IntegerAttr(pending, i64) if pending else None,
            },
        )

    @property
    def tap_count(self) -> int:
        return self.taps.value.data

    def tap_extents(self) -> list[int]:
        """The extents of B's tap dimensions (past its leading indices)."""
        t = self.b.type
        assert isinstance(t, MemRefType)
        lead = len(self.b_indices)
        return list(t.get_shape())[lead : lead + self.tap_count]

    def b_tile(self) -> tuple[int, int, int]:
        """(rows, columns, pitch) of one tap's B tile (`tile_shape`)."""
        t = self.b.type
        assert isinstance(t, MemRefType)
        shape = tile_shape(t, len(self.b_indices) + self.tap_count)
        assert shape is not None
        return shape

    @property
    def k(self) -> int:
        """K of one tap's tile."""
        rows, cols, _ = self.b_tile()
        return cols if self.b_k_major is not None else rows

    def leading_indices(self, buffer: SSAValue) -> list[SSAValue] | None:
        """B's leading indices (the tiles of all its taps are read whole)."""
        return list(self.b_indices) if buffer is self.b else None

    def verify_(self) -> None:
        _verify_fragments(self.fragments.type)
        self._verify_pending()
        b = self.b.type
        assert isinstance(b, MemRefType)
        if _space(b) != SHARED or not isinstance(
            b.get_element_type(), Float16Type | BFloat16Type
        ):
            raise VerifyException(f"B must be a shared tile of f16 or bf16, got {b}")
        leading = len(self.b_indices) + self.tap_count
        if self.tap_count < 0 or tile_shape(b, leading) is None:
            raise VerifyException(
                f"B ({b}) is no row-major, interleaved or slab tile past its "
                f"{len(self.b_indices)} leading indices and {self.tap_count} taps"
            )
        want = VectorType(b.get_element_type(), [4, 2])
        for v in self.a:
            if v.type != want:
                raise VerifyException(f"A's fragments are {want}, got {v.type}")
        rows, cols, _ = self.b_tile()
        k, n = (cols, rows) if self.b_k_major is not None else (rows, cols)
        if k % WGMMA_STEP:
            raise VerifyException(f"B's K is {k}, not a multiple of {WGMMA_STEP}")
        steps = math.prod(self.tap_extents()) * (k // WGMMA_STEP)
        if len(self.a) != steps:
            raise VerifyException(
                f"B holds {steps} steps of k16 ({self.tap_extents()} taps of K = "
                f"{k}), A {len(self.a)} fragments"
            )
        if n != self.n:
            raise VerifyException(f"B has N = {n} columns, the fragments hold {self.n}")


@irdl_op_definition
class FenceProxyAsyncSharedOp(IntrinsicOp):
    """`nvvm.fence.proxy.async.shared_cta`: order the thread's generic-proxy accesses
    to shared memory (the `cp.async` copies' writes) before the async proxy's
    (`wgmma`'s reads), PTX's `fence.proxy.async.shared::cta`. MLIR writes it
    `nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space =
    #nvvm.shared_space<cta>}`."""

    name = "nvvm.fence.proxy.async.shared_cta"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.fence.proxy.async.shared_cta"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


WGMMA_STEP_OPS = (WarpgroupMmaStepOp, WarpgroupMmaRegistersOp)
PROXY_FENCE_OPS = (FenceProxyAsyncSharedOp,)

__all__ = [
    "CORE",
    "PROXY_FENCE_OPS",
    "SLABS",
    "WGMMA_ROWS",
    "WGMMA_STEP",
    "WGMMA_STEP_OPS",
    "FenceProxyAsyncSharedOp",
    "WarpgroupMmaRegistersOp",
    "WarpgroupMmaStepOp",
    "interleaved_offset",
    "interleaved_shape",
    "slab_offset",
    "slab_span",
    "tile_offset",
    "tile_shape",
]
