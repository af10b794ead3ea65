"""Where a block's threads must wait for each other: `gpu.barrier` between phases.

The threads of a block run the phases of the grid level in program order, each
thread its own iterations, with nothing keeping one thread from running ahead. A
phase (or a grid-level read) that reads what an earlier phase wrote, or writes what
an earlier one read or wrote, since the last barrier, needs a barrier before it. The
trip of an enclosing `affine.for` continues into the next trip, so a loop's body is
walked twice: the second walk starts with what the first left pending (the copy of
the next tile must wait for the compute phase of this one). Private buffers (memory
space 5) never need one: only their owner touches them.

    affine.parallel ... {              // phase: writes %tile
    } {affinec.mapping = "block"}
    gpu.barrier                        // %tile: written above, read below
    affine.parallel ... {              // phase: reads %tile
    } {affinec.mapping = "block"}

Barriers already in the IR count: the pass adds only the ones missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, SSAValue

from affinec.dialects import affine, gpu
from affinec.dialects.affinec import OVERLAY
from affinec.ir.effects import only_reads, reads, writes
from affinec.transforms.gpu.bands import (
    GridAnalysis,
    is_private,
    is_shared,
)


@dataclass
class Access:
    """Shared (non-private) buffers read and written since the last barrier."""

    reads: set[SSAValue] = field(default_factory=set)
    writes: set[SSAValue] = field(default_factory=set)

    def conflicts(self, other: Access, overlays: frozenset[SSAValue]) -> bool:
        """Whether `other` after `self` needs a barrier between: one writes what the
        other touches, or one touches an overlay (a buffer that may take the bytes of
        every other shared buffer, `affinec.overlay`) and the other another buffer."""
        if self.writes & (other.reads | other.writes) or self.reads & other.writes:
            return True
        mine, theirs = (
            _shared(self.reads | self.writes),
            _shared(other.reads | other.writes),
        )
        return any(bool(theirs - {b}) for b in mine & overlays) or any(
            bool(mine - {b}) for b in theirs & overlays
        )

    def __or__(self, other: Access) -> Access:
        return Access(self.reads | other.reads, self.writes | other.writes)


def _shared(buffers: set[SSAValue]) -> set[SSAValue]:
    return {b for b in buffers if is_shared(b)}


def access_of(op: Operation) -> Access:
    """The non-private buffers `op` (and the ops nested in it) reads and writes, as
    the ops declare their effects (`affinec.ir.effects`)."""
    acc = Access()
    for inner in op.walk():
        acc.reads.update(b for b in reads(inner) if not is_private(b))
        acc.writes.update(b for b in writes(inner) if not is_private(b))
    return acc


def plan_barriers(analysis: GridAnalysis) -> list[Operation]:
    """The ops of the grid level that need a barrier right before them."""
    phases = {p.op for p in analysis.phases}
    overlays = frozenset(
        a.results[0] for a in analysis.allocs if OVERLAY in a.attributes
    )
    sites: list[Operation] = []
    _walk(analysis.grid.op.body.block, Access(), phases, overlays, sites)
    return sites


def _walk(
    block: Block,
    pending: Access,
    phases: set[Operation],
    overlays: frozenset[SSAValue],
    sites: list[Operation],
) -> Access:
    """Mark the ops that need a barrier before them; return what is pending after."""
    for op in block.ops:
        if isinstance(op, gpu.BarrierOp) or op in sites:
            pending = Access()
        if op in phases or only_reads(op):
            acc = access_of(op)
            if pending.conflicts(acc, overlays):
                sites.append(op)
                pending = Access()
            pending = pending | acc
        elif isinstance(op, affine.ForOp):
            end = _walk(op.body.block, pending, phases, overlays, sites)
            # The next trip starts with what the last one left pending.
            end = _walk(op.body.block, pending | end, phases, overlays, sites)
            pending = pending | end
        elif isinstance(op, affine.IfOp):
            ends = [
                _walk(r.block, pending, phases, overlays, sites)
                for r in (op.then_region, op.else_region)
                if r.blocks
            ]
            for end in ends:
                pending = pending | end
    return pending


def insert_barriers(sites: list[Operation]) -> None:
    for site in sites:
        block = site.parent_block()
        assert block is not None
        block.insert_op_before(gpu.BarrierOp(), site)
