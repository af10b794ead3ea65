"""From a spec to the naive IR.

Underneath is one builder for any single-statement affine contraction
(`affinec.frontend.contraction`). `build_naive` turns a `Contraction` into the reference design's first listing: a
`func.func` over memrefs, one `affine.parallel` over the output space, a scalar f32
accumulator (`memref.alloca`), an `affine.for` nest over the reduction space, padded
loads where an access can leave its operand, extend/multiply/add, the epilogue, the
store.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AnyFloat,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    f32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.element_types import storage_type
from affinec.base.spec import Spec
from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp, write_spec
from affinec.frontend.contraction import Access, Contraction, contraction_of


def _memref(c: Contraction, access: Access, element: AnyFloat) -> MemRefType:
    dynamic = c.dynamic_dims(access)
    shape = [DYNAMIC_INDEX if j in dynamic else n for j, n in enumerate(access.shape)]
    return MemRefType(element, shape)


def build_naive(c: Contraction, spec: Spec | None = None) -> ModuleOp:
    """The naive IR of `c`, as a module with one function named `c.name`."""
    storage: AnyFloat = storage_type(c.dtype)
    arg_types = [_memref(c, a, storage) for a in c.operands]
    entry = Block(arg_types=arg_types)
    args = dict(zip((a.name for a in c.operands), entry.args, strict=True))
    for a in c.operands:
        args[a.name].name_hint = a.name

    zero = arith.ConstantOp(FloatAttr(0.0, f32))
    zero.result.name_hint = "zero"
    entry.add_op(zero)

    n_out = len(c.output_index)
    body = Block(arg_types=[affine.IndexType()] * n_out)
    for arg, (name, _) in zip(body.args, c.output_index, strict=True):
        arg.name_hint = name
    out_ivs: list[SSAValue] = list(body.args)

    if c.reduction_index:
        acc = memref.AllocaOp.get(f32, shape=[])
        acc.memref.name_hint = "acc"
        body.add_ops([acc, affine.StoreOp(zero.result, acc.memref, [])])

    innermost = body
    red_ivs: list[SSAValue] = []
    loops: list[affine.ForOp] = []
    for name, extent in c.reduction_index:
        loop_body = Block(arg_types=[affine.IndexType()])
        loop_body.args[0].name_hint = name
        red_ivs.append(loop_body.args[0])
        loop = affine.ForOp(0, extent, loop_body)
        innermost.add_op(loop)
        loops.append(loop)
        innermost = loop_body

    ivs = out_ivs + red_ivs

    def load(block: Block, access: Access, padded: bool, hint: str) -> SSAValue:
        m = AffineMap(len(ivs), 0, access.indices)
        used = sorted(m.used_dims())
        m = _compress_dims(m, used)
        operands = [ivs[d] for d in used]
        op: Operation = (
            PaddedLoadOp(args[access.name], operands, m, c.dynamic_dims(access))
            if padded
            else affine.LoadOp(args[access.name], operands, m)
        )
        op.results[0].name_hint = hint
        block.add_op(op)
        return _extended(block, op.results[0])

    values = [
        load(innermost, f, c.needs_padding(f), chr(ord("a") + k))
        for k, f in enumerate(c.factors)
    ]
    product = values[0]
    for v in values[1:]:
        mul = arith.MulfOp(product, v)
        mul.result.name_hint = "prod"
        innermost.add_op(mul)
        product = mul.result
    if c.reduction_index:
        old = affine.LoadOp(acc.memref, [])
        old.result.name_hint = "old"
        new = arith.AddfOp(old.result, product)
        new.result.name_hint = "new"
        innermost.add_ops([old, new, affine.StoreOp(new.result, acc.memref, [])])
        for loop in loops:
            loop.body.block.add_op(affine.YieldOp())
        total = affine.LoadOp(acc.memref, [])
        body.add_op(total)
        result: SSAValue = total.result
    else:
        result = product
    result.name_hint = "sum"

    result = _epilogue(c, body, result, zero.result, load)
    if not isinstance(storage, Float32Type):
        trunc = arith.TruncFOp(result, storage)
        trunc.result.name_hint = "out"
        body.add_op(trunc)
        result = trunc.result
    out_map = AffineMap(n_out, 0, c.output.indices)
    body.add_ops([affine.StoreOp(result, args[c.output.name], out_ivs, out_map)])
    body.add_op(affine.YieldOp())

    extents = [e for _, e in c.output_index]
    if c.dynamic:
        entry.add_op(_runtime_band(c, entry, args, body))
    else:
        entry.add_op(affine.ParallelOp.from_extents(extents, body))
    entry.add_op(func.ReturnOp())

    fn = func.FuncOp(c.name, (arg_types, []), Region(entry))
    module = ModuleOp([fn])
    if spec is not None:
        write_spec(module, spec)
    return module


def _runtime_band(
    c: Contraction, entry: Block, args: dict[str, SSAValue], body: Block
) -> affine.ParallelOp:
    """The output band with its outermost extent read off the first input whose
    size is that extent (`memref.dim`, a symbol of the band's upper bound):

        %batch = memref.dim %input, %c0 : memref<?x6x6x8xf16>
        affine.parallel (%n, ...) = (0, ...) to (symbol(%batch), ...) {"""
    source = next(a for a in c.inputs if c.dynamic_dims(a))
    dim = c.dynamic_dims(source)[0]
    index = arith.ConstantOp(IntegerAttr(dim, IndexType()))
    size = memref.DimOp(args[source.name], index.result)
    index.result.name_hint = "c0"
    size.result.name_hint = "batch"
    entry.add_ops([index, size])
    n = len(c.output_index)
    zeros = AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in range(n)))
    uppers = AffineMap(
        0,
        1,
        (
            AffineExpr.symbol(0),
            *(AffineExpr.constant(e) for _, e in c.output_index[1:]),
        ),
    )
    return affine.ParallelOp(
        zeros, [1] * n, uppers, [1] * n, body, upper_operands=[size.result]
    )


def _compress_dims(m: AffineMap, used: Sequence[int]) -> AffineMap:
    """`m` over only the dims it uses, renumbered in order."""
    renumber = [
        AffineExpr.dimension(used.index(d)) if d in used else AffineExpr.constant(0)
        for d in range(m.num_dims)
    ]
    return AffineMap(
        len(used), 0, tuple(e.replace_dims_and_symbols(renumber, []) for e in m.results)
    )


def _extended(block: Block, value: SSAValue) -> SSAValue:
    """`value` as f32: f16 and bf16 loads are extended, as the reference design's
    `fpext`, so products and sums are f32's."""
    if isinstance(value.type, Float32Type):
        return value
    ext = arith.ExtFOp(value, f32)
    ext.result.name_hint = f"{value.name_hint}32"
    block.add_op(ext)
    return ext.result


_HINTS = {"scale": ("sval", "scaled"), "bias": ("bval", "biased"),
          "residual": ("rval", "summed")}  # fmt: skip


def _epilogue(c: Contraction, body: Block, result: SSAValue, zero: SSAValue, load):
    """The epilogue's steps on `result` (f32), in order: scale (multiply), bias and
    residual (add), then ReLU (`max(x, 0)`) or ReLU6 (`min(max(x, 0), 6)`)."""
    operands = {a.name: a for a in c.epilogue_operands}
    for step in c.steps:
        if step in operands:
            value_hint, result_hint = _HINTS[step]
            value = load(body, operands[step], False, value_hint)
            op = (arith.MulfOp if step == "scale" else arith.AddfOp)(result, value)
            op.result.name_hint = result_hint
            body.add_op(op)
            result = op.result
            continue
        relu = arith.MaximumfOp(result, zero)
        relu.result.name_hint = "relu"
        body.add_op(relu)
        result = relu.result
        if step == "relu6":
            six = arith.ConstantOp(FloatAttr(6.0, f32))
            six.result.name_hint = "six"
            capped = arith.MinimumfOp(result, six.result)
            capped.result.name_hint = "relu6"
            body.add_ops([six, capped])
            result = capped.result
    return result


def build(spec: Spec) -> ModuleOp:
    """The naive IR of a spec, recording the spec on the module."""
    return build_naive(contraction_of(spec), spec)


__all__ = ["build", "build_naive"]
