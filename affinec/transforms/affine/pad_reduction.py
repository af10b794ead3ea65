"""Pad a contraction's channel loop with zeros: `c` from 0 to C becomes 0 to C' (a
multiple of what the tensor cores' k needs), and every load the channel indexes
reads zero past the tensor (`affinec.padded_load`).

    affine.for %c = 0 to 3 {                      affine.for %c = 0 to 4 {
      %a = affinec.padded_load %in[.., %c]   =>     %a = affinec.padded_load %in[.., %c]
      %b = affine.load %w[%r, %s, %c, %k]           %b = affinec.padded_load %w[%r, %s, %c, %k]

The added iterations multiply zeros and add +0.0 to the sum, so the result is the
same (a sum of -0.0 becomes +0.0, equal under comparison). What it buys: a pixel's
channels padded to 4 f16 make 8-byte rows, and a stride-2 window's rows of k start on
16 bytes, which `ldmatrix` needs (ResNet-50's first layer with its 3 channels takes
the tensor cores the way the 4-channel one does).
"""

from __future__ import annotations

from xdsl.dialects.builtin import AffineMapAttr
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.base.spec import Spec
from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.frontend.contraction import contraction_of

CHANNELS = ("c", "p")
"""The channel reduction of a convolution (`c`) and of a matrix product (`p`)."""


def channel_depth(spec: Spec) -> int | None:
    """How deep in the naive nest the channel reduction loop is (0: outermost), or
    None for a spec without one (an outer product)."""
    names = [n for n, _ in contraction_of(spec).reduction_index]
    return next((k for k, n in enumerate(names) if n in CHANNELS), None)


def channel_loop(band: affine.ParallelOp, depth: int) -> affine.ForOp:
    """The reduction loop at `depth` (0: outermost) of the naive band's nest."""
    ops = [o for o in band.body.block.ops if isinstance(o, affine.ForOp)]
    loop = ops[0] if len(ops) == 1 else None
    for _ in range(depth):
        if loop is None:
            break
        inner = [o for o in loop.body.block.ops if isinstance(o, affine.ForOp)]
        loop = inner[0] if len(inner) == 1 else None
    if loop is None:
        raise PassError(band, f"expected a nest of reduction loops {depth + 1} deep")
    return loop


def pad_loop(loop: affine.ForOp, multiple: int) -> bool:
    """Extend `loop` (0 to C, step 1) to the next multiple of `multiple`, its loads
    reading zero past their tensors; False when C is one already."""
    lower, upper = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if (
        loop.step.value.data != 1
        or lower.results != (AffineExpr.constant(0),)
        or len(upper.results) != 1
        or upper.num_dims + upper.num_symbols
    ):
        raise PassError(loop, "the channel loop must run from 0 to a constant, step 1")
    extent = upper.eval([], [])[0]
    padded = -(-extent // multiple) * multiple
    if padded == extent:
        return False
    iv = loop.body.block.args[0]
    _check_reads_past_the_tensors(loop, iv)
    for user in [o for o in loop.walk() if o is not loop]:
        if iv not in user.operands and not _uses_through_apply(user, iv):
            continue
        if isinstance(user, affine.LoadOp) and not isinstance(user, PaddedLoadOp):
            padded_load = PaddedLoadOp(user.memref, list(user.indices), user.map.data)
            padded_load.result.name_hint = user.result.name_hint
            user.parent_block().insert_op_before(padded_load, user)  # pyright: ignore
            user.result.replace_all_uses_with(padded_load.result)
            user.parent_block().erase_op(user)  # pyright: ignore
        elif not isinstance(user, PaddedLoadOp | affine.ApplyOp):
            raise PassError(
                user,
                "the channel loop's variable reaches an op other than a load: cannot "
                "pad the loop with zeros",
            )
    loop.properties["upperBoundMap"] = AffineMapAttr(
        AffineMap(0, 0, (AffineExpr.constant(padded),))
    )
    return True


def _check_reads_past_the_tensors(loop: affine.ForOp, iv: SSAValue) -> None:
    """Refuse, before any rewriting, a loop whose added iterations would not read
    zeros: the variable reaching an op other than a load, or indexing a tensor's
    dimension together with other terms (a grouped convolution's `g * C/G + c`: past
    the group's channels come the next group's, not the end of the tensor)."""
    for user in [o for o in loop.walk() if o is not loop]:
        if iv not in user.operands and not _uses_through_apply(user, iv):
            continue
        if not isinstance(user, affine.LoadOp | PaddedLoadOp | affine.ApplyOp):
            raise PassError(
                user,
                "the channel loop's variable reaches an op other than a load: cannot "
                "pad the loop with zeros",
            )
        if isinstance(user, affine.ApplyOp) or iv not in user.operands:
            raise PassError(
                user,
                "the channel loop's variable reaches this load through an "
                "affine.apply: cannot tell that its padding reads zeros",
            )
        alone = AffineExpr.dimension(list(user.indices).index(iv))
        for e in user.map.data.results:
            if alone in list(e.dfs()) and e != alone:
                raise PassError(
                    user,
                    "the channel loop indexes this tensor together with other terms "
                    "(a grouped convolution's channel): past the loop's end come other "
                    "elements, not zeros, so the loop cannot be padded",
                )


def _uses_through_apply(op: Operation, iv: SSAValue) -> bool:
    return any(
        isinstance(v.owner, affine.ApplyOp) and iv in v.owner.operands
        for v in op.operands
    )
