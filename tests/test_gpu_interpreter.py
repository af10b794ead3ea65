"""The interpreter at the gpu level: grids, blocks and threads, shared memory per block,
barriers, and data races reported as errors (never silently wrong results)."""

import numpy as np
import pytest

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.gpu_ops import BarrierDivergenceError
from affinec.interpreter.shared_memory import DataRaceError
from affinec.ir.context import make_context


def kernel_module(body: str, *, threads: int = 4, blocks: int = 2, n: int = 8) -> str:
    """A host function launching one kernel over `blocks` x `threads`, whose body
    (with `%tx`, `%bx`, the buffer `%a: memref<{n}xf32>` and the shared `%tile`) is
    `body`."""
    return f"""
builtin.module attributes {{gpu.container_module}} {{
  func.func @f(%a: memref<{n}xf32>) {{
    %c1 = arith.constant 1 : index
    %cb = arith.constant {blocks} : index
    %ct = arith.constant {threads} : index
    gpu.launch_func @k::@k blocks in (%cb, %c1, %c1) threads in (%ct, %c1, %c1) args(%a : memref<{n}xf32>)
    func.return
  }}
  gpu.module @k {{
    gpu.func @k(%a: memref<{n}xf32>) workgroup(%tile : memref<{threads}xf32, 3>) kernel {{
      %tx = gpu.thread_id x
      %bx = gpu.block_id x
      %nt = gpu.block_dim x
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
{body}
      gpu.return
    }}
  }}
}}
"""


def run(text: str, a: np.ndarray) -> np.ndarray:
    module = parse_module(make_context(), text)
    verify(module)
    Interpreter(module).run("f", a)
    return a


def global_index() -> str:
    return """
      %base = arith.muli %bx, %nt : index
      %g = arith.addi %base, %tx : index
"""


def test_shared_memory_exchange_with_a_barrier_is_correct():
    # Each thread writes its element to shared memory, then reads its neighbour's.
    body = (
        global_index()
        + """
      %v = memref.load %a[%g] : memref<8xf32>
      memref.store %v, %tile[%tx] : memref<4xf32, 3>
      gpu.barrier
      %t1 = arith.addi %tx, %c1 : index
      %c4 = arith.constant 4 : index
      %n = arith.remui %t1, %c4 : index
      %w = memref.load %tile[%n] : memref<4xf32, 3>
      gpu.barrier
      memref.store %w, %a[%g] : memref<8xf32>
"""
    )
    a = np.arange(8, dtype=np.float32)
    run(kernel_module(body), a)
    np.testing.assert_array_equal(a, [1, 2, 3, 0, 5, 6, 7, 4])


def test_reading_another_threads_write_without_a_barrier_is_a_race():
    body = (
        global_index()
        + """
      %v = memref.load %a[%g] : memref<8xf32>
      memref.store %v, %tile[%tx] : memref<4xf32, 3>
      %t1 = arith.addi %tx, %c1 : index
      %c4 = arith.constant 4 : index
      %n = arith.remui %t1, %c4 : index
      %w = memref.load %tile[%n] : memref<4xf32, 3>
      memref.store %w, %a[%g] : memref<8xf32>
"""
    )
    with pytest.raises(
        DataRaceError, match=r"%tile\[.\] in block \(0, 0, 0\).*no gpu.barrier"
    ):
        run(kernel_module(body), np.zeros(8, np.float32))


def test_two_threads_writing_one_shared_element_is_a_race():
    body = """
      %v = arith.constant 1.0 : f32
      memref.store %v, %tile[%c0] : memref<4xf32, 3>
"""
    with pytest.raises(
        DataRaceError, match=r"thread \(1, 0, 0\) writes what thread \(0, 0, 0\) wrote"
    ):
        run(kernel_module(body), np.zeros(8, np.float32))


def test_a_barrier_between_the_writes_still_leaves_one_thread_per_interval():
    # Thread 0 writes, barrier, thread 1 writes: ordered by the barrier, no race.
    body = """
      %v = arith.constant 1.0 : f32
      %is0 = arith.cmpi eq, %tx, %c0 : index
      scf.if %is0 {
        memref.store %v, %tile[%c0] : memref<4xf32, 3>
      }
      gpu.barrier
      %is1 = arith.cmpi eq, %tx, %c1 : index
      scf.if %is1 {
        memref.store %v, %tile[%c0] : memref<4xf32, 3>
      }
"""
    run(kernel_module(body), np.zeros(8, np.float32))


def test_overwriting_what_another_thread_read_without_a_barrier_is_a_race():
    body = """
      %v = memref.load %tile[%c0] : memref<4xf32, 3>
      %is1 = arith.cmpi eq, %tx, %c1 : index
      scf.if %is1 {
        memref.store %v, %tile[%c0] : memref<4xf32, 3>
      }
"""
    with pytest.raises(DataRaceError, match="writes what other threads read"):
        run(kernel_module(body), np.zeros(8, np.float32))


def test_every_thread_reading_one_element_is_fine():
    body = """
      %z = arith.constant 0.0 : f32
      %is0 = arith.cmpi eq, %tx, %c0 : index
      scf.if %is0 {
        memref.store %z, %tile[%c0] : memref<4xf32, 3>
      }
      gpu.barrier
      %v = memref.load %tile[%c0] : memref<4xf32, 3>
"""
    run(kernel_module(body), np.zeros(8, np.float32))


def test_shared_memory_is_per_block_and_starts_poisoned():
    # Block 1 must not see what block 0 wrote: its tile reads NaN.
    body = (
        global_index()
        + """
      %is0 = arith.cmpi eq, %bx, %c0 : index
      scf.if %is0 {
        %one = arith.constant 1.0 : f32
        memref.store %one, %tile[%tx] : memref<4xf32, 3>
      }
      gpu.barrier
      %v = memref.load %tile[%tx] : memref<4xf32, 3>
      memref.store %v, %a[%g] : memref<8xf32>
"""
    )
    a = run(kernel_module(body), np.zeros(8, np.float32))
    np.testing.assert_array_equal(a[:4], 1)
    assert np.isnan(a[4:]).all()


def test_a_barrier_some_threads_skip_is_an_error():
    body = """
      %is0 = arith.cmpi eq, %tx, %c0 : index
      scf.if %is0 {
        gpu.barrier
      }
"""
    with pytest.raises(BarrierDivergenceError, match="waits at 'gpu.barrier'"):
        run(kernel_module(body), np.zeros(8, np.float32))


def test_threads_at_different_barriers_is_an_error():
    body = """
      %is0 = arith.cmpi eq, %tx, %c0 : index
      scf.if %is0 {
        gpu.barrier
      } else {
        gpu.barrier
      }
"""
    with pytest.raises(BarrierDivergenceError, match="another barrier"):
        run(kernel_module(body), np.zeros(8, np.float32))


def test_gpu_launch_runs_its_body_for_every_thread():
    text = """
func.func @f(%a: memref<6xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c3, %sy = %c1, %sz = %c1) workgroup(%w : memref<3xf32, 3>) {
    %base = arith.muli %bx, %sx : index
    %g = arith.addi %base, %tx : index
    %v = memref.load %a[%g] : memref<6xf32>
    %s = arith.addf %v, %one : f32
    memref.store %s, %w[%tx] : memref<3xf32, 3>
    gpu.barrier
    %r = memref.load %w[%tx] : memref<3xf32, 3>
    memref.store %r, %a[%g] : memref<6xf32>
    gpu.terminator
  }
  func.return
}
"""
    a = run(text, np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(a, np.arange(1, 7))


def test_a_barrier_outside_a_kernel_is_an_error():
    text = "func.func @f(%a: memref<6xf32>) {\n  gpu.barrier\n  func.return\n}"
    with pytest.raises(InterpreterError, match="outside a kernel"):
        run(text, np.zeros(6, np.float32))
