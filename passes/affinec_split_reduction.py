"""`affinec-split-reduction`: split-K. The channel reduction of a naive contraction
is cut into `splits` partial sums, computed by a band with a leading split
dimension into an f32 workspace, and added in a fixed order by a second band that
applies the epilogue once (`affinec/transforms/affine/split_reduction.py` shows the
IR before and after).

    affine.parallel (%n, %k, %oh, %ow) ...          affine.parallel (%sk, %n, %k, %oh, %ow) ...
      affine.for %c = 0 to 1024 { ... }      =>        affine.for %c = 0 to 256 { ...%sk * 256 + %c... }
                                                     affine.parallel (%n, %k, %oh, %ow) ...
                                                       (partial 0 + partial 1 + ...), epilogue

What it is for: a layer whose outputs make too few blocks to fill the GPU (a deep
layer of a network at batch 1: 7×7 pixels, 512 channels) gets `splits` times as
many, each with a share of the reduction. The function gains a last argument, the
workspace `%partials : memref<S x ... x f32>` marked `affinec.workspace`, which the
caller provides (the checker and the runtime allocate it); after the GPU mapping the
two bands are two kernels, launched in order.

The result is deterministic (no atomics: the same bits on every run). With
`splits=1` it is the unsplit result bit for bit; with more, the sum's order changes,
and so may its rounding (the checker holds it to the dtype's tolerance). A channel
count the splits do not divide is padded with zeros. Runs on the naive level, once,
before `affine-loop-tile`; needs the module's spec (`affinec.spec`) to know which
reduction loop is the channels'. Refused, located: splits below 1 or above
`MAX_SPLITS`, more splits than channels, a spec without a channel reduction (an
outer product), a convolution of any batch (`batch=dynamic`), a module already
split, a grouped convolution whose group's channels the splits do not divide (its
padding would read the next group's channels).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    UnitAttr,
)
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import (
    SPLITS,
    WORKSPACE,
    required_spec,
    workspace_flags,
)
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.pad_reduction import channel_depth
from affinec.transforms.affine.split_reduction import (
    partials_type,
    split_reduction,
)
from affinec.transforms.mapped_bands import naive_parallels

MAX_SPLITS = 64
"""The most splits: the combining band adds this many loads per output."""


@dataclass(frozen=True)
class AffinecSplitReduction(ModulePass):
    """Split the channel reduction into `splits` partial sums and their sum."""

    name = "affinec-split-reduction"

    splits: int = 2
    """How many partial sums: the grid gets this many times the blocks."""

    @property
    def changes_rounding(self) -> bool:
        """Several splits add the partial sums in another order than one loop."""
        return self.splits > 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        if not 1 <= self.splits <= MAX_SPLITS:
            raise PassError(
                op, f"splits must be between 1 and {MAX_SPLITS}, got {self.splits}"
            )
        spec = required_spec(op, self.name)
        depth = channel_depth(spec)
        if depth is None:
            raise PassError(op, f"a {spec.kind} has no reduction to split")
        if getattr(spec, "dynamic_batch", False):
            raise PassError(
                op,
                "a convolution of any batch (batch=dynamic) compiles with one image "
                "a block: no splits yet",
            )
        bands = naive_parallels(
            op, "affinec-split-reduction runs on the naive IR, before affine-loop-tile"
        )
        if not bands:
            raise PassError(op, "expected the naive affine.parallel of a contraction")
        for band in bands:
            if SPLITS in band.attributes or _split_already(band):
                raise PassError(band, "is already split (affinec-split-reduction)")
        for band in bands:
            fn = band.parent_op()
            if not isinstance(fn, func.FuncOp):
                raise PassError(band, "expected the naive band directly in a func.func")
            partials = _add_workspace(fn, partials_type(band, self.splits))
            split_reduction(band, depth, self.splits, partials)


def _split_already(band: affine.ParallelOp) -> bool:
    fn = band.parent_op()
    return isinstance(fn, func.FuncOp) and any(workspace_flags(fn))


def _add_workspace(fn: func.FuncOp, t) -> object:
    """Give `fn` a last argument of type `t`, marked as a workspace."""
    block = fn.body.block
    arg = block.insert_arg(t, len(block.args))
    arg.name_hint = "partials"
    inputs = [*fn.function_type.inputs.data, t]
    fn.function_type = FunctionType.from_lists(inputs, fn.function_type.outputs.data)
    old = fn.arg_attrs.data if fn.arg_attrs is not None else ()
    attrs = [*old, *(DictionaryAttr({}) for _ in range(len(inputs) - 1 - len(old)))]
    fn.arg_attrs = ArrayAttr([*attrs, DictionaryAttr({WORKSPACE: UnitAttr()})])
    return arg
