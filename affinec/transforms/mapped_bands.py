"""Finding the bands of a module: the naive IR's unmapped `affine.parallel`, the
GPU-mapped ones (`{affinec.mapping = "grid"}` or `"block"`), and the grid band around
a block band."""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import BLOCK, GRID, mapping_of


def naive_parallels(module: ModuleOp, why: str) -> list[affine.ParallelOp]:
    """The outermost `affine.parallel` of each function (the naive IR's band),
    refusing a mapped one (`'op' is already mapped to 'grid': {why}`) and a function
    of several blocks, whose control flow is already lowered to `cf`."""
    found = []
    for fn in module.walk():
        if not isinstance(fn, func.FuncOp) or not fn.body.blocks:
            continue
        if len(fn.body.blocks) > 1:
            raise PassError(
                fn,
                f"has {len(fn.body.blocks)} blocks, its control flow lowered to cf: "
                f"{why}",
            )
        for op in fn.body.block.ops:
            if isinstance(op, affine.ParallelOp):
                if (level := mapping_of(op)) is not None:
                    raise PassError(op, f"is already mapped to '{level}': {why}")
                found.append(op)
    return found


def block_loops(module: ModuleOp, pass_name: str) -> list[affine.ParallelOp]:
    """The block-level `affine.parallel` ops of `module`; refuses a module without."""
    found = [
        op
        for op in module.walk()
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == BLOCK
    ]
    if not found:
        raise PassError(
            module,
            f"has no affine.parallel mapped to '{BLOCK}': {pass_name} runs after "
            "affine-loop-tile",
        )
    return found


def grid_loop_of(op: affine.ParallelOp, pass_name: str) -> affine.ParallelOp:
    """The grid-level `affine.parallel` around a block-level one."""
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ParallelOp) and mapping_of(parent) == GRID:
            return parent
        parent = parent.parent_op()
    raise PassError(
        op,
        f"is mapped to '{BLOCK}' but not nested in an affine.parallel mapped to "
        f"'{GRID}'; {pass_name} needs the grid loop to allocate per-block buffers in",
    )


def grid_loops(module: ModuleOp, pass_name: str) -> list[affine.ParallelOp]:
    """The grid-level `affine.parallel` ops of `module`; refuses a module without."""
    found = [
        op
        for op in module.walk()
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == GRID
    ]
    if not found:
        raise PassError(
            module,
            f"has no affine.parallel mapped to '{GRID}': {pass_name} runs after "
            "affine-loop-tile",
        )
    return found
