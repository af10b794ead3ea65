"""A kernel of several blocks in lockstep: the loops and branches `cfg_structure`
finds, written for a block's threads.

    Loop (its condition the same for every thread)     while True:
                                                          budget.threads(count)
                                                          <header's ops>
                                                          if not stay: break
                                                          <body>; header args = ...
    Branch (a condition every thread shares)           if c: <arm> else: <arm>
    Branch (threads part)                              join args = poisoned lanes
                                                       taken = flatnonzero(c)
                                                       <arm on the lanes taken>
                                                       join_arg[taken] = value
    Jump                                               target's args = values

A block's arguments are named once, before the first jump to them, so that every
jump and the loop's turns assign the same variables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.ir import Block, Region

from affinec.interpreter.cfg_structure import (
    Branch,
    Exit,
    Jump,
    Loop,
    Run,
    blocks_of,
)


def write_items(kw: Any, region: Region, items: list) -> None:
    """Write `items` (the structure of `region`) with the kernel writer `kw`."""
    for block in list(region.blocks)[1:]:
        for arg in block.args:
            kw.w.define(arg)
    _Items(kw).write(items)


class _Items:
    def __init__(self, kw: Any) -> None:
        self.kw = kw
        self.scatter: dict[Block, str] = {}
        """The joins of branches being written for some lanes only: the lanes'
        positions among those running outside the branch."""

    def write(self, items: list) -> None:
        kw = self.kw
        w = kw.w
        for item in items:
            match item:
                case Run():
                    for op in list(item.block.ops)[:-1]:
                        with w.at(op):
                            kw.op(op)
                case Jump():
                    self.jump(item)
                case Loop():
                    self.loop(item)
                case Branch():
                    self.branch(item)
                case Exit():
                    pass  # the function's own `return`

    def jump(self, item: Jump) -> None:
        kw = self.kw
        w = kw.w
        args = item.target.args
        if not args:
            return
        taken = self.scatter.get(item.target)
        if taken is not None:
            for arg, value in zip(args, item.values, strict=True):
                w.line(f"{w[arg]}[{taken}] = {w[value]}")
            return
        values = [kw.lanes_of(a, v) for a, v in zip(args, item.values, strict=True)]
        w.assign([w[a] for a in args], values)

    def loop(self, item: Loop) -> None:
        kw = self.kw
        w = kw.w
        charge = w.global_(w.program.budget.threads, "charge")
        with w.indented("while True:"):
            w.line(f"{charge}({kw.count})")
            self.write([Run(item.header)])
            condition = w[item.condition]
            test = f"not {condition}" if item.stay else condition
            with w.indented(f"if {test}:"):
                w.line("break")
            self.write(item.body)
        assert item.exit is not None
        self.jump(item.exit)

    def branch(self, item: Branch) -> None:
        kw = self.kw
        w = kw.w
        if not kw.kernel_plan.differ((item.condition,)):
            for k, arm in enumerate(item.arms):
                with w.indented(f"if {w[item.condition]}:" if k == 0 else "else:"):
                    self.write(arm)
            return
        for arg in item.join.args:
            kw.fresh_lanes(w[arg], arg)
        condition = w.fresh("condition")
        broadcast = w.global_(np.broadcast_to, "broadcast_to")
        w.line(f"{condition} = {broadcast}({w[item.condition]}, ({kw.count},))")
        nonzero = w.global_(np.flatnonzero, "flatnonzero")
        for k, arm in enumerate(item.arms):
            taken = w.fresh("taken")
            w.line(f"{taken} = {nonzero}({'~' if k else ''}{condition})")
            blocks = blocks_of(arm)
            with w.indented(f"if {taken}.size:"), kw.on(taken, blocks):
                outer, self.scatter = self.scatter, {**self.scatter, item.join: taken}
                try:
                    self.write(arm)
                finally:
                    self.scatter = outer
