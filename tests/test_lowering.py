"""The lowering to the gpu level and below: every pass proven on the interpreter (bit for
bit against the naive IR), and every illegal option or input refused before rewriting."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import llvm

from affinec.base.diagnostics import OpError, PassError, verify
from affinec.base.dtypes import storage_numpy_dtype
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import LaunchRecord
from affinec.driver.pipeline import Pipeline
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter
from affinec.ir.context import make_context
from affinec.transforms.gpu.outlining import find_kernels
from strategies import conv_specs, specs

INPUTS = Path(__file__).parent / "filecheck" / "lowering" / "inputs"

TO_CF = (
    "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{{threads-per-block={threads}}},affinec-convert-parallel-to-gpu,"
    "gpu-kernel-outlining,lower-affine,cse,convert-scf-to-cf"
)


def parse(text: str):
    module = parse_module(make_context(), text)
    verify(module)
    return module


def naive_result(spec, inputs):
    out = poisoned_output(spec)
    Interpreter(build(spec)).run(contraction_of(spec).name, *inputs, out)
    return out


def interpreted(module, spec, inputs):
    out = poisoned_output(spec)
    Interpreter(module).run(contraction_of(spec).name, *[x.copy() for x in inputs], out)
    return out


@st.composite
def tiled(draw, spec_strategy=None):
    """A spec, and the affine pipeline tiling it with random block tile sizes."""
    spec = draw(specs() if spec_strategy is None else spec_strategy)
    extents = [e for _, e in contraction_of(spec).output_index]
    sizes = [draw(st.integers(1, e)) for e in extents]
    separate = draw(st.booleans())
    options = f"tile-sizes={','.join(map(str, sizes))}"
    if separate:
        options += " separate=true"
    affine_passes = (
        f"affine-loop-tile{{{options}}},affinec-split,affinec-sink,affinec-canonicalize"
    )
    threads = draw(st.sampled_from([0, 1, 3, 32]))
    return spec, affine_passes, threads


@given(tiled(), st.sampled_from([32, 64]))
def test_gpu_and_llvm_levels_equal_naive_bit_for_bit(case, index_bitwidth):
    spec, affine_passes, threads = case
    inputs = random_inputs(spec, np.random.default_rng(0))
    expected = naive_result(spec, inputs)
    module = build(spec)
    Pipeline.parse(f"{affine_passes},{TO_CF.format(threads=threads)}").run(module)
    (kernel, record), *others = find_kernels(module)
    assert not others and record is not None
    assert isinstance(kernel, gpu.FuncOp)
    np.testing.assert_array_equal(interpreted(module, spec, inputs), expected)
    Pipeline.parse(
        f"convert-gpu-to-nvvm{{index-bitwidth={index_bitwidth} use-bare-ptr-memref-call-conv=true}}"
    ).run(module)
    ((kernel, _),) = find_kernels(module)
    assert isinstance(kernel, llvm.FuncOp)
    np.testing.assert_array_equal(interpreted(module, spec, inputs), expected)


@given(tiled(conv_specs(max_channels=3, max_image=6)))
def test_each_lowering_pass_keeps_the_result(case):
    # `check=True` interprets after every pass and names the first that differs.
    spec, affine_passes, threads = case
    module = build(spec)
    Pipeline.parse(affine_passes).run(module)
    lowering = (
        TO_CF.format(threads=threads)
        + ",convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
    )
    Pipeline.parse(lowering).run(module, check=True)


def test_the_hand_written_split_convolution():
    module = parse((INPUTS / "conv_split.mlir").read_text())
    spec = ConvSpec(1, 2, 5, 5, 3, 3, 3, padding=1)
    inputs = random_inputs(spec, np.random.default_rng(1))
    lowering = (
        TO_CF.format(threads=8)
        + ",convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
    )
    Pipeline.parse(lowering).run(module, check=True)
    np.testing.assert_array_equal(
        interpreted(module, spec, inputs), naive_result(spec, inputs)
    )


def test_shared_buffers_get_barriers_and_stay_exact():
    # The filter tile is copied into a block buffer by one phase and read by the next
    # at other indices: a workgroup (shared) buffer, barriers around the copy.
    module = parse((INPUTS / "matmul_shared.mlir").read_text())
    spec = MatmulSpec(6, 5, 7)
    inputs = random_inputs(spec, np.random.default_rng(2))
    Pipeline.parse(
        "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu"
    ).run(module, check=True)
    (launch,) = [op for op in module.walk() if isinstance(op, gpu.LaunchOp)]
    assert [str(a.type) for a in launch.workgroup_args] == ["memref<4x3xf32, 3 : i64>"]
    assert sum(isinstance(op, gpu.BarrierOp) for op in module.walk()) == 2
    Pipeline.parse(
        "gpu-kernel-outlining,lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}"
    ).run(module, check=True)
    np.testing.assert_array_equal(
        interpreted(module, spec, inputs), naive_result(spec, inputs)
    )


def test_without_its_barriers_the_shared_buffer_races():
    from affinec.interpreter.shared_memory import DataRaceError

    module = parse((INPUTS / "matmul_shared.mlir").read_text())
    Pipeline.parse(
        "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu"
    ).run(module)
    for op in [op for op in module.walk() if isinstance(op, gpu.BarrierOp)]:
        op.parent_block().erase_op(op)  # pyright: ignore[reportOptionalMemberAccess]
    spec = MatmulSpec(6, 5, 7)
    inputs = random_inputs(spec, np.random.default_rng(2))
    with pytest.raises(DataRaceError, match="data race on shared memory %tile"):
        interpreted(module, spec, inputs)
    # The lowering's static check refuses the racy kernel before PTX...
    with pytest.raises(PassError, match="no gpu.barrier between"):
        Pipeline.parse("affinec-lower-to-nvvm").run(module)
    # ...and the interpreter still catches the race in the llvm dialect, where the
    # barriers of a kernel lowered whole are taken out.
    module = parse((INPUTS / "matmul_shared.mlir").read_text())
    Pipeline.parse(
        "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4},affinec-convert-parallel-to-gpu,affinec-lower-to-nvvm"
    ).run(module)
    barriers = [op for op in module.walk() if op.name == "nvvm.barrier0"]
    assert barriers
    for op in barriers:
        op.parent_block().erase_op(op)  # pyright: ignore[reportOptionalMemberAccess]
    with pytest.raises(DataRaceError, match="data race on shared memory"):
        interpreted(module, spec, inputs)


def test_a_block_band_that_never_runs_disappears():
    text = """
func.func @f(%A: memref<8xf32>) {
  %z = arith.constant 1.0 : f32
  affine.parallel (%i) = (0) to (2) {
    affine.parallel (%t) = (0) to (min(4, 3 - %i * 4 - 4)) {
      affine.store %z, %A[%t] : memref<8xf32>
    } {affinec.mapping = "block"}
  } {affinec.mapping = "grid"}
  func.return
}"""
    module = parse(text)
    Pipeline.parse("affinec-lower-to-nvvm").run(module, verify_each=True)
    a = np.zeros(8, np.float32)
    Interpreter(module).run("f", a)
    assert not a.any()


def test_block_buffers_indexed_by_the_band_become_per_thread_storage():
    module = parse((INPUTS / "conv_split.mlir").read_text())
    Pipeline.parse(
        "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=8},affinec-convert-parallel-to-gpu"
    ).run(module)
    allocas = [op for op in module.walk() if op.name == "memref.alloca"]
    # 32 iterations of the block band, 8 threads: 4 turns, 4 elements per thread.
    assert [str(op.results[0].type) for op in allocas] == ["memref<4xf32>"]
    turn_loops = [
        op
        for op in module.walk()
        if isinstance(op, affine.ForOp) and "affinec.unroll" in op.attributes
    ]
    assert len(turn_loops) == 3


def test_the_launch_record():
    spec = ConvSpec(1, 2, 6, 6, 3, 3, 3, padding=1, epilogue="bias-relu")
    module = build(spec)
    Pipeline.parse(
        "affine-loop-tile{tile-sizes=1,2,4,4},affinec-split,affinec-sink,"
        "affinec-canonicalize,affinec-map-to-gpu,gpu-kernel-outlining"
    ).run(module)
    ((kernel, record),) = find_kernels(module)
    assert record == LaunchRecord.of(kernel)
    assert record is not None
    assert record.kernel == "conv_kernel" and record.host == "conv"
    assert record.grid == (1 * 2 * 2 * 2, 1, 1)
    assert record.block == (32, 1, 1)
    assert record.dynamic_shared_memory == 0
    assert [a.name for a in record.arguments] == ["input", "filter", "bias", "output"]
    assert [a.shape for a in record.arguments] == [
        (1, 2, 6, 6),
        (3, 2, 3, 3),
        (3,),
        (1, 3, 6, 6),
    ]
    assert record.outputs == ("output",)
    assert LaunchRecord.from_attribute(record.to_attribute()) == record


# -- lower-affine -------------------------------------------------------------------------


def _run_index_function(text: str, *args):
    module = parse(text)
    it = Interpreter(module)
    return it.call("f", *args)


@pytest.mark.parametrize(
    "expr",
    ["d0 floordiv 4", "d0 mod 4", "d0 ceildiv 4", "(d0 * 3 - 7) floordiv 5 + d0 mod 3"],
)
def test_lowered_division_keeps_affine_semantics_for_negative_values(expr):
    text = f"""
func.func @f(%x: index) -> index {{
  %r = affine.apply affine_map<(d0) -> ({expr})>(%x)
  func.return %r : index
}}"""
    before = parse(text)
    after = parse(text)
    Pipeline.parse("lower-affine").run(after)
    assert not any(op.name.startswith("affine.") for op in after.walk())
    a, b = Interpreter(before), Interpreter(after)
    for x in range(-13, 14):
        assert a.call("f", x) == b.call("f", x), x


def test_lower_affine_handles_every_bound_and_region_form():
    text = """
func.func @f(%A: memref<10xf32>, %n: index) -> f32 {
  %zero = arith.constant 0.0 : f32
  %s = affine.for %i = max affine_map<(d0) -> (0, d0 - 6)>(%n) to min affine_map<(d0)[s0] -> (10, d0 + 3, s0 * 2)>(%n)[%n] step 2 iter_args(%acc = %zero) -> (f32) {
    %v = affinec.padded_load %A[%i - 1] : memref<10xf32>
    %w = affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0, d0 mod 4 == 0)>(%i)[%n] -> f32 {
      affine.yield %v : f32
    } else {
      %m = affine.max affine_map<(d0) -> (d0 floordiv 3, 1)>(%i)
      %u = memref.load %A[%m] : memref<10xf32>  // %m: not an affine index (MLIR)
      affine.yield %u : f32
    }
    %t = arith.addf %acc, %w : f32
    affine.yield %t : f32
  }
  %p = affine.parallel (%a, %b) = (0, max(%n - 5, 0)) to (2, min(%n, 3)) reduce ("addf") -> (f32) {
    %x = affine.load %A[%a * 3 + %b] : memref<10xf32>
    affine.yield %x : f32
  }
  %r = arith.addf %s, %p : f32
  func.return %r : f32
}"""
    before, after = parse(text), parse(text)
    Pipeline.parse("lower-affine,convert-scf-to-cf").run(after)
    assert not any(op.name.startswith(("affine.", "scf.")) for op in after.walk())
    data = np.random.default_rng(3).standard_normal(10).astype(np.float32)
    a, b = Interpreter(before), Interpreter(after)
    for n in range(0, 9):
        assert a.call("f", data, n) == b.call("f", data, n), n


# -- refusals -----------------------------------------------------------------------------


def _refused(text: str, pipeline: str, message: str) -> None:
    """The last pass of `pipeline` refuses the module, before changing it."""
    module = parse(text)
    *setup, last = Pipeline.parse(pipeline).passes
    Pipeline(setup).run(module)
    pipeline = str(last)
    before = str(module)
    with pytest.raises(PassError, match=message) as info:
        Pipeline.parse(pipeline).run(module)
    assert info.value.op is not None
    assert str(module) == before, "the pass rewrote before refusing"


GRID_BLOCK = """
func.func @f(%A: memref<8xf32>) {{
  %z = arith.constant 0.0 : f32
  affine.parallel (%i) = (0) to ({grid}) {{
    {grid_body}
    affine.parallel (%t) = (0) to (4) {{
      {block_body}
    }} {{affinec.mapping = "{inner}"}}
  }} {{affinec.mapping = "{outer}"}}
  func.return
}}"""


def _grid_block(
    grid="2", grid_body="", block_body="", inner="block", outer="grid"
) -> str:
    return GRID_BLOCK.format(
        grid=grid, grid_body=grid_body, block_body=block_body, inner=inner, outer=outer
    )


@pytest.mark.parametrize(
    ("text", "pipeline", "message"),
    [
        (
            _grid_block(),
            "affinec-place-buffers,affinec-map-threads{threads-per-block=2000}",
            "between 1 and 1024",
        ),
        (
            _grid_block(),
            "affinec-place-buffers,affinec-map-threads{threads-per-block=-1}",
            "between 1 and 1024",
        ),
        (
            _grid_block(inner="grid"),
            "affinec-place-buffers",
            "grid-mapped affine.parallel inside",
        ),
        (
            _grid_block(grid_body="affine.store %z, %A[%i] : memref<8xf32>"),
            "affinec-place-buffers",
            "every thread of a block would run this op",
        ),
        (
            _grid_block(
                grid_body="%big = memref.alloc() : memref<16384xf32>\n"
                "affine.store %z, %big[%i] : memref<16384xf32>"
            ),
            "affinec-place-buffers",
            "every thread of a block would run this op",
        ),
        (_grid_block(), "lower-affine", "must be mapped to the GPU first"),
        (
            _grid_block(),
            "affinec-map-to-gpu,gpu-kernel-outlining,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}",
            "run lower-affine and convert-scf-to-cf first",
        ),
    ],
)
def test_illegal_inputs_and_options_are_refused(text, pipeline, message):
    _refused(text, pipeline, message)


VECTOR_FLOOR_DIVISION = """
builtin.module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%a: vector<2xi32>, %b: vector<2xi32>, %out: memref<2xi32>) kernel {
      %c0 = arith.constant 0 : index
      %q = arith.floordivsi %a, %b : vector<2xi32>
      vector.store %q, %out[%c0] : memref<2xi32>, vector<2xi32>
      gpu.return
    }
  }
}"""


def test_a_rounded_division_of_vectors_is_refused_at_its_op():
    module = parse(VECTOR_FLOOR_DIVISION)
    pipeline = Pipeline.parse("convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}")
    before = str(module)
    with pytest.raises(
        PassError, match="lowered on scalars only, not on vector<2x"
    ) as e:
        pipeline.run(module)
    assert e.value.op is not None and e.value.op.name == "arith.floordivsi"
    assert str(module) == before, "the pass rewrote before refusing"


def test_a_mapping_that_names_no_level_is_refused():
    module = parse(_grid_block(outer="warp"))
    with pytest.raises(OpError, match="'affinec.mapping' must be one of") as info:
        Pipeline.parse("affinec-place-buffers").run(module)
    assert info.value.op is not None


def test_a_block_band_outside_a_grid_band_is_refused():
    text = """
func.func @f(%A: memref<8xf32>) {
  affine.parallel (%t) = (0) to (4) {
  } {affinec.mapping = "block"}
  func.return
}"""
    _refused(text, "affinec-place-buffers", "must be inside a grid-mapped one")


@pytest.mark.parametrize(
    ("chip", "limit"), [("sm_90", 232448), ("sm_80", 166912), ("sm_86", 101376)]
)
def test_shared_memory_beyond_the_chips_limit_is_refused(chip, limit):
    # Past 48 KiB shared buffers are dynamic shared memory; past the chip's limit
    # (sm_90: 227 KiB) a block cannot have them.
    text = """
func.func @f(%A: memref<8xf32>) {
  %z = arith.constant 0.0 : f32
  affine.parallel (%i) = (0) to (2) {
    %big = memref.alloc() : memref<65536xf32>
    affine.parallel (%t) = (0) to (4) {
      affine.store %z, %big[%t * 2] : memref<65536xf32>
    } {affinec.mapping = "block"}
  } {affinec.mapping = "grid"}
  func.return
}"""
    _refused(
        text,
        f"nvvm-attach-target{{chip={chip}}},affinec-place-buffers",
        f"262144 bytes, more than the {limit} bytes .* on {chip}",
    )


def test_a_grid_band_with_dynamic_bounds_is_refused_but_in_its_outermost_dimension():
    text = """
func.func @f(%A: memref<8xf32>, %n: index) {
  affine.parallel (%i, %j) = (0, 0) to (3, symbol(%n)) {
    affine.parallel (%t) = (0) to (4) {
    } {affinec.mapping = "block"}
  } {affinec.mapping = "grid"}
  func.return
}"""
    _refused(text, "affinec-place-buffers", "no static bound")
    # the outermost dimension takes what the block index leaves (a dynamic batch)
    module = parse(text.replace("(3, symbol(%n))", "(symbol(%n), 3)"))
    Pipeline.parse(
        "affinec-place-buffers,affinec-map-threads,affinec-convert-parallel-to-gpu"
    ).run(module)
    text = str(module)
    assert "%blocks = affine.apply affine_map<(d0) -> (d0 * 3)>(%n)" in text
    assert "blocks(%bx, %2, %3) in (%4 = %blocks," in text
    assert "%i = affine.apply affine_map<(d0) -> (d0 floordiv 3)>(%bx)" in text
    assert "%j = affine.apply affine_map<(d0) -> (d0 mod 3)>(%bx)" in text


def test_index_bitwidth_must_be_32_64_or_0():
    module = build(ConvSpec(1, 1, 3, 3, 1, 1, 1))
    with pytest.raises(PassError, match="index-bitwidth must be 32, 64 or 0"):
        Pipeline.parse("affinec-default").run(module)  # fine
        Pipeline.parse(
            "convert-gpu-to-nvvm{index-bitwidth=16 use-bare-ptr-memref-call-conv=true}"
        ).run(module)


@given(st.integers(-(2**40), 2**40), st.sampled_from(["index", "i32", "i64"]))
def test_the_lowerings_constants_are_the_ops_their_constructors_make(value, type_name):
    from xdsl.dialects import arith
    from xdsl.dialects.builtin import IndexType, IntegerAttr, i32, i64

    from affinec.ir.constants import constant, index_constant, integer_attr

    t = {"index": IndexType(), "i32": i32, "i64": i64}[type_name]
    if type_name == "i32":
        value = value % 2**31
    ours = [constant(llvm.ConstantOp, integer_attr(value, t), t)]
    theirs = [llvm.ConstantOp(IntegerAttr(value, t), t)]  # pyright: ignore
    if type_name == "index":
        ours.append(index_constant(value))
        theirs.append(arith.ConstantOp(IntegerAttr.from_index_int_value(value)))
    for op, expected in zip(ours, theirs, strict=True):
        assert type(op) is type(expected) and str(op) == str(expected)
        assert op.properties == expected.properties
        assert op.attributes == expected.attributes
        assert [r.type for r in op.results] == [r.type for r in expected.results]
        op.verify()


@pytest.mark.parametrize(
    ("op", "t", "called"),
    [
        ("math.fma %v, %v, %v", "vector<2x2xf32>", "llvm.fma.v2f32"),
        ("arith.maximumf %v, %v", "vector<2x2xf32>", "llvm.maximum.v2f32"),
        ("arith.minnumf %v, %v", "vector<2xf16>", "llvm.minnum.v2f16"),
        ("arith.maximumf %v, %v", "bf16", "llvm.maximum.bf16"),
        ("math.fma %v, %v, %v", "f16", "llvm.fma.f16"),
    ],
)
def test_intrinsics_are_called_by_their_mangled_names_row_by_row(op, t, called):
    """An intrinsic on an n-D vector is called on each row (it built an
    `llvm.extractvalue` of the unlowered vector, which did not verify); its name
    carries the type LLVM mangles into it (it said `f16` for bf16 and `fNone` for
    a vector)."""
    *shape, element = t.removeprefix("vector<").removesuffix(">").split("x")
    if shape:
        make = f"vector.broadcast %x : {element} to {t}"
        take = f"vector.extract %r[{', '.join('1' * len(shape))}] : {element} from {t}"
    else:
        make, take = f"arith.addf %x, %x : {t}", f"arith.addf %r, %r : {t}"
    memref = f"memref<4x{element}>"
    text = f"""
builtin.module attributes {{gpu.container_module}} {{
  func.func @f(%a: {memref}, %o: {memref}) {{
    %one = arith.constant 1 : index
    gpu.launch_func @k::@k blocks in (%one, %one, %one) threads in (%one, %one, %one) args(%a : {memref}, %o : {memref})
    func.return
  }}
  gpu.module @k {{
    gpu.func @k(%a: {memref}, %o: {memref}) kernel {{
      %c0 = arith.constant 0 : index
      %x = memref.load %a[%c0] : {memref}
      %v = {make}
      %r = {op} : {t}
      %e = {take}
      memref.store %e, %o[%c0] : {memref}
      gpu.return
    }}
  }}
}}
"""
    module = parse(text)
    lowered = module.clone()
    Pipeline.parse("convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}").run(
        lowered
    )
    calls = {
        o.intrin.data for o in lowered.walk() if isinstance(o, llvm.CallIntrinsicOp)
    }
    assert calls == {called}
    a = np.array([1.5, -2.0, 3.0, 0.5], storage_numpy_dtype(element))
    results = []
    for m in (module, lowered):
        out = np.zeros(4, a.dtype)
        Interpreter(m).run("f", a.copy(), out)
        results.append(out)
    assert results[0].tobytes() == results[1].tobytes() and results[0][0] != 0
