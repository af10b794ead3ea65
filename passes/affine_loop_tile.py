"""`affine-loop-tile`: MLIR's tiling of `affine.for` bands, and the reference design's
tiling of an `affine.parallel` for the GPU's grid and blocks.

Each op at the top of a function is tiled by one of two rules:

- a band of perfectly nested `affine.for` loops is tiled as MLIR's pass of the same
  name tiles it, with MLIR's options `tile-size`, `tile-sizes`, `cache-size` and
  `separate` (`affinec/transforms/affine/mlir_tiling.py` says how, and where affinec
  refuses rather than guess what MLIR would do);
- an unmapped `affine.parallel` (affinec's naive IR) is tiled for the GPU, with the
  options `tile-sizes`, `reduction-tile-sizes`, `separate` and `reassociate`, as
  follows.

The outermost unmapped `affine.parallel` of each function (the output band) becomes
two: a grid-level band over tiles, `{affinec.mapping = "grid"}` (one iteration per GPU
block), and inside it a block-level band over the points of one tile,
`{affinec.mapping = "block"}` (one iteration per thread, until thread mapping gives
threads more). Each perfect band of `affine.for` loops directly in its body (the
reduction) becomes tile loops, marked `{affinec.tile}`, around point loops. As the
reference design has it, tiling takes only simple loops (lower bound 0, step 1),
produces only simple loops, and adds no operation: `%i` becomes `%i0 * 16 + %i1` in the
map of every op that uses it, simplified (`%n0 + %n1`, never `%n0 * 1 + %n1`).

    affine.parallel (%i, %j) = (0, 0) to (64, 100) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 12 {
        %a = affine.load %A[%i, %p] : memref<64x12xf32>
        ...
      }
      ...
      affine.store %sum, %C[%i, %j] : memref<64x100xf32>
    }

with `affine-loop-tile{tile-sizes=16,16 reduction-tile-sizes=4}` becomes

    affine.parallel (%i0, %j0) = (0, 0) to (4, 7) {
      affine.parallel (%i1, %j1) = (0, 0) to (16, min(16, %j0 * -16 + 100)) {
        %acc = memref.alloca() : memref<f32>
        affine.store %zero, %acc[] : memref<f32>
        affine.for %p0 = 0 to 3 {
          affine.for %p1 = 0 to 4 {
            %a = affine.load %A[%i0 * 16 + %i1, %p0 * 4 + %p1] : memref<64x12xf32>
            ...
          }
        } {affinec.tile}
        ...
        affine.store %sum, %C[%i0 * 16 + %i1, %j0 * 16 + %j1] : memref<64x100xf32>
      } {affinec.mapping = "block"}
    } {affinec.mapping = "grid"}

Sizes that do not divide an extent are legal: the last tile's upper bound is a `min`
group (`min(16, %j0 * -16 + 100)`) or, for a reduction, an `affine.min` bound map.
With `separate=true`, full tiles carry no bounds: the block band is versioned on the
grid variables, `affine.if` (every tile but the last along each dimension) holding a
copy with constant bounds, the else branch the bounded one (PlaidML's fast and slow
paths), and the last, partial iteration of a reduction tile loop is peeled off into
its own copy (Loopy's slabs).

The order of summation is kept unless `reassociate=true`. The tile loops run first, so
a reduction band keeps its order only if the dimensions cut into several tiles come
first, in tiles of 1 except perhaps the last of them, and every later dimension is
whole (see `summation_order_kept`). Sizes that would reorder the sum are refused,
because they change the result's rounding, not because they are wrong.

Options (for an `affine.for` band, see MLIR: `tile-size` for every loop, `tile-sizes`
per loop, filled with 4, else the `cache-size` model; `separate`):
- `tile-sizes`: the block's extent along each parallel dimension (outermost first).
  Missing trailing sizes are 1 (the dimension goes to the grid); a size above the
  extent is the extent. A band of partial sums (`affinec.splits`, made by
  `affinec-split-reduction`) takes them for the dimensions after its leading split
  dimension, which is tiled by 1 (one split a block); the band that adds the
  partial sums, which has no reduction, takes the default (below) instead: it is
  a copy, and small blocks spread it over the chip. Default: about 256 iterations per block, filled from the
  innermost (contiguous) output dimension outwards, at most 16 along the two innermost.
- `reduction-tile-sizes`: the tile along each reduction dimension. Missing trailing
  sizes, and sizes at or above the extent, are the whole extent (one tile, which keeps
  the order). Default: the outermost reduction dimension of extent above 1 in tiles of
  up to 64 point iterations, the others whole (ResNet-50's first layer: 1, 7, 7).
- `separate`: separate full tiles from partial ones (see above).
- `reassociate`: accept reduction sizes that change the order of summation.

The output honours the contract the GPU lowering relies on: per function, one
grid-level `affine.parallel` holding the block-level one(s), whose bounds may depend
on the grid variables; inside, only affine ops, `affinec.padded_load`, arith and
memref. Illegal options and inputs (a size of 0 or below, more sizes than dimensions,
a loop that is not simple, an induction variable used outside an affine map, a
reduction band whose bounds depend on itself, an already mapped loop) are refused with
a diagnostic naming the op and the option, before anything is rewritten. So are
options that fit no op of the module (`tile-size` without an `affine.for` band,
`reduction-tile-sizes` without an `affine.parallel`). A module with neither is left
as it is, as MLIR leaves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import BLOCK, GRID, MAPPING, SPLITS
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import (
    body_ops,
    constant_trip_extent,
    constant_value,
    is_defined_inside,
    is_simple_for,
    map_slots,
    non_affine_uses,
    non_simple_parallel_dims,
    perfect_band,
    refuse_unsupported,
    summation_order_kept,
)
from affinec.transforms.affine.mlir_tiling import (
    TilingRefused,
    check_dependences,
    mlir_skips,
    mlir_tile_sizes,
    separate_full_tiles,
    tile_band_like_mlir,
    tileable_bands,
)
from affinec.transforms.affine.tiling import (
    drop_leading_unit_dimension,
    tile_band,
    tile_parallel,
)
from affinec.transforms.affine.versioning import peel_last_iteration, version_full_tiles
from affinec.transforms.mapped_bands import naive_parallels

BLOCK_ITERATIONS = 256
"""What the default block tile aims at: a few warps' worth of output points."""
MAX_INNER_TILE = 16
"""The default tile along each of the two innermost output dimensions."""
POINT_ITERATIONS = 64
"""What the default reduction tile aims at: the point loops of one tile."""


@dataclass(frozen=True)
class _Band:
    loops: tuple[affine.ForOp, ...]
    extents: tuple[int | None, ...]
    sizes: tuple[int | None, ...]
    """Per loop: the tile size, or None for the whole (unknown) extent."""


@dataclass(frozen=True)
class _Plan:
    parallel: affine.ParallelOp
    sizes: tuple[int, ...]
    bands: tuple[_Band, ...]


@dataclass(frozen=True)
class AffineLoopTilePass(ModulePass):
    """Tile affine.for bands as MLIR does; an affine.parallel into grid/block loops."""

    name = "affine-loop-tile"

    tile_sizes: tuple[int, ...] = ()
    """The block's extent along each parallel dimension, outermost first; missing
    trailing sizes are 1 (that dimension goes to the grid)."""
    reduction_tile_sizes: tuple[int, ...] = ()
    """The tile along each reduction dimension; missing trailing sizes are the whole
    extent."""
    separate: bool = False
    """Separate full tiles (no bounds checks) from partial ones."""
    reassociate: bool = False
    """Accept reduction tiles that change the order of summation."""
    tile_size: int = 0
    """MLIR's: one tile size for every loop of an `affine.for` band (0: unset)."""
    cache_size: int = 512
    """MLIR's: the cache, in KiB, whose size picks an `affine.for` band's tile sizes
    when neither `tile-size` nor `tile-sizes` is given."""

    @property
    def changes_rounding(self) -> bool:
        """Whether this pass may change the order of summation (and so the rounding):
        `Pipeline.run(check=True)` then holds it to the dtype's tolerance."""
        return self.reassociate

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        parallels = naive_parallels(
            op,
            "affine-loop-tile tiles the unmapped affine.parallel of the naive IR, once",
        )
        bands = [b for b in tileable_bands(op) if not mlir_skips(b)]
        self._check_options(op, parallels, tileable_bands(op))
        reduces = [_has_reduction(p) for p in parallels]
        plans = [
            self._plan(p, beside=not r and any(reduces))
            for p, r in zip(parallels, reduces, strict=True)
        ]
        if self.reduction_tile_sizes and plans and not any(p.bands for p in plans):
            # (a band without reductions beside one with, such as the band that
            # combines a split reduction's partial sums, takes none)
            raise PassError(
                parallels[0],
                f"has no reduction loops, but reduction-tile-sizes="
                f"{_text(self.reduction_tile_sizes)} was given",
            )
        for_plans = [(band, self._plan_for_band(band)) for band in bands]
        for plan in plans:
            self._rewrite(plan)
        for band, sizes in for_plans:
            _, intra = tile_band_like_mlir(band, sizes)
            if self.separate:
                separate_full_tiles(intra)

    def _check_options(
        self,
        module: ModuleOp,
        parallels: Sequence[affine.ParallelOp],
        bands: Sequence[Sequence[affine.ForOp]],
    ) -> None:
        """Options that fit no op of the module, or that no op can take."""
        if self.tile_size < 0:
            raise PassError(module, f"tile-size={self.tile_size} must be positive")
        if self.cache_size <= 0:
            raise PassError(module, f"cache-size={self.cache_size} must be positive")
        if self.tile_size and not bands and parallels:
            # (without either, there is nothing to tile: MLIR does nothing)
            raise PassError(
                module,
                "tile-size tiles affine.for bands (MLIR's meaning) and the module has "
                "none; an affine.parallel takes tile-sizes",
            )
        if (self.reduction_tile_sizes or self.reassociate) and not parallels:
            option = (
                "reduction-tile-sizes" if self.reduction_tile_sizes else "reassociate"
            )
            raise PassError(
                module,
                f"{option} applies to affinec's tiling of an affine.parallel, and the "
                "module has none",
            )
        if bands and any(t <= 0 for t in self.tile_sizes):
            raise PassError(
                bands[0][0],
                f"tile-sizes={_text(self.tile_sizes)}: tile sizes must be positive",
            )

    def _plan_for_band(self, band: Sequence[affine.ForOp]) -> list[int]:
        """MLIR's tile sizes for an `affine.for` band, after checking that affinec can
        tell that MLIR would tile it."""
        try:
            check_dependences(band)
            return mlir_tile_sizes(
                band, self.tile_size, self.tile_sizes, self.cache_size
            )
        except TilingRefused as e:
            raise PassError(e.op, e.reason) from None

    # -- checking and planning, before any rewriting ----------------------------------

    def _plan(self, op: affine.ParallelOp, beside: bool = False) -> _Plan:
        """`beside`: a band without reductions beside one with (the band adding a
        split reduction's partial sums), tiled by the default rule: blocks of about
        `BLOCK_ITERATIONS` outputs, not the contraction's large ones."""
        if op.res:
            raise PassError(
                op, "has reductions; affine-loop-tile takes an affine.parallel without"
            )
        # A split band's leading dimension is its split: one a block (SPLITS).
        split = 1 if SPLITS in op.attributes else 0
        dims = len(op.induction_variables) - split
        _check_sizes(op, "tile-sizes", self.tile_sizes, dims, "dimensions")
        if bad := non_simple_parallel_dims(op):
            raise PassError(
                op,
                f"is not a simple loop (dimension {bad[0]} has a lower bound other "
                "than 0 or a step other than 1); affine-loop-tile (tile-sizes) takes "
                "only simple loops: run affine-loop-normalize first",
            )
        for iv in op.induction_variables:
            _check_affine_uses(iv, op, "tile-sizes")
        extents = _parallel_extents(op)
        if split and not (extents and (extents[0] or 0) >= 1):
            raise PassError(
                op,
                f"is a band of partial sums ({SPLITS}) whose split dimension has no "
                "constant extent of at least 1",
            )
        given = () if beside else self.tile_sizes
        sizes = given or default_tile_sizes(extents[split:])
        sizes = (1,) * split + tuple(sizes) + (1,) * (dims - len(sizes))
        sizes = tuple(
            min(t, e) if e else t for t, e in zip(sizes, extents, strict=True)
        )

        loops = [s for s in body_ops(op.body.block) if isinstance(s, affine.ForOp)]
        bands = tuple(self._plan_band(perfect_band(loop)) for loop in loops)
        return _Plan(op, sizes, bands)

    def _plan_band(self, band: list[affine.ForOp]) -> _Band:
        _check_sizes(
            band[0],
            "reduction-tile-sizes",
            self.reduction_tile_sizes,
            len(band),
            "loops",
        )
        for k, loop in enumerate(band):
            if not is_simple_for(loop):
                raise PassError(
                    loop,
                    "is not a simple loop (lower bound 0, step 1); affine-loop-tile "
                    "(reduction-tile-sizes) takes only simple loops: run "
                    "affine-loop-normalize first",
                )
            if loop.inits:
                raise PassError(
                    loop,
                    "has iter_args; affine-loop-tile (reduction-tile-sizes) tiles "
                    "loops that carry no values",
                )
            for operand in map_slots(loop)[1].operands:
                if k and is_defined_inside(operand, band[0]):
                    raise PassError(
                        loop,
                        "has a bound that depends on an enclosing loop of its band; "
                        "affine-loop-tile (reduction-tile-sizes) tiles rectangular "
                        "bands only",
                    )
            _check_affine_uses(loop.induction_variable, loop, "reduction-tile-sizes")
        extents = tuple(constant_trip_extent(loop) for loop in band)
        given = self.reduction_tile_sizes or default_reduction_tile_sizes(extents)
        sizes: list[int | None] = []
        for k, e in enumerate(extents):
            t = given[k] if k < len(given) else None
            if t is None or (e is not None and t >= e):
                t = e  # one tile: None when the extent is not a constant
            if t == 0:
                t = 1  # an empty loop: tiles of one (there are none)
            sizes.append(t)
        cut = [
            None if e is not None and t == e else t
            for t, e in zip(sizes, extents, strict=True)
        ]
        if not self.reassociate and not summation_order_kept(extents, cut):
            raise PassError(
                band[0],
                f"reduction-tile-sizes={_text(given)} changes the order of summation "
                f"over the band of extents {_text(extents)}: the order is kept only if "
                "the dimensions cut into several tiles come first, in tiles of 1 but "
                "for the last of them, and the others are whole; pass "
                "reassociate=true to accept a different rounding",
            )
        return _Band(tuple(band), extents, tuple(sizes))

    # -- rewriting ----------------------------------------------------------------------

    def _rewrite(self, plan: _Plan) -> None:
        for band in plan.bands:
            tiles, _ = tile_band(band.loops, band.sizes)
            if self.separate:
                for tile, e, t in reversed(
                    list(zip(tiles, band.extents, band.sizes, strict=True))
                ):
                    if e is not None and t is not None and e % t and -(-e // t) >= 2:
                        peel_last_iteration(tile)
        _, inner = tile_parallel(
            plan.parallel,
            plan.sizes,
            {**plan.parallel.attributes, MAPPING: StringAttr(GRID)},
            {MAPPING: StringAttr(BLOCK)},
        )
        if SPLITS in plan.parallel.attributes:
            inner = drop_leading_unit_dimension(inner)
        if self.separate:
            version_full_tiles(inner)


def _has_reduction(op: affine.ParallelOp) -> bool:
    return any(isinstance(s, affine.ForOp) for s in body_ops(op.body.block))


def _check_sizes(
    op: Operation, option: str, sizes: Sequence[int], available: int, what: str
) -> None:
    if len(sizes) > available:
        raise PassError(
            op,
            f"{option}={_text(sizes)} gives {len(sizes)} sizes but the op has "
            f"{available} {what}",
        )
    for t in sizes:
        if t <= 0:
            raise PassError(
                op, f"{option}={_text(sizes)}: tile size {t} must be positive"
            )


def _check_affine_uses(iv, loop: Operation, option: str) -> None:
    if stray := non_affine_uses(iv):
        name = f"%{iv.name_hint}" if iv.name_hint else "an induction variable"
        raise PassError(
            loop,
            f"cannot be tiled ({option}): {name} is used by '{stray[0].name}', which "
            "has no affine map to fold the tiled index into",
        )


def _parallel_extents(op: affine.ParallelOp) -> tuple[int | None, ...]:
    upper = op.upperBoundsMap.data
    extents: list[int | None] = []
    k = 0
    for g in op.upper_groups:
        values = [constant_value(upper, k + j) for j in range(g)]
        extents.append(None if None in values else max(0, min(values)))  # pyright: ignore
        k += g
    return tuple(extents)


def _text(values: Sequence[object]) -> str:
    return ",".join("?" if v is None else str(v) for v in values)


def _fit(extent: int | None, limit: int) -> int:
    """The whole extent when it fits `limit`, else the largest power of two that does."""
    if extent is not None and extent <= limit:
        return max(1, extent)
    return 1 << (max(1, limit).bit_length() - 1)


def default_tile_sizes(extents: Sequence[int | None]) -> tuple[int, ...]:
    """Block tile sizes for an output band of these extents (None: unknown).

    About `BLOCK_ITERATIONS` points per block, filled from the innermost dimension
    outwards so that a block covers a contiguous run of the output: ResNet-50's first
    layer (128, 64, 112, 112) gets 1x1x16x16, a 12x12 matrix product 12x12. A
    dimension of unknown extent (a dynamic batch, bounded by a symbol) is tiled by
    1, the only size the tiling takes for it.
    """
    sizes = [1] * len(extents)
    budget = BLOCK_ITERATIONS
    for k in reversed(range(len(extents))):
        if extents[k] is None:
            continue
        inner = k >= len(extents) - 2
        t = _fit(extents[k], min(budget, MAX_INNER_TILE) if inner else budget)
        sizes[k] = t
        budget //= t
        if budget <= 1:
            break
    return tuple(sizes)


def default_reduction_tile_sizes(
    extents: Sequence[int | None],
) -> tuple[int | None, ...]:
    """Reduction tile sizes that keep the order of summation: the outermost dimension
    of extent above 1 in tiles of about `POINT_ITERATIONS` points (with the whole of
    every dimension inside it), the rest whole (None)."""
    sizes: list[int | None] = [None] * len(extents)
    for k, e in enumerate(extents):
        if e is None:
            return tuple(sizes)
        if e > 1:
            inner = math.prod(
                x if x is not None else POINT_ITERATIONS for x in extents[k + 1 :]
            )
            inner = max(inner, 1)  # an empty loop inside: any tile will do
            sizes[k] = _fit(e, max(1, POINT_ITERATIONS // inner))
            return tuple(sizes)
    return tuple(sizes)
