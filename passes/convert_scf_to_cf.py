"""`convert-scf-to-cf`: `scf.for`, `scf.if` and `scf.index_switch` to branches.

xDSL's pass of the same name, with one change: a loop's discardable attributes (such
as `affinec.unroll`) move to its back edge, the branch from the end of the body to
the loop header, where MLIR keeps loop annotations and LLVM looks for `llvm.loop`.

    scf.for %j = %c0 to %c4 step %c1 {...} {affinec.unroll}
    ->
    ^header(%j: index): ... cf.cond_br %more, ^body, ^exit
    ^body: ... cf.br ^header(%next : index) {affinec.unroll}

Differences from MLIR's pass: MLIR moves only attributes of the llvm dialect (such
as `llvm.loop_annotation`) to the back edge and drops the others; this pass moves
them all (affinec's own annotations travel that way; an attribute on a branch means
nothing to MLIR). `scf.while`, `scf.execute_region`, `scf.parallel`, `scf.forall`
and `scf.reduce`, which MLIR's pass also lowers, are refused by name before
anything is rewritten, not left behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    op_type_rewrite_pattern,
)
from xdsl.transforms.convert_scf_to_cf import ForLowering, IfLowering, SwitchLowering

from affinec.base.diagnostics import PassError
from affinec.transforms.affine.unrolling import check_unrolling


class AnnotatedForLowering(ForLowering):
    """xDSL's `scf.for` lowering, moving the loop's attributes to its back edge."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, for_op: scf.ForOp, rewriter: PatternRewriter, /):
        attributes = dict(for_op.attributes)
        init = for_op.parent_block()
        super().match_and_rewrite(for_op, rewriter)
        if not attributes or init is None:
            return
        # init -> header -(exit)-> end; the body's last block, just before `end`,
        # branches back to the header.
        header = init.last_op.successors[0]  # pyright: ignore[reportOptionalMemberAccess]
        end = header.last_op.successors[1]  # pyright: ignore[reportOptionalMemberAccess]
        latch = end.prev_block
        if latch is not None and latch.last_op is not None:
            latch.last_op.attributes |= attributes


_LOWERED = (
    scf.ForOp,
    scf.IfOp,
    scf.IndexSwitchOp,
    scf.YieldOp,
)
"""The scf ops this pass removes (`scf.yield` goes with its parent)."""


@dataclass(frozen=True)
class ConvertScfToCf(ModulePass):
    """Lower scf.for/if/index_switch to cf branches, keeping loop annotations."""

    name = "convert-scf-to-cf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if o.dialect_name() == "scf" and not isinstance(o, _LOWERED):
                raise PassError(
                    o,
                    "is not lowered by affinec's convert-scf-to-cf (it lowers "
                    "scf.for, scf.if and scf.index_switch; MLIR's lowers this op too)",
                )
        check_unrolling(op)
        # One walk lowers every scf op: each is on the walk's list from the start
        # (a lowering moves the ops nested in it, the same objects, and makes no
        # scf op), and each pattern matches its op whatever the IR around it. A
        # recursive walk would go over the lowered module again, matching nothing.
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [SwitchLowering(), IfLowering(), AnnotatedForLowering()]
            ),
            apply_recursively=False,
        ).rewrite_module(op)
