"""The Hopper kernels lowered: nvgpu → nvvm ops → llvm → PTX for sm_90a.

Every level runs in the interpreter to the same bits as the nvgpu level (the
lowered descriptors are decoded as `wgmma` decodes them); ptxas assembles the PTX
for sm_90a without spilling; a chip without the instructions is refused, located,
before LLVM sees them; mlir-opt reads the nvvm level as the same IR."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from mlir_opt import mlir_opt, needs_mlir_opt, printed, same_ir
from repository_scripts import load_script
from xdsl.dialects.builtin import DenseArrayBase, f32, i64
from xdsl.dialects.llvm import ExtractValueOp
from xdsl.rewriter import InsertPoint, Rewriter

from affinec.backend.emitter import EmitterError, to_llvm_ir, to_ptx
from affinec.backend.ptxas import assemble, find_ptxas
from affinec.base.diagnostics import PassError
from affinec.base.locating_parser import parse_module
from affinec.dialects.nvvm import WgmmaMmaAsyncOp
from affinec.driver.pipeline import Pipeline
from affinec.hardware.wgmma_layouts import MatrixDescriptor, TileLayout
from affinec.interpreter import Interpreter, InterpreterError
from affinec.ir.context import make_context
from affinec.tools.hopper_matmul import matmul_module

needs_ptxas = pytest.mark.skipif(
    find_ptxas() is None and os.environ.get("AFFINEC_ALLOW_NO_PTXAS") == "1",
    reason="ptxas not found and AFFINEC_ALLOW_NO_PTXAS=1",
)

STAGES = (
    "nvvm-attach-target{chip=sm_90a}",
    "convert-nvgpu-to-nvvm",
    "convert-scf-to-cf",
    "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}",
)
SHAPES = [(64, 64, 128, 2), (128, 32, 256, 3), (64, 16, 64, 1)]
GRID = (128, 64, 128, 2, 64, 32)  # 2 x 2 blocks of 64 x 32


def _lowered(text: str, upto: int = len(STAGES)):
    module = parse_module(make_context(), text)
    Pipeline.parse(",".join(STAGES[:upto])).run(module)
    module.verify()
    return module


def _run(module, m, n, k) -> np.ndarray:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = np.full((m, n), np.nan, np.float32)
    Interpreter(module).run("matmul", a, b, out)
    return out


@pytest.mark.parametrize(("m", "n", "k", "stages"), SHAPES)
def test_every_level_computes_the_same_bits(m, n, k, stages):
    text = matmul_module(m, n, k, stages)
    expected = _run(_lowered(text, 0), m, n, k)
    for upto in range(2, len(STAGES) + 1):
        got = _run(_lowered(text, upto), m, n, k)
        assert np.array_equal(got, expected), STAGES[upto - 1]


def test_a_grid_of_blocks_computes_the_product_at_every_level():
    m, n, k, stages, tm, tn = GRID
    text = matmul_module(m, n, k, stages, tm, tn)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    reference = a.astype(np.float64) @ b.astype(np.float64)
    results = []
    for upto in (0, 2, len(STAGES)):
        out = np.full((m, n), np.nan, np.float32)
        Interpreter(_lowered(text, upto)).run("matmul", a, b, out)
        results.append(out)
    assert np.linalg.norm(results[0] - reference) < 1e-6 * np.linalg.norm(reference)
    assert all(np.array_equal(r, results[0]) for r in results)


def test_a_lowering_with_the_wrong_descriptor_fields_is_caught(monkeypatch):
    text = matmul_module(64, 64, 128, 2)
    expected = _run(_lowered(text, 0), 64, 64, 128)
    lowered = _lowered(text, 0)
    wrong_a = MatrixDescriptor(0, 16, 512, 128)  # A's row groups 512 B apart
    monkeypatch.setattr(TileLayout, "k_major", lambda self: wrong_a)
    Pipeline.parse(",".join(STAGES[:2])).run(lowered)
    monkeypatch.undo()  # the interpreter decodes the descriptors as PTX says
    wrong = _run(lowered, 64, 64, 128)
    assert not np.allclose(wrong, expected, rtol=0.1)


def test_the_lowered_kernel_takes_its_tensor_maps_by_value_and_aligns_its_tiles():
    text = printed(_lowered(matmul_module(64, 64, 128, 2), 2))
    assert (
        "affinec.shared_alignments = array<i64: 1024, 1024, 1024, 1024, 16, 16>" in text
    )
    assert "%bar : memref<2xi64, 3 : i64>" in text
    assert text.count("nvvm.wgmma.mma_async") == 8  # 2 steps x 4 of K=16
    llvm = printed(_lowered(matmul_module(64, 64, 128, 2)))
    grid_constant = (
        "!llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, "
        "nvvm.grid_constant}"
    )
    assert llvm.count(grid_constant) == 2


def _asm_statements(module) -> list[int]:
    """The wgmmas of each inline PTX statement of the module's LLVM IR."""
    return [
        statement.count("wgmma.mma_async")
        for statement in to_llvm_ir(module, "sm_90a").split(" asm sideeffect ")[1:]
        if "wgmma.mma_async" in statement.split('", "')[0]
    ]


@needs_ptxas
def test_a_run_of_wgmmas_is_one_inline_statement_unless_a_d_is_read_elsewhere():
    """The four K=16 MMAs of a K step accumulate into the same registers: one
    inline PTX statement. Where something else reads a D inside the run, the run
    ends there, so that value exists in LLVM IR; both assemble."""
    module = _lowered(matmul_module(64, 64, 128, 2))
    assert _asm_statements(module) == [4, 4]
    mmas = [op for op in module.walk() if isinstance(op, WgmmaMmaAsyncOp)]
    read = ExtractValueOp(DenseArrayBase.from_list(i64, [0]), mmas[1].res, f32)
    Rewriter.insert_op(read, InsertPoint.after(mmas[3]))
    assert _asm_statements(module) == [2, 2, 4]
    (resources,) = assemble(to_ptx(module, "sm_90a"), "sm_90a").values()
    assert resources.spill_stores == 0


@needs_ptxas
@pytest.mark.parametrize(("m", "n", "k", "stages"), SHAPES)
def test_ptxas_assembles_the_kernel_for_sm_90a(m, n, k, stages):
    ptx = to_ptx(_lowered(matmul_module(m, n, k, stages)), "sm_90a")
    assert ".target sm_90a" in ptx
    assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n", ptx)) == (
        m // 64
    ) * (k // 16)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile" in ptx
    assert re.search(
        r"\.shared \.align 1024 \.b8 __(shared|dynamic_shared)_matmul", ptx
    )
    (resources,) = assemble(ptx, "sm_90a").values()
    assert resources.spill_stores == resources.stack_frame == 0
    assert resources.advisories == ()  # no wgmma serialized, no wait inserted


@pytest.mark.parametrize(
    ("chip", "op", "needs"),
    [
        ("sm_90", "nvgpu.warpgroup.mma", "sm_90a (wgmma)"),
        ("sm_80", "nvgpu.mbarrier.arrive.expect_tx", "sm_90 or sm_90a (tma)"),
    ],
)
def test_a_chip_without_the_instructions_is_refused_at_the_op(chip, op, needs):
    module = parse_module(make_context(), matmul_module())
    stages = f"nvvm-attach-target{{chip={chip}}},convert-nvgpu-to-nvvm"
    with pytest.raises(PassError, match=re.escape(needs)) as caught:
        Pipeline.parse(stages).run(module)
    assert caught.value.op is not None and caught.value.op.name == op


def test_the_emitter_refuses_wgmma_for_plain_sm_90_before_llvm():
    module = _lowered(matmul_module())
    for op in module.walk():  # as if the target had been dropped
        op.attributes.pop("affinec.target", None)
        if op.name == "gpu.module":
            op.properties.pop("targets", None)
    with pytest.raises(EmitterError, match=r"needs sm_90a \(wgmma\).*sm_90$"):
        to_ptx(module, "sm_90")


@needs_mlir_opt
def test_mlir_opt_reads_the_nvvm_level_as_the_same_ir():
    text = printed(_lowered(matmul_module(128, 32, 128, 2), 2))
    theirs = mlir_opt(text, "--allow-unregistered-dialect")  # affinec.element_pointer
    assert same_ir(text, theirs, allow_unregistered=True)


@pytest.mark.parametrize("stages", [2, 3])
def test_mmas_left_in_flight_across_steps_compute_the_same_bits(stages):
    # waitGroup = 1: a step's MMAs run while the next step waits for its tiles, and
    # a stage is reloaded one step later than with waitGroup = 0
    m, n, k = 128, 64, 384
    text = matmul_module(m, n, k, stages, 64, 64, in_flight=True)
    assert "waitGroup" not in text  # MLIR's default: one group left in flight
    waited = _run(_lowered(matmul_module(m, n, k, stages, 64, 64), 0), m, n, k)
    for upto in (0, 2, len(STAGES)):
        assert np.array_equal(_run(_lowered(text, upto), m, n, k), waited)
    ptx = to_ptx(_lowered(text), "sm_90a")
    assert "wgmma.wait_group.sync.aligned \t1;" in ptx


@pytest.mark.parametrize("upto", [0, len(STAGES)])
def test_a_stage_reloaded_while_its_mmas_are_in_flight_is_a_race(upto):
    # MMAs left in flight, but each stage reloaded right after the barrier that
    # follows them, as if they had finished
    text = matmul_module(128, 64, 256, 2, 64, 64).replace(
        "waitGroup = 0", "waitGroup = 1"
    )
    with pytest.raises(InterpreterError, match="may still be reading: no wgmma wait"):
        _run(_lowered(text, upto), 128, 64, 256)


@pytest.mark.parametrize("stages", [2, 3])
def test_a_warp_specialized_kernel_computes_the_same_bits(stages):
    # a loading warpgroup and a multiplying one, stages handed back on mbarriers
    m, n, k = 128, 64, 384
    text = matmul_module(m, n, k, stages, 64, 64, warp_specialized=True)
    waited = _run(_lowered(matmul_module(m, n, k, stages, 64, 64), 0), m, n, k)
    for upto in (0, 2, len(STAGES)):
        assert np.array_equal(_run(_lowered(text, upto), m, n, k), waited)
    (resources,) = assemble(to_ptx(_lowered(text), "sm_90a"), "sm_90a").values()
    assert resources.spill_stores == 0


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        (
            r"\n *nvgpu.mbarrier.try_wait.parity %empty\[[^\n]*",
            "arrives on %bar[0] after",
        ),
        (r"%handed\d+ = nvgpu.mbarrier.arrive[^\n]*", "phase 0 of %empty[0] misses 1"),
    ],
    ids=["the producer does not wait for a stage", "the consumer never hands back"],
)
def test_a_warp_specialized_kernel_s_mistakes_are_named(mistake, message):
    text = matmul_module(128, 64, 384, 2, 64, 64, warp_specialized=True)
    wrong = re.sub(mistake, "", text)
    assert wrong != text
    with pytest.raises(InterpreterError, match=re.escape(message)):
        _run(_lowered(wrong, 0), 128, 64, 384)


@pytest.mark.parametrize(
    ("tile", "schedule"),
    [
        ((128, 128), {}),
        ((64, 256), {"in_flight": True}),
        ((128, 128), {"warp_specialized": True}),
    ],
)
def test_b_tiles_wider_than_a_swizzle_row_are_loaded_slab_by_slab(tile, schedule):
    # B's TMA box is one 128-byte row wide; a 128- or 256-wide tile is loaded into
    # memref.reinterpret_cast views of its slabs, and read as one MN-major operand
    tm, tn = tile
    m, n, k = 128, 256, 192
    text = matmul_module(m, n, k, 3, tm, tn, **schedule)
    assert "memref.reinterpret_cast" in text
    first = _run(_lowered(text, 0), m, n, k)
    assert np.array_equal(_run(_lowered(text), m, n, k), first)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    reference = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(first - reference) < 1e-6 * np.linalg.norm(reference)
    (resources,) = assemble(to_ptx(_lowered(text), "sm_90a"), "sm_90a").values()
    assert resources.spill_stores == resources.stack_frame == 0


def test_the_gpu_script_compiles_its_kernels_without_a_gpu(capsys):
    script = load_script("scripts/gpu_hopper.py")
    argv = ["--compile-only", "--only", "0", "3", "--spec-only", "0"]
    assert script.main(argv) == 0
    report = capsys.readouterr().out
    assert report.count("0 B spilled") == 3 and "block (256, 1, 1)" in report
    assert "matmul m=300 n=200 k=328 dtype=f16 epilogue=bias-relu" in report
