"""The parts of an access's offset (`affinec.transforms.nvvm.address_parts`): which
term goes where, that the parts add up to the offset, and where 32-bit indices keep
one sum. The kernels built this way are proven on the interpreter by the lowering
and tensor-core tests; this file checks the analysis itself."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import SSAValue

from affinec.base.locating_parser import parse_module
from affinec.ir.context import make_context
from affinec.transforms.nvvm.address_parts import AddressParts, linear_terms

# A kernel at the cf level: %k counts the turns of a loop, %i those of a loop
# marked for unrolling inside it; %t is the thread's id, %n an argument.
KERNEL = """
func.func @kernel(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %tid = gpu.thread_id x
  %t = arith.index_cast %tid : index to i32
  cf.br ^loop(%c0 : i32)
^loop(%k: i32):
  %more = arith.cmpi slt, %k, %c4 : i32
  cf.cond_br %more, ^inner(%c0 : i32), ^exit
^inner(%i: i32):
  %more_i = arith.cmpi slt, %i, %c4 : i32
  cf.cond_br %more_i, ^body, ^latch
^body:
  %i8 = arith.muli %i, %c8 : i32
  %row = arith.addi %t, %i8 : i32
  %col = arith.addi %k, %c1 : i32
  %back = arith.subi %c4, %i : i32
  %from_n = arith.addi %n, %i8 : i32
  %q = arith.divui %k, %c4 : i32
  %rm = arith.remui %k, %c4 : i32
  %next_i = arith.addi %i, %c1 : i32
  cf.br ^inner(%next_i : i32) {affinec.unroll}
^latch:
  %next_k = arith.addi %k, %c1 : i32
  cf.br ^loop(%next_k : i32)
^exit:
  func.return
}
"""


def kernel() -> tuple[func.FuncOp, dict[str, SSAValue]]:
    module = parse_module(make_context(), KERNEL)
    f = module.body.block.first_op
    assert isinstance(f, func.FuncOp)
    names: dict[str, SSAValue] = {}
    for block in f.body.blocks:
        for arg in block.args:
            if arg.name_hint:
                names[arg.name_hint] = arg
        for op in block.ops:
            for r in op.results:
                if r.name_hint:
                    names[r.name_hint] = r
    return f, names


def test_each_term_goes_to_its_part():
    f, v = kernel()
    parts = AddressParts(f, 32).split([v["row"], v["col"]], [72, 1], 64 * 72)  # pyright: ignore
    assert parts is not None
    assert parts.invariant == {v["t"]: 72}
    assert parts.varying == {v["k"]: 1}
    assert parts.unrolled == {v["i"]: 576}
    assert parts.constant == 1


def test_a_quotient_and_its_remainder_are_put_back_together():
    f, v = kernel()
    q, rm, k = v["q"], v["rm"], v["k"]

    def varying(strides):
        parts = AddressParts(f, 32).split([q, rm], strides, 64)  # pyright: ignore
        assert parts is not None
        return parts.varying

    assert varying([4, 1]) == {k: 1}  # tile[k / 4, k % 4] of rows of 4: k
    assert varying([12, 1]) == {q: 12, rm: 1}  # rows of 12: left as they are
    assert varying([2, 1]) == {q: 2, rm: 1}  # rows of 2: nothing to put back


def test_signs():
    f, v = kernel()
    a = AddressParts(f, 32)  # pyright: ignore[reportArgumentType]
    assert a.nonnegative(v["t"])  # a thread id
    assert a.nonnegative(v["k"]) and a.nonnegative(v["i"])  # IVs counting up from 0
    assert not a.nonnegative(v["n"])  # an argument: anything
    assert not a.nonnegative(v["back"])  # 4 - i: a difference


def test_32_bit_indices_keep_one_sum_where_a_part_might_not_hold_its_value():
    f, v = kernel()
    size = 64 * 72
    # a negative coefficient (4 - i) or a term of unknown sign (%n)
    for row in (v["back"], v["from_n"]):
        assert AddressParts(f, 32).split([row, v["col"]], [72, 1], size) is None  # pyright: ignore
        parts = AddressParts(f, 64).split([row, v["col"]], [72, 1], size)  # pyright: ignore
        assert parts is not None
    # a coefficient that does not fit 32 bits (8 * 2**29 for i)
    assert AddressParts(f, 32).split([v["row"]], [2**29], 2**30) is None  # pyright: ignore
    # a buffer whose size and constant (k + 1: one) reach 2**31
    assert AddressParts(f, 32).split([v["col"]], [1], 2**31 - 2) is not None  # pyright: ignore
    assert AddressParts(f, 32).split([v["col"]], [1], 2**31 - 1) is None  # pyright: ignore


@given(st.integers(0, 2**16), st.integers(0, 64), st.integers(0, 16), st.integers(1, 4))
def test_the_parts_add_up_to_the_offset(t, k, i, seed):
    """Whatever the values of the terms, invariant + varying + unrolled + constant
    is the row-major offset."""
    f, v = kernel()
    rng = random.Random(seed)
    values = {v["t"]: t, v["k"]: k, v["i"]: i, v["n"]: rng.randrange(-99, 99)}
    for rows in (["row", "col"], ["back", "col"], ["from_n", "row"], ["q", "rm"]):
        indices = [v[name] for name in rows]
        strides = [rng.randrange(1, 300), 1]
        parts = AddressParts(f, 64).split(indices, strides, 10**6)  # pyright: ignore
        assert parts is not None
        whole = sum(
            evaluate(x, values) * s for x, s in zip(indices, strides, strict=True)
        )
        split = parts.constant + sum(
            evaluate(x, values) * c
            for part in (parts.invariant, parts.varying, parts.unrolled)
            for x, c in part.items()
        )
        assert split == whole


def evaluate(value: SSAValue, values: dict[SSAValue, int]) -> int:
    if value in values:
        return values[value]
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        assert isinstance(op.value, IntegerAttr)
        return op.value.value.data
    lhs, rhs = (evaluate(o, values) for o in op.operands)
    return {
        arith.AddiOp: lambda: lhs + rhs,
        arith.SubiOp: lambda: lhs - rhs,
        arith.MuliOp: lambda: lhs * rhs,
        arith.DivUIOp: lambda: lhs // rhs,  # of the non-negative values drawn
        arith.RemUIOp: lambda: lhs % rhs,
    }[type(op)]()


def test_linear_terms_stop_at_what_they_cannot_read():
    f, v = kernel()
    assert linear_terms(v["row"]) == ({v["t"]: 1, v["i"]: 8}, 0)
    assert linear_terms(v["back"]) == ({v["i"]: -1}, 4)
    assert linear_terms(v["more"]) == ({v["more"]: 1}, 0)  # a comparison


def test_a_long_chain_of_index_arithmetic_is_read_without_exhausting_the_stack():
    lines = [
        "func.func @chain() {",
        "  %c2 = arith.constant 2 : i32",
        "  %tid = gpu.thread_id x",
        "  %x0 = arith.index_cast %tid : index to i32",
        "  %y0 = arith.index_cast %tid : index to i32",
    ]
    for n in range(1, 3000):
        lines.append(f"  %x{n} = arith.addi %x{n - 1}, %x{n - 1} : i32")
        lines.append(f"  %y{n} = arith.muli %y{n - 1}, %c2 : i32")
    lines += ["  func.return", "}"]
    module = parse_module(make_context(), "\n".join(lines))
    f = module.body.block.first_op
    last = list(f.body.block.ops)[-3:-1]  # pyright: ignore[reportOptionalMemberAccess]
    for op in last:
        value = op.results[0]
        terms, _ = linear_terms(value)
        assert terms
        a = AddressParts(f, 32)  # pyright: ignore[reportArgumentType]
        a.split([value], [1], 1024)
        # past the analysis' depth, the answers that split least
        assert a.varies(value) and not a.unrolls(value) and not a.nonnegative(value)


if __name__ == "__main__":
    pytest.main([__file__])
