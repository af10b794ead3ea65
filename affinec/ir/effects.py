"""The buffers an op reads and writes, from the effects the ops declare.

affinec's ops name the operands they touch (`AccessesOperands`,
`dialects/memory_effects.py`); xDSL's declare effects without saying on what
(`memref.load`'s `MemoryReadEffect`), which count for every memref operand; an op
that declares nothing may do anything to its memref operands, so it counts as
reading and writing them all. Ops with regions are not looked into: walk them.

    reads(affine.load %A[%i])             -> [%A]
    writes(nvgpu.device_async_copy ...)   -> [%dst]
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.traits import MemoryEffectKind, RecursiveMemoryEffect, get_effects


def _buffers(op: Operation, kind: MemoryEffectKind) -> list[SSAValue]:
    if op.has_trait(RecursiveMemoryEffect):
        return []
    memrefs = [v for v in op.operands if isinstance(v.type, MemRefType)]
    effects = get_effects(op)
    if effects is None:  # unknown: anything to any of its buffers
        return memrefs
    out: list[SSAValue] = []
    for e in effects:
        if e.kind != kind:
            continue
        if isinstance(e.value, SSAValue):
            out.append(e.value)
        elif e.value is None:
            out += memrefs
    return list(dict.fromkeys(out))


def reads(op: Operation) -> list[SSAValue]:
    """The buffers `op` itself reads."""
    return _buffers(op, MemoryEffectKind.READ)


def writes(op: Operation) -> list[SSAValue]:
    """The buffers `op` itself writes."""
    return _buffers(op, MemoryEffectKind.WRITE)


def only_reads(op: Operation) -> bool:
    """Whether `op` reads some buffer and writes none (declared so)."""
    effects = get_effects(op)
    return (
        effects is not None
        and bool(effects)
        and all(e.kind == MemoryEffectKind.READ for e in effects)
    )
