"""nvgpu's Hopper ops (mbarriers, TMA, warpgroup MMA) in MLIR's syntax, and what the
interpreter makes of them: the right product through swizzled tiles and real
descriptors, and every mistake the tests plant caught and named."""

from __future__ import annotations

import numpy as np
import pytest
from mlir_opt import mlir_opt, needs_mlir_opt, same_ir
from xdsl.utils.exceptions import VerifyException

from affinec.base.locating_parser import parse_module
from affinec.hardware import wgmma_layouts
from affinec.hardware.wgmma_layouts import MatrixDescriptor, TileLayout
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.mbarriers import TensorMap
from affinec.ir.context import make_context
from affinec.tools.hopper_matmul import matmul_module


def _run(
    text: str, m: int, n: int, k: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    module = parse_module(make_context(), text)
    module.verify()
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    out = np.full((m, n), np.nan, np.float32)
    Interpreter(module).run("matmul", a, b, out)
    return out, a.astype(np.float64) @ b.astype(np.float64)


def _error(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize(
    ("m", "n", "k", "stages"),
    [(64, 64, 64, 1), (128, 64, 256, 2), (64, 32, 192, 3), (64, 64, 256, 4)],
)
def test_a_tma_wgmma_pipeline_computes_the_product(m, n, k, stages):
    out, ref = _run(matmul_module(m, n, k, stages), m, n, k)
    # Each m64nNk16 instruction rounds once to f32.
    assert _error(out, ref) < 1e-6


# -- the descriptor's bits decide what is read ------------------------------------------


def test_the_descriptor_encodes_and_decodes_its_fields():
    d = MatrixDescriptor(start=0x2400, leading=16, stride=1024, swizzle=128)
    assert d.encode() == (1 << 62) | (64 << 32) | (1 << 16) | (0x2400 >> 4)
    assert MatrixDescriptor.decode(d.encode()) == d
    for span in (0, 32, 64, 128):
        e = MatrixDescriptor(0x400, 2048, 512, span)
        assert MatrixDescriptor.decode(e.encode()) == e


def test_what_tma_writes_is_what_the_descriptors_read():
    for rows, cols, span in [
        (64, 64, 128),
        (128, 32, 64),
        (64, 16, 32),
        (64, 128, 128),
    ]:
        layout = TileLayout(rows, cols, 2, span)
        where = layout.addresses()
        assert sorted(where.ravel().tolist()) == list(range(0, rows * cols * 2, 2))
        for k0 in range(0, cols, 16):  # A, K-major
            d = layout.k_major().advanced(layout.k_offset(k0, True))
            got = wgmma_layouts.operand_addresses(d, rows, 16, 2, k_major=True)
            assert (got == where[:, k0 : k0 + 16]).all()
        for k0 in range(0, rows, 16):  # B, MN-major: rows are K
            d = layout.mn_major().advanced(layout.k_offset(k0, False))
            got = wgmma_layouts.operand_addresses(d, cols, 16, 2, k_major=False)
            assert (got == where[k0 : k0 + 16].T).all()


def test_a_wrong_stride_offset_reads_the_wrong_rows(monkeypatch):
    wrong = MatrixDescriptor(0, 16, 512, 128)
    monkeypatch.setattr(TileLayout, "k_major", lambda self: wrong)
    out, ref = _run(matmul_module(64, 64, 64, 1), 64, 64, 64)
    assert _error(out, ref) > 0.5


def test_a_descriptor_without_its_swizzle_bits_reads_the_wrong_elements(monkeypatch):
    encode = MatrixDescriptor.encode

    def without_swizzle(self):  # A's (K-major) descriptors only
        return encode(self) & ~(3 << 62) if self.leading == 16 else encode(self)

    monkeypatch.setattr(MatrixDescriptor, "encode", without_swizzle)
    out, ref = _run(matmul_module(64, 64, 64, 1), 64, 64, 64)
    assert _error(out, ref) > 0.5


def test_a_descriptor_pointing_past_its_tile_is_refused(monkeypatch):
    encode = MatrixDescriptor.encode
    monkeypatch.setattr(
        MatrixDescriptor, "encode", lambda self: encode(self) & ~(3 << 62)
    )
    with pytest.raises(InterpreterError, match="which no one buffer holds"):
        _run(matmul_module(64, 64, 64, 1), 64, 64, 64)


def test_a_tile_swizzled_another_way_reads_the_wrong_elements(monkeypatch):
    real = wgmma_layouts.swizzled
    monkeypatch.setattr(
        wgmma_layouts, "swizzled", lambda a, span: real(a, 64 if span == 128 else span)
    )
    # TMA's placement (TileLayout.addresses) and the descriptors' reading both go
    # through `swizzled`; patched only where the reads are computed:
    from affinec.interpreter import warpgroups

    monkeypatch.setattr(
        warpgroups,
        "operand_addresses",
        lambda d, rows, k, e, k_major: wgmma_layouts.operand_addresses(
            d, rows, k, e, k_major
        ),
    )
    monkeypatch.setattr(TileLayout, "addresses", _unpatched_addresses(real))
    out, ref = _run(matmul_module(64, 64, 64, 1), 64, 64, 64)
    assert _error(out, ref) > 0.5


def _unpatched_addresses(real):
    def addresses(self):
        r = np.arange(self.rows)[:, None]
        c = np.arange(self.cols)[None, :]
        t = self.slab_columns
        inner = real(r * self.swizzle + (c % t) * self.element_bytes, self.swizzle)
        return (c // t) * self.slab_bytes + inner

    return addresses


# -- mbarriers: every mistake is named ------------------------------------------------


def _mutated(old: str, new: str, **shape) -> str:
    text = matmul_module(**shape)
    assert old in text
    return text.replace(old, new, 1)


def _fails(text: str, *fragments: str, m=64, n=64, k=64) -> str:
    with pytest.raises(InterpreterError) as caught:
        _run(text, m, n, k)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_missing_expect_tx_is_a_wait_that_never_ends():
    text = _mutated(
        "nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers\n", ""
    )
    _fails(text, "waits forever", "%bar[0]", "misses 1 of its 1 arrivals")


def test_too_few_announced_bytes_end_the_phase_before_the_last_tile_lands():
    # A's 8192 bytes complete the phase; B's arrive in the next one.
    text = _mutated("%bytes = arith.constant 16384", "%bytes = arith.constant 8192")
    _fails(text, "data race on shared memory %sb0", "has not completed")


def test_loads_without_an_arrival_never_complete_the_phase():
    text = _mutated("%bytes = arith.constant 16384", "%bytes = arith.constant 0")
    text = text.replace("init %bar[%c0], %c1", "init %bar[%c0], %c2", 1)
    _fails(
        text,
        "waits forever",
        "misses 1 of its 2 arrivals",
        "16384 bytes more than announced",
    )


def test_a_plain_arrival_instead_of_expect_tx_lets_threads_read_a_tile_in_flight():
    text = _mutated(
        "nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers",
        "%tok = nvgpu.mbarrier.arrive %bar[%c0] : !barriers -> !nvgpu.mbarrier.token",
    )
    _fails(text, "data race", "may still be writing", "has not completed")


def test_waiting_on_the_wrong_parity_reads_a_tile_in_flight():
    text = _mutated("%bar[%c0], %false, %ticks", "%bar[%c0], %true, %ticks")
    _fails(text, "data race", "nvgpu.tma.async.load", "has not completed")


def test_reading_without_waiting_is_a_race():
    text = _mutated(
        "nvgpu.mbarrier.try_wait.parity %bar[%c0], %false, %ticks : !barriers\n", ""
    )
    _fails(text, "data race", "nvgpu.warpgroup.mma")


def test_a_barrier_used_before_its_init_is_visible_is_refused():
    text = _mutated("gpu.barrier  // the barriers' init", "// no barrier")
    _fails(text, "initialized with no gpu.barrier between")


def test_a_stage_reloaded_after_finished_mmas_needs_no_barrier():
    # waitGroup = 0: the warpgroup's MMAs have finished when thread 0 goes on, so
    # reloading their stage without a gpu.barrier is ordered (by thread 0's own
    # program) and the product is right; MMAs left in flight are another matter
    # (test_hopper_lowering: a stage reloaded while its MMAs are in flight)
    shape = {"m": 64, "n": 64, "k": 256, "stages": 2}
    text = _mutated("gpu.barrier  // stage 0 read", "// stage 0 not released", **shape)
    out, ref = _run(text, 64, 64, 256)
    assert _error(out, ref) < 1e-6


def test_a_warpgroup_needs_128_threads():
    text = _mutated("%threads = arith.constant 128", "%threads = arith.constant 64")
    _fails(text, "partial warpgroup", "64 threads")


def test_the_tma_box_fills_what_lies_outside_the_tensor():
    tensor = np.arange(12, dtype=np.float16).reshape(3, 4)
    box = TensorMap(tensor, (2, 4), 0, 0).read_box((2, 2))  # x = 2, y = 2
    assert box.tolist() == [[10, 11, 0, 0], [0, 0, 0, 0]]
    nan = TensorMap(tensor, (2, 2), 0, np.nan).read_box((-1, 0))
    assert np.isnan(nan[:, 0]).all() and nan[:, 1].tolist() == [0, 4]


# -- syntax: MLIR's, both ways ----------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("{transposeB, ", "{", "set transposeB"),
        ("{transposeB, ", "{transposeB, transposeA, ", "transposeA is not supported"),
        (
            "waitGroup = 0 : i64",
            "waitGroup = 9 : i64",
            "waitGroup is an i64 from 0 to 7",
        ),
        ("vector<64x64xf32>", "vector<64x32xf32>", "the accumulator is 64x32"),
    ],
)
def test_the_verifier_refuses_what_the_op_cannot_mean(old, new, message):
    text = matmul_module().replace(old, new)
    module = parse_module(make_context(), text)
    with pytest.raises(VerifyException, match=message):
        module.verify()


def test_a_swizzled_box_must_be_one_swizzle_row_wide():
    text = matmul_module(n=32).replace("swizzle_64b", "swizzle_128b")
    with pytest.raises(
        VerifyException, match="must have last dimension of 128 bytes but it is 64"
    ):
        parse_module(make_context(), text).verify()


@needs_mlir_opt
@pytest.mark.parametrize("generic", [False, True])
def test_mlir_opt_reads_the_hopper_ops_as_the_same_ir(generic):
    ours = matmul_module(128, 128, 128, 2, in_flight=True)
    module = parse_module(make_context(), ours)
    from mlir_opt import printed

    text = printed(module, generic=generic)
    theirs = mlir_opt(text)
    assert same_ir(text, theirs)
    assert same_ir(ours, mlir_opt(ours, "--mlir-print-op-generic"))
