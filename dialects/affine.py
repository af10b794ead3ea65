"""The affine dialect in MLIR's syntax.

xDSL 0.74 ships an affine dialect whose textual form differs from MLIR's: it has no
custom syntax for `affine.parallel` and `affine.if`, no `affine.max`, prints maps as
`(d0 + -2)`, and parses `affine.load %A[%i, %j + 1]` into a map over symbols. This file
defines the dialect anew, op for op, with MLIR's syntax and MLIR's convention that
loop induction variables are map dimensions:

    affine.parallel (%i, %j) = (0, 0) to (%n, min(%i + 16, 100)) step (1, 2) {
      %v = affine.load %A[%i, %j + symbol(%k)] : memref<?x?xf32>
      affine.store %v, %B[%j, %i] : memref<?x?xf32>
    } {affinec.mapping = "block"}
    %m = affine.max affine_map<(d0) -> (0, d0 - 3)>(%i)
    affine.if affine_set<(d0) : (d0 - 1 >= 0)>(%i) { ... } else { ... }

Properties carry the same names as MLIR's (`lowerBoundsMap`, `upperBoundsGroups`,
`steps`, `reductions`, `condition`, ...) and the same values, so the generic form is
MLIR's too: reductions of `affine.parallel` are written `"addf"` in the custom form
and stored as MLIR's enum integers (`arith::AtomicRMWKind`, `reductions = [0]`).

MLIR's validity rules for affine maps' operands hold (`is_valid_dim`,
`is_valid_symbol`): an induction variable is a dimension, never a symbol; a value
defined at the top of a function (or above, or a constant, or a pure op of symbols)
is a symbol; anything else (a loaded value, an `arith.addi` of an induction
variable) is neither, and the op that uses it that way does not verify.

Also defined, as MLIR has them: `affine.vector_load`, `affine.vector_store`,
`affine.prefetch`, `affine.dma_start`, `affine.dma_wait`, `affine.delinearize_index`
and `affine.linearize_index` (`PASSES_REFUSE`: only `lower-affine` lowers some).

This module is the dialect, `Affine`, and the names of all its parts; they are defined
by idea in `affine_syntax` (the textual pieces the ops share), `affine_validity`
(MLIR's dim and symbol rules, the checks of maps' operands), `affine_index`
(affine.apply, min, max, delinearize_index, linearize_index), `affine_memory` (loads,
stores, vector accesses, prefetch, DMA), `affine_loops` (affine.for, affine.if,
affine.yield) and `affine_parallel` (affine.parallel and its reductions).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Dialect

from affinec.dialects.affine_index import (
    DYNAMIC_BASIS,
    ApplyOp,
    DelinearizeIndexOp,
    LinearizeIndexOp,
    MaxOp,
    MinOp,
)
from affinec.dialects.affine_loops import ForOp, IfOp, YieldOp
from affinec.dialects.affine_memory import (
    AffineLoadBase,
    DmaStartOp,
    DmaWaitOp,
    LoadOp,
    PrefetchOp,
    StoreOp,
    VectorLoadOp,
    VectorStoreOp,
)
from affinec.dialects.affine_parallel import (
    REDUCTION_ENUM,
    REDUCTION_IDENTITY,
    REDUCTION_KINDS,
    REDUCTION_NAMES,
    ParallelOp,
    _groups_attr,  # pyright: ignore[reportPrivateUsage]
    reduction_fits,
)
from affinec.dialects.affine_syntax import (
    parse_indexed,
    parse_memref_access,
    parse_memref_type,
    print_indexed,
    print_map_attr,
    print_memref_access,
    print_set_attr,
)
from affinec.dialects.affine_validity import (
    AFFINE_SCOPES,
    affine_scope,
    is_induction_variable,
    is_valid_dim,
    is_valid_symbol,
    verify_dims_and_symbols,
    verify_divisors,
    verify_index_operands,
    verify_memref_access,
)

__all__ = [
    "AFFINE_SCOPES",
    "DYNAMIC_BASIS",
    "PASSES_REFUSE",
    "REDUCTION_ENUM",
    "REDUCTION_IDENTITY",
    "REDUCTION_KINDS",
    "REDUCTION_NAMES",
    "Affine",
    "AffineLoadBase",
    "ApplyOp",
    "DelinearizeIndexOp",
    "DmaStartOp",
    "DmaWaitOp",
    "ForOp",
    "IfOp",
    "IndexType",
    "LinearizeIndexOp",
    "LoadOp",
    "MaxOp",
    "MinOp",
    "ParallelOp",
    "PrefetchOp",
    "StoreOp",
    "VectorLoadOp",
    "VectorStoreOp",
    "YieldOp",
    "_groups_attr",
    "affine_scope",
    "is_induction_variable",
    "is_valid_dim",
    "is_valid_symbol",
    "parse_indexed",
    "parse_memref_access",
    "parse_memref_type",
    "print_indexed",
    "print_map_attr",
    "print_memref_access",
    "print_set_attr",
    "reduction_fits",
    "verify_dims_and_symbols",
    "verify_divisors",
    "verify_index_operands",
    "verify_memref_access",
]


Affine = Dialect(
    "affine",
    [
        ApplyOp,
        DelinearizeIndexOp,
        DmaStartOp,
        DmaWaitOp,
        ForOp,
        IfOp,
        LinearizeIndexOp,
        LoadOp,
        MaxOp,
        MinOp,
        ParallelOp,
        PrefetchOp,
        StoreOp,
        VectorLoadOp,
        VectorStoreOp,
        YieldOp,
    ],
    [],
)

PASSES_REFUSE = (
    DelinearizeIndexOp,
    DmaStartOp,
    DmaWaitOp,
    LinearizeIndexOp,
    PrefetchOp,
    VectorLoadOp,
    VectorStoreOp,
)
"""Affine ops affinec reads and prints but whose meaning its transformations do not
know: every pass but `lower-affine` refuses them (`affinec.ir.context`)."""
