"""From a spec to the naive IR.

Underneath is one builder for any single-statement affine contraction, written the
way PlaidML's Tile language writes them: an output index space, a reduction index
space, one affine access per operand, and `+` over `*`:

    O[n, k, oh, ow] = +(I[n, c, oh + r - 1, ow + s - 1] * F[k, c, r, s])

`build_naive` turns a `Contraction` into the reference design's first listing: a
`func.func` over memrefs, one `affine.parallel` over the output space, a scalar f32
accumulator (`memref.alloca`), an `affine.for` nest over the reduction space, padded
loads where an access can leave its operand, extend/multiply/add, the epilogue, the
store. Convolution, matrix product and outer product are thin layers on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    AnyFloat,
    Float16Type,
    Float32Type,
    FloatAttr,
    MemRefType,
    ModuleOp,
    StringAttr,
    f16,
    f32,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.dialects import affine
from affinec.dialects.affine_syntax import format_expr
from affinec.dialects.affinec import SPEC, PaddedLoadOp
from affinec.ir.affine_exprs import expr_range
from affinec.spec import ConvSpec, MatmulSpec, OuterSpec, Spec


@dataclass(frozen=True)
class Access:
    """An operand and how the contraction indexes it.

    `indices` are affine expressions over the contraction's dims: output dims first,
    then reduction dims (`d0 ... d{n-1}`, `d{n} ...`).
    """

    name: str
    shape: tuple[int, ...]
    indices: tuple[AffineExpr, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.shape):
            raise ValueError(
                f"operand {self.name} has rank {len(self.shape)} but "
                f"{len(self.indices)} indices"
            )


@dataclass(frozen=True)
class Contraction:
    """`output[...] = epilogue(+(factor0[...] * factor1[...] * ...))`."""

    name: str
    output_index: tuple[tuple[str, int], ...]
    reduction_index: tuple[tuple[str, int], ...]
    factors: tuple[Access, ...]
    output: Access
    dtype: str = "f32"
    epilogue: str = "none"
    bias: Access | None = None
    """For the bias-relu epilogue: indexed by output dims only."""

    def __post_init__(self) -> None:
        if not self.factors:
            raise ValueError("a contraction needs at least one factor")
        if (self.epilogue == "bias-relu") != (self.bias is not None):
            raise ValueError("a bias operand goes with the bias-relu epilogue, only")
        names = [a.name for a in self.operands]
        if len(set(names)) != len(names):
            raise ValueError(f"operand names must differ, got {names}")

    @property
    def operands(self) -> tuple[Access, ...]:
        """In the order of the function's arguments: factors, bias, output."""
        bias = (self.bias,) if self.bias is not None else ()
        return (*self.factors, *bias, self.output)

    @property
    def dim_names(self) -> list[str]:
        return [n for n, _ in self.output_index + self.reduction_index]

    @property
    def extents(self) -> list[int]:
        return [e for _, e in self.output_index + self.reduction_index]

    def needs_padding(self, access: Access) -> bool:
        """Whether some point of the index space makes `access` leave its operand."""
        ranges = [(0, e - 1) for e in self.extents]
        for expr, size in zip(access.indices, access.shape, strict=True):
            lo, hi = expr_range(expr, ranges)  # pyright: ignore[reportGeneralTypeIssues]
            if lo < 0 or hi >= size:
                return True
        return False

    def __str__(self) -> str:
        """The Tile-language form: `O[i, j] = +(A[i, k] * B[k, j])`."""

        def ref(a: Access) -> str:
            return f"{a.name}[{', '.join(format_expr(e, self.dim_names) for e in a.indices)}]"

        product = " * ".join(ref(f) for f in self.factors)
        body = f"+({product})" if self.reduction_index else product
        if self.bias is not None:
            body = f"{body} + {ref(self.bias)}"
        if self.epilogue != "none":
            body = f"relu({body})"
        return f"{ref(self.output)} = {body}"


def _memref(access: Access, element: AnyFloat) -> MemRefType:
    return MemRefType(element, access.shape)


def build_naive(c: Contraction, spec_text: str | None = None) -> ModuleOp:
    """The naive IR of `c`, as a module with one function named `c.name`."""
    storage: AnyFloat = f16 if c.dtype == "f16" else f32
    arg_types = [_memref(a, storage) for a in c.operands]
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
        op: Operation = (PaddedLoadOp if padded else affine.LoadOp)(
            args[access.name], operands, m
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

    if c.bias is not None:
        bias = load(body, c.bias, False, "bval")
        add = arith.AddfOp(result, bias)
        add.result.name_hint = "biased"
        body.add_op(add)
        result = add.result
    if c.epilogue in ("relu", "bias-relu"):
        relu = arith.MaximumfOp(result, zero.result)
        relu.result.name_hint = "relu"
        body.add_op(relu)
        result = relu.result
    if isinstance(storage, Float16Type):
        trunc = arith.TruncFOp(result, f16)
        trunc.result.name_hint = "out"
        body.add_op(trunc)
        result = trunc.result
    out_map = AffineMap(n_out, 0, c.output.indices)
    body.add_ops([affine.StoreOp(result, args[c.output.name], out_ivs, out_map)])
    body.add_op(affine.YieldOp())

    extents = [e for _, e in c.output_index]
    entry.add_op(affine.ParallelOp.from_extents(extents, body))
    entry.add_op(func.ReturnOp())

    fn = func.FuncOp(c.name, (arg_types, []), Region(entry))
    module = ModuleOp([fn])
    if spec_text is not None:
        module.attributes[SPEC] = StringAttr(spec_text)
    return module


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
    """`value` as f32: f16 loads are extended, as the reference design's `fpext`."""
    if isinstance(value.type, Float32Type):
        return value
    ext = arith.ExtFOp(value, f32)
    ext.result.name_hint = f"{value.name_hint}32"
    block.add_op(ext)
    return ext.result


# -- convolution, matrix product, outer product ---------------------------------------------


def _dims(names: str) -> dict[str, AffineExpr]:
    return {n: AffineExpr.dimension(k) for k, n in enumerate(names.split())}


def conv_contraction(spec: ConvSpec) -> Contraction:
    """The convolution as a contraction; index order follows the layouts, so the
    innermost output dimension is the contiguous one."""
    out_order = "n k oh ow" if spec.layout == "nchw" else "n oh ow k"
    red_order = "c r s" if spec.filter_layout == "kcrs" else "r s c"
    d = _dims(f"{out_order} {red_order}")
    (sh, sw), (ph, pw), (dh, dw) = spec.stride, spec.padding, spec.dilation
    ih = d["oh"] * sh + d["r"] * dh - ph
    iw = d["ow"] * sw + d["s"] * dw - pw
    n, c, k, r, s = d["n"], d["c"], d["k"], d["r"], d["s"]
    if spec.layout == "nchw":
        inp = (n, c, ih, iw)
        out = (n, k, d["oh"], d["ow"])
    else:
        inp = (n, ih, iw, c)
        out = (n, d["oh"], d["ow"], k)
    flt = (k, c, r, s) if spec.filter_layout == "kcrs" else (r, s, c, k)
    extents = {
        "n": spec.n,
        "k": spec.k,
        "oh": spec.out_h,
        "ow": spec.out_w,
        "c": spec.c,
        "r": spec.r,
        "s": spec.s,
    }
    return Contraction(
        name="conv",
        output_index=tuple((x, extents[x]) for x in out_order.split()),
        reduction_index=tuple((x, extents[x]) for x in red_order.split()),
        factors=(
            Access("input", spec.input_shape, inp),
            Access("filter", spec.filter_shape, flt),
        ),
        output=Access("output", spec.output_shape, out),
        dtype=spec.dtype,
        epilogue=spec.epilogue,
        bias=Access("bias", (spec.k,), (k,)) if spec.epilogue == "bias-relu" else None,
    )


def matmul_contraction(spec: MatmulSpec) -> Contraction:
    d = _dims("i j p")
    i, j, p = d["i"], d["j"], d["p"]
    return Contraction(
        name="matmul",
        output_index=(("i", spec.m), ("j", spec.n)),
        reduction_index=(("p", spec.k),),
        factors=(
            Access("A", (spec.m, spec.k), (i, p)),
            Access("B", (spec.k, spec.n), (p, j)),
        ),
        output=Access("C", (spec.m, spec.n), (i, j)),
        dtype=spec.dtype,
        epilogue=spec.epilogue,
        bias=Access("bias", (spec.n,), (j,)) if spec.epilogue == "bias-relu" else None,
    )


def outer_contraction(spec: OuterSpec) -> Contraction:
    d = _dims("i j")
    return Contraction(
        name="outer",
        output_index=(("i", spec.m), ("j", spec.n)),
        reduction_index=(),
        factors=(Access("a", (spec.m,), (d["i"],)), Access("b", (spec.n,), (d["j"],))),
        output=Access("c", (spec.m, spec.n), (d["i"], d["j"])),
        dtype=spec.dtype,
    )


def contraction_of(spec: Spec) -> Contraction:
    if isinstance(spec, ConvSpec):
        return conv_contraction(spec)
    if isinstance(spec, MatmulSpec):
        return matmul_contraction(spec)
    return outer_contraction(spec)


def build(spec: Spec) -> ModuleOp:
    """The naive IR of a spec, recording the spec on the module."""
    return build_naive(contraction_of(spec), spec.to_text())


__all__ = [
    "Access",
    "Contraction",
    "build",
    "build_naive",
    "contraction_of",
    "conv_contraction",
    "matmul_contraction",
    "outer_contraction",
]
