"""A single-statement `linalg.generic` contraction as affinec's contraction, and the
spec it is when it is one.

    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                     affine_map<(d0, d1, d2) -> (d2, d1)>,
                                     affine_map<(d0, d1, d2) -> (d0, d1)>],
                    iterator_types = ["parallel", "parallel", "reduction"]}
        ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %acc, %p : f32
      linalg.yield %s : f32
    }

is `C[d0, d1] = +(A[d0, d2] * B[d2, d1])` (`generic_contraction`): the output's map a
permutation of the parallel dimensions (its order is the parallel loops'), every
dimension's extent the size of an operand dimension its map names alone, the body
`out + in0 * in1`. `spec_of_contraction` finds the spec such a contraction is — a
matrix product, or a convolution in NHWC/RSCK or NCHW/KCRS with strides and
dilations read off the input's map (what MLIR's `--linalg-generalize-named-ops` makes
of `linalg.matmul` and the two named convolutions) — by comparing the two
contractions' accesses point by point, up to the order of the reduction dimensions.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Operation
from xdsl.ir.affine import AffineDimExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.frontend.contraction import Access, Contraction, contraction_of


def is_contraction(op: Operation) -> bool:
    return isinstance(op, GenericOp) and len(op.inputs) == 2 and len(op.outputs) == 1


def generic_contraction(
    op: GenericOp, names: list[str], dtype: str, name: str
) -> Contraction:
    """The contraction `op` computes (its operands named `names`), or a `PassError`
    at it saying what affinec cannot take."""
    maps = [m.data for m in op.indexing_maps if isinstance(m, AffineMapAttr)]
    kinds = [
        str(getattr(i, "data", i)).split(".")[-1].lower() for i in op.iterator_types
    ]
    kinds = ["reduction" if "reduction" in k else "parallel" for k in kinds]
    operands = [*op.inputs, *op.outputs]
    if len(operands) != 3 or len(maps) != 3:
        raise PassError(op, "affinec takes a generic of two inputs and one output")
    shapes = []
    for value in operands:
        t = value.type
        if not isinstance(t, MemRefType) or any(d < 0 for d in t.get_shape()):
            raise PassError(op, f"affinec takes statically shaped memrefs, got {t}")
        shapes.append(tuple(t.get_shape()))
    _check_body(op)
    out_map = maps[2]
    parallel = [d for d, k in enumerate(kinds) if k == "parallel"]
    reduction = [d for d, k in enumerate(kinds) if k == "reduction"]
    out_dims = [e.position for e in out_map.results if isinstance(e, AffineDimExpr)]
    if len(out_dims) != len(out_map.results) or sorted(out_dims) != parallel:
        raise PassError(
            op,
            f"the output's map {out_map} must name each parallel dimension once "
            "(affinec writes every output element once)",
        )
    order = out_dims + reduction
    extents = [dimension_extent(op, d, maps, shapes) for d in range(len(kinds))]
    # old dimension d is new dimension order.index(d)
    renaming = AffineMap(
        len(order), 0, tuple(AffineDimExpr(order.index(d)) for d in range(len(kinds)))
    )
    accesses = [
        Access(n, shape, tuple(m.compose(renaming).results))
        for n, shape, m in zip(names, shapes, maps, strict=True)
    ]
    return Contraction(
        name=name,
        output_index=tuple((f"d{d}", extents[d]) for d in out_dims),
        reduction_index=tuple((f"d{d}", extents[d]) for d in reduction),
        factors=tuple(accesses[:2]),
        output=accesses[2],
        dtype=dtype,
    )


def dimension_extent(
    op: Operation, d: int, maps: Sequence[AffineMap], shapes: Sequence[tuple]
) -> int:
    """The extent of iteration dimension `d` of `op`: the size of the first operand
    dimension whose map result is `d` alone (a `PassError` at `op` without one)."""
    for m, shape in zip(maps, shapes, strict=True):
        for k, e in enumerate(m.results):
            if isinstance(e, AffineDimExpr) and e.position == d:
                return shape[k]
    raise PassError(
        op,
        f"d{d} is not alone in any operand's map, so its extent is not an operand's "
        "size: affinec takes generics whose every dimension is",
    )


def _check_body(op: GenericOp) -> None:
    block = op.body.block
    x, y, acc = block.args
    ops = list(block.ops)
    refusal = PassError(
        op,
        "affinec takes a generic whose body is out + in0 * in1 (arith.mulf of the "
        "inputs, arith.addf with the output, yielded)",
    )
    if len(ops) != 3:
        raise refusal
    mul, add, yielded = ops
    if not (
        isinstance(mul, arith.MulfOp)
        and {mul.lhs, mul.rhs} == {x, y}
        and isinstance(add, arith.AddfOp)
        and {add.lhs, add.rhs} == {acc, mul.result}
        and list(yielded.operands) == [add.result]
    ):
        raise refusal


def spec_of_contraction(c: Contraction) -> Spec | None:
    """The matrix product or convolution `c` is, if it is one."""
    candidates: list[Spec] = []
    a, b, out = (x.shape for x in c.operands)
    if len(a) == len(b) == len(out) == 2:
        candidates.append(MatmulSpec(out[0], out[1], a[1], c.dtype))
    if len(a) == len(b) == len(out) == 4:
        for layout, filters, spatial in (
            ("nhwc", "rsck", (1, 2)),
            ("nchw", "kcrs", (2, 3)),
        ):
            candidate = _conv(c, layout, filters, spatial)
            if candidate is not None:
                candidates.append(candidate)
    for spec in candidates:
        if same_contraction(contraction_of(spec), c):
            return spec
    return None


def _conv(
    c: Contraction, layout: str, filters: str, spatial: tuple[int, int]
) -> ConvSpec | None:
    a, b, _ = (x.shape for x in c.operands)
    if layout == "nhwc":
        (n, h, w, ch), (r, s, _, k) = a, b
    else:
        (n, ch, h, w), (k, _, r, s) = a, b
    strides, dilations = [], []
    for axis in spatial:
        expr = c.factors[0].indices[axis]
        used = sorted(expr.used_dims())
        if len(used) != 2:
            return None
        low, high = (_coefficient(expr, d, len(c.extents)) for d in used)
        strides.append(low)
        dilations.append(high)
    try:
        return ConvSpec(
            n, ch, h, w, k, r, s,
            stride=tuple(strides), padding=(0, 0), dilation=tuple(dilations),
            layout=layout, filter_layout=filters, dtype=c.dtype,
        )  # fmt: skip
    except ValueError:
        return None


def _coefficient(expr, d: int, dims: int) -> int:
    unit = [0] * dims
    unit[d] = 1
    m = AffineMap(dims, 0, (expr,))
    return m.eval(unit, [])[0] - m.eval([0] * dims, [])[0]


def same_contraction(ours: Contraction, theirs: Contraction) -> bool:
    """Whether the two compute the same thing: the same extents, and every operand
    of the same shape read at the same places, up to the order of the reduction
    dimensions (compared at every corner and a few points of the iteration space)."""
    if [e for _, e in ours.output_index] != [e for _, e in theirs.output_index]:
        return False
    n_out = len(ours.output_index)
    reductions = [e for _, e in theirs.reduction_index]
    for perm in itertools.permutations(range(len(reductions))):
        if [reductions[p] for p in perm] != [e for _, e in ours.reduction_index]:
            continue
        if all(
            x.shape == y.shape and _same_indices(x, y, ours.extents, n_out, perm)
            for x, y in zip(ours.operands, theirs.operands, strict=True)
        ):
            return True
    return False


def _same_indices(x: Access, y: Access, extents: list[int], n_out: int, perm) -> bool:
    dims = len(extents)
    ours = AffineMap(dims, 0, x.indices)
    theirs = AffineMap(dims, 0, y.indices)
    points = itertools.product(*[sorted({0, 1, e - 1}) for e in extents])
    for point in itertools.islice(points, 512):
        # ours' reduction dimension i is theirs' perm[i]
        theirs_point = list(point[:n_out]) + [
            point[n_out + perm.index(q)] for q in range(len(perm))
        ]
        if ours.eval(list(point), []) != theirs.eval(theirs_point, []):
            return False
    return True


__all__ = [
    "generic_contraction",
    "is_contraction",
    "same_contraction",
    "spec_of_contraction",
]
