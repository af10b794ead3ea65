"""The interpreter at warp level, on hand-written gpu-level kernels: ldmatrix and
mma.sync on all 32 lanes with the PTX layouts (checked against numpy), warps that do
not meet at a collective op, shared-memory races through ldmatrix, and asynchronous
copies whose data lands only at their wait."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mma_kernels import MmaKernel

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.shared_memory import DataRaceError
from affinec.ir.context import make_context


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def run(kernel: MmaKernel, text: str | None = None) -> float:
    """Interpret the kernel (or `text`, a variant of it); the relative error of D."""
    module = parse_module(make_context(), text or kernel.text())
    verify(module)
    a, b, c, d = kernel.inputs()
    Interpreter(module).run("mma", a, b, c, d)
    return relative_error(d, kernel.reference(a, b, c))


KERNELS = [
    MmaKernel(),
    MmaKernel(operands="bf16"),
    MmaKernel(b_k_contiguous=False),
    MmaKernel(warps=2, k_steps=2),
    MmaKernel(operands="bf16", warps=2, k_steps=3, b_k_contiguous=False),
    MmaKernel(async_copy=True),
    MmaKernel(epilogue=True, k_steps=2),
]


@pytest.mark.parametrize("kernel", KERNELS, ids=repr)
def test_one_warp_mma_kernels_compute_a_times_b_plus_c(kernel):
    # The MMA's sums are exact and rounded once; k-steps round the accumulator.
    assert run(kernel) < 1e-6


@given(
    st.builds(
        MmaKernel,
        operands=st.sampled_from(["f16", "bf16", "tf32"]),
        warps=st.integers(1, 3),
        k_steps=st.integers(1, 3),
        b_k_contiguous=st.booleans(),
        async_copy=st.booleans(),
        epilogue=st.booleans(),
    ),
    st.integers(0, 2**16),
)
def test_random_mma_kernels_compute_a_times_b_plus_c(kernel, seed):
    module = parse_module(make_context(), kernel.text())
    a, b, c, d = kernel.inputs(seed)
    Interpreter(module).run("mma", a, b, c, d)
    want = kernel.reference(a, b, c)
    assert np.linalg.norm(d - want) / np.linalg.norm(want) < 1e-6


def test_tf32_mma_with_fragments_loaded_lane_by_lane():
    kernel = MmaKernel(operands="tf32", k_steps=2)
    assert run(kernel) < 1e-6


@pytest.mark.parametrize("lanes", [(3, 7), (0, 31), (12, 13)])
def test_two_lanes_swapping_their_d_fragments_fail_the_check(lanes):
    assert run(MmaKernel(swap_lanes=lanes)) > 0.05


def test_a_lane_swapping_two_a_elements_fails_the_check():
    kernel = MmaKernel()
    text = kernel.text().replace(
        "%dnext = nvgpu.mma.sync (%fa,",
        """%x0 = vector.extract %fa[0, 0] : f16 from vector<4x2xf16>
        %x1 = vector.extract %fa[0, 1] : f16 from vector<4x2xf16>
        %y0 = vector.insert %x1, %fa[0, 0] : f16 into vector<4x2xf16>
        %y1 = vector.insert %x0, %y0[0, 1] : f16 into vector<4x2xf16>
        %l5 = arith.constant 5 : index
        %is5 = arith.cmpi eq, %lane, %l5 : index
        %fa2 = arith.select %is5, %y1, %fa : vector<4x2xf16>
        %dnext = nvgpu.mma.sync (%fa2,""",
    )
    assert run(kernel, text) > 1e-3


# -- warps that do not meet --------------------------------------------------------------


def test_a_partial_warp_is_refused_naming_the_op():
    text = (
        MmaKernel().text().replace("%nt = arith.constant 32", "%nt = arith.constant 24")
    )
    with pytest.raises(InterpreterError, match=r"nvgpu.ldmatrix.*partial warp.*24"):
        run(MmaKernel(), text)


def test_lanes_of_a_warp_at_different_ops_are_an_error():
    # Lane 0 skips the first ldmatrix: it reaches the second one alone.
    kernel = MmaKernel()
    text = kernel.text().replace(
        "  %fa = nvgpu.ldmatrix %sa[%arow, %acol]",
        """  %is0 = arith.cmpi eq, %lane, %c0 : index
          %fa = scf.if %is0 -> (vector<4x2xf16>) {
            %p = ub.poison : vector<4x2xf16>
            scf.yield %p : vector<4x2xf16>
          } else {
            %q = nvgpu.ldmatrix %sa[%arow, %acol] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, 3> -> vector<4x2xf16>
            scf.yield %q : vector<4x2xf16>
          }
          %unused = nvgpu.ldmatrix %sa[%arow, %acol]""",
    )
    with pytest.raises(InterpreterError, match="the lanes of warp 0 .* diverge"):
        run(kernel, text)


def test_a_lane_that_returns_early_is_an_error():
    kernel = MmaKernel()
    text = kernel.text().replace(
        "gpu.barrier\n",
        """gpu.barrier
          %is9 = arith.cmpi eq, %lane, %c8 : index
          cf.cond_br %is9, ^early, ^rest
        ^early:
          gpu.return
        ^rest:
""",
        1,
    )
    # (a multi-block body: run it through scf-free control flow as written)
    with pytest.raises(InterpreterError, match="lane 8 of warp 0 .* returned"):
        run(kernel, text)


def test_ldmatrix_without_the_barrier_after_the_copy_is_a_race():
    text = MmaKernel().text().replace("gpu.barrier", "")
    with pytest.raises(DataRaceError, match=r"reads \(nvgpu.ldmatrix, lane \d+\)"):
        run(MmaKernel(), text)


def test_misaligned_ldmatrix_rows_are_refused():
    text = (
        MmaKernel()
        .text()
        .replace("%acol = arith.addi %acol0, %ks", "%acol = arith.addi %acol0, %c1")
    )
    with pytest.raises(InterpreterError, match="not 16-byte aligned"):
        run(MmaKernel(), text)


# -- asynchronous copies -----------------------------------------------------------------


def test_removing_the_wait_is_reported_as_a_race():
    kernel = MmaKernel(async_copy=True)
    text = kernel.text().replace(
        "nvgpu.device_async_wait %grp {numGroups = 0 : i32}", ""
    )
    with pytest.raises(
        DataRaceError,
        match=r"%sa\[\d+, \d+\].*asynchronous copy '%atok = nvgpu.device_async_copy.*"
        "may still be writing",
    ):
        run(kernel, text)


def test_a_wait_that_leaves_the_group_in_flight_is_a_race():
    kernel = MmaKernel(async_copy=True)
    text = kernel.text().replace("{numGroups = 0 : i32}", "{numGroups = 1 : i32}")
    with pytest.raises(DataRaceError, match="may still be writing"):
        run(kernel, text)


ASYNC = """
builtin.module attributes {{gpu.container_module}} {{
  func.func @f(%g: memref<64xf16>, %out: memref<64xf16>) {{
    %one = arith.constant 1 : index
    %n = arith.constant {threads} : index
    gpu.launch_func @k::@k blocks in (%one, %one, %one) threads in (%n, %one, %one) args(%g : memref<64xf16>, %out : memref<64xf16>)
    func.return
  }}
  gpu.module @k {{
    gpu.func @k(%g: memref<64xf16>, %out: memref<64xf16>) workgroup(%s : memref<64xf16, 3>) kernel {{
      %tid = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c32 = arith.constant 32 : index
      %base = arith.muli %tid, %c8 : index
{body}
      gpu.return
    }}
  }}
}}
"""


def run_async(body: str, threads: int = 8) -> np.ndarray:
    module = parse_module(make_context(), ASYNC.format(body=body, threads=threads))
    verify(module)
    g = np.arange(64, dtype=np.float16)
    out = np.full(64, np.nan, np.float16)
    Interpreter(module).run("f", g, out)
    return out


COPY_THEN_READ = """
      %t = nvgpu.device_async_copy %g[%base], %s[%base], 8{valid} : memref<64xf16> to memref<64xf16, 3>
      %grp = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %grp {{numGroups = 0 : i32}}
      gpu.barrier
      %r = arith.subi %c8, %tid : index
      %mirror = arith.muli %r, %c8 : index
      %src = arith.subi %mirror, %c8 : index
      scf.for %k = %c0 to %c8 step %c1 {{
        %i = arith.addi %src, %k : index
        %o = arith.addi %base, %k : index
        %v = memref.load %s[%i] : memref<64xf16, 3>
        memref.store %v, %out[%o] : memref<64xf16>
      }}
"""


def test_copies_land_at_the_wait_and_others_see_them_after_a_barrier():
    out = run_async(COPY_THEN_READ.format(valid=""))
    expected = np.arange(64, dtype=np.float16).reshape(8, 8)[::-1].reshape(-1)
    np.testing.assert_array_equal(out, expected)


def test_source_elements_read_only_that_many_and_zero_fill_the_rest():
    out = run_async(COPY_THEN_READ.format(valid=", %c4"))
    expected = np.arange(64, dtype=np.float16).reshape(8, 8)[::-1].copy()
    expected[:, 4:] = 0
    np.testing.assert_array_equal(out, expected.reshape(-1))


def test_reading_anothers_landed_copy_without_a_barrier_is_a_race():
    # Whichever runs first in the simulation, the reader or the copier, it is found.
    body = COPY_THEN_READ.format(valid="").replace("gpu.barrier", "")
    with pytest.raises(
        DataRaceError,
        match=r"reads what thread \(\d, 0, 0\) wrote|overwrites what thread \(\d, 0, 0\) "
        "read",
    ):
        run_async(body)


def test_a_copy_over_a_stage_another_thread_still_reads_is_a_race():
    body = """
      %t = nvgpu.device_async_copy %g[%base], %s[%base], 8 : memref<64xf16> to memref<64xf16, 3>
      %grp = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %grp
      gpu.barrier
      %v = memref.load %s[%c0] : memref<64xf16, 3>
      %c7 = arith.constant 7 : index
      %last = arith.cmpi eq, %tid, %c7 : index
      scf.if %last {
        %t2 = nvgpu.device_async_copy %g[%c0], %s[%c0], 8 : memref<64xf16> to memref<64xf16, 3>
      }
"""
    with pytest.raises(
        DataRaceError,
        match=r"%s\[0\].*thread \(7, 0, 0\) starts the asynchronous copy .* which "
        "overwrites what other threads read",
    ):
        run_async(body)


def test_wait_n_leaves_the_newest_n_groups_in_flight():
    # Two groups; waiting with numGroups = 1 lands only the first (elements 0-3 of
    # each thread's run), so reading the second half is still a race...
    two_groups = """
      %t1 = nvgpu.device_async_copy %g[%base], %s[%base], 4 : memref<64xf16> to memref<64xf16, 3>
      %g1 = nvgpu.device_async_create_group %t1
      %hi = arith.addi %base, %c4 : index
      %t2 = nvgpu.device_async_copy %g[%hi], %s[%hi], 4 : memref<64xf16> to memref<64xf16, 3>
      %g2 = nvgpu.device_async_create_group %t2
      nvgpu.device_async_wait %g2 {{numGroups = 1 : i32}}
      %v = memref.load %s[{index}] : memref<64xf16, 3>
      memref.store %v, %out[%base] : memref<64xf16>
"""
    out = run_async(two_groups.format(index="%base"))
    np.testing.assert_array_equal(out[::8], np.arange(0, 64, 8))
    with pytest.raises(DataRaceError, match="may still be writing"):
        run_async(two_groups.format(index="%hi"))
    # ... and a copy never grouped is never landed.
    ungrouped = """
      %t1 = nvgpu.device_async_copy %g[%base], %s[%base], 8 : memref<64xf16> to memref<64xf16, 3>
      %g0 = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g0
      %t2 = nvgpu.device_async_copy %g[%base], %s[%base], 8 : memref<64xf16> to memref<64xf16, 3>
      nvgpu.device_async_wait %g0
      %v = memref.load %s[%base] : memref<64xf16, 3>
"""
    with pytest.raises(DataRaceError, match="may still be writing"):
        run_async(ungrouped)


def test_misaligned_and_out_of_bounds_copies_are_refused():
    misaligned = """
      %o = arith.addi %base, %c1 : index
      %t = nvgpu.device_async_copy %g[%o], %s[%base], 8 : memref<64xf16> to memref<64xf16, 3>
"""
    with pytest.raises(InterpreterError, match="not aligned to the copy's 16 bytes"):
        run_async(misaligned)
    beyond = """
      %o = arith.addi %base, %c32 : index
      %t = nvgpu.device_async_copy %g[%o], %s[%base], 8 : memref<64xf16> to memref<64xf16, 3>
"""
    with pytest.raises(InterpreterError, match=r"index \[\d+\] is out of bounds"):
        run_async(beyond)
