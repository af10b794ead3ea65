"""`convert-nvgpu-to-nvvm`: nvgpu's tensor-core ops and asynchronous copies as nvvm ops.

As MLIR's pass of the same name, it runs before `convert-gpu-to-nvvm` and rewrites
only the nvgpu ops, in place; the rest of the kernel keeps its memrefs, so the IR
between the two passes is still the gpu level — it prints, parses and is interpreted
like any other. Each nvgpu op becomes its nvvm op on pointers and registers, with the
conversions around it (`affinec/transforms/nvvm/nvgpu_to_nvvm.py` has the table):

    %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]}
        : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>

becomes

    %a0 = vector.extract %a[0] : vector<2xf16> from vector<4x2xf16>
    ...                                               (A, B registers; C elements)
    %s = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[%c0, %c1, %c2, %c3]
        {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
         shape = #nvvm.shape<m = 16, n = 8, k = 16>}
        : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
    %s0 = llvm.extractvalue %s[0] : !llvm.struct<(f32, f32, f32, f32)>
    %p = ub.poison : vector<2x2xf32>
    %d0 = vector.insert %s0, %p [0, 0] : f32 into vector<2x2xf32>
    ...

and `nvgpu.device_async_copy %g[%i], %s[%j], 8` becomes `nvvm.cp.async.shared.global`
on two `affinec.element_pointer`s.

Why a separate pass, and the `element_pointer` op: `convert-gpu-to-nvvm` translates a
whole kernel in one walk, memrefs becoming bare pointers. Had the nvgpu converters
joined that walk, `convert-nvgpu-to-nvvm` could only be an alias of it, and no level
would show the nvvm ops among the gpu-level code. Here the nvvm ops take pointers
made by `affinec.element_pointer %buf[%i, %j]`, which the interpreter runs as (flat
buffer, offset) and `convert-gpu-to-nvvm` lowers like any memref address; the vector
and llvm ops around them are interpreted at this level and lowered by
`convert-gpu-to-nvvm` too (n-D vectors become LLVM arrays of 1-D vectors, as in
MLIR). `convert-gpu-to-nvvm` refuses nvgpu ops, naming this pass.

Async tokens vanish (PTX's groups are per thread, not per token): a copy's token may
only be listed by `device_async_create_group`, and a group's token only be waited
on; anything else is refused before rewriting.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from affinec.base.diagnostics import PassError
from affinec.dialects.nvgpu import MmaSparseSyncOp
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.nvvm import wgmma_steps  # noqa: F401  (registers its lowering)
from affinec.transforms.nvvm.hopper_to_nvvm import lower_hopper
from affinec.transforms.nvvm.nvgpu_to_nvvm import (
    LOWERINGS,
    check_lowerable,
    name_intermediates,
)


@dataclass(frozen=True)
class ConvertNvgpuToNvvm(ModulePass):
    """nvgpu.ldmatrix, mma.sync and the async copies to nvvm ops, in place."""

    name = "convert-nvgpu-to-nvvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        for o in op.walk():
            if isinstance(o, MmaSparseSyncOp):
                raise PassError(o, "is not lowered: affinec emits no sparse mma.sync")
        lower_hopper(op)
        found = [o for o in op.walk() if o in LOWERINGS]
        for o in found:
            check_lowerable(o)
        # Users first: a wait before the group it names, a group before its copies.
        for o in reversed(found):
            lower = LOWERINGS.lookup(o)
            assert lower is not None
            new_ops, results = lower(o)
            name_intermediates(new_ops, results)
            # Tokens (results without a replacement) have lost their users already.
            replacements = results or [None] * len(o.results)
            Rewriter.replace_op(o, new_ops, replacements)
