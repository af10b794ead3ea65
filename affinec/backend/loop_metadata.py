"""The `llvm.loop` metadata that asks LLVM to unroll a loop fully, on the back edge
of each loop the IR marks (`UNROLL` on its `llvm.br`). llvmlite cannot build the
self-referencing distinct node LLVM wants as a loop id, so `mark_unroll` attaches a
placeholder while the module is built and `complete_loop_metadata` rewrites the
placeholders in the module's text.
"""

from __future__ import annotations

import re

import llvmlite.ir as ir

_LOOP_MARK = "affinec.loop."
_PLACEHOLDER = re.compile(
    r'^(!\d+) = !\{\s*!"' + re.escape(_LOOP_MARK) + r'\d+"\s*\}$', re.MULTILINE
)


def mark_unroll(branch: ir.Instruction | None, module: ir.Module) -> None:
    """Attach a placeholder loop id to a back edge; `complete_loop_metadata`
    completes it."""
    if branch is None:
        return
    count = getattr(module, "_affinec_loops", 0)
    module._affinec_loops = count + 1  # pyright: ignore[reportAttributeAccessIssue]
    placeholder = module.add_metadata(
        [ir.MetaDataString(module, f"{_LOOP_MARK}{count}")]
    )
    branch.set_metadata("llvm.loop", placeholder)


def complete_loop_metadata(text: str) -> str:
    """Turn the loop id placeholders into what LLVM wants: a distinct node whose first
    operand is itself (llvmlite cannot build self-references), asking for a full
    unroll."""
    if not _PLACEHOLDER.search(text):
        return text
    ids = re.findall(r"^!(\d+) =", text, re.MULTILINE)
    unroll = f"!{1 + max(int(n) for n in ids)}"
    text = _PLACEHOLDER.sub(lambda m: f"{m[1]} = distinct !{{{m[1]}, {unroll}}}", text)
    return text + f'\n{unroll} = !{{!"llvm.loop.unroll.full"}}\n'


__all__ = ["complete_loop_metadata", "mark_unroll"]
