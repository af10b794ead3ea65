"""`affinec-lower-linalg`: MLIR's named linalg ops and single-statement
`linalg.generic` contractions as the naive IR the pipeline starts from, with the
spec recorded.

IR written by MLIR's front ends enters here: a function whose body is one
`linalg.conv_2d_nhwc_hwcf`, `linalg.conv_2d_nchw_fchw`,
`linalg.depthwise_conv_2d_nhwc_hwc`, `linalg.depthwise_conv_2d_nchw_chw`,
`linalg.conv_2d_ngchw_gfchw` or `linalg.matmul` on
memrefs (MLIR's bufferization turns the tensor form into this one) becomes the naive
`affine.parallel` of its spec, as `affinec gen` writes it, and the module records
the spec, so that `affinec-default` picks a configuration for it:

    func.func @conv(%x: memref<1x8x8x16xf32>, %w: memref<3x3x16x32xf32>,
                    %y: memref<1x6x6x32xf32>) {
      linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>,
                                strides = dense<1> : tensor<2xi64>}
          ins(%x, %w : ...) outs(%y : ...)
      func.return
    }

becomes

    builtin.module attributes {affinec.spec = "conv n=1 c=16 h=8 w=8 k=32 ..."} {
      func.func @conv(%x: ..., %w: ..., %y: ...) {
        affine.parallel (%n, %oh, %ow, %k) = (0, 0, 0, 0) to (1, 6, 6, 32) {
          ... affine.for %r, %s, %c: %acc += %x[...] * %w[...] ...
          affine.store ..., %y[%n, %oh, %ow, %k]
      ...

A `linalg.generic` whose body is `out + in0 * in1` over two inputs (what MLIR's
`--linalg-generalize-named-ops` makes of the named ops, or any contraction whose
output map names each parallel dimension once) is read as a contraction
(`affinec/transforms/affine/generic_import.py`): when it is a spec (a matrix product,
a convolution in NHWC/RSCK or NCHW/KCRS, strides and dilations read off its maps),
the spec is recorded as for the named op; otherwise its naive IR is built without a
spec, and a remark says that `affinec-default` picks no configuration for it
(its defaults apply). So are `linalg.batch_matmul`'s (affinec has no spec of a
batched product) and TOSA's `linalg.conv_2d_nhwc_fhwc`'s (its filter F x R x S x
C is no filter layout of a spec; a remark names `linalg.conv_2d_nhwc_hwcf`). A fill may be the generic
MLIR generalizes `linalg.fill` to.

`linalg.depthwise_conv_2d_nhwc_hwc` (`_nchw_chw`) is a grouped convolution with a
group a channel (`groups = C`), its filter taken as R x S x 1 x C (C x 1 x R x S):
linalg's with a unit dimension, the same elements in the same order, but the function's argument changes
shape, and a remark says so. torch-mlir's grouped convolution
(`linalg.conv_2d_ngchw_gfchw`) is a grouped NCHW spec whose operands lose their
group dimension the same way (N x G x C x H x W as N x GC x H x W), also said.

Differs from MLIR's meaning in one more way, said as a remark: in f16 and bf16 the
sum is taken in f32 and rounded once (linalg's body adds in the output's type).
Refused by name, at the op: mixed element types, a function that does more than the
one op, a second such op in the module, and any other linalg op (a pooling, an
elementwise op, a `linalg.generic` that is no contraction, a fill outside the
function of the op it fills for), which this pass would otherwise leave in place.

    affinec-opt model.mlir -p 'affinec-lower-linalg,affinec-default'
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects.linalg import Linalg, NamedStructuredOp
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.linalg_import import (
    import_linalg,
    is_fill,
    module_spec,
    named_ops,
)


@dataclass(frozen=True)
class AffinecLowerLinalg(ModulePass):
    """Turn a function of one named linalg op (or generic contraction) into the
    naive IR of its spec."""

    name = "affinec-lower-linalg"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        _refuse_other_linalg_ops(op)
        module_spec(op)  # every refusal before any rewriting
        import_linalg(op)


def _refuse_other_linalg_ops(module: ModuleOp) -> None:
    """A `PassError` at the first linalg op this pass does not lower: neither one of
    its named ops or contractions, nor a fill in the function of one."""
    lowered = named_ops(module)
    functions = {o.parent_op() for o in lowered}
    for o in module.walk():
        if o.dialect_name() != "linalg" or o in lowered:
            continue
        parent = o.parent_op()
        if parent is not None and parent.dialect_name() == "linalg":
            continue  # the body of a linalg op (linalg.yield, linalg.index)
        if is_fill(o) and parent in functions:
            continue  # the function's own checks say whether it fills the output
        names = ", ".join(sorted(_lowered_names()))
        raise PassError(
            o,
            f"is not an op affinec-lower-linalg lowers; it lowers {names} and "
            "linalg.generic contractions (out + in0 * in1)",
        )


def _lowered_names() -> list[str]:
    """The named linalg ops this pass reads."""
    return [o.name for o in Linalg.operations if issubclass(o, NamedStructuredOp)]
