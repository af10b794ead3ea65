"""Which buffers an op reads and writes, declared on the op: the `AccessesOperands`
trait (xDSL's `MemoryEffect` interface, with the operands named).

    class LoadOp(IRDLOperation):
        memref = operand_def(MemRefType)
        traits = traits_def(AccessesOperands(reads=("memref",)))

Analyses ask `affinec.ir.effects` (`reads`, `writes`), which reads these and xDSL's
own effect traits alike, so no pass keeps a list of the ops that touch memory.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.traits import EffectInstance, MemoryEffect, MemoryEffectKind


@dataclass(frozen=True)
class AccessesOperands(MemoryEffect):
    """The op reads the buffers of operands `reads` and writes those of `writes`
    (operand definitions by name), and nothing else."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    def get_effects(self, op: Operation) -> Set[EffectInstance]:  # pyright: ignore[reportIncompatibleMethodOverride]
        return frozenset(
            [EffectInstance(MemoryEffectKind.READ, getattr(op, n)) for n in self.reads]
            + [
                EffectInstance(MemoryEffectKind.WRITE, getattr(op, n))
                for n in self.writes
            ]
        )
