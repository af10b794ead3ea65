"""The control-flow graph of a region: which blocks run, and in what order to visit
them so that every block comes after its dominators.

A block no branch reaches never runs: the interpreter and the nvvm lowering leave it
out, which also spares them the values such a block may use before their definition
(MLIR's verifier lets unreachable code do that).
"""

from __future__ import annotations

from xdsl.ir import Block, Region


def reverse_post_order(region: Region) -> list[Block]:
    """The blocks reachable from the entry, in reverse post-order (a block's
    dominators before it). Iterative: a chain of thousands of blocks is fine."""
    entry = region.blocks.first
    if entry is None:
        return []
    order: list[Block] = []
    seen = {entry}
    stack = [(entry, _successors(entry))]
    while stack:
        block, successors = stack[-1]
        for s in successors:
            if s not in seen:
                seen.add(s)
                stack.append((s, _successors(s)))
                break
        else:
            stack.pop()
            order.append(block)
    order.reverse()
    return order


def reachable_blocks(region: Region) -> list[Block]:
    """The blocks reachable from the entry, in the region's order."""
    reachable = set(reverse_post_order(region))
    return [b for b in region.blocks if b in reachable]


def _successors(block: Block):
    term = block.last_op
    return iter(term.successors if term is not None else ())
