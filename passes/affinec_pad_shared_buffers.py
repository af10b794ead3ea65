"""`affinec-pad-shared-buffers`: pad the innermost dimension of each shared buffer so
that a warp's accesses to it spread over the 32 banks.

A tile whose rows are a multiple of 128 bytes puts the same column of every row in
one bank: `ldmatrix` reading eight 64-byte rows, or threads reading a column, wait
for one another. The analysis (`affinec/transforms/gpu/bank_conflicts.py`) counts
the wavefronts each access of the block's first warp costs; this pass grows each
buffer's innermost dimension by the padding that costs its accesses the fewest (in
16-byte steps when some access moves 16 bytes a lane, so rows stay aligned), the
smallest on ties. Nothing reads the padding, so the result is bit for bit the same.

    %input_shared = memref.alloc() : memref<3x1x4x32x32xf16, 3 : i64>

becomes

    %input_shared = memref.alloc() : memref<3x1x4x32x40xf16, 3 : i64>

Runs at the mapped level (after `affinec-map-threads`), where every index is a
function of the thread's id.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp
from xdsl.passes import ModulePass

from affinec.context import require_affinec_dialects
from affinec.dialects import gpu
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels
from affinec.transforms.gpu.bank_conflicts import best_padding, shared_accesses


@dataclass(frozen=True)
class AffinecPadSharedBuffers(ModulePass):
    """Pad each shared buffer's rows against bank conflicts (the fewest wavefronts)."""

    name = "affinec-pad-shared-buffers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        work = []
        for g in grid_parallels(op):
            analysis = analyze_grid(g)
            accesses = shared_accesses(g)
            for alloc in analysis.allocs:
                buffer = alloc.results[0]
                if gpu.memory_space(buffer.type) != gpu.WORKGROUP_ADDRESS_SPACE:
                    continue
                mine = [(o, i, w) for o, b, i, w in accesses if b is buffer]
                if mine and (pad := best_padding(buffer, mine)):
                    work.append((alloc, pad))
        for alloc, pad in work:
            t = alloc.results[0].type
            assert isinstance(t, MemRefType)
            shape = list(t.get_shape())
            new = memref.AllocOp(
                [],
                [],
                gpu.in_memory_space(
                    MemRefType(t.get_element_type(), [*shape[:-1], shape[-1] + pad]),
                    gpu.WORKGROUP_ADDRESS_SPACE,
                ),
            )
            new.memref.name_hint = alloc.results[0].name_hint
            new.attributes |= alloc.attributes
            block = alloc.parent_block()
            assert block is not None
            block.insert_op_before(new, alloc)
            alloc.results[0].replace_all_uses_with(new.memref)
            block.erase_op(alloc)
