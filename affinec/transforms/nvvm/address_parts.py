"""An access's row-major offset in the three parts LLVM addresses best (read-only
analysis of a kernel at the cf level, before `convert-gpu-to-nvvm` rewrites it).

Each index is read as a sum of (coefficient x value) terms and a constant, looking
through arith's additions, subtractions and multiplications by a constant; the
offset's terms then fall in three parts:

    tile[s, r + 8 * i, c]       s: a loop's stage, r and c: the lane's,
                                i: the IV of a loop marked `affinec.unroll`
    offset = (r * 72 + c)       invariant: computed once, at the kernel's entry
           + s * 8160           varying: once a turn of its loop
           + i * 576 + C        constant once LLVM unrolls i's loop: an immediate

and the address is `((base + invariant) + varying) + constant`, one
`getelementptr` a part. Written as one sum, `(r + 8 * i) * 72 + c`, the unrolled
constant stays inside a product, a sign extension keeps it from the immediate, and
only NVPTX's straight-line strength reduction (superlinear in the number of such
addresses, half of a compile's time in LLVM) took it out again.

Each part is sign-extended on its own, so it must hold its true value: in 64-bit
index arithmetic it does; in 32-bit the split is made only when every coefficient
is positive (and below 2**31) and every term's value provably non-negative
(`AddressParts.nonnegative`), which bounds each part by the access's offset, and
the buffer's size by 2**31 less the constant. Anything else keeps one sum, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects import arith, cf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from affinec.dialects import gpu
from affinec.dialects.affinec import UNROLL

_MOST_VISITS = 32
"""How many definitions `linear_terms` reads for one index."""

LIMIT = 2**31

_DEEPEST = 48
"""How far back through definitions `AddressParts` looks; past it, a value is
varying, not unrolled and of unknown sign (a long chain of index arithmetic must
not exhaust Python's stack)."""


@dataclass
class Parts:
    """`offset = sum(invariant) + sum(varying) + sum(unrolled) + constant`, each
    part a map from value to coefficient (in the order the terms were found)."""

    invariant: dict[SSAValue, int]
    varying: dict[SSAValue, int]
    unrolled: dict[SSAValue, int]
    constant: int


def linear_terms(index: SSAValue) -> tuple[dict[SSAValue, int], int]:
    """`index` as `sum(coefficient * value) + constant`; a value that is not an
    addition, a subtraction or a product with a constant is a term of its own, and
    so is any value reached after `_MOST_VISITS` definitions (a subexpression that
    many others share is not expanded into each of them, nor a DAG into a tree)."""
    terms: dict[SSAValue, int] = {}
    constant = 0
    visits = 0

    def add(value: SSAValue, coefficient: int) -> None:
        nonlocal constant, visits
        visits += 1
        op = value.owner
        if (known := constant_value(value)) is not None:
            constant += coefficient * known
        elif visits > _MOST_VISITS:
            terms[value] = terms.get(value, 0) + coefficient
        elif isinstance(op, arith.AddiOp | arith.SubiOp):
            add(op.lhs, coefficient)
            add(op.rhs, -coefficient if isinstance(op, arith.SubiOp) else coefficient)
        elif isinstance(op, arith.MuliOp) and (k := constant_value(op.rhs)) is not None:
            add(op.lhs, coefficient * k)
        elif isinstance(op, arith.MuliOp) and (k := constant_value(op.lhs)) is not None:
            add(op.rhs, coefficient * k)
        else:
            terms[value] = terms.get(value, 0) + coefficient

    add(index, 1)
    return {v: k for v, k in terms.items() if k}, constant


_REMAINDERS = {arith.DivUIOp: arith.RemUIOp, arith.DivSIOp: arith.RemSIOp}


def recombined(terms: dict[SSAValue, int]) -> dict[SSAValue, int]:
    """`terms` with each quotient and remainder of one division put back together:

        a * K * (x / K) + a * (x % K)  =  a * x

    (`x = K * (x / K) + x % K`, for unsigned and truncating signed division alike).
    A tile read row by row at `(e / 16) * 128 + (e % 16) * 8` is `8 * e`, and LLVM
    then sees one term that grows by a constant each turn rather than two it must
    divide out again."""
    remainders = {
        (type(v.owner), v.owner.operands[0], constant_value(v.owner.operands[1])): v
        for v in terms
        if isinstance(v.owner, arith.RemUIOp | arith.RemSIOp)
    }
    out = dict(terms)
    for quotient, b in terms.items():
        division = quotient.owner
        if type(division) not in _REMAINDERS:
            continue
        x, divisor = division.operands
        k = constant_value(divisor)
        remainder = remainders.get((_REMAINDERS[type(division)], x, k))
        if k is None or k <= 0 or remainder is None or remainder not in out:
            continue
        a = terms[remainder]
        if b == a * k:
            del out[remainder], out[quotient]
            out[x] = out.get(x, 0) + a
    return {v: k for v, k in out.items() if k}


def constant_value(value: SSAValue) -> int | None:
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


@dataclass
class AddressParts:
    """The analysis for one kernel `func` with `index_bitwidth`-bit indices."""

    func: gpu.FuncOp
    index_bitwidth: int
    _unrolled_ivs: set[SSAValue] | None = None
    _varies: dict[SSAValue, bool] = field(default_factory=dict)
    _unrolls: dict[SSAValue, bool] = field(default_factory=dict)
    _nonnegative: dict[SSAValue, bool] = field(default_factory=dict)
    _depth: int = 0

    def split(
        self, indices: list[SSAValue], strides: list[int], size: int
    ) -> Parts | None:
        """The parts of the offset `sum(index * stride)` into a buffer of `size`
        elements, or None where they might not hold their true values."""
        coefficients: dict[SSAValue, int] = {}
        constant = 0
        for index, stride in zip(indices, strides, strict=True):
            terms, offset = linear_terms(index)
            constant += offset * stride
            for value, k in terms.items():
                coefficients[value] = coefficients.get(value, 0) + k * stride
        coefficients = recombined({v: k for v, k in coefficients.items() if k})
        if self.index_bitwidth < 64 and (
            size + abs(constant) >= LIMIT
            or not all(
                0 < k < LIMIT and self.nonnegative(v) for v, k in coefficients.items()
            )
        ):
            return None
        parts = Parts({}, {}, {}, constant)
        for value, k in coefficients.items():
            if self.unrolls(value):
                parts.unrolled[value] = k
            elif self.varies(value):
                parts.varying[value] = k
            else:
                parts.invariant[value] = k
        return parts

    # -- what a value depends on ------------------------------------------------------

    def unrolls(self, value: SSAValue) -> bool:
        """Whether `value` is a constant once LLVM unrolls the loops marked for it:
        arith over constants and the IVs of such loops."""
        return self._recall(self._unrolls, value, self._unrolls_by_definition, False)

    def _unrolls_by_definition(self, value: SSAValue) -> bool:
        if isinstance(value, BlockArgument):
            return value in self.unrolled_ivs()
        op = value.owner
        if isinstance(op, arith.ConstantOp):
            return True
        return (
            op.dialect_name() == "arith"
            and bool(op.operands)
            and all(self.unrolls(o) for o in op.operands)
        )

    def unrolled_ivs(self) -> set[SSAValue]:
        """The arguments of the loop headers whose back edge asks for a full unroll."""
        if self._unrolled_ivs is None:
            self._unrolled_ivs = {
                arg
                for op in self.func.body.walk()
                if isinstance(op, cf.BranchOp) and UNROLL in op.attributes
                for arg in op.successor.args
            }
        return self._unrolled_ivs

    def varies(self, value: SSAValue) -> bool:
        """Whether `value` depends on a loop's turn (an argument of a block other
        than the kernel's entry); if not, the entry computes it once."""
        return self._recall(self._varies, value, self._varies_by_definition, True)

    def _varies_by_definition(self, value: SSAValue) -> bool:
        if isinstance(value, BlockArgument):
            return value.block is not self.func.body.blocks.first
        return any(self.varies(o) for o in value.owner.operands)

    def _recall(
        self,
        memo: dict[SSAValue, bool],
        value: SSAValue,
        by_definition: Callable[[SSAValue], bool],
        past_depth: bool,
    ) -> bool:
        """`memo`'s answer for `value`, else `by_definition`'s, remembered; past
        `_DEEPEST` definitions back, `past_depth` (not remembered)."""
        known = memo.get(value)
        if known is not None:
            return known
        if self._depth >= _DEEPEST:
            return past_depth
        self._depth += 1
        try:
            found = by_definition(value)
        finally:
            self._depth -= 1
        memo[value] = found
        return found

    # -- signs --------------------------------------------------------------------------

    def nonnegative(self, value: SSAValue) -> bool:
        """Whether `value` is provably at least zero. A block argument is when every
        value its predecessors pass is (assumed while that is checked, which makes an
        IV counting up from zero one); 32-bit index arithmetic does not wrap (the
        kernel's indices were narrowed because their ranges fit)."""
        known = self._nonnegative.get(value)
        if known is not None:
            return known
        if self._depth >= _DEEPEST:
            return False
        self._nonnegative[value] = True  # a loop's argument, while it is checked
        self._depth += 1
        try:
            if isinstance(value, BlockArgument):
                found = self._arguments_nonnegative(value)
            else:
                found = self._result_nonnegative(value)
        finally:
            self._depth -= 1
        self._nonnegative[value] = found
        if not found:
            # what was concluded under the assumption is void
            self._nonnegative = {v: k for v, k in self._nonnegative.items() if not k}
        return found

    def _arguments_nonnegative(self, arg: BlockArgument) -> bool:
        block = arg.block
        if block is self.func.body.blocks.first:
            return False
        passed = [_passed(p.last_op, block, arg.index) for p in block.predecessors()]
        return bool(passed) and all(
            v is not None and self.nonnegative(v) for vs in passed for v in vs
        )

    def _result_nonnegative(self, value: SSAValue) -> bool:
        if (known := constant_value(value)) is not None:
            return known >= 0
        op = value.owner
        if isinstance(op, _NONNEGATIVE):
            return True
        if isinstance(op, _NONNEGATIVE_WITH_ANY_OPERAND):
            return any(self.nonnegative(o) for o in op.operands)
        if isinstance(op, arith.SelectOp):
            return self.nonnegative(op.lhs) and self.nonnegative(op.rhs)
        if isinstance(op, _NONNEGATIVE_WITH_ALL_OPERANDS):
            return all(self.nonnegative(o) for o in op.operands)
        return False


_NONNEGATIVE = (
    gpu.ThreadIdOp | gpu.BlockIdOp | gpu.BlockDimOp | gpu.GridDimOp | gpu.LaneIdOp
)
_NONNEGATIVE_WITH_ANY_OPERAND = arith.MaxSIOp | arith.AndIOp
_NONNEGATIVE_WITH_ALL_OPERANDS = (
    arith.AddiOp
    | arith.MuliOp
    | arith.MinSIOp
    | arith.DivUIOp
    | arith.RemUIOp
    | arith.ShRUIOp
    | arith.DivSIOp
    | arith.RemSIOp
    | arith.FloorDivSIOp
    | arith.CeilDivSIOp
    | arith.OrIOp
    | arith.IndexCastOp
    | arith.ExtUIOp
    | arith.ExtSIOp
)


def _passed(
    terminator: Operation | None, block: Block, index: int
) -> list[SSAValue | None]:
    """The values `terminator` passes to `block`'s argument `index` (None where it
    passes something this analysis cannot name)."""
    if isinstance(terminator, cf.BranchOp):
        return [terminator.arguments[index]]
    if isinstance(terminator, cf.ConditionalBranchOp):
        out: list[SSAValue | None] = []
        if terminator.then_block is block:
            out.append(terminator.then_arguments[index])
        if terminator.else_block is block:
            out.append(terminator.else_arguments[index])
        return out
    return [None]
