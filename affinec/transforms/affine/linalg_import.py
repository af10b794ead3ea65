"""MLIR's named linalg ops as affinec's specs, and their naive IR.

A function whose body fills its output with zeros and applies one named op to its
arguments is one spec:

    func.func @conv(%x: memref<1x9x9x16xf16>, %w: memref<3x3x16x32xf16>,
                    %y: memref<1x7x7x32xf16>) {
      %zero = arith.constant 0.0 : f16
      linalg.fill ins(%zero : f16) outs(%y : memref<1x7x7x32xf16>)
      linalg.conv_2d_nhwc_hwcf {strides = dense<1> : tensor<2xi64>, ...}
          ins(%x, %w : ...) outs(%y : ...)
      func.return
    }

is `conv n=1 c=16 h=9 w=9 k=32 r=3 s=3 layout=nhwc filter-layout=rsck dtype=f16`
(`spec_of`), and `import_linalg` replaces the function by the naive IR of that spec
(the frontend's), under the function's name and with its arguments' names, and
records the spec on the module. A depthwise convolution
(`linalg.depthwise_conv_2d_nhwc_hwc`, `_nchw_chw`) is a grouped one with a group
a channel, and
torch-mlir's grouped one (`linalg.conv_2d_ngchw_gfchw`) a grouped NCHW spec. A
batched product (`linalg.batch_matmul`) has no spec, nor has TOSA's convolution
(`linalg.conv_2d_nhwc_fhwc`, its filter F x R x S x C): their contraction's naive IR
is built, and a remark says that `affinec-default` picks no configuration for it. What
affinec cannot take (mixed element types, a function doing more than the one op) is
refused by name, at the op.

Two differences from linalg's meaning, each said as a remark: in f16 and bf16 the
naive IR sums in f32 and rounds once, where linalg's body adds in the output's type;
a depthwise filter is taken as R x S x 1 x C (C x 1 x R x S in NCHW), linalg's
with a unit dimension, and a grouped convolution's operands without their group dimension
(the same bytes, the function's arguments of other shapes).
"""

from __future__ import annotations

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    MemRefType,
    ModuleOp,
)
from xdsl.dialects.linalg import ops as xdsl_linalg
from xdsl.dialects.linalg.ops import GenericOp
from xdsl.ir import Attribute, Operation, SSAValue

from affinec.base.diagnostics import PassError, remark
from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.dialects import linalg
from affinec.dialects.affinec import SPEC, read_spec, write_spec
from affinec.frontend.contraction import Access, Contraction
from affinec.frontend.naive import build, build_naive
from affinec.transforms.affine.generic_import import (
    dimension_extent,
    generic_contraction,
    is_contraction,
    spec_of_contraction,
)

DTYPES: dict[type[Attribute], str] = {
    Float32Type: "f32",
    Float16Type: "f16",
    BFloat16Type: "bf16",
}


def named_ops(module: ModuleOp) -> list[Operation]:
    """The module's named linalg ops and `linalg.generic` contractions."""
    return [
        o
        for o in module.walk()
        if isinstance(o, linalg.NamedStructuredOp) or is_contraction(o)
    ]


def spec_of(op: Operation) -> Spec | None:
    """The spec `op` computes, or a `PassError` at it saying why there is none (a
    `linalg.batch_matmul` or `linalg.conv_2d_nhwc_fhwc`, or a `linalg.generic`
    contraction that is no spec: None)."""
    if isinstance(op, GenericOp):
        return spec_of_contraction(_generic_contraction(op))
    assert isinstance(op, linalg.NamedStructuredOp)
    a, b, c = op.types()
    dtype = _dtype(op, a, b, c)
    if isinstance(op, linalg.Conv2DNhwcHwcfOp):
        (n, h, w, ch), (r, s, _, k) = a.get_shape(), b.get_shape()
        return _conv_spec(op, (n, ch, h, w, k, r, s), 1, "nhwc", dtype)
    if isinstance(op, linalg.Conv2DNchwFchwOp):
        (n, ch, h, w), (k, _, r, s) = a.get_shape(), b.get_shape()
        return _conv_spec(op, (n, ch, h, w, k, r, s), 1, "nchw", dtype)
    if isinstance(op, linalg.MatmulOp):
        (m, k), (_, n) = a.get_shape(), b.get_shape()
        return MatmulSpec(m, n, k, dtype)
    if isinstance(op, linalg.DepthwiseConv2DNhwcHwcOp):
        (n, h, w, ch), (r, s, _) = a.get_shape(), b.get_shape()
        return _conv_spec(op, (n, ch, h, w, ch, r, s), ch, "nhwc", dtype)
    if isinstance(op, linalg.DepthwiseConv2DNchwChwOp):
        (n, ch, h, w), (_, r, s) = a.get_shape(), b.get_shape()
        return _conv_spec(op, (n, ch, h, w, ch, r, s), ch, "nchw", dtype)
    if isinstance(op, linalg.Conv2DNgchwGfchwOp):
        (n, g, c, h, w), (_, f, _, r, s) = a.get_shape(), b.get_shape()
        return _conv_spec(op, (n, g * c, h, w, g * f, r, s), g, "nchw", dtype)
    assert type(op) in _INDEX_NAMES
    return None  # no spec: `import_linalg` builds its contraction's naive IR


def _conv_spec(
    op: linalg.WindowedOp,
    sizes: tuple[int, int, int, int, int, int, int],
    groups: int,
    layout: str,
    dtype: str,
) -> ConvSpec:
    """A convolution op's spec from its sizes (n, c, h, w, k, r, s), its window, and
    no padding (a front end pads the input first); the filter in the layout's
    usual order (RSCK beside NHWC, KCRS beside NCHW)."""
    return ConvSpec(
        *sizes,
        stride=op.window("strides"),
        padding=(0, 0),
        dilation=op.window("dilations"),
        layout=layout,
        filter_layout="rsck" if layout == "nhwc" else "kcrs",
        dtype=dtype,
        groups=groups,
    )


def module_spec(module: ModuleOp) -> Spec | None:
    """The spec of the module's one named linalg op or generic contraction (None
    without one, or for a contraction that is no spec), checked as `import_linalg`
    checks it."""
    ops = named_ops(module)
    if not ops:
        return None
    _one_per_module(ops)
    spec = spec_of(ops[0])
    _function_of(ops[0])
    return spec


def _generic_contraction(op: GenericOp) -> Contraction:
    types = [v.type for v in (*op.inputs, *op.outputs)]
    dtype = _dtype(op, *types)  # pyright: ignore[reportArgumentType]
    function = op.parent_op()
    name = (
        function.sym_name.data if isinstance(function, func.FuncOp) else "contraction"
    )
    names = [
        v.name_hint or default
        for v, default in zip((*op.inputs, *op.outputs), ("A", "B", "C"), strict=True)
    ]
    return generic_contraction(op, names, dtype, name)


_INDEX_NAMES: dict[type, tuple[str, ...]] = {
    linalg.BatchMatmulOp: ("batch", "m", "n", "k"),
    linalg.Conv2DNhwcFhwcOp: ("n", "oh", "ow", "f", "r", "s", "c"),
}
"""The iteration dimensions of the named ops that are no spec, in their maps'
order (the output's first)."""


def _named_contraction(
    op: linalg.NamedStructuredOp, function: func.FuncOp
) -> Contraction:
    """The contraction of a named op that is no spec (`_INDEX_NAMES`), from its
    indexing maps, named after the function and its arguments."""
    a, b, c = op.types()
    dtype = _dtype(op, a, b, c)
    maps = op.default_maps()
    shapes = [tuple(t.get_shape()) for t in (a, b, c)]
    index = _INDEX_NAMES[type(op)]
    extents = [dimension_extent(op, d, maps, shapes) for d in range(len(index))]
    outputs = len(maps[2].results)
    names = [v.name_hint or x for v, x in zip(op.operands, "ABC", strict=True)]
    accesses = [
        Access(n, shape, tuple(m.results))
        for n, shape, m in zip(names, shapes, maps, strict=True)
    ]
    return Contraction(
        name=function.sym_name.data,
        output_index=tuple(zip(index[:outputs], extents[:outputs], strict=True)),
        reduction_index=tuple(zip(index[outputs:], extents[outputs:], strict=True)),
        factors=(accesses[0], accesses[1]),
        output=accesses[2],
        dtype=dtype,
    )


def import_linalg(module: ModuleOp) -> None:
    """Replace the function of the module's named linalg op by the naive IR of its
    spec, and record the spec (a `PassError` at the op that cannot be)."""
    ops = named_ops(module)
    if not ops:
        return
    _one_per_module(ops)
    (op,) = ops
    function = _function_of(op)
    spec = spec_of(op)
    recorded = read_spec(module, required=False)
    if spec is None:
        contraction = (
            _generic_contraction(op)
            if isinstance(op, GenericOp)
            else _named_contraction(op, function)  # pyright: ignore[reportArgumentType]
        )
        remark(
            op,
            f"is no spec affinec knows ({contraction}): its naive IR is built, and "
            "affinec-default picks no configuration for it (its defaults apply); "
            "give the passes their options",
        )
        if isinstance(op, linalg.Conv2DNhwcFhwcOp):
            remark(
                op,
                "has its filter F x R x S x C, a layout no spec of affinec's has: "
                "linalg.conv_2d_nhwc_hwcf (its filter R x S x C x F) is a spec, "
                "which config_for configures (tensor cores in f16 and bf16)",
            )
        _say_it_sums_in_f32(op, contraction.dtype)
        _replace(function, build_naive(contraction))
        return
    if SPEC in module.attributes and recorded != spec:
        raise PassError(
            op,
            f"the module already records {module.attributes[SPEC]}, not this op's "
            f"{spec.to_text()}",
        )
    _say_it_sums_in_f32(op, spec.dtype)
    if isinstance(
        op, linalg.DepthwiseConv2DNhwcHwcOp | linalg.DepthwiseConv2DNchwChwOp
    ):
        shape = "x".join(map(str, op.types()[1].get_shape()))
        ours = "x".join(map(str, spec.filter_shape))
        remark(
            op,
            f"takes its filter as {ours}, a grouped convolution's (groups = "
            f"channels), where linalg's is {shape}: the same elements in the "
            "same order, the function's argument of another shape",
        )
    if isinstance(op, linalg.Conv2DNgchwGfchwOp):
        remark(
            op,
            "takes its operands as a grouped convolution's N x GC x H x W, GF x C x "
            "R x S and N x GF x OH x OW, where linalg's have a group dimension: the "
            "same elements in the same order, the function's arguments of other shapes",
        )
    _replace(function, build(spec))
    write_spec(module, spec)


def _say_it_sums_in_f32(op: Operation, dtype: str) -> None:
    if dtype != "f32":
        remark(
            op,
            f"sums in f32 and rounds once to {dtype}, where linalg's body adds in "
            f"{dtype}",
        )


def _replace(function: func.FuncOp, naive: ModuleOp) -> None:
    """Put the function of `naive` in `function`'s place, with its name and its
    arguments' names."""
    (built,) = [o for o in naive.body.block.ops if isinstance(o, func.FuncOp)]
    built.detach()
    built.sym_name = function.sym_name
    for new, old in zip(built.body.block.args, function.body.block.args, strict=True):
        new.name_hint = old.name_hint or new.name_hint
    built.location = function.location
    parent = function.parent_block()
    assert parent is not None
    parent.insert_op_before(built, function)
    parent.erase_op(function)


def _dtype(op: Operation, *types: MemRefType) -> str:
    elements = [t.get_element_type() for t in types]
    names = [DTYPES.get(type(e)) for e in elements]
    if None in names or len(set(names)) != 1:
        raise PassError(
            op,
            "affinec takes inputs and output of one element type, f32, f16 or bf16 "
            f"(the output stored in the inputs' type), got "
            f"{', '.join(str(e) for e in elements)}",
        )
    return names[0]  # pyright: ignore[reportReturnType]


def _function_of(op: Operation) -> func.FuncOp:
    """The function `op` is all of: the output filled with zeros, the op, a return,
    the op's operands the function's arguments in order. (A named op adds to what
    its output holds; the spec computes the convolution or product alone, which is
    what the op means on an output filled with zeros, as MLIR's front ends write
    it.)"""
    function = op.parent_op()
    block = op.parent_block()
    if not isinstance(function, func.FuncOp) or block is None:
        raise PassError(op, "affinec takes a named linalg op in a func.func")
    body = [o for o in block.ops if not _is_zero(o)]
    fills = [o for o in body if is_fill(o)]
    output = op.outputs[0]  # pyright: ignore[reportAttributeAccessIssue]
    if not fills or not any(_fills_with_zero(f, output) for f in fills):
        raise PassError(
            op,
            f"adds to what %{output.name_hint or 'its output'} holds; affinec "
            "computes the convolution or product alone: fill the output with zeros "
            "first (linalg.fill), as MLIR's front ends do",
        )
    rest = [o for o in body if o not in fills]
    if (
        len(fills) != 1
        or fills[0].next_op is not op
        or rest != [op, block.last_op]
        or not isinstance(block.last_op, func.ReturnOp)
        or block.last_op.operands
        or list(op.operands) != list(function.body.block.args)
    ):
        raise PassError(
            op,
            "affinec takes a function whose body is a zero fill of the output, one "
            "named linalg op on the function's arguments in order (ins, then outs) "
            "and a return",
        )
    return function


def _is_zero(op: Operation) -> bool:
    """An `arith.constant` of a float 0 (the fill's value)."""
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, FloatAttr)
        and op.value.value.data == 0.0
    )


def is_fill(op: Operation) -> bool:
    """`linalg.fill`, or the generic MLIR generalizes it to (a scalar yielded into
    every element of the output)."""
    if isinstance(op, xdsl_linalg.FillOp):
        return True
    if not isinstance(op, GenericOp) or len(op.inputs) != 1 or len(op.outputs) != 1:
        return False
    ops = list(op.body.block.ops)
    return (
        not isinstance(op.inputs[0].type, MemRefType)
        and len(ops) == 1
        and list(ops[0].operands) == [op.body.block.args[0]]
    )


def _fills_with_zero(fill: Operation, output: SSAValue) -> bool:
    (value,) = fill.inputs  # pyright: ignore[reportAttributeAccessIssue]
    return (
        list(fill.outputs) == [output]  # pyright: ignore[reportAttributeAccessIssue]
        and isinstance(value.owner, Operation)
        and _is_zero(value.owner)
    )


def _one_per_module(ops: list[Operation]) -> None:
    if len(ops) > 1:
        raise PassError(
            ops[1],
            f"a second named linalg op in the module (or generic contraction): "
            f"affinec compiles one spec a "
            f"module (the first is a {ops[0].name})",
        )
