"""xDSL's walks over nested ops (`Operation.walk`, `Region.walk`, `Block.walk`)
without a generator a level.

xDSL's walks are generators that delegate to the walk of each region, block and
op below them (`yield from`): an op nested ten loops deep reaches the caller
through some thirty generators, each resumed for it, and the passes walk
whole kernels of thousands of ops many times (about 6 % of a compile went to
the generators alone). `install` puts in front of the three a walk with one
generator and a stack of the same iterators, in the same order and as lazily:
each level's iterator is made when xDSL's generator would make it (a region's
blocks and a block's ops when the walk reaches them, an op's regions once the
caller has seen the op) and advanced when xDSL's would be, so a pass that
changes the IR while it walks sees what it saw before (an op erased after it is
yielded, for one, is stepped over as xDSL's iterators step over it). The walks
in reverse or with the regions first are xDSL's own.
`tests/test_ir_walk.py` compares the two, the IR changed during the walk included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from xdsl.ir import Block, Operation, Region

_xdsl_operation_walk: Callable[..., Iterator[Operation]] = Operation.walk
_xdsl_region_walk: Callable[..., Iterator[Operation]] = Region.walk
_xdsl_block_walk: Callable[..., Iterable[Operation]] = Block.walk

_REGIONS, _BLOCKS, _OPS = 0, 1, 2
"""What an iterator of the walk's stack gives, by its depth modulo three."""


def _below(top: Iterator, level: int) -> Iterator[Operation]:
    """Every op under `top` (an iterator of regions, blocks or ops, as `level`
    says), each before what it holds."""
    stack: list[Iterator] = [top]
    depth = level  # the level of stack[-1]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            depth -= 1
        elif depth % 3 == _OPS:
            yield item
            # Most ops hold no region: nothing to push (and pop at once) for them.
            # Read once the caller has seen the op, as xDSL's walk reads it.
            if item.regions:
                stack.append(iter(item.regions))
                depth += 1
        elif depth % 3 == _REGIONS:
            stack.append(iter(item.blocks))
            depth += 1
        else:
            stack.append(iter(item.ops))
            depth += 1


def _operation(op: Operation) -> Iterator[Operation]:
    yield op
    yield from _below(iter(op.regions), _REGIONS)


def _region(region: Region) -> Iterator[Operation]:
    yield from _below(iter(region.blocks), _BLOCKS)


def _block(block: Block) -> Iterator[Operation]:
    yield from _below(iter(block.ops), _OPS)


def operation_walk(
    self: Operation, *, reverse: bool = False, region_first: bool = False
) -> Iterator[Operation]:
    """`Operation.walk`: this op and every op nested in it."""
    if reverse or region_first:
        return _xdsl_operation_walk(self, reverse=reverse, region_first=region_first)
    return _operation(self)


def region_walk(
    self: Region, *, reverse: bool = False, region_first: bool = False
) -> Iterator[Operation]:
    """`Region.walk`: every op nested in the region."""
    if reverse or region_first:
        return _xdsl_region_walk(self, reverse=reverse, region_first=region_first)
    return _region(self)


def block_walk(
    self: Block, *, reverse: bool = False, region_first: bool = False
) -> Iterable[Operation]:
    """`Block.walk`: every op nested in the block."""
    if reverse or region_first:
        return _xdsl_block_walk(self, reverse=reverse, region_first=region_first)
    return _block(self)


def install() -> None:
    """Walk through one generator from now on (idempotent)."""
    Operation.walk = operation_walk  # pyright: ignore[reportAttributeAccessIssue]
    Region.walk = region_walk  # pyright: ignore[reportAttributeAccessIssue]
    Block.walk = block_walk  # pyright: ignore[reportAttributeAccessIssue]


def uninstall() -> None:
    """xDSL's own walks again (for comparing the two)."""
    Operation.walk = _xdsl_operation_walk  # pyright: ignore[reportAttributeAccessIssue]
    Region.walk = _xdsl_region_walk  # pyright: ignore[reportAttributeAccessIssue]
    Block.walk = _xdsl_block_walk  # pyright: ignore[reportAttributeAccessIssue]
