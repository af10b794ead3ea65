"""`affinec-contract-fma`: a multiply whose only use is an add becomes one fused
multiply-add (`math.fma`), rounded once.

The GPU does a multiply-add in one instruction (`fma.rn.f32`), at twice the rate of a
multiply and an add, and rounds once instead of twice. LLVM would contract on its own
under fast-math flags, but then the interpreter could not know where: here the
contraction is an op in the IR, and the interpreter computes `math.fma` with the
same single rounding as the GPU (see `fused_multiply_add`), so the kernel's output
stays bit-identical to the interpreter's from this pass down.

    %prod = arith.mulf %a, %b : f32
    %new = arith.addf %old, %prod : f32

becomes

    %new = math.fma %a, %b, %old : f32

The rounding changes (for the better), so `Pipeline.run(check=True)` holds this pass
to the dtype's tolerance against float64, and the passes after it to its result, bit
for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float16Type, Float32Type, ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects


@dataclass(frozen=True)
class AffinecContractFma(ModulePass):
    """Fuse each multiply into the add that is its only use (math.fma)."""

    name = "affinec-contract-fma"

    @property
    def changes_rounding(self) -> bool:
        return True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        for add in [o for o in op.walk() if isinstance(o, arith.AddfOp)]:
            if not isinstance(add.result.type, Float32Type | Float16Type):
                continue
            for k, term in enumerate((add.lhs, add.rhs)):
                mul = term.owner
                if (
                    isinstance(mul, arith.MulfOp)
                    and term.has_one_use()
                    and mul.parent_block() is add.parent_block()
                ):
                    other = (add.rhs, add.lhs)[k]
                    fma = math.FmaOp(mul.lhs, mul.rhs, other)
                    fma.result.name_hint = add.result.name_hint
                    fma.location = add.location
                    block = add.parent_block()
                    assert block is not None
                    block.insert_op_before(fma, add)
                    add.result.replace_all_uses_with(fma.result)
                    block.erase_op(add)
                    block.erase_op(mul)
                    break
