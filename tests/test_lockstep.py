"""Kernels in lockstep (`affinec.interpreter.lockstep`): a block's threads run
together as numpy vectors with the same bits as thread by thread, the same races
found, and the kernels it does not take still run thread by thread."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_levels import erase_barriers, sm_90a_levels

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import gpu
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import KernelConfig
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipeline_names import pass_text
from affinec.frontend.contraction import contraction_of
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.cfg_structure import Branch, Jump, structure
from affinec.interpreter.lockstep_plan import plan_lockstep
from affinec.interpreter.shared_memory import DataRaceError
from affinec.interpreter.support import StepLimitError
from affinec.ir.context import make_context
from affinec.testing import kernel_configs, specs
from strategies import examples, mma_cases, with_nans


def _kernels(module) -> list[gpu.FuncOp]:
    return [op for op in module.walk() if isinstance(op, gpu.FuncOp)]


LOCKSTEP_LEVELS = (
    "affinec-mma-sync",
    "affinec-map-threads",
    "affinec-plan-shared-memory",
    "affinec-convert-parallel-to-gpu",
    "gpu-kernel-outlining",
    "affinec-narrow-indices",
    "lower-affine",
    "cse",
    "convert-nvgpu-to-nvvm",
    "convert-scf-to-cf",
    "convert-gpu-to-nvvm",
)
"""The passes after which blocks run in lockstep: thread-mapped grid bands (with
block bands beside their thread bands after `affinec-mma-sync`), a `gpu.launch`,
outlined kernels, in affine and after `lower-affine` (scf, integer
arithmetic), after `convert-nvgpu-to-nvvm` (pointers, registers, nvvm's
ldmatrix, mma.sync and cp.async), after `convert-scf-to-cf` (loops and branches
as blocks, `cfg_structure`) and after `convert-gpu-to-nvvm` (the llvm level:
pointers into shared, private and global memory, `lockstep_llvm`)."""


def _levels(spec, config) -> dict[str, object]:
    """`spec` compiled with `config`, the module after each of `LOCKSTEP_LEVELS`."""
    levels = {}

    def keep(p, module, _seconds) -> None:
        name = pass_text(p).split("{")[0]
        if name in LOCKSTEP_LEVELS:
            levels[name] = module.clone()

    compile_to_ptx(spec, config, callback=keep)
    return levels


def _same_in_lockstep(spec, config, seed: int) -> None:
    """Every level from the thread mapping to the outlined kernel runs in
    lockstep, with the bits it gives thread by thread."""
    levels = _levels(spec, config)
    assert all(
        plan_lockstep(k) is not None for k in _kernels(levels["gpu-kernel-outlining"])
    )
    for name, module in levels.items():
        outputs = []
        for lockstep in (True, False):
            interpreter = Interpreter(module, lockstep=lockstep)
            assert (".lanes" in interpreter.source) == lockstep, name
            inputs = random_inputs(spec, np.random.default_rng(seed))
            out = poisoned_output(spec)
            interpreter.run(contraction_of(spec).name, *with_nans(inputs, seed), out)
            outputs.append(out)
        assert outputs[0].tobytes() == outputs[1].tobytes()


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(12), deadline=None)
def test_the_gpu_level_in_lockstep_is_bit_identical(data, seed):
    """Random specs (layouts, dtypes, strides, groups, epilogues) and
    configurations: promoted tiles, asynchronous copies, partial tiles."""
    spec = data.draw(specs())
    _same_in_lockstep(spec, data.draw(kernel_configs(spec)), seed)


@given(case=mma_cases(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(8), deadline=None)
def test_the_tensor_core_route_in_lockstep_is_bit_identical(case, seed):
    """The mma route's gpu level: `ldmatrix`, `mma.sync`, fragments as vectors,
    the staged output's 16-byte copies, f16, bf16 and tf32."""
    spec, config = case
    _same_in_lockstep(spec, config, seed)


def kernel(body: str, threads: int = 8, blocks: int = 2) -> str:
    """A host function launching one kernel whose body (with `%tx`, `%bx`, the
    buffer `%a: memref<16xf32>` and the shared `%tile: memref<8xf32, 3>`) is
    `body`."""
    return f"""
builtin.module attributes {{gpu.container_module}} {{
  func.func @f(%a: memref<16xf32>) {{
    %c1 = arith.constant 1 : index
    %cb = arith.constant {blocks} : index
    %ct = arith.constant {threads} : index
    gpu.launch_func @k::@k blocks in (%cb, %c1, %c1) threads in (%ct, %c1, %c1) args(%a : memref<16xf32>)
    func.return
  }}
  gpu.module @k {{
    gpu.func @k(%a: memref<16xf32>) workgroup(%tile : memref<8xf32, 3>) kernel {{
      %tx = gpu.thread_id x
      %bx = gpu.block_id x
{body}
      gpu.return
    }}
  }}
}}
"""


def _module(text: str):
    module = parse_module(make_context(), text)
    verify(module)
    return module


def _both(text: str, a: np.ndarray) -> list[np.ndarray | InterpreterError]:
    """What the kernel leaves in `a` (or the error it raises) in lockstep and
    thread by thread."""
    module = _module(text)
    results: list[np.ndarray | InterpreterError] = []
    for lockstep in (True, False):
        out = a.copy()
        try:
            Interpreter(module, lockstep=lockstep).run("f", out)
            results.append(out)
        except InterpreterError as e:
            results.append(e)
    return results


EXCHANGE = """
      %v = affine.load %a[%bx * 8 + %tx] : memref<16xf32>
      affine.store %v, %tile[%tx] : memref<8xf32, 3>
      gpu.barrier
      %w = affine.load %tile[(%tx + 1) mod 8] : memref<8xf32, 3>
      affine.if affine_set<(d0) : (d0 - 5 >= 0)>(%tx) {
        %d = arith.addf %w, %w : f32
        affine.store %d, %a[%bx * 8 + %tx] : memref<16xf32>
      } else {
        affine.store %w, %a[%bx * 8 + %tx] : memref<16xf32>
      }
"""


def test_an_exchange_through_shared_memory_with_a_divergent_branch():
    module = _module(kernel(EXCHANGE))
    assert plan_lockstep(_kernels(module)[0]) is not None
    a = np.arange(16, dtype=np.float32)
    lockstep, threads = _both(kernel(EXCHANGE), a)
    expected = np.concatenate([np.roll(a[:8], -1), np.roll(a[8:], -1)])
    expected[[5, 6, 7, 13, 14, 15]] *= 2
    np.testing.assert_array_equal(lockstep, expected)
    np.testing.assert_array_equal(threads, expected)


SELECT = """
      %one = arith.constant 1.0 : f32
      %v = affine.load %a[%bx * 8 + %tx] : memref<16xf32>
      %r = affine.if affine_set<(d0) : (d0 mod 2 == 0)>(%tx) -> f32 {
        %s = affine.if affine_set<(d0) : (d0 - 4 >= 0)>(%tx) -> f32 {
          %t = arith.addf %v, %one : f32
          affine.yield %t : f32
        } else {
          affine.yield %one : f32
        }
        affine.yield %s : f32
      } else {
        affine.yield %v : f32
      }
      affine.store %r, %a[%bx * 8 + %tx] : memref<16xf32>
"""


def test_nested_divergent_branches_with_results():
    a = np.arange(16, dtype=np.float32) * 10
    lockstep, threads = _both(kernel(SELECT), a)
    expected = a.copy()
    for k in range(16):
        if k % 8 % 2 == 0:
            expected[k] = a[k] + 1 if k % 8 >= 4 else 1
    np.testing.assert_array_equal(lockstep, expected)
    np.testing.assert_array_equal(threads, expected)


RACES = {
    "two threads write one element": """
      %v = affine.load %a[%tx] : memref<16xf32>
      affine.store %v, %tile[%tx floordiv 2] : memref<8xf32, 3>
""",
    "a read of another thread's write": """
      %v = affine.load %a[%tx] : memref<16xf32>
      affine.store %v, %tile[%tx] : memref<8xf32, 3>
      %w = affine.load %tile[(%tx + 1) mod 8] : memref<8xf32, 3>
      affine.store %w, %a[%tx] : memref<16xf32>
""",
    "a write of what another thread read": """
      %v = affine.load %a[%tx] : memref<16xf32>
      affine.store %v, %tile[%tx] : memref<8xf32, 3>
      gpu.barrier
      %w = affine.load %tile[(%tx + 1) mod 8] : memref<8xf32, 3>
      affine.store %w, %tile[%tx] : memref<8xf32, 3>
""",
    "a read of what a copy may still be writing": """
      %t = nvgpu.device_async_copy %a[%tx], %tile[%tx], 1 : memref<16xf32> to memref<8xf32, 3>
      gpu.barrier
      %w = affine.load %tile[%tx] : memref<8xf32, 3>
      affine.store %w, %a[%tx] : memref<16xf32>
""",
    "two copies to one element": """
      %half = affine.apply affine_map<(d0) -> (d0 floordiv 2)>(%tx)
      affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%tx) {
        %t = nvgpu.device_async_copy %a[%tx], %tile[%half], 1 : memref<16xf32> to memref<8xf32, 3>
      }
""",
}


@pytest.mark.parametrize("body", RACES.values(), ids=RACES.keys())
def test_a_race_is_found_in_lockstep_as_thread_by_thread(body):
    module = _module(kernel(body))
    assert plan_lockstep(_kernels(module)[0]) is not None
    lockstep, threads = _both(kernel(body), np.zeros(16, np.float32))
    assert isinstance(lockstep, DataRaceError)
    assert isinstance(threads, DataRaceError)


COPY = """
      %g0 = affine.apply affine_map<(d0, d1) -> (d0 * 8 + d1)>(%bx, %tx)
      %t = nvgpu.device_async_copy %a[%g0], %tile[%tx], 1 : memref<16xf32> to memref<8xf32, 3>
      %g = nvgpu.device_async_create_group %t
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
      gpu.barrier
      %w = affine.load %tile[7 - %tx] : memref<8xf32, 3>
      gpu.barrier
      affine.store %w, %a[%bx * 8 + %tx] : memref<16xf32>
"""


def test_asynchronous_copies_land_at_the_wait():
    a = np.arange(16, dtype=np.float32)
    lockstep, threads = _both(kernel(COPY), a)
    expected = np.concatenate([a[7::-1], a[:7:-1]])
    np.testing.assert_array_equal(lockstep, expected)
    np.testing.assert_array_equal(threads, expected)


OUT_OF_BOUNDS = """
      %v = affine.load %tile[%tx + 1] : memref<8xf32, 3>
"""


def test_an_access_out_of_bounds_is_the_same_error():
    lockstep, threads = _both(kernel(OUT_OF_BOUNDS), np.zeros(16, np.float32))
    assert isinstance(lockstep, InterpreterError)
    assert str(lockstep) == str(threads)
    assert "index [8] is out of bounds for a memref of shape [8]" in str(lockstep)


def test_the_step_budget_counts_every_thread():
    body = """
      affine.for %i = 0 to 100 {
        affine.store %cst, %a[%tx] : memref<16xf32>
      }
"""
    text = kernel("      %cst = arith.constant 1.0 : f32\n" + body)
    module = _module(text)
    for lockstep in (True, False):
        # 2 blocks x 8 threads x 100 iterations
        Interpreter(module, max_steps=1_700, lockstep=lockstep).run(
            "f", np.zeros(16, np.float32)
        )
        with pytest.raises(StepLimitError):
            Interpreter(module, max_steps=1_500, lockstep=lockstep).run(
                "f", np.zeros(16, np.float32)
            )


NOT_IN_LOCKSTEP = {
    "a barrier some threads skip": """
      affine.if affine_set<(d0) : (d0 - 100 >= 0)>(%tx) {
        gpu.barrier
      }
      %v = affine.load %a[%tx] : memref<16xf32>
      affine.store %v, %a[%tx + 8] : memref<16xf32>
""",
    "a loop bound that differs between threads": """
      %v = affine.load %a[%tx] : memref<16xf32>
      affine.for %i = 0 to affine_map<(d0) -> (d0)>(%tx) {
        affine.store %v, %a[%tx + 8] : memref<16xf32>
      }
""",
}


@pytest.mark.parametrize("body", NOT_IN_LOCKSTEP.values(), ids=NOT_IN_LOCKSTEP.keys())
def test_a_kernel_lockstep_does_not_take_runs_thread_by_thread(body):
    module = _module(kernel(body, blocks=1))
    assert plan_lockstep(_kernels(module)[0]) is None
    a = np.arange(16, dtype=np.float32)
    lockstep, threads = _both(kernel(body, blocks=1), a)
    assert isinstance(lockstep, np.ndarray)
    np.testing.assert_array_equal(lockstep, threads)


INTEGER_OPS = [
    "addi",
    "subi",
    "muli",
    "andi",
    "ori",
    "xori",
    "shli",
    "shrsi",
    "shrui",
    "divsi",
    "remsi",
    "floordivsi",
    "ceildivsi",
    "divui",
    "remui",
    "minsi",
    "maxsi",
]


def _integer_kernel(op: str, t: str) -> str:
    """A kernel of 32 threads: c[tx] = a[tx] <op> b[tx], and d[tx] the
    comparisons and a select on them."""
    widen = (
        "%w = arith.extsi %s : i32 to i64"
        if t == "i32"
        else "%w = arith.addi %s, %s : i64"
    )
    return f"""
builtin.module attributes {{gpu.container_module}} {{
  func.func @f(%a: memref<32x{t}>, %b: memref<32x{t}>, %c: memref<32x{t}>, %d: memref<32xi64>) {{
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%a : memref<32x{t}>, %b : memref<32x{t}>, %c : memref<32x{t}>, %d : memref<32xi64>)
    func.return
  }}
  gpu.module @k {{
    gpu.func @k(%a: memref<32x{t}>, %b: memref<32x{t}>, %c: memref<32x{t}>, %d: memref<32xi64>) kernel {{
      %tx = gpu.thread_id x
      %x = memref.load %a[%tx] : memref<32x{t}>
      %y = memref.load %b[%tx] : memref<32x{t}>
      %z = arith.{op} %x, %y : {t}
      memref.store %z, %c[%tx] : memref<32x{t}>
      %lt = arith.cmpi ult, %x, %y : {t}
      %ge = arith.cmpi sge, %x, %y : {t}
      %s = arith.select %lt, %x, %y : {t}
      {widen}
      %e = arith.extui %ge : i1 to i64
      %v = arith.addi %w, %e : i64
      memref.store %v, %d[%tx] : memref<32xi64>
      gpu.return
    }}
  }}
}}
"""


@pytest.mark.parametrize("op", INTEGER_OPS)
@given(data=st.data())
@settings(max_examples=examples(10), deadline=None)
def test_integer_arithmetic_in_lockstep_is_thread_by_thread(op, data):
    """Every arith integer op on values that differ between threads, i32 and i64:
    extremes, zeros and negative values; a division by zero or a shift past the
    width is the same error."""
    t, bits = data.draw(st.sampled_from([("i32", 32), ("i64", 64)]))
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    values = st.one_of(
        st.sampled_from([0, 1, -1, low, high, 2, bits - 1]), st.integers(low, high)
    )
    dtype = np.int32 if bits == 32 else np.int64
    a = np.array(data.draw(st.lists(values, min_size=32, max_size=32)), dtype)
    b = np.array(data.draw(st.lists(values, min_size=32, max_size=32)), dtype)
    module = _module(_integer_kernel(op, t))
    assert plan_lockstep(_kernels(module)[0]) is not None
    results = []
    for lockstep in (True, False):
        c, d = np.zeros(32, dtype), np.zeros(32, np.int64)
        try:
            Interpreter(module, lockstep=lockstep).run("f", a.copy(), b.copy(), c, d)
            results.append((c.tobytes(), d.tobytes()))
        except InterpreterError as e:
            results.append(str(e).split(": ")[-1])
    assert results[0] == results[1]


def _mapped(barrier: str) -> str:
    """A thread-mapped grid band: eight threads read a shared tile, then a block
    band (thread 0) writes it, with `barrier` between."""
    return f"""
func.func @f(%a: memref<16xf32>) {{
  affine.parallel (%b) = (0) to (2) {{
    %tile = memref.alloc() : memref<8xf32, 3>
    affine.parallel (%i) = (0) to (8) {{
      %c = arith.constant 1.5 : f32
      affine.store %c, %tile[%i] : memref<8xf32, 3>
    }} {{affinec.mapping = "block"}}
    gpu.barrier
    affine.parallel (%t) = (0) to (8) {{
      %v = affine.load %tile[7 - %t] : memref<8xf32, 3>
      affine.store %v, %a[%b * 8 + %t] : memref<16xf32>
    }} {{affinec.mapping = "thread"}}
    {barrier}
    affine.parallel (%i) = (0) to (8) {{
      %c = arith.constant 2.5 : f32
      affine.store %c, %tile[%i] : memref<8xf32, 3>
    }} {{affinec.mapping = "block"}}
  }} {{affinec.mapping = "grid"}}
  func.return
}}
"""


def test_a_block_band_beside_thread_bands_runs_on_thread_zero():
    for barrier, fine in (("gpu.barrier", True), ("", False)):
        module = _module(_mapped(barrier))
        assert ".lanes" in Interpreter(module).source
        lockstep, threads = _both(_mapped(barrier), np.zeros(16, np.float32))
        if fine:
            np.testing.assert_array_equal(lockstep, np.full(16, 1.5, np.float32))
            np.testing.assert_array_equal(threads, lockstep)
        else:  # thread 0 overwrites what the others read, with no barrier between
            assert isinstance(lockstep, DataRaceError)
            assert isinstance(threads, DataRaceError)


# -- kernels of several blocks (after convert-scf-to-cf) --------------------------------


def _as_blocks(text: str):
    """The module of `text` with its kernel's loops and branches as blocks."""
    module = _module(text)
    Pipeline.parse("lower-affine,convert-scf-to-cf").run(module)
    return module


LOOP_WITH_CARRIED_VALUE = """
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %zero = arith.constant 0.0 : f32
      %sum = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
        %j = arith.addi %i, %tx : index
        %k = arith.remui %j, %c4 : index
        %v = memref.load %a[%k] : memref<16xf32>
        %n = arith.addf %acc, %v : f32
        scf.yield %n : f32
      }
      %o = arith.addi %tx, %c4 : index
      memref.store %sum, %a[%o] : memref<16xf32>
"""


@pytest.mark.parametrize(
    "body",
    [EXCHANGE, SELECT, LOOP_WITH_CARRIED_VALUE],
    ids=["divergent branch", "nested branches with results", "a carried value"],
)
def test_branches_between_blocks_run_in_lockstep(body):
    module = _as_blocks(kernel(body))
    (k,) = _kernels(module)
    assert len(k.body.blocks) > 1
    plan = plan_lockstep(k)
    assert plan is not None and plan.tree is not None
    a = np.arange(16, dtype=np.float32) * 3
    results = []
    for lockstep in (True, False):
        out = a.copy()
        Interpreter(module, max_steps=1_500, lockstep=lockstep).run("f", out)
        results.append(out)
    np.testing.assert_array_equal(*results)
    unlowered = a.copy()
    Interpreter(_module(kernel(body))).run("f", unlowered)
    np.testing.assert_array_equal(results[0], unlowered)


def test_a_loop_carrying_a_value_per_thread_runs_in_lockstep():
    text = kernel(LOOP_WITH_CARRIED_VALUE, threads=4, blocks=1)
    module = _as_blocks(text)
    assert plan_lockstep(_kernels(module)[0]) is not None
    a = np.arange(16, dtype=np.float32)
    lockstep, threads = (a.copy(), a.copy())
    Interpreter(module, lockstep=True).run("f", lockstep)
    Interpreter(module, lockstep=False).run("f", threads)
    np.testing.assert_array_equal(lockstep, threads)
    np.testing.assert_array_equal(lockstep[4:8], np.full(4, a[:4].sum()))


def test_a_loop_whose_trips_differ_between_threads_runs_thread_by_thread():
    body = NOT_IN_LOCKSTEP["a loop bound that differs between threads"]
    module = _as_blocks(kernel(body, blocks=1))
    assert plan_lockstep(_kernels(module)[0]) is None
    a = np.arange(16, dtype=np.float32)
    out = a.copy()
    Interpreter(module).run("f", out)
    expected = a.copy()
    expected[9:16] = a[1:8]  # thread t > 0 stores its value, t times
    np.testing.assert_array_equal(out, expected)


UNSTRUCTURED = """
func.func @f(%n: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  cf.br ^head(%c0 : index)
^head(%i: index):
  %more = arith.cmpi slt, %i, %n : index
  cf.cond_br %more, ^body, ^done(%i : index)
^body:
  %stop = arith.cmpi eq, %i, %c5 : index
  %next = arith.addi %i, %c1 : index
  cf.cond_br %stop, ^done(%c5 : index), ^head(%next : index)
^done(%r: index):
  func.return %r : index
}
"""


def test_a_loop_with_two_ways_out_has_no_structure():
    (f,) = [op for op in _module(UNSTRUCTURED).walk() if op.name == "func.func"]
    assert structure(f.body) is None


def test_loops_and_branches_are_found_again():
    module = _as_blocks(kernel(LOOP_WITH_CARRIED_VALUE + SELECT, threads=8, blocks=1))
    tree = structure(_kernels(module)[0].body)
    assert tree is not None
    kinds = [type(item).__name__ for item in tree]
    assert kinds.count("Loop") == 1 and kinds[-1] == "Exit"
    branches = [item for item in tree if isinstance(item, Branch)]
    assert len(branches) == 1 and all(isinstance(a[-1], Jump) for a in branches[0].arms)


HOPPER_LOCKSTEP_LEVELS = LOCKSTEP_LEVELS[1:8]
"""The levels at which Hopper's warpgroup steps (`affinec.warpgroup_mma`, A from
shared memory, and `affinec.warpgroup_mma_registers`, A from the threads'
fragments) run in lockstep, checked here: from the thread mapping to `cse`, before
`convert-nvgpu-to-nvvm`. The nvvm and llvm levels' descriptor wgmma runs in lockstep
too (`tests/test_lockstep_wgmma.py`); their mbarrier kernels thread by thread."""


def _hopper_levels(spec, config) -> dict[str, object]:
    return sm_90a_levels(spec, config, HOPPER_LOCKSTEP_LEVELS)


def _run(module, spec, lockstep: bool, seed: int = 3) -> np.ndarray:
    interpreter = Interpreter(module, lockstep=lockstep)
    source = interpreter.source
    in_lanes = "WARPGROUP_STEP_LANES" in source or "WARPGROUP_REGISTERS_LANES" in source
    assert in_lanes == lockstep
    inputs = random_inputs(spec, np.random.default_rng(seed))
    out = poisoned_output(spec)
    interpreter.run(contraction_of(spec).name, *inputs, out)
    return out


WGMMA_ROUTES = {
    # A from shared memory: a product of two warpgroups' rows, partial tiles, two
    # stages of cp.async
    "shared": (
        MatmulSpec(136, 40, 96, "f16", "bias-relu"),
        KernelConfig(
            tile_sizes=(128, 32), reduction_tile_sizes=(32,), mma=True,
            tensor_core="wgmma", stages=2, tma=False,
        ),
    ),
    # A from the threads' fragments: a 3x3 of stride 2, its taps a step
    "registers": (
        ConvSpec(1, 16, 10, 10, 16, 3, 3, stride=2, padding=1, layout="nhwc",
                 filter_layout="rsck", dtype="bf16", epilogue="bias-relu"),
        KernelConfig(
            tile_sizes=(1, 4, 8, 16), reduction_tile_sizes=(3, 3, 16), mma=True,
            tensor_core="wgmma", stages=2, tma=False, reassociate=True,
        ),
    ),
}  # fmt: skip


@pytest.mark.parametrize("route", WGMMA_ROUTES)
def test_hoppers_warpgroup_steps_in_lockstep_are_bit_identical(route):
    spec, config = WGMMA_ROUTES[route]
    for name, module in _hopper_levels(spec, config).items():
        together, apart = (_run(module, spec, lockstep) for lockstep in (True, False))
        assert together.tobytes() == apart.tobytes(), name
        assert np.isfinite(together.astype(np.float32)).all(), name


def test_a_warpgroup_step_reading_a_tile_before_its_barrier_races_in_lockstep():
    # every barrier of the kernel erased: the steps read tiles other threads'
    # copies wrote in the same interval, which both ways find
    spec, config = WGMMA_ROUTES["shared"]
    module = _hopper_levels(spec, config)["gpu-kernel-outlining"]
    erase_barriers(module)
    for lockstep in (True, False):
        with pytest.raises(DataRaceError, match="data race on shared memory"):
            _run(module, spec, lockstep)
