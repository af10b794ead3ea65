"""affinec against a real mlir-opt 22: mlir-opt reads the IR affinec prints (custom
and generic form) as the same IR, affinec reads what mlir-opt prints, and the passes
named after MLIR's compute what MLIR's compute.

Every module goes out in both forms and comes back from mlir-opt in both forms
(`same_ir`: parsed by affinec, compared as anonymous generic IR). Skipped where
mlir-opt 22 is absent (tests/mlir_opt.py says how to get it); `.ci/run` installs it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest
from mlir_opt import (
    MlirOptError,
    mlir_opt,
    needs_mlir_opt,
    parse,
    printed,
    read_back_differently,
    same_ir,
)
from test_mlir_fidelity import (
    _INVALID,
    AFFINE_OPS,
    GPU_OPS,
    MORE_GPU_OPS,
    _in_function,
)
from xdsl.utils.exceptions import ParseError

from affinec import ConvSpec, build
from affinec.base.diagnostics import verify
from affinec.driver.config import config_for
from affinec.driver.kernel_config import UNPROMOTED
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.interpreter import Interpreter

pytestmark = needs_mlir_opt

FILECHECK = Path(__file__).parent / "filecheck"


@functools.cache
def _levels(spec: ConvSpec | None = None) -> list[tuple[str, str]]:
    """(pass, IR after it) for every level of the default pipeline, naive first:
    with the default configuration, or `config_for`'s of `spec`."""
    module = build(spec or ConvSpec(1, 2, 4, 4, 2, 3, 3, padding=1))
    levels = [("naive", printed(module))]

    def keep(p, m, seconds) -> None:
        levels.append((p.name, printed(m)))

    passes = default_passes() if spec is None else default_passes(config_for(spec))
    Pipeline(passes).run(module, callback=keep)
    return levels


LLVM_LEVEL = "convert-gpu-to-nvvm"


def _uses_nvvm(text: str) -> bool:
    return re.search(r"\bnvvm\.[a-z]", text) is not None


def test_mlir_opt_reads_every_level_of_the_default_pipeline_as_the_same_ir():
    """Every level up to the one where nvvm ops appear (see the next test)."""
    levels = [(n, t) for n, t in _levels() if n != LLVM_LEVEL and not _uses_nvvm(t)]
    assert len(levels) > 10
    differ = read_back_differently([text for _, text in levels])
    assert [levels[k][0] for k in differ] == []


@pytest.mark.parametrize("dynamic_batch", [False, True])
def test_mlir_opt_reads_every_level_of_the_tensor_core_route_as_the_same_ir(
    dynamic_batch,
):
    """config_for's tensor-core route (its copies' maps divide and take remainders
    MLIR simplifies as it reads them), and a kernel of any batch: `memref<?x...>`,
    the batch a symbol of the band, the grid a function of it."""
    spec = ConvSpec(
        2, 16, 4, 4, 16, 3, 3, padding=1, layout="nhwc", filter_layout="rsck",
        dtype="f16", dynamic_batch=dynamic_batch,
    )  # fmt: skip
    levels = [(n, t) for n, t in _levels(spec) if n != LLVM_LEVEL and not _uses_nvvm(t)]
    assert len(levels) > 10
    assert ("to (symbol(%batch), 4, 4, 16)" in levels[0][1]) == dynamic_batch
    differ = read_back_differently([text for _, text in levels])
    assert [levels[k][0] for k in differ] == []


DIVISIONS = [
    "(d0 + d1 * 128) floordiv 32 mod 3",
    "(d0 * 128) floordiv 64",
    "(d0 * 128) mod 64",
    "(d0 + d1 * 64) mod 32",
    "(d0 * 64 + d1) mod 32",
    "(d0 mod 64) mod 32",
    "(d0 mod 48) mod 32",
    "(d0 * 6) ceildiv 3",
    "(d0 + d1 * 6) ceildiv 3",
    "(d0 + 4) floordiv 2",
    "(d0 * 4 + d1 * 8) floordiv -2",
    "((d0 floordiv 4) * 8) mod 16",
    "d0 floordiv 1 + d1 ceildiv 1 + (d0 + 3) mod 1",
]


def test_mlir_opt_reads_simplified_divisions_as_affinec_does():
    """MLIR simplifies a division by a constant as it builds it; so does affinec's
    parser (and its printer prints that form)."""
    texts = [
        f"func.func @f(%a: index, %b: index) {{\n  %0 = affine.apply "
        f"affine_map<(d0, d1) -> ({e})>(%a, %b)\n  return\n}}"
        for e in DIVISIONS
    ]
    assert read_back_differently(texts) == []


@pytest.mark.xfail(
    strict=True,
    raises=(MlirOptError, ParseError),
    reason="affinec's nvvm.cp.async (dialects/nvvm.py) writes its cache modifier as "
    "#nvvm<load_cache_modifier ca>, which mlir-opt 22 does not read, and does not "
    "read mlir-opt's",
)
def test_mlir_opt_reads_the_levels_with_nvvm_ops_as_the_same_ir():
    levels = [t for n, t in _levels() if n != LLVM_LEVEL and _uses_nvvm(t)]
    assert levels
    assert read_back_differently(levels) == []


def test_mlir_opt_reads_the_llvm_level_in_custom_form():
    """At the llvm + nvvm level, the custom form (xDSL's generic getelementptr is
    not MLIR 22's: see the next test)."""
    (text,) = [t for name, t in _levels() if name == LLVM_LEVEL]
    theirs = mlir_opt(text, "--allow-unregistered-dialect")
    assert same_ir(text, theirs, allow_unregistered=True)


@pytest.mark.xfail(
    strict=True,
    raises=MlirOptError,
    reason="the level's nvvm.cp.async writes its cache modifier as mlir-opt 22 does "
    "not read it (as the levels with nvvm ops above)",
)
def test_mlir_opt_reads_the_llvm_level_in_generic_form():
    (text,) = [t for name, t in _levels() if name == LLVM_LEVEL]
    ours = printed(parse(text, allow_unregistered=True), generic=True)
    theirs = mlir_opt(ours, "--allow-unregistered-dialect", "--mlir-print-op-generic")
    assert same_ir(ours, theirs, allow_unregistered=True)


def test_mlir_opt_reads_an_llvm_level_without_async_copies_in_generic_form():
    """The walking skeleton's route (no shared memory, so no `nvvm.cp.async`): its
    `getelementptr inbounds` is MLIR 22's `noWrapFlags = 3` both ways."""
    module = build(ConvSpec(1, 2, 4, 4, 2, 3, 3, padding=1))
    Pipeline(default_passes(UNPROMOTED)).run(module)
    text = printed(module)
    assert "getelementptr inbounds" in text
    assert read_back_differently([text]) == []


GEP_FLAGS = """
llvm.func @f(%p: !llvm.ptr<1>, %i: i64) {
  %0 = llvm.getelementptr %p[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
  %1 = llvm.getelementptr inbounds %p[%i] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
  %2 = llvm.getelementptr nuw %p[2] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
  %3 = llvm.getelementptr nusw %p[3] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f16
  %4 = llvm.getelementptr inbounds|nuw %p[%i] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i8
  %5 = llvm.getelementptr nusw|nuw %p[4] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
  llvm.return
}"""


def test_mlir_opt_reads_a_getelementptrs_no_wrap_flags_as_affinec_does():
    assert read_back_differently([GEP_FLAGS]) == []


def _chunks() -> list[tuple[str, str]]:
    """Every chunk of every FileCheck input that affinec parses and verifies (error
    tests' chunks left out), with a name."""
    found = []
    for path in sorted(FILECHECK.rglob("*.mlir")):
        if "Output" in path.relative_to(FILECHECK).parts:
            continue  # lit's own files (it may be writing them as this runs)
        for k, chunk in enumerate(path.read_text().split("// -----")):
            try:
                verify(parse(chunk, allow_unregistered=True))
            except Exception:
                continue
            found.append((f"{path.relative_to(FILECHECK)}#{k}", chunk))
    return found


def test_mlir_opt_reads_our_filecheck_inputs_as_the_same_ir():
    chunks = _chunks()
    assert len(chunks) > 10
    differ = read_back_differently([text for _, text in chunks])
    assert [chunks[k][0] for k in differ] == []


SEMI_AFFINE = """
func.func @f(%A: memref<?xf32>, %n: index, %m: index) {
  affine.for %i = 0 to %n {
    %v = affine.load %A[%i mod symbol(%n)] : memref<?xf32>
    %w = affine.load %A[%i * symbol(%n) + symbol(%m) floordiv 2] : memref<?xf32>
    %a = affine.min affine_map<(d0)[s0, s1] -> (d0 ceildiv (s0 * 2), (d0 + 1) * s1, s0 * s1 - d0, -(d0 * s0) mod (s1 + 3))>(%i)[%n, %m]
    affine.if affine_set<(d0)[s0] : (d0 * s0 - 4 >= 0, d0 floordiv s0 == 0)>(%i)[%n] {
    }
  }
  func.return
}"""


def test_mlir_opt_reads_semi_affine_maps_and_the_affine_and_gpu_ops_as_the_same_ir():
    """Semi-affine maps, MLIR's affine and gpu ops (async and cluster launches,
    launch_func with i32/i64 sizes, targets, shuffles, reductions, subgroup ids)."""
    assert read_back_differently([SEMI_AFFINE, AFFINE_OPS, GPU_OPS]) == []


def test_mlir_opt_reads_the_other_gpu_ops_as_the_same_ir():
    """Binaries and their objects, the host's memory ops, rotate, broadcast,
    warp_execute_on_lane_0, printf."""
    assert read_back_differently([MORE_GPU_OPS]) == []


GLOBALS = """
memref.global "private" constant @c : memref<2xf32> = dense<[1.0, 2.0]> {alignment = 64 : i64}
memref.global @z : memref<3xf16> = uninitialized
memref.global "private" @y : memref<4xi32>
memref.global "private" @s : memref<f32> = dense<0.0>
func.func @f() -> memref<2xf32> {
  %0 = memref.get_global @c : memref<2xf32>
  return %0 : memref<2xf32>
}"""


def test_mlir_opt_reads_memref_globals_as_the_same_ir():
    """`memref.global` in MLIR's custom form: visibility, constant, an initial
    value, uninitialized, a declaration."""
    assert read_back_differently([GLOBALS]) == []


def test_mlir_opt_meets_the_expected_errors_affinec_meets():
    """Every case of tests/filecheck/mlir/mlir_wording.mlir (which lit runs through
    affinec-opt --verify-diagnostics) is met by mlir-opt as well: the messages are
    MLIR's own."""
    text = (FILECHECK / "mlir" / "mlir_wording.mlir").read_text()
    mlir_opt(text, "--split-input-file", "--verify-diagnostics")


@pytest.mark.parametrize(("body", "op", "message"), _INVALID)
def test_mlir_opt_refuses_what_affinec_refuses(body, op, message):
    with pytest.raises(MlirOptError) as info:
        mlir_opt(_in_function(body).replace("func.return", "return"))
    assert message in str(info.value)


# -- passes named after MLIR's compute what MLIR's compute -------------------------------

LOWER_AFFINE = """
func.func @f(%x: index, %n: index) -> (index, index, index, index, index) {
  %a = affine.apply affine_map<(d0)[s0] -> (d0 mod s0 + (d0 - 7) floordiv 3)>(%x)[%n]
  %b = affine.min affine_map<(d0)[s0] -> (d0 ceildiv s0, 8 - d0, s0 * 2)>(%x)[%n]
  %c = affine.max affine_map<(d0) -> (d0 * 5 mod 7, -d0)>(%x)
  %d:3 = affine.delinearize_index %x into (%n, 3) : index, index, index
  %l = affine.linearize_index [%d#1, %d#2] by (%n, 3) : index
  %s = affine.for %i = max affine_map<(d0) -> (0, d0 - 5)>(%x) to min affine_map<(d0)[s0] -> (9, d0 + s0)>(%x)[%n] step 2 iter_args(%acc = %a) -> (index) {
    %t = affine.if affine_set<(d0)[s0] : (d0 - s0 >= 0, d0 mod 3 == 0)>(%i)[%n] -> index {
      %u = affine.apply affine_map<(d0, d1) -> (d0 + d1)>(%acc, %i)
      affine.yield %u : index
    } else {
      affine.yield %acc : index
    }
    affine.yield %t : index
  }
  func.return %b, %c, %d#0, %l, %s : index, index, index, index, index
}"""


def _results(text: str, args) -> list[tuple[int, ...]]:
    run = Interpreter(parse(text))
    return [tuple(int(v) for v in run.call("f", *a)) for a in args]


def test_lower_affine_computes_what_mlirs_computes():
    """Both lowerings, interpreted by affinec at negative and positive points (floor
    semantics), positive symbols (as MLIR assumes for semi-affine divisors)."""
    mlir_text = LOWER_AFFINE.replace("func.return", "return")
    theirs = mlir_opt(mlir_text, "--lower-affine")
    ours = parse(LOWER_AFFINE)
    Pipeline.parse("lower-affine").run(ours)
    args = [(x, n) for x in range(-12, 13) for n in (1, 2, 3, 7)]
    assert _results(str(ours), args) == _results(theirs, args)


NORMALIZE = """
func.func @f(%A: memref<64xf32>, %m: index) {
  affine.for %i = 2 to 30 step 3 {
    %a = affine.load %A[%i] : memref<64xf32>
    %b = arith.addf %a, %a : f32
    affine.store %b, %A[%i + 1] : memref<64xf32>
  }
  affine.parallel (%i, %j) = (1, 2) to (9, 20) step (2, 3) {
    %a = affine.load %A[%i + %j] : memref<64xf32>
    affine.store %a, %A[%i * 3 + %j] : memref<64xf32>
  }
  affine.for %i = %m to 30 {
    %a = affine.load %A[%i + 1] : memref<64xf32>
    affine.store %a, %A[%i] : memref<64xf32>
  }
  func.return
}"""


def _memory_after(text: str, m: int) -> np.ndarray:
    A = np.arange(64, dtype=np.float32) * 0.5
    Interpreter(parse(text)).call("f", A, m)
    return A


def test_affine_loop_normalize_computes_what_mlirs_computes():
    theirs = mlir_opt(
        NORMALIZE.replace("func.return", "return"), "--affine-loop-normalize"
    )
    ours = parse(NORMALIZE)
    Pipeline.parse("affine-loop-normalize").run(ours)
    assert not re.search(r"step [2-9]", str(ours))
    for m in (0, 5, 29):
        assert np.array_equal(_memory_after(str(ours), m), _memory_after(theirs, m))


TILING = {
    "matmul": """
func.func @f(%A: memref<40x50xf32>, %B: memref<50x30xf32>, %C: memref<40x30xf32>) {
  affine.for %i = 0 to 40 {
    affine.for %j = 0 to 30 {
      affine.for %k = 0 to 50 {
        %a = affine.load %A[%i, %k] : memref<40x50xf32>
        %b = affine.load %B[%k, %j] : memref<50x30xf32>
        %c = affine.load %C[%i, %j] : memref<40x30xf32>
        %p = arith.mulf %a, %b : f32
        %s = arith.addf %c, %p : f32
        affine.store %s, %C[%i, %j] : memref<40x30xf32>
      }
    }
  }
  func.return
}""",
    "symbolic": """
func.func @f(%A: memref<?x100xf32>, %n: index) {
  affine.for %i = 1 to %n step 2 {
    affine.for %j = affine_map<()[s0] -> (s0)>()[%n] to affine_map<()[s0] -> (s0 + 50)>()[%n] {
      %a = affine.load %A[%i, %j - symbol(%n)] : memref<?x100xf32>
      affine.store %a, %A[%i, %j - symbol(%n)] : memref<?x100xf32>
    }
  }
  func.return
}""",
    "small": """
func.func @f(%A: memref<8x3xf32>) {
  affine.for %i = 0 to 8 {
    affine.for %j = 0 to 3 {
      %a = affine.load %A[%i, %j] : memref<8x3xf32>
      affine.store %a, %A[%i, %j] : memref<8x3xf32>
    }
  }
  func.return
}""",
}


@pytest.mark.parametrize("name", list(TILING))
@pytest.mark.parametrize(
    "options",
    ["", "tile-size=4", "tile-sizes=8,2", "cache-size=1", "tile-size=16 separate"],
)
def test_affine_loop_tile_tiles_affine_for_bands_as_mlir(name, options):
    text = TILING[name]
    flag = f"--affine-loop-tile={options}" if options else "--affine-loop-tile"
    theirs = mlir_opt(text.replace("func.return", "return"), flag)
    ours = parse(text)
    pipeline = f"affine-loop-tile{{{options}}}" if options else "affine-loop-tile"
    Pipeline.parse(pipeline).run(ours)
    assert same_ir(str(ours), theirs)


OUTLINE = """
func.func @host(%A: memref<64xf32>, %x: f32) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %t0 = gpu.wait async
  %t = gpu.launch async [%t0] blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) workgroup(%w : memref<64xf32, 3>) private(%p : memref<1xf32, 5>) {
    %v = memref.load %A[%tx] : memref<64xf32>
    %m = arith.mulf %v, %x : f32
    memref.store %m, %w[%tx] : memref<64xf32, 3>
    gpu.barrier
    %u = memref.load %w[%tx] : memref<64xf32, 3>
    memref.store %u, %A[%tx] : memref<64xf32>
    gpu.terminator
  }
  gpu.wait [%t]
  func.return
}"""


def test_gpu_kernel_outlining_makes_what_mlir_verifies():
    """MLIR's verifier checks each gpu.launch_func against its kernel (a gpu.kernel,
    the operands' number and types); the outlined async launch keeps its tokens and
    the kernel its workgroup and private attributions, as MLIR's pass outlines."""
    ours = parse(OUTLINE)
    Pipeline.parse("gpu-kernel-outlining").run(ours)
    text = str(ours)
    theirs = mlir_opt(
        OUTLINE.replace("func.return", "return"), "--gpu-kernel-outlining"
    )
    assert same_ir(text, mlir_opt(text))
    for piece in ("launch_func async [", "workgroup(", "private(", " kernel"):
        assert piece in text and piece in theirs, piece


SCF = """
func.func @f(%n: index, %x: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (index) {
    %odd = arith.remui %i, %c3 : index
    %c = arith.cmpi eq, %odd, %c1 : index
    %s = scf.if %c -> (index) {
      %a = arith.addi %acc, %i : index
      scf.yield %a : index
    } else {
      %b = arith.muli %acc, %c3 : index
      scf.yield %b : index
    }
    scf.yield %s : index
  }
  func.return %r : index
}"""


def test_convert_scf_to_cf_computes_what_mlirs_computes():
    theirs = mlir_opt(SCF.replace("func.return", "return"), "--convert-scf-to-cf")
    ours = parse(SCF)
    Pipeline.parse("convert-scf-to-cf").run(ours)
    assert not any(op.dialect_name() == "scf" for op in ours.walk())
    args = [(n, x) for n in range(0, 7) for x in range(-2, 4)]
    assert _results(str(ours), args) == _results(theirs, args)
