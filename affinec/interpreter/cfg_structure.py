"""The loops and branches of a region of blocks, found again: what a block in
lockstep (`lockstep`) needs of a kernel after `convert-scf-to-cf`.

`convert-scf-to-cf` writes each `scf.for` as a header block that tests the
induction variable and a body that branches back to it, and each `scf.if` as a
conditional branch whose arms meet again at a join block; the LLVM level keeps
that shape. `structure` reads such a region back into a tree of

    Run(block)                  the block's ops but its terminator
    Jump(target, values)        the target's arguments take the values
    Loop(header, stay, body)    while the header's condition says `stay`: the body
    Branch(condition, arms, join)   each arm from the branch to the join
    Exit(op)                    the function's return

so that a loop whose condition all threads share runs as a Python `while`, and a
branch the threads take apart runs each arm on its own threads. A region of
another shape (a loop with several exits, a branch whose arms never meet, a
block reached from two places that is neither a header nor a join) gives None:
its kernel runs thread by thread.

    ^bb1(%i: index):                      Jump(^bb1, [%c0])
      %c = arith.cmpi slt, %i, %n         Loop(^bb1, stay=True, [
      cf.cond_br %c, ^bb2, ^bb3             Run(^bb2), Jump(^bb1, [%next])])
    ^bb2:                                 Run(^bb3)
      ...; cf.br ^bb1(%next : index)      Exit(return)
    ^bb3:
      gpu.return
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import cf, llvm
from xdsl.ir import Block, Operation, Region, SSAValue

from affinec.base.diagnostics import dominance_sets, dominators


@dataclass(eq=False)
class Run:
    block: Block


@dataclass(eq=False)
class Jump:
    target: Block
    values: Sequence[SSAValue]


@dataclass(eq=False)
class Loop:
    header: Block
    condition: SSAValue
    stay: bool
    """Whether the loop goes on where the condition holds (its true successor is
    the body)."""
    body: list = field(default_factory=list)
    exit: Jump | None = None


@dataclass(eq=False)
class Branch:
    condition: SSAValue
    arms: tuple[list, list]
    """The items of the true arm and of the false arm, each ending in the `Jump`
    to the join."""
    join: Block


@dataclass(eq=False)
class Exit:
    op: Operation


def edges(term: Operation) -> list[tuple[Block, Sequence[SSAValue]]] | None:
    """The successors of a branch and the values it passes each; None for
    another terminator."""
    match term:
        case cf.BranchOp() | llvm.BrOp():
            return [(term.successor, term.arguments)]
        case cf.ConditionalBranchOp() | llvm.CondBrOp():
            return [
                (term.then_block, term.then_arguments),
                (term.else_block, term.else_arguments),
            ]
    return None


def structure(region: Region) -> list | None:
    """The tree of `region`'s blocks (see the module's docstring), or None."""
    blocks = list(region.blocks)
    if not blocks:
        return None
    try:
        graph = _Graph(region)
        return graph.sequence(blocks[0], None, set())
    except _Unstructured:
        return None


class _Unstructured(Exception):
    pass


class _Graph:
    def __init__(self, region: Region) -> None:
        blocks = list(region.blocks)
        self.successors: dict[Block, list[Block]] = {}
        self.exits: list[Block] = []
        for b in blocks:
            out = edges(b.last_op) if b.last_op is not None else None
            if out is None:
                self.successors[b] = []
                self.exits.append(b)
            else:
                self.successors[b] = [s for s, _ in out]
        self.predecessors: dict[Block, list[Block]] = {b: [] for b in blocks}
        for b, succ in self.successors.items():
            for s in succ:
                if s not in self.predecessors:
                    raise _Unstructured
                self.predecessors[s].append(b)
        self.dominators = dominators(region)
        self.headers = {
            s
            for b, succ in self.successors.items()
            for s in succ
            if b in self.dominators and s in self.dominators[b]
        }
        self.loops = {h: self._natural_loop(h) for h in self.headers}
        self.post_dominators = dominance_sets(
            blocks[::-1], set(self.exits), self.successors
        )

    def _natural_loop(self, header: Block) -> set[Block]:
        body = {header}
        work = [p for p in self.predecessors[header] if header in self.dominators[p]]
        while work:
            b = work.pop()
            if b not in body:
                body.add(b)
                work.extend(self.predecessors[b])
        return body

    def join(self, block: Block) -> Block:
        """The nearest block every path from `block` to the exit goes through (its
        immediate post-dominator)."""
        candidates = self.post_dominators[block] - {block}
        for c in candidates:
            if all(d in self.post_dominators[c] for d in candidates):
                return c
        raise _Unstructured

    def sequence(self, block: Block, stop: Block | None, seen: set[Block]) -> list:
        items: list = []
        b = block
        while b is not stop:
            if b in seen:
                raise _Unstructured  # reached twice, neither a header nor a join
            seen.add(b)
            term = b.last_op
            out = edges(term) if term is not None else None
            if b in self.headers:
                items.append(self._loop(b, out, seen))
                loop = items[-1]
                target = loop.exit.target
                if target is stop:
                    return items
                b = target
                continue
            items.append(Run(b))
            if out is None:
                if stop is not None or term is None:
                    raise _Unstructured
                items.append(Exit(term))
                return items
            if len(out) == 1:
                target, values = out[0]
                items.append(Jump(target, values))
                if target is stop:
                    return items
                if len(self.predecessors[target]) != 1 and target not in self.headers:
                    raise _Unstructured
                b = target
                continue
            assert isinstance(term, cf.ConditionalBranchOp | llvm.CondBrOp)
            join = self.join(b)
            arms = tuple(
                [Jump(s, v)] + ([] if s is join else self.sequence(s, join, seen))
                for s, v in out
            )
            items.append(Branch(term.cond, arms, join))  # pyright: ignore
            if join is stop:
                return items
            b = join
        return items

    def _loop(self, header: Block, out, seen: set[Block]) -> Loop:
        """A loop at `header`: its terminator a conditional branch into the loop
        and out of it, the only way out."""
        body = self.loops[header]
        if out is None or len(out) != 2:
            raise _Unstructured
        inside = [k for k, (s, _) in enumerate(out) if s in body and s is not header]
        if len(inside) != 1:
            raise _Unstructured
        k = inside[0]
        for b in body - {header}:
            if any(s not in body for s in self.successors[b]):
                raise _Unstructured  # a way out besides the header's
        (enter, enter_values), (leave, leave_values) = out[k], out[1 - k]
        loop = Loop(header, header.last_op.cond, stay=(k == 0))  # pyright: ignore
        loop.body = [Jump(enter, enter_values), *self.sequence(enter, header, seen)]
        if not loop.body or not isinstance(loop.body[-1], Jump):
            raise _Unstructured
        loop.exit = Jump(leave, leave_values)
        return loop


def blocks_of(items: list) -> list[Block]:
    """Every block an item list runs, headers and nested ones included."""
    out: list[Block] = []
    for item in items:
        match item:
            case Run():
                out.append(item.block)
            case Loop():
                out.append(item.header)
                out.extend(blocks_of(item.body))
            case Branch():
                for arm in item.arms:
                    out.extend(blocks_of(arm))
    return out
