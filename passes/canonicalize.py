"""`canonicalize`: every op's canonicalization patterns and folders, with MLIR's options.

xDSL's pass of this name takes no option; MLIR's takes seven, which MLIR's own test
files use (`canonicalize{test-convergence}`, `region-simplify=disabled`, ...). This is
xDSL's rewrite (the patterns each op declares, folding, dead-code elimination of
regions) driven as MLIR drives it: sweeps over the module until one changes nothing,
at most `max-iterations` of them.

    %c = arith.constant 4 : index
    %d = arith.addi %c, %c : index
    "test.use"(%d) : (index) -> ()

becomes

    %d = arith.constant 8 : index
    "test.use"(%d) : (index) -> ()

What differs from MLIR: `region-simplify=aggressive` does what `normal` does (xDSL
removes dead code and unreachable blocks but merges no blocks); a pattern's label
(for `enable-patterns`/`disable-patterns`) is its class name.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.traits import HasCanonicalizationPatternsTrait
from xdsl.transforms.dead_code_elimination import region_dce

from affinec.base.diagnostics import PassError

REGION_SIMPLIFY = ("disabled", "normal", "aggressive")


class _OpsOwnPatterns(RewritePattern):
    """The canonicalization patterns an op's traits declare, the allowed ones."""

    def __init__(self, enabled: tuple[str, ...], disabled: tuple[str, ...]) -> None:
        self.enabled = set(enabled)
        self.disabled = set(disabled)

    def allowed(self, pattern: RewritePattern) -> bool:
        label = type(pattern).__name__
        if self.enabled and label not in self.enabled:
            return False
        return label not in self.disabled

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        patterns = [
            pattern
            for trait in op.get_traits_of_type(HasCanonicalizationPatternsTrait)
            for pattern in trait.get_patterns(type(op))
            if self.allowed(pattern)
        ]
        if patterns:
            GreedyRewritePatternApplier(patterns).match_and_rewrite(op, rewriter)


class _Budgeted(RewritePattern):
    """`pattern` (folding included) for at most `budget` rewrites (-1: no limit)."""

    def __init__(self, pattern: RewritePattern, budget: int) -> None:
        self.pattern = pattern
        self.budget = budget

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if self.budget == 0:
            return
        self.pattern.match_and_rewrite(op, rewriter)
        if rewriter.has_done_action and self.budget > 0:
            self.budget -= 1


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Apply every op's canonicalization patterns and folders until nothing changes."""

    name = "canonicalize"

    top_down: bool = True
    """Visit ops in program order (false: from the end), as MLIR seeds its worklist."""

    region_simplify: str = "normal"
    """`disabled`: no dead-code elimination of regions; `normal` and `aggressive`:
    dead ops and unreachable blocks removed (no block merging)."""

    max_iterations: int = 10
    """Sweeps over the module at most (-1: until nothing changes)."""

    max_num_rewrites: int = -1
    """Pattern rewrites at most, over all sweeps (-1: no limit)."""

    test_convergence: bool = False
    """Fail when `max-iterations` sweeps still change the module (a pattern that
    undoes another's work), instead of stopping there."""

    disable_patterns: tuple[str, ...] = ()
    """Patterns (by class name) not to apply."""

    enable_patterns: tuple[str, ...] = ()
    """Apply only these patterns (by class name); all by default."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.region_simplify not in REGION_SIMPLIFY:
            raise PassError(
                op,
                f"region-simplify must be one of {', '.join(REGION_SIMPLIFY)}, got "
                f"'{self.region_simplify}'",
            )
        for option, value in (
            ("max-iterations", self.max_iterations),
            ("max-num-rewrites", self.max_num_rewrites),
        ):
            if value == 0 or value < -1:
                raise PassError(
                    op, f"{option} must be positive or -1 (no limit), got {value}"
                )
        patterns = _OpsOwnPatterns(self.enable_patterns, self.disable_patterns)
        walker = PatternRewriteWalker(
            _Budgeted(
                GreedyRewritePatternApplier([patterns], ctx=ctx, folding_enabled=True),
                self.max_num_rewrites,
            ),
            walk_reverse=not self.top_down,
            apply_recursively=False,
            post_walk_func=None if self.region_simplify == "disabled" else region_dce,
        )
        sweeps = 0
        while walker.rewrite_module(op):
            sweeps += 1
            if sweeps == self.max_iterations:
                if self.test_convergence and walker.rewrite_module(op):
                    raise PassError(
                        op,
                        f"canonicalization did not converge in {self.max_iterations} "
                        "iterations (test-convergence)",
                    )
                return
