"""The write-back of the `affinec-mma-sync` rewrite: each lane's accumulator elements
through the block's epilogue (`rewrite_writeback`), at the pixel and channel the
accumulator's fragment layout gives them (`affinec.ir.mma_layouts.c_element`),
guarded to the block's real outputs; stored in pairs of adjacent output channels as
one `affine.vector_store` of two where the output's channels are its innermost,
contiguous dimension (the output, or the shared tile `affinec-stage-output` made of
it), else one by one.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    MemRefType,
    VectorType,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintExpr, AffineExpr, AffineMap, AffineSet

from affinec.dialects import affine, gpu
from affinec.ir.affine_exprs import ge0, linear_form
from affinec.transforms.affine.analysis import compose_map
from affinec.transforms.gpu.bands import Band
from affinec.transforms.gpu.mma_fragments import Builder, band_iv, pixel_values
from affinec.transforms.gpu.mma_plan import MmaPlan
from affinec.transforms.gpu.mma_warp_bands import constant_ivs, warp_band
from affinec.transforms.gpu.thread_bands import erase_op, partial_tile_guards


def rewrite_writeback(plan: MmaPlan, phase: Band, acc: SSAValue) -> None:
    """Each lane stores its accumulator elements through the band's epilogue: in
    pairs of adjacent output channels (c0 c1, c2 c3 of a fragment) as one
    `affine.vector_store` of two where the output's channels are its innermost,
    contiguous dimension (`_vector_store`: the output, or the shared tile
    `affinec-stage-output` made of it), else one by one."""
    body = [o for o in phase.op.body.block.ops if not isinstance(o, affine.YieldOp)]
    store = _vector_store(plan, phase, body, 2)
    element, loops = _fragment_band(plan, phase, acc, body)
    nt = loops[0]
    if store is None:
        inner = nt.loop(4, "e")
        inner.add(element.guarded(inner, inner.block.args[0]))
    else:
        inner = nt.loop(2, "half")
        first, second = _pair_elements(inner)
        otherwise = None
        if plan.block_n % 2 or phase.dims[plan.n_dim].guards:
            # a pair cut in two by the block's last channel: its first alone
            scalar = Builder(Block())
            scalar.add(element.guarded(scalar, first))
            scalar.close()
            otherwise = scalar.block
        target = _Element.to_output(store)
        pair = element.pair(inner, first, second, store, target, otherwise=otherwise)
        inner.add(pair)
    for x in (inner, *loops):
        x.close()
    erase_op(phase.op)


def _fragment_band(
    plan: MmaPlan, phase: Band, acc: SSAValue, body: list[Operation]
) -> tuple[_Element, list[Builder]]:
    """A warp band before `phase` with loops over the lane's fragments (the MMA
    tiles mt, nt), and the element of the epilogue they address; the builders from
    the innermost loop out, to close."""
    b, ids = warp_band(plan, phase.op)
    fixed = constant_ivs(plan, phase, b)
    mt = b.loop(plan.mt, "mt")
    nt = mt.loop(plan.nt, "nt")
    warp = (ids["lane"], ids["wm"], ids["wn"])
    fragment = (mt.block.args[0], nt.block.args[0])
    return _Element(plan, phase, acc, warp, fragment, fixed, body), [nt, mt, b]


def _pair_elements(half: Builder) -> tuple[SSAValue, SSAValue]:
    """The accumulator elements (of a fragment's four) of pair `half`."""
    h, d = half.block.args[0], AffineExpr.dimension
    return half.apply(d(0) * 2, [h], "e"), half.apply(d(0) * 2 + 1, [h], "e")


def _vector_store(
    plan: MmaPlan, phase: Band, body: list[Operation], width: int
) -> affine.StoreOp | None:
    """The epilogue's one store (to the output, or to the shared tile it is staged
    in), when `width` consecutive channels from a
    multiple of `width` are consecutive elements of it, aligned to `width` elements:
    the channel dimension unit-stride and the output's innermost, every other term
    a multiple of `width` (so are the channel band's lower bound and the innermost
    extent), no index computed in the epilogue."""
    stores = [o for o in body if isinstance(o, affine.StoreOp)]
    if len(stores) != 1 or any(isinstance(o, affine.IfOp | affine.ForOp) for o in body):
        return None
    (store,) = stores
    t = store.memref.type
    assert isinstance(t, MemRefType)
    element = t.get_element_type()
    if gpu.memory_space(t) not in (0, gpu.WORKGROUP_ADDRESS_SPACE) or not isinstance(
        element, Float16Type | BFloat16Type | Float32Type
    ):
        return None
    dim = phase.dims[plan.n_dim]
    n_iv = phase.op.induction_variables[plan.n_dim]
    m = store.map.data
    forms = [linear_form(e, m.num_dims, m.num_symbols) for e in m.results]
    if m.num_symbols or any(f is None for f in forms) or n_iv not in store.indices:
        return None
    if any(_defined_in(v, body) for v in store.indices):
        return None

    def coefficient(form, v: SSAValue) -> int:
        return sum(c for c, x in zip(form[0], store.indices, strict=True) if x is v)

    *outer, last = forms
    others = [c for c, x in zip(last[0], store.indices, strict=True) if x is not n_iv]
    if (
        coefficient(last, n_iv) != 1
        or any(coefficient(f, n_iv) for f in outer)
        or any(c % width for c in others)
        or last[2] % width
        or t.get_shape()[-1] % width
        or dim.step != 1
        or dim.lower is None
        or dim.lower % width
    ):
        return None
    return store


def _defined_in(v: SSAValue, body: list[Operation]) -> bool:
    owner = v.owner
    return isinstance(owner, Operation) and any(
        owner is o or o.is_ancestor(owner) for o in body
    )


class _Element:
    """One accumulator element of a lane through the epilogue: its pixel and
    channel, the guard that it is a real output of the block, and the epilogue's
    ops on it."""

    def __init__(
        self,
        plan: MmaPlan,
        phase: Band,
        acc: SSAValue,
        warp: tuple[SSAValue, SSAValue, SSAValue],
        fragment: tuple[SSAValue, SSAValue],
        fixed: dict[int, SSAValue],
        body: list[Operation],
    ) -> None:
        self.plan, self.phase, self.acc = plan, phase, acc
        self.lane, self.wm, self.wn = warp
        self.m_t, self.n_t = fragment
        self.fixed, self.body = fixed, body

    def _place(
        self, b: Builder, e: SSAValue
    ) -> tuple[dict[SSAValue, SSAValue], list[SSAValue], list[AffineConstraintExpr]]:
        """`_place_at` the lane's element `e` of its fragment."""
        plan, d = self.plan, AffineExpr.dimension
        tm, tn = plan.kind.m, plan.kind.n
        # the accumulator's layout (`mma_layouts.c_element`): lane/4 and lane%4 * 2
        m = b.apply(
            d(1) * (tm * plan.mt) + d(2) * tm + d(0) // 4 + (d(3) // 2) * 8,
            [self.lane, self.wm, self.m_t, e],
            "m",
        )
        n = b.apply(
            d(1) * (tn * plan.nt) + d(2) * tn + (d(0) % 4) * 2 + d(3) % 2,
            [self.lane, self.wn, self.n_t, e],
            "n",
        )
        return _place_at(self.plan, self.phase, self.fixed, b, m, n)

    def _epilogue(
        self, into: Block, e: SSAValue, values: dict[SSAValue, SSAValue], skip=None
    ) -> dict[SSAValue, SSAValue]:
        """The epilogue's ops for element `e` appended to `into` (but `skip`)."""
        mapping: dict[SSAValue, SSAValue] = dict(values)
        for o in self.body:
            if o is skip:
                continue
            if isinstance(o, affine.LoadOp) and o.memref is self.plan.acc.results[0]:
                load = affine.LoadOp(self.acc, [self.m_t, self.n_t, e])
                into.add_op(load)
                mapping[o.result] = load.result
                continue
            into.add_op(o.clone(mapping))
        return mapping

    def guarded(self, b: Builder, e: SSAValue) -> affine.IfOp:
        """Element `e` through the epilogue, stored where its guard holds."""
        values, operands, constraints = self._place(b, e)
        guarded = Block()
        self._epilogue(guarded, e, values)
        guarded.add_op(affine.YieldOp())
        return affine.IfOp(_condition(constraints, operands), operands, guarded)

    @staticmethod
    def to_output(store: affine.StoreOp) -> PairTarget:
        """Pairs stored where the epilogue's `store` stores the first of them."""

        def target(packed, first_values, operands) -> Operation:
            indices = [first_values.get(v, v) for v in store.indices]
            m = store.map.data
            if gpu.memory_space(store.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE:
                # A staged tile's row is the pixels linearized, which the composed
                # map folds back into the lane's pixel m (no division left).
                m, indices = compose_map(
                    m, indices, _one_level(indices), fold_producers=False
                )
            return affine.VectorStoreOp(packed, store.memref, indices, m)

        return target

    def pair(
        self,
        b: Builder,
        first: SSAValue,
        second: SSAValue,
        store: affine.StoreOp,
        target: PairTarget,
        otherwise: Block | None = None,
    ) -> affine.IfOp:
        """Elements `first` and `second` (adjacent channels) through the epilogue but
        its `store`, stored together by `target` where the second's guard holds (then
        the first's does); else `otherwise`."""
        values, operands, constraints = self._place(b, second)
        guarded = Block()
        t = store.value.type
        vector_type = VectorType(t, [2])
        zero = arith.ConstantOp(FloatAttr(0.0, t))  # pyright: ignore[reportArgumentType]
        vec = vector.BroadcastOp(zero.result, vector_type)
        guarded.add_ops([zero, vec])
        packed = vec.results[0]
        first_values = None
        for k, e in enumerate((first, second)):
            at = values
            if k == 0:
                at = dict(values)
                n_iv = self.phase.op.induction_variables[self.plan.n_dim]
                d = AffineExpr.dimension
                lower = affine.ApplyOp([values[n_iv]], AffineMap(1, 0, (d(0) - 1,)))
                guarded.add_op(lower)
                at[n_iv] = lower.result
                first_values = at
            mapping = self._epilogue(guarded, e, at, skip=store)
            insert = vector.InsertOp(mapping.get(store.value, store.value), packed, [k])
            guarded.add_op(insert)
            packed = insert.results[0]
        assert first_values is not None
        guarded.add_op(target(packed, first_values, operands))
        guarded.add_op(affine.YieldOp())
        return affine.IfOp(
            _condition(constraints, operands), operands, guarded, otherwise
        )


def _one_level(values: list[SSAValue]) -> dict[SSAValue, tuple[AffineExpr, list]]:
    """Each of `values` an `affine.apply` makes, as its expression over its operands
    (for `compose_map`: one level, so shared values such as the pixel stay shared)."""
    subst = {}
    for v in values:
        op = v.owner
        if isinstance(op, affine.ApplyOp) and not op.map.data.num_symbols:
            subst[v] = (op.map.data.results[0], list(op.mapOperands))
    return subst


PairTarget = Callable[[SSAValue, dict[SSAValue, SSAValue], list[SSAValue]], Operation]
"""Builds the store of a lane's packed pair: (the pair, the band's variables at the
first element, the guard's operands: the second's pixel and channel first)."""


def _place_at(
    plan: MmaPlan,
    phase: Band,
    fixed: dict[int, SSAValue],
    b: Builder,
    m: SSAValue,
    n: SSAValue,
) -> tuple[dict[SSAValue, SSAValue], list[SSAValue], list[AffineConstraintExpr]]:
    """The band's variables at the block's pixel `m` and channel `n` (`fixed`: its
    other dimensions), and the operands and constraints of the guard that they are
    a real output of the block (operands `m` and `n` first)."""
    d = AffineExpr.dimension
    pixel = pixel_values(plan, b, d(0), [m], phase)
    ivs = phase.op.induction_variables
    values = {ivs[dd]: v for dd, v in (fixed | pixel).items()}
    values[ivs[plan.n_dim]] = b.apply(band_iv(phase, plan.n_dim, d(0), 1), [n])
    # a real pixel and channel of the block, within a partial tile
    operands: list[SSAValue] = [m, n]
    constraints = [
        ge0(AffineExpr.constant(plan.block_m - 1) - d(0)),
        ge0(AffineExpr.constant(plan.block_n - 1) - d(1)),
    ]
    constraints += partial_tile_guards(
        ((values[iv], dim) for iv, dim in zip(ivs, phase.dims, strict=False)),
        phase.op.upper_bound_operands,
        operands,
    )
    return values, operands, constraints


def _condition(
    constraints: list[AffineConstraintExpr], operands: list[SSAValue]
) -> AffineSet:
    n = len(operands)
    return AffineSet(
        n,
        0,
        tuple(
            AffineConstraintExpr(c.kind, c.lhs.simplify(n, 0), c.rhs)
            for c in constraints
        ),
    )
