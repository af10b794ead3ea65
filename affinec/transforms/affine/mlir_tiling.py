"""MLIR's loop tiling of perfect `affine.for` bands: the work behind
`affine-loop-tile` on an `affine.for` at the top of a function.

It does what MLIR's pass does (`mlir/lib/Dialect/Affine/Transforms/LoopTiling.cpp`
and `tilePerfectlyNested`), checked against mlir-opt 22 on cases of our own:

- the bands are the maximal perfect nests of `affine.for` whose outermost loop is
  directly in a function body (`tileable_bands`); a band with a loop that yields
  values or whose bounds depend on another loop of the band is left alone, as MLIR
  leaves it;
- tile sizes (`mlir_tile_sizes`): `tile-size` for every loop, else `tile-sizes`
  (cut or filled with 4 to the band's depth), else MLIR's cache model: the band's
  memory footprint `cache-size` KiB at a time, the excess spread evenly over the
  loops and each size reduced to a divisor of its constant trip count;
- the tiled nest (`tile_band_like_mlir`): tile loops over the original bounds with
  the step times the size, then intra-tile loops from `%t` to `%t + size * step`,
  bounded by `min(%t + size * step, original upper bounds)` where the trip count's
  largest known divisor is not a multiple of the size, and to `%t + trip count *
  step` where the whole trip count is smaller than the size; uses of the original
  variables become the intra-tile ones;
- with `separate`, full tiles (`separate_full_tiles`): an `affine.if` on the tile
  variables holding a copy of the intra-tile nest with constant trip counts, the
  `min`-bounded nest in the else branch (not when a step is not 1, as MLIR).

Where affinec cannot reproduce MLIR's decision it refuses, naming why
(`TilingRefused`): whether tiling violates a dependence is decided for access pairs
whose dependence distances are constants or free (MLIR's own test tiles those),
the cache model's footprint for bands whose loops have constant bounds.

The work is in four modules, re-exported here: `mlir_tile_bands.py` (the bands, trip
counts, `TilingRefused`), `mlir_tile_dependences.py` (the dependence check),
`mlir_tile_cache_model.py` (the tile sizes and footprint) and `mlir_tile_rewrite.py`
(the tiled nest and full-tile separation).
"""

from affinec.transforms.affine.mlir_tile_bands import (
    TilingRefused,
    constant_trip_count,
    largest_divisor_of_trip_count,
    largest_known_divisor,
    mlir_skips,
    perfect_nest,
    tileable_bands,
    trip_count_exprs,
)
from affinec.transforms.affine.mlir_tile_cache_model import (
    DEFAULT_TILE_SIZE,
    Symbolic,
    footprint_bytes,
    mlir_tile_sizes,
)
from affinec.transforms.affine.mlir_tile_dependences import check_dependences
from affinec.transforms.affine.mlir_tile_rewrite import (
    separate_full_tiles,
    separation_condition,
    tile_band_like_mlir,
)

__all__ = [
    "DEFAULT_TILE_SIZE",
    "Symbolic",
    "TilingRefused",
    "check_dependences",
    "constant_trip_count",
    "footprint_bytes",
    "largest_divisor_of_trip_count",
    "largest_known_divisor",
    "mlir_skips",
    "mlir_tile_sizes",
    "perfect_nest",
    "separate_full_tiles",
    "separation_condition",
    "tile_band_like_mlir",
    "tileable_bands",
    "trip_count_exprs",
]
