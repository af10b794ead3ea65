"""The promoted tiles `wgmma` reads, loaded by TMA (`affinec-tma-copies`): what a
copy band of the promotion is, and whether TMA can do it.

A tile copy is a block band of `nvgpu.device_async_copy`s into a tile an
`affinec.warpgroup_mma` reads, as `affine-data-copy-generate` writes it: each
iteration copies `elements` consecutive elements of a row of the global matrix
into the tile, the source indices clamped into the matrix and the copy zero-filled
(`srcElements` 0) where it falls outside:

    affine.parallel (%r, %v) = (0, 0) to (64, 4) {
      %row = affine.apply (d0 * 64 + d2)(%i0, %p, %r, %v)     %col = ... d3 * 8 ...
      %n = affine.if (row, col inside A) -> 8 else 0
      nvgpu.device_async_copy %A[clamped row, col], %A_shared[%stage, %r, %v * 8], 8, %n
    } {affinec.mapping = "block"}

`tile_copy` reads such a band as a `TileCopy` — the tile, its stage index, the
global array, the box and the tile's origin in the array (affine maps of values
from outside the band) — after proving it: at every iteration of the band, for
origins of the band's outer values drawn from a few samples (the block's first
tile's among them), the unclamped source
is the origin plus the element of the box copied, the box's elements row-major
are the tile's (one tile row per element of the box's outer dimensions), the
copies cover the box exactly once, and the elements copied are the whole run where
it lies inside the array, none where it lies outside. That is what a TMA box at
the origin, zero-filled past the array's edges, writes too. The array may have
more dimensions than the tile: a convolution's NHWC input, whose tile at a tap
(`affinec-wgmma`'s box of pixels, `wgmma_lowering_boxes`) is the 4-D box of the
block's images x rows x columns x 64 channels at the tap's shifted origin
(negative, or past the image, at its edges: the padding, TMA's zero fill):

    %ih = affine.apply (d1 * 8 + d3 + d6 - 1)(%n0, %oh0, %ow0, %r, %s, %i, %h, %w, %v)
    nvgpu.device_async_copy %input[%n, clamped %ih, clamped %iw, %v * 8],
        %input_shared[%stage, (%i * 8 + %h) * 8 + %w, %v * 8], 8, %inside

Its rows past the box (the last warpgroup's, idle) are left alone. A strided
convolution's tap reads every s-th input row and column (the promotion's box keeps
only those: the footprint's lattice), so its band copies `origin + s * i` along
them: a box with element strides s (`TileCopy.strides`, at most 8), which TMA
loads by a tensor map with those traversal strides, zero-filling each element
past the image's edges by itself:

    %ih = affine.apply (d1 * 16 + d2 + d6 * 2 - 1)(%n0, %oh0, %r0, %ow0, %s0, %i, %h, %w, %v)

Anything else
is refused, located, with the reason (`PassError`), as are tiles TMA cannot load:
an array of more than 5 dimensions, rows that are not a multiple of 16 bytes apart
(TMA's global strides), a box of more than 256 elements along a dimension.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Operation, Region, SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr
from xdsl.ir.affine.affine_set import AffineConstraintKind

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import affine, nvgpu
from affinec.dialects.affinec import BLOCK, mapping_of
from affinec.dialects.affinec_wgmma import CORE
from affinec.ir.affine_exprs import constraints_to_python, to_python
from affinec.transforms.gpu.bands import band_of

MAX_BOX = 256
"""The most elements of a TMA box along one dimension."""

MAX_ELEMENT_STRIDE = 8
"""The largest element (traversal) stride of a TMA box."""

MAX_RANK = 5
"""The most dimensions of an array a tensor map describes (tiled mode)."""

GLOBAL_STRIDE_BYTES = 16
"""TMA's global strides are multiples of this many bytes."""

_SAMPLES = ((0, 1), (3, 2), (7, 5))
"""Values the band's outer values take, in turn (each value its own of each pair,
by position, plus its position), when the band is checked, after all of them 0
(`_samples`)."""


def _samples(count: int) -> list[list[int]]:
    """The values `count` outer values take in turn: all 0 first (the block's first
    tile, whose copies lie inside any array: on a small one the other samples' may
    all lie past its edges, and the elements copied inside it would go unchecked),
    then `_SAMPLES`'."""
    return [[0] * count] + [[p[k % 2] + k for k in range(count)] for p in _SAMPLES]


@dataclass
class TileCopy:
    """A copy band of a whole tile, as TMA can do it."""

    band: affine.ParallelOp
    copy: nvgpu.DeviceAsyncCopyOp
    tile: SSAValue
    stage: SSAValue | None
    """The tile's leading index (the pipeline's stage), or None (one stage)."""
    source: SSAValue
    origin: tuple[tuple[AffineMap, list[SSAValue]], ...]
    """The indices of the array (outermost first) where the tile's element (0, 0)
    comes from, each a map of values from outside the band."""
    box: tuple[int, ...]
    """The box's extent along each of the array's dimensions (outermost first): its
    elements row-major are the tile's, one tile row per element of its outer
    dimensions."""
    strides: tuple[int, ...] = ()
    """The box's element strides (outermost first; empty: all 1): it takes every
    s-th element of the array along a dimension of stride s (a strided
    convolution's pixels at a tap)."""

    @property
    def shape(self) -> tuple[int, int]:
        t = self.tile.type
        assert isinstance(t, MemRefType)
        rows, cols = t.get_shape()[-2:]
        return rows, cols

    @property
    def bytes(self) -> int:
        """The bytes the box brings (the tile's rows past it are left alone)."""
        t = self.tile.type
        assert isinstance(t, MemRefType)
        return math.prod(self.box) * element_size(t.get_element_type())


def copy_bands(grid: Operation, tiles: set[SSAValue]) -> list[affine.ParallelOp]:
    """The block bands in `grid` that copy asynchronously into one of `tiles`."""
    bands = []
    for op in grid.walk():
        if isinstance(op, nvgpu.DeviceAsyncCopyOp) and op.dst in tiles:
            band = op.parent_op()
            if not (isinstance(band, affine.ParallelOp) and mapping_of(band) == BLOCK):
                raise PassError(
                    op,
                    "copies into a wgmma tile outside a block band: "
                    "affinec-tma-copies takes the promotion's copies before "
                    "affinec-map-threads",
                )
            bands.append(band)
    return bands


def tile_copy(band: affine.ParallelOp) -> TileCopy:
    """`band` read as a `TileCopy`, proven as the module says; a `PassError` at the
    op at fault otherwise."""
    body = band.body.block
    copies = [o for o in body.ops if isinstance(o, nvgpu.DeviceAsyncCopyOp)]
    if len(copies) != 1:
        raise PassError(band, "a tile copy band holds one asynchronous copy")
    copy = copies[0]
    for op in body.ops:
        if op is copy or isinstance(op, affine.YieldOp):
            continue
        if not isinstance(
            op, affine.ApplyOp | affine.MinOp | affine.MaxOp | affine.IfOp
        ) and not isinstance(op, arith.ConstantOp):
            raise PassError(op, "a tile copy band computes its indices, nothing else")
    extents = _extents(band)
    tile = copy.dst
    t, s = tile.type, copy.src.type
    assert isinstance(t, MemRefType) and isinstance(s, MemRefType)
    *lead, r, c = copy.dstIndices
    if len(lead) > 1 or any(band.is_ancestor(v.owner) for v in lead if _owned(v)):
        raise PassError(
            copy,
            "the tile's leading indices (its stage) must be one value from outside "
            "the band",
        )
    rows, cols = t.get_shape()[-2:]
    _check_box(copy, s, t, rows, cols)
    ivs = list(band.body.block.args)
    src = [_unclamped(v, band) for v in copy.srcIndices]
    outer = _outer_values(band, [*src, r, c, copy.srcElements])
    origin_maps = tuple(_at_zero(v, band, copy) for v in src)
    box: tuple[int, ...] | None = None
    strides: tuple[int, ...] = ()
    given = [] if copy.srcElements is None else [copy.srcElements]
    indices = index_function([r, c, *src, *given], [*outer, *ivs], copy, _UNFOLLOWED)
    for at_sample in _samples(len(outer)):
        env = dict(zip(outer, at_sample, strict=True))
        points = []
        for point in itertools.product(*(range(x) for x in extents)):
            row, col, *where = indices(*at_sample, *point)
            elements = where.pop() if given else copy.elements
            points.append((row, col, tuple(where), elements))
            if len(points) == 1:
                env.update(zip(ivs, point, strict=True))
                at_zero = tuple(
                    m.eval(
                        [_eval(x, env, copy) for x in xs[: m.num_dims]],
                        [_eval(x, env, copy) for x in xs[m.num_dims :]],
                    )[0]
                    for m, xs in origin_maps
                )
                if points[0][:2] != (0, 0) or at_zero != points[0][2]:
                    raise PassError(
                        copy, "the band's first iteration copies no tile's origin"
                    )
        here, steps = _check_sample(copy, points, s.get_shape(), rows, cols)
        if len(here) == 2 and here[0] != rows:
            raise PassError(copy, "the copies do not cover the whole tile")
        if box is not None and (here, steps) != (box, strides):
            raise PassError(copy, "the box the band copies depends on its origin")
        box, strides = here, steps
    assert box is not None
    return TileCopy(
        band,
        copy,
        tile,
        lead[0] if lead else None,
        copy.src,
        origin_maps,  # pyright: ignore[reportArgumentType]
        box,
        strides if any(k != 1 for k in strides) else (),
    )


def _check_sample(
    copy: nvgpu.DeviceAsyncCopyOp,
    points: list[tuple[int, int, tuple[int, ...], int]],
    bounds: Sequence[int],
    rows: int,
    cols: int,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box (its extent along each of the source's dimensions) and its element
    strides that the band's iterations `points` (tile row, tile column, source
    indices, elements given) copy from the first one's source on, proven: each
    copies the element of the box at its offset from the origin (along a
    dimension of stride s, s times its position in the box) into the tile at that
    element's position (the box's elements row-major, one tile row per element of
    its outer dimensions, the tile's rows past them left alone), the copies cover
    the box once each, and they fill with zeros exactly the elements past the
    source's edges (each element by itself: TMA's fill of a strided box). The
    points are checked as arrays; where several break the proof, the first of them
    is refused for the first of these it breaks, as a walk point by point would."""
    e = copy.elements
    table = np.array([(r, c, *g, n) for r, c, g, n in points], dtype=np.int64)
    tile_rows, tile_cols, source, given = (
        table[:, 0], table[:, 1], table[:, 2:-1], table[:, -1]
    )  # fmt: skip
    moved = source - source[0]
    outer = moved.shape[1] - 1
    steps = [int(np.gcd.reduce(np.abs(moved[:, j]))) or 1 for j in range(outer)]
    if any(k > MAX_ELEMENT_STRIDE for k in steps):
        raise PassError(
            copy,
            f"the copies step by {steps} elements of the array: TMA's element "
            f"strides are at most {MAX_ELEMENT_STRIDE}",
        )
    offsets = moved[:, :outer] // np.array(steps, dtype=np.int64)
    box = [int(offsets[:, j].max()) + 1 for j in range(outer)]
    if any(b * k > MAX_BOX for b, k in zip(box, steps, strict=True)):
        raise PassError(
            copy,
            f"a box of {box} elements at strides {steps}: TMA boxes span at most "
            f"{MAX_BOX} a dimension",
        )
    if math.prod(box) > rows or (outer and int(offsets.min()) < 0):
        raise PassError(copy, _NOT_A_BOX)
    row = np.zeros(len(points), dtype=np.int64)
    for j, b in enumerate(box):
        row = row * b + offsets[:, j]
    misplaced = (row != tile_rows) | (moved[:, -1] != tile_cols)
    # the tile's elements each point's run copies, and whether an earlier run did
    outside_tile = (
        (tile_rows < 0) | (tile_rows >= rows) | (tile_cols < 0) | (tile_cols + e > cols)
    )
    runs = (tile_rows * cols + tile_cols)[:, None] + np.arange(e)
    _, first, where = np.unique(
        runs.reshape(-1), return_index=True, return_inverse=True
    )
    copied_before = (first[where].reshape(runs.shape) // e) < np.arange(len(points))[
        :, None
    ]
    uncovering = outside_tile | copied_before.any(axis=1)
    last = source[:, -1]
    rows_in = np.all((source[:, :-1] >= 0) & (source[:, :-1] < bounds[:-1]), axis=1)
    inside = rows_in & (last >= 0) & (last + e <= bounds[-1])
    past = ~rows_in | (last >= bounds[-1]) | (last + e <= 0)
    misfilled = ~(inside & (given == e) | past & (given == 0))
    broken = np.flatnonzero(misplaced | uncovering | misfilled)
    if broken.size:
        i = broken[0]
        if misplaced[i]:
            raise PassError(copy, _NOT_A_BOX)
        if uncovering[i]:
            raise PassError(copy, "the copies do not cover the tile once each")
        raise PassError(
            copy,
            "the copy fills other elements with zeros than those past the "
            "matrix's edges (what TMA fills)",
        )
    if len(points) * e != math.prod(box) * cols:
        raise PassError(copy, "the copies do not cover the whole box")
    return (*box, cols), (*steps, 1)


_NOT_A_BOX = (
    "the copy's source is not the tile's origin plus the element copied: TMA "
    "copies a box"
)


def _check_box(
    copy: Operation, s: MemRefType, t: MemRefType, rows: int, cols: int
) -> None:
    size = element_size(s.get_element_type())
    if not 2 <= s.get_num_dims() <= MAX_RANK:
        raise PassError(
            copy, f"TMA here loads boxes of 2- to {MAX_RANK}-D arrays, not of {s}"
        )
    if s.get_element_type() != t.get_element_type():
        raise PassError(copy, "the copy converts its elements: TMA copies bytes")
    if s.get_shape()[-1] * size % GLOBAL_STRIDE_BYTES:
        raise PassError(
            copy,
            f"the rows of {s} are {s.get_shape()[-1] * size} bytes apart: TMA needs a "
            f"multiple of {GLOBAL_STRIDE_BYTES} (keep cp.async copies: "
            "affinec-tma-copies is for such arrays only)",
        )
    if (s.get_num_dims() == 2 and rows > MAX_BOX) or cols % CORE:
        raise PassError(
            copy,
            f"a tile of {rows}x{cols}: TMA boxes of at most {MAX_BOX} rows, and the "
            f"columns in slabs of {CORE}",
        )


def _extents(band: affine.ParallelOp) -> list[int]:
    out = []
    for dim in band_of(band, {}, "block").dims:
        if dim.lower != 0 or dim.step != 1 or dim.guards or dim.runtime_upper:
            raise PassError(
                band, "a tile copy band from 0 by 1 to constant bounds, for TMA"
            )
        out.append(dim.extent)
    return out


def _owned(v: SSAValue) -> bool:
    return isinstance(v.owner, Operation)


def _unclamped(v: SSAValue, band: Operation) -> SSAValue:
    """`v` without the `affine.min`/`affine.max` of one operand that clamp it."""
    while isinstance(v.owner, affine.MinOp | affine.MaxOp) and band.is_ancestor(
        v.owner
    ):
        op = v.owner
        if len(op.mapOperands) != 1 or any(
            e != AffineExpr.dimension(0) and not _is_constant(e)
            for e in op.map.data.results
        ):
            break
        v = op.mapOperands[0]
    return v


def _is_constant(e: AffineExpr) -> bool:
    return not any(isinstance(x, AffineDimExpr | AffineSymExpr) for x in e.dfs())


def _outer_values(band: Operation, roots: Sequence[SSAValue | None]) -> list[SSAValue]:
    """The values from outside `band` that `roots` are computed from (constants
    aside)."""
    seen: dict[SSAValue, None] = {}
    stack = [v for v in roots if v is not None]
    ivs = set(band.regions[0].block.args)
    while stack:
        v = stack.pop()
        if v in ivs or v in seen:
            continue
        owner = v.owner
        if isinstance(owner, Operation) and band.is_ancestor(owner):
            stack.extend(owner.operands)
            for region in owner.regions:
                for op in region.walk():
                    stack.extend(op.operands)
            continue
        if isinstance(owner, arith.ConstantOp):
            continue
        seen[v] = None
    return list(seen)


_UNFOLLOWED = "an index of the copy is computed in a way TMA cannot follow"


def _eval(v: SSAValue, env: dict[SSAValue, int], at: Operation) -> int:
    return evaluate(v, env, at, _UNFOLLOWED)


def evaluate(v: SSAValue, env: dict[SSAValue, int], at: Operation, why: str) -> int:
    """The value of index `v`, the values of `env` known (constants, affine maps,
    `affine.if` results); a `PassError` at `at` saying `why` where it depends on
    anything else."""
    if v in env:
        return env[v]
    op = v.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    if isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp):
        m = op.map.data
        values = [evaluate(x, env, at, why) for x in op.mapOperands]
        results = m.eval(values[: m.num_dims], values[m.num_dims :])
        if isinstance(op, affine.MinOp):
            return min(results)
        if isinstance(op, affine.MaxOp):
            return max(results)
        return results[0]
    if isinstance(op, affine.IfOp) and len(op.results) == 1:
        taken = op.then_region if holds(op, env, at, why) else op.else_region
        return evaluate(_yielded(taken), env, at, why)
    raise PassError(at, why)


def index_function(
    roots: Sequence[SSAValue], inputs: Sequence[SSAValue], at: Operation, why: str
) -> Callable[..., tuple[int, ...]]:
    """`evaluate` of each of `roots`, written once as one Python function of the
    values of `inputs` (positional, in order): what `evaluate` computes point by
    point, without walking the ops again at every point. A root that depends on
    anything `evaluate` cannot follow raises the same `PassError` when a point
    reaches it (an `affine.if`'s branch not taken is not evaluated)."""
    names = {v: f"x{k}" for k, v in enumerate(inputs)}

    def source(v: SSAValue) -> str:
        if v in names:
            return names[v]
        op = v.owner
        if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            return f"({op.value.value.data})"
        if isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp):
            m = op.map.data
            args = [source(x) for x in op.mapOperands]
            dims, syms = args[: m.num_dims], args[m.num_dims :]
            results = [to_python(e, dims, syms) for e in m.results]
            if isinstance(op, affine.ApplyOp):
                return results[0]
            fold = "min" if isinstance(op, affine.MinOp) else "max"
            return f"{fold}({', '.join(results)})" if len(results) > 1 else results[0]
        if isinstance(op, affine.IfOp) and len(op.results) == 1:
            s = op.condition.data
            args = [source(x) for x in op.args]
            tests = constraints_to_python(s, args[: s.num_dims], args[s.num_dims :])
            taken, other = _yielded(op.then_region), _yielded(op.else_region)
            return (
                f"({source(taken)} if ({' and '.join(tests) or 'True'}) "
                f"else {source(other)})"
            )
        return "refuse()"

    def refuse() -> int:
        raise PassError(at, why)

    text = (
        f"def index_function({', '.join(names.values())}):\n"
        f"    return ({''.join(source(v) + ', ' for v in roots)})\n"
    )
    scope: dict[str, object] = {"refuse": refuse}
    exec(compile(text, "<index_function>", "exec"), scope)
    return scope["index_function"]  # pyright: ignore[reportReturnType]


def _yielded(region: Region) -> SSAValue:
    """The value an `affine.if`'s region yields."""
    term = region.block.last_op
    assert isinstance(term, affine.YieldOp)
    return term.operands[0]


def holds(op: affine.IfOp, env: dict[SSAValue, int], at: Operation, why: str) -> bool:
    """Whether the condition of `op` holds for the values of `env`."""
    s = op.condition.data
    values = [evaluate(x, env, at, why) for x in op.args]
    dims, syms = values[: s.num_dims], values[s.num_dims :]
    for c in s.constraints:
        lhs, rhs = AffineMap(s.num_dims, s.num_symbols, (c.lhs, c.rhs)).eval(dims, syms)
        if c.kind == AffineConstraintKind.ge and not lhs >= rhs:
            return False
        if c.kind == AffineConstraintKind.le and not lhs <= rhs:
            return False
        if c.kind == AffineConstraintKind.eq and lhs != rhs:
            return False
    return True


def _at_zero(
    v: SSAValue, band: Operation, copy: Operation
) -> tuple[AffineMap, list[SSAValue]]:
    """The map of `v` with the band's induction variables at 0, and its operands:
    `v` must be an `affine.apply` of values from outside the band and the band's
    induction variables."""
    op = v.owner
    ivs = list(band.regions[0].block.args)
    if not isinstance(op, affine.ApplyOp) or any(
        x not in ivs and _owned(x) and band.is_ancestor(x.owner)  # pyright: ignore
        for x in op.mapOperands
    ):
        raise PassError(
            copy,
            "the copy's source index is no affine.apply of the band's induction "
            "variables and values from outside it",
        )
    m = op.map.data
    zero = {}
    for k, x in enumerate(op.mapOperands):
        if x in ivs:
            zero[k] = AffineExpr.constant(0)
    kept = [x for k, x in enumerate(op.mapOperands) if k not in zero]
    renumber: list[AffineExpr] = []
    dims = syms = 0
    for k in range(len(op.mapOperands)):
        if k in zero:
            renumber.append(zero[k])
        elif k < m.num_dims:
            renumber.append(AffineExpr.dimension(dims))
            dims += 1
        else:
            renumber.append(AffineExpr.symbol(syms))
            syms += 1
    (e,) = m.results
    moved = e.replace_dims_and_symbols(renumber[: m.num_dims], renumber[m.num_dims :])
    return AffineMap(dims, syms, (moved,)), kept


__all__ = [
    "MAX_BOX",
    "TileCopy",
    "copy_bands",
    "evaluate",
    "holds",
    "index_function",
    "tile_copy",
]
