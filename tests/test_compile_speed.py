"""The shortcuts that make compiling faster give the answers of the slow ways they
replace: the 32-bit index check's ranges computed once from the leaves up, the
pure-affine test of an op's maps remembered by attribute, the mma.sync pass's grid
analysis reused where folding changed nothing; and `AFFINEC_LEAN_CODEGEN` picks
NVPTX's code generation level (and only it); a shared LLVM library of llvmlite's
version gives the same PTX."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr, ModuleOp
from xdsl.ir import Operation, OpResult
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr, AffineMap
from xdsl.ir.affine.affine_set import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineSet,
)
from xdsl.passes import ModulePass

from affinec.backend import nvptx, shared_llvm
from affinec.backend.emitter_errors import EmitterError
from affinec.base.diagnostics import PassError, VerificationError
from affinec.ir.affine_exprs import Interval, expr_range
from affinec.transforms.affine import analysis
from affinec.transforms.gpu import index_width
from affinec.transforms.gpu.outlining import find_kernels

LIMIT = index_width.LIMIT


def exprs(dims: int) -> st.SearchStrategy[AffineExpr]:
    """Affine expressions over `dims` dims, with semi-affine products and
    divisions by non-constants among them, and constants near the 32-bit limit."""
    leaves = st.one_of(
        st.integers(0, dims - 1).map(AffineExpr.dimension),
        st.sampled_from([-7, -1, 0, 1, 2, 3, 16, 1000, 2**20, 2**31 - 1]).map(
            AffineExpr.constant
        ),
    )

    def grow(children: st.SearchStrategy[AffineExpr]) -> st.SearchStrategy:
        return st.builds(
            AffineBinaryOpExpr, st.sampled_from(AffineBinaryOpKind), children, children
        )

    return st.recursive(leaves, grow, max_leaves=8)


ranges = st.lists(
    st.one_of(
        st.none(),
        st.tuples(st.integers(-(2**33), 2**33), st.integers(0, 2**33)).map(
            lambda t: (t[0], t[0] + t[1])
        ),
    ),
    min_size=3,
    max_size=3,
)


@given(exprs(3), ranges)
def test_subexpressions_fit_as_each_range_computed_alone(
    e: AffineExpr, dims: list[Interval | None]
) -> None:
    def fits(r: Interval | None) -> bool:
        return r is not None and r[0] >= -LIMIT and r[1] < LIMIT

    expected = all(fits(expr_range(sub, dims)) for sub in e.dfs())
    assert index_width._subexpressions_fit(e, dims) == expected


def _product(a: AffineExpr, b: AffineExpr) -> AffineExpr:
    """`a * b`, built as it is (xDSL's `*` refuses two non-constants)."""
    return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, a, b)


def _semi_affine_maps() -> list[AffineMap]:
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    s0 = AffineExpr.symbol(0)
    return [
        AffineMap(2, 0, (d0 + d1 * 4,)),
        AffineMap(2, 0, (_product(d0, d1),)),
        AffineMap(2, 1, (AffineBinaryOpExpr(AffineBinaryOpKind.FloorDiv, d0, s0), d1)),
        AffineMap(2, 0, (d0 % 16, d1.ceil_div(4))),
    ]


@pytest.mark.parametrize("m", _semi_affine_maps())
def test_maps_pure_remembered_as_computed(m: AffineMap) -> None:
    attr = AffineMapAttr(m)
    expected = all(e.is_pure_affine() for e in m.results)
    for _ in range(2):  # computed, then remembered
        known = analysis._PURE.get(id(attr))
        assert analysis._maps_pure_attr(attr) == expected
        if known is not None:
            assert known[0] is attr


def test_condition_purity_is_that_of_its_map() -> None:
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    for lhs, pure in ((d0 * 2 + d1, True), (_product(d0, d1), False)):
        s = AffineSet(
            2,
            0,
            (
                AffineConstraintExpr(
                    AffineConstraintKind.ge, lhs, AffineExpr.constant(3)
                ),
            ),
        )
        attr = AffineSetAttr(s)
        expected = all(e.is_pure_affine() for e in analysis.condition_map(s).results)
        assert expected == pure
        assert analysis._maps_pure_attr(attr) == pure


def test_refuse_unsupported_names_a_semi_affine_map() -> None:
    from xdsl.dialects.builtin import IndexType
    from xdsl.dialects.test import TestOp

    from affinec.dialects import affine

    operands = TestOp(result_types=[IndexType(), IndexType()])
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    good = affine.ApplyOp(list(operands.results), AffineMap(2, 0, (d0 + d1,)))
    bad = affine.ApplyOp(list(operands.results), AffineMap(2, 0, (_product(d0, d1),)))
    module = ModuleOp([operands, good, bad])
    for _ in range(2):  # the second time from what the first remembered
        with pytest.raises(PassError, match=r"semi-affine map \(d0 \* d1\)") as e:
            analysis.refuse_unsupported(module, "some-pass")
        assert e.value.op is bad


def test_lean_codegen_lowers_code_generation_only(monkeypatch) -> None:
    monkeypatch.delenv(nvptx.LEAN_CODEGEN, raising=False)
    assert [nvptx.codegen_level(k) for k in range(4)] == [0, 1, 2, 3]
    monkeypatch.setenv(nvptx.LEAN_CODEGEN, "0")
    assert nvptx.codegen_level(3) == 3
    monkeypatch.setenv(nvptx.LEAN_CODEGEN, "1")
    assert [nvptx.codegen_level(k) for k in range(4)] == [0, 1, 2, 2]


def test_lean_codegen_compiles(monkeypatch) -> None:
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1, dtype="f16")
    plain = compile_to_ptx(spec, arch="sm_80")
    monkeypatch.setenv(nvptx.LEAN_CODEGEN, "1")
    lean = compile_to_ptx(spec, arch="sm_80")
    assert lean.llvm_ir == plain.llvm_ir  # only LLVM's code generation differs
    assert ".entry" in lean.ptx
    assert lean.ptx.count("mma.sync") == plain.ptx.count("mma.sync") > 0


def test_beside_raises_its_own_error_first_then_the_works() -> None:
    ran: list[str] = []

    def work() -> None:
        ran.append("work")
        raise RuntimeError("work failed")

    def fine() -> None:
        ran.append("beside")

    def broken() -> None:
        raise ValueError("beside failed")

    with pytest.raises(RuntimeError, match="work failed"):
        nvptx._beside(work, fine)
    assert sorted(ran) == ["beside", "work"]
    with pytest.raises(ValueError, match="beside failed"):
        nvptx._beside(work, broken)
    nvptx._beside(lambda: None, fine)


def test_during_runs_while_llvm_writes_and_llvms_error_comes_first() -> None:
    import threading

    ran: list[str] = []
    started, release = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        assert release.wait(10)  # held until `during` has run beside it
        ran.append("work")

    def during() -> None:
        assert started.wait(10)
        ran.append("during")
        release.set()

    nvptx._while(work, during)
    assert ran == ["during", "work"]

    def broken_work() -> None:
        raise RuntimeError("work failed")

    def broken_during() -> None:
        raise ValueError("during failed")

    with pytest.raises(RuntimeError, match="work failed"):
        nvptx._while(broken_work, broken_during)
    with pytest.raises(ValueError, match="during failed"):
        nvptx._while(lambda: None, broken_during)
    nvptx._while(lambda: ran.append("alone"), None)
    assert ran[-1] == "alone"


def test_what_the_compiler_does_while_llvm_writes_is_in_the_kernel(
    monkeypatch,
) -> None:
    import gc

    from affinec.backend import emitter
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 8, 6, 6, 8, 3, 3, padding=1)
    collector: list[bool] = []
    plain_emit = emitter.emit

    def emit(module, arch, opt_level, beside=None, during=None):
        collector.append(gc.isenabled())  # paused from the first pass

        def watched() -> None:
            assert during is not None
            during()
            collector.append(gc.isenabled())  # resumed while LLVM writes

        return plain_emit(module, arch, opt_level, beside, watched)

    monkeypatch.setattr("affinec.driver.compiler.emit", emit)
    assert gc.isenabled()
    kernel = compile_to_ptx(spec, arch="sm_80", verify_each=False)
    assert collector == [False, True] and gc.isenabled()
    assert kernel.parameters and kernel.tolerance is not None
    assert ".entry" in kernel.ptx
    gc.disable()
    try:  # a caller's paused collector stays paused
        compile_to_ptx(spec, arch="sm_80", verify_each=False)
        assert collector[-2:] == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


@dataclass(frozen=True)
class _UseBeforeDefinition(ModulePass):
    """Moves the first op of a kernel that uses a value defined in its own block
    before that definition: LLVM IR can still be written, the verifier refuses."""

    name = "test-use-before-definition"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel, _ in find_kernels(op):
            for user in kernel.walk():
                for value in user.operands:
                    owner = value.owner
                    if isinstance(value, OpResult) and owner.parent is user.parent:
                        block = user.parent
                        assert block is not None
                        block.detach_op(user)
                        block.insert_op_before(user, owner)
                        return


def test_a_module_that_does_not_verify_fails_in_the_verifier_beside_llvm() -> None:
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for
    from affinec.driver.pipelines import default_passes

    spec = ConvSpec(1, 2, 6, 6, 3, 3, 3, padding=1)
    passes = [*default_passes(config_for(spec)), _UseBeforeDefinition()]
    with pytest.raises(VerificationError, match="does not dominate"):
        compile_to_ptx(spec, pipeline=passes, verify_each=False)
    with pytest.raises(VerificationError, match="does not dominate"):
        compile_to_ptx(spec, pipeline=passes, verify_each=True)


def test_stages_add_up_to_the_compile() -> None:
    import time

    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    start = time.perf_counter()
    compiled = compile_to_ptx(
        ConvSpec(1, 2, 6, 6, 3, 3, 3, padding=1), verify_each=False
    )
    wall = time.perf_counter() - start
    names = [name for name, _ in compiled.timings]
    assert names[-3:] == ["verify", "shared-memory hazards", "llvm-ir + ptx"]
    assert all(t >= 0 for _, t in compiled.timings)
    assert compiled.seconds <= wall


def _module_with_xdsl_affine() -> tuple[ModuleOp, Operation]:
    """A module, and an op of xDSL's own `affine` dialect not yet in it."""
    from xdsl.dialects import affine as xdsl_affine
    from xdsl.dialects.builtin import IndexType
    from xdsl.dialects.test import TestOp

    operand = TestOp(result_types=[IndexType()])
    d0 = AffineExpr.dimension(0)
    foreign = xdsl_affine.ApplyOp(
        [operand.results[0]], AffineMapAttr(AffineMap(1, 0, (d0 + 1,)))
    )
    return ModuleOp([operand]), foreign


def test_dialects_checked_once_until_forgotten() -> None:
    from affinec.ir.context import dialects_checked_once, require_affinec_dialects

    module, foreign = _module_with_xdsl_affine()
    with dialects_checked_once() as forget:
        require_affinec_dialects(module)
        module.body.block.add_op(foreign)
        require_affinec_dialects(module)  # checked already: not walked again
        forget()
        with pytest.raises(PassError, match="xDSL's 'affine' dialect"):
            require_affinec_dialects(module)
    with pytest.raises(PassError, match="xDSL's 'affine' dialect"):
        require_affinec_dialects(module)  # outside: every call checks


@dataclass(frozen=True)
class _AddsXdslAffine(ModulePass):
    """Not one of affinec's passes: it adds an op of xDSL's `affine` dialect."""

    name = "test-adds-xdsl-affine"
    foreign: Operation

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.body.block.add_op(self.foreign)


def test_a_pass_not_affinecs_has_the_next_one_check_the_dialects_again() -> None:
    from affinec.driver.pipeline import Pipeline
    from affinec.passes.affinec_canonicalize import AffinecCanonicalizePass

    for verify_each in (False, True):
        module, foreign = _module_with_xdsl_affine()
        passes = [
            AffinecCanonicalizePass(),
            _AddsXdslAffine(foreign),
            AffinecCanonicalizePass(),
        ]
        with pytest.raises(PassError, match="xDSL's 'affine' dialect") as e:
            Pipeline(passes).run(module, verify_each=verify_each)
        assert e.value.op is foreign


RELEASE_LLVM = Path("/lib/x86_64-linux-gnu/libLLVM.so.22.1")
OLD_LLVM = Path("/usr/lib/llvm-14/lib/libLLVM-14.so")


@pytest.mark.skipif(not RELEASE_LLVM.exists(), reason="no libLLVM 22.1 here")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_shared_llvm_of_the_same_version_gives_the_same_ptx(
    monkeypatch, arch: str
) -> None:
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    spec = ConvSpec(1, 16, 8, 8, 16, 3, 3, padding=1, dtype="f16")
    monkeypatch.setenv(shared_llvm.LIBLLVM, shared_llvm.OWN)
    plain = compile_to_ptx(spec, arch=arch, verify_each=False)
    monkeypatch.setenv(shared_llvm.LIBLLVM, str(RELEASE_LLVM))
    shared = compile_to_ptx(spec, arch=arch, verify_each=False)
    assert shared.llvm_ir == plain.llvm_ir
    assert shared.ptx == plain.ptx
    with pytest.raises(EmitterError, match="LLVM rejected the IR"):
        nvptx.llvm_ir_to_ptx("define void @f() { ret i32 0 }", arch)


@pytest.mark.skipif(not RELEASE_LLVM.exists(), reason="no libLLVM 22.1 here")
def test_the_machines_release_llvm_compiles_unless_llvmlite_is_asked_for(
    monkeypatch,
) -> None:
    monkeypatch.delenv(shared_llvm.LIBLLVM, raising=False)
    assert shared_llvm.library_path() == str(RELEASE_LLVM)
    for own in (shared_llvm.OWN, ""):
        monkeypatch.setenv(shared_llvm.LIBLLVM, own)
        assert shared_llvm.library_path() is None
    monkeypatch.setenv(shared_llvm.LIBLLVM, "/some/libLLVM.so")
    assert shared_llvm.library_path() == "/some/libLLVM.so"


def test_a_release_llvm_of_another_version_is_not_taken() -> None:
    if OLD_LLVM.exists():
        assert not shared_llvm._compiles_for_us(str(OLD_LLVM))
    assert not shared_llvm._compiles_for_us("/nonexistent/libLLVM.so.22.1")


def test_a_shared_llvm_that_cannot_be_used_is_named(monkeypatch) -> None:
    monkeypatch.setenv(shared_llvm.LIBLLVM, "/nonexistent/libLLVM.so")
    with pytest.raises(EmitterError, match="cannot load it"):
        nvptx.llvm_ir_to_ptx("", "sm_80")
    if OLD_LLVM.exists():
        monkeypatch.setenv(shared_llvm.LIBLLVM, str(OLD_LLVM))
        with pytest.raises(EmitterError, match=r"is not an LLVM 22\.1\.\d+ library"):
            nvptx.llvm_ir_to_ptx("", "sm_80")


def test_the_switch_interval_is_short_while_llvm_overlaps_and_restored_after() -> None:
    import sys

    before = sys.getswitchinterval()
    seen: list[float] = []

    def fails() -> None:
        raise ValueError("the work's error")

    nvptx._overlapped(
        lambda: None,
        lambda: seen.append(sys.getswitchinterval()),
        "test",
        work_error_first=True,
    )
    with pytest.raises(ValueError, match="the work's error"):
        nvptx._overlapped(fails, lambda: None, "test", work_error_first=True)
    assert seen == [min(before, nvptx.OVERLAP_SWITCH_INTERVAL_S)]
    assert sys.getswitchinterval() == before


def test_overlaps_in_two_threads_restore_the_interval_they_found() -> None:
    import sys

    before = sys.getswitchinterval()
    short = min(before, nvptx.OVERLAP_SWITCH_INTERVAL_S)
    first, second = nvptx._short_switch_interval(), nvptx._short_switch_interval()
    first.__enter__()
    second.__enter__()  # a second thread's compile, begun before the first ends
    first.__exit__(None, None, None)
    assert sys.getswitchinterval() == short  # the second still overlaps
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == before
