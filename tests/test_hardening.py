"""Regression cases: every class of input that once ended in a Python
traceback or a hang, each now a located error with exit code 1 (or a clean "not
supported"), in time. The cases run through `affinec-opt` and `affinec check` the
way the fuzzer (`tests/fuzzing.py`) runs its inputs: in-process, time-bounded,
tracebacks caught. Crashes the fuzzer finds are added here, named after their class.
"""

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import AffineMapAttr, FileLineColLoc, IntAttr, StringAttr
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineMap

from affinec.base.diagnostics import PassError, format_exception, verify
from affinec.base.dtypes import numpy_dtype
from affinec.base.element_types import UnsupportedType, element_size
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec, parse_spec
from affinec.dialects import affine
from affinec.driver.checking import MAX_CHECK_BYTES, MAX_CHECK_POINTS
from affinec.driver.pipeline import Pipeline
from affinec.frontend.naive import build
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.support import MAX_BUFFER_BYTES
from affinec.ir.context import make_context
from fuzzing import Case, Outcome, run_case, seeds

OUTER = OuterSpec(m=3, n=4, dtype="f16").to_text()
CONV = ConvSpec(1, 2, 5, 5, 2, 3, 3, padding=(1, 1)).to_text()
MATMUL = MatmulSpec(5, 4, 6, epilogue="relu").to_text()


def run(tmp_path, tool: str, text: str, *argv: str) -> Outcome:
    """`tool` on `text` (as `input.mlir`), as the fuzzer runs it."""
    return run_case(Case(None, text, tool, argv), tmp_path)


def assert_error(outcome: Outcome, message: str, line: int | None = None) -> None:
    """Exit code 1, no traceback, `message` in the error, located at `line`."""
    assert outcome.problem is None, outcome.report()
    assert outcome.code == 1, outcome.report()
    err = outcome.stderr
    assert message in err, outcome.report()
    if line is not None:
        located = [x for x in err.splitlines() if ": error: " in x]
        assert located and f"input.mlir:{line}:" in located[0], outcome.report()


def line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment)].count("\n") + 1


def level(name: str, spec_text: str = OUTER) -> str:
    """The default pipeline's module of `spec_text` at a fuzzer level."""
    return next(s.text for s in seeds() if s.level == name and s.spec == spec_text)


# -- semi-affine maps -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "index", ["%i * %j", "%i floordiv %j", "%i mod %j", "%i ceildiv %j"]
)
def test_semi_affine_indices_are_located_errors(tmp_path, index):
    """A product of dimensions is not even semi-affine: MLIR's parse error, at the op."""
    text = (
        "func.func @f(%A: memref<4x4xf32>) {\n"
        "  affine.for %i = 1 to 4 {\n"
        "    affine.for %j = 1 to 4 {\n"
        f"      %v = affine.load %A[{index}, %j] : memref<4x4xf32>\n"
        "    }\n  }\n  func.return\n}\n"
    )
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, "non-affine expression", line=4)


def test_a_semi_affine_map_attribute_is_a_located_error(tmp_path):
    text = "#m = affine_map<(d0, d1) -> (d0 floordiv d1)>\nfunc.func @f() {\n  func.return\n}\n"
    assert_error(run(tmp_path, "affinec-opt", text), "non-affine expression", line=1)


def test_a_pass_that_cannot_build_a_semi_affine_map_refuses_it_at_the_op():
    """Built in memory (products of dimensions do not parse): affine-loop-tile
    refuses the map at its op, by name, before composing it (where xDSL would raise
    NotImplementedError)."""
    module = build(MatmulSpec(4, 4, 4))
    load = next(op for op in module.walk() if isinstance(op, affine.LoadOp))
    m = load.map.data
    product = AffineBinaryOpExpr(AffineBinaryOpKind.Mul, m.results[0], m.results[1])
    load.properties["map"] = AffineMapAttr(
        AffineMap(m.num_dims, m.num_symbols, (product, *m.results[1:]))
    )
    load.location = FileLineColLoc(StringAttr("m.mlir"), IntAttr(7), IntAttr(5))
    with pytest.raises(PassError) as info:
        Pipeline.parse("affine-loop-tile").run(module)
    assert info.value.op is load
    message = format_exception(info.value)
    assert message.startswith("m.mlir:7:5: error: 'affine.load' op has a semi-affine")
    assert "affine-loop-tile" in message


# -- attributes our passes read -------------------------------------------------------------


@pytest.mark.parametrize("tool", ["affinec-opt", "affinec"])
def test_a_mapping_attribute_of_the_wrong_kind(tmp_path, tool):
    text = level("tiled").replace('{affinec.mapping = "grid"}', "{affinec.mapping = 3}")
    argv = ("-p", "affinec-split") if tool == "affinec-opt" else ()
    outcome = run(tmp_path, tool, text, *argv)
    assert_error(outcome, "'affinec.mapping' must be one of", line=4)


def _mapped_band_replaced(tmp_path, band: str, replacement: str):
    """The outer product's module after `affinec-map-threads` with the bounds of one
    `affine.parallel` replaced, and what the rest of its pipeline makes of it."""
    seed = next(
        s for s in seeds() if s.spec == OUTER and s.after == "affinec-map-threads"
    )
    assert f"affine.parallel {band}" in seed.text
    text = seed.text.replace(
        f"affine.parallel {band}", f"affine.parallel {replacement}", 1
    )
    return text, run(tmp_path, "affinec-opt", text, "-p", ",".join(seed.rest))


def test_a_thread_band_of_no_threads_is_refused_at_the_conversion(tmp_path):
    """Found by the fuzzer: `affine.parallel (%tx) = (0) to (0)` left a block of
    no threads, and the refusal's message failed on a name its condition had
    skipped (an internal error instead of the error). A band to a negative bound
    is refused the same way (it was told to run to a constant, which it did)."""
    for empty in ("(0) to (0)", "(0) to (-3)"):
        text, outcome = _mapped_band_replaced(
            tmp_path, "(%tx) = (0) to (12)", f"(%tx) = {empty}"
        )
        assert_error(
            outcome,
            "a thread band of no iteration: a block has 1 to 1024 threads",
            line=line_of(text, "affine.parallel (%tx)"),
        )


@pytest.mark.parametrize("empty", ["(0, 0) to (0, 1)", "(0, 0) to (1, -1)"])
def test_a_grid_band_of_no_iteration_is_refused_at_the_band(tmp_path, empty):
    """A grid of no blocks was refused at the `gpu.launch` the pass had built (a
    size of 0) or, to a negative bound, as a band not running to constants."""
    text, outcome = _mapped_band_replaced(
        tmp_path, "(%i0, %j0) = (0, 0) to (1, 1)", f"(%i0, %j0) = {empty}"
    )
    dimension = 0 if empty.endswith("(0, 1)") else 1
    assert_error(
        outcome,
        f"dimension {dimension} of the grid-mapped band has no iteration",
        line=line_of(text, "affine.parallel (%i0, %j0)"),
    )


def test_a_register_tile_over_a_band_that_never_runs_is_refused(tmp_path):
    """Found by the fuzzer: a band whose first dimension runs from 1 to 1 left no
    thread at all, and the share of each divided by zero."""
    seed = next(
        s
        for s in seeds()
        if s.after == "affinec-place-buffers"
        and s.spec.startswith("conv")
        and "affinec.workspace" in s.text
    )
    band = re.search(r"= \(0, 0, 0, 0\) to \(1, 3, 4, 4\)", seed.text)
    assert band is not None
    text = seed.text.replace(band.group(0), "= (1, 0, 0, 0) to (1, 3, 4, 4)", 1)
    outcome = run(tmp_path, "affinec-opt", text, "-p", ",".join(seed.rest))
    assert_error(
        outcome,
        "register-tile over a band of 0x3x4x4 iterations, which runs none",
        line=line_of(text, "= (1, 0, 0, 0) to (1, 3, 4, 4)"),
    )


def test_a_launch_of_a_negative_block_is_refused_at_the_launch(tmp_path):
    """Found by the fuzzer: a block of -1 threads made the shared-memory hazard
    check ask numpy for an array of negative size."""
    text = level("gpu", CONV)
    threads = re.search(r"threads\([^)]*\) in \(%\w+ = (%\w+)", text)
    assert threads is not None
    size = re.search(rf"{threads.group(1)} = arith.constant (\d+) : index", text)
    assert size is not None
    broken = text.replace(size.group(0), size.group(0).replace(size.group(1), "-1"))
    outcome = run(tmp_path, "affinec-opt", broken, "-p", "gpu-kernel-outlining")
    assert_error(
        outcome,
        "every size must be positive",
        line=line_of(broken, "gpu.launch"),
    )


def test_a_shared_alignment_that_is_no_power_of_two(tmp_path):
    """Found by the fuzzer on the wgmma route's seed: an alignment of 0 divided by
    zero in the shared-memory layout."""
    from fuzzing import WGMMA_SPEC

    text = level("cf", WGMMA_SPEC.to_text())
    marked = re.search(r"shared_alignments = array<i64: ([^>]*)>", text)
    assert marked is not None
    for bad in ("0", "48"):
        broken = text.replace(marked.group(1), marked.group(1).replace("16", bad, 1))
        outcome = run(
            tmp_path,
            "affinec-opt",
            broken,
            "-p",
            "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}",
        )
        assert_error(
            outcome,
            f"affinec.shared_alignments must be powers of two bytes, got {bad}",
            line=line_of(broken, "gpu.func @conv_kernel"),
        )


# -- what the lowering and xDSL's backend once met as a KeyError ---------------------------


def test_a_use_its_definition_does_not_dominate(tmp_path):
    """xDSL does not check dominance; the nvvm lowering met it as a KeyError."""
    text = level("cf", CONV)
    # Swap a definition with the line after it that uses it.
    lines = text.splitlines()
    k = next(
        k
        for k, x in enumerate(lines)
        if " = arith.muli " in x and x.split(" = ")[0].strip() in lines[k + 1]
    )
    lines[k], lines[k + 1] = lines[k + 1], lines[k]
    for argv in ((), ("-p", "convert-gpu-to-nvvm")):
        outcome = run(tmp_path, "affinec-opt", "\n".join(lines), *argv)
        assert_error(outcome, "does not dominate this use", line=k + 1)


UNREACHABLE = """
    %zero = arith.constant 0.000000e+00 : f32
    %c0 = arith.constant 0 : index
    cf.br ^bb3(%zero : f32)
  ^bb1:
    cf.br ^bb3(%late : f32)
  ^bb2:
    %late = arith.addf %zero, %zero : f32
    cf.br ^bb3(%late : f32)
  ^bb3(%v: f32):
    memref.store %v, %A[%c0] : memref<4xf32>
"""
"""Blocks no branch reaches, the first using a value the second defines."""


def test_unreachable_blocks_that_use_values_before_their_definition(tmp_path):
    """Valid IR for MLIR (and our verifier): unreachable code is exempt from
    dominance. The nvvm lowering met the use as a KeyError and the interpreter as
    a value used before its definition; both now leave such blocks out."""
    kernel = (
        "builtin.module attributes {gpu.container_module} {\n  gpu.module @m {\n"
        "  gpu.func @k(%A: memref<4xf32>) kernel {"
        f"{UNREACHABLE}    gpu.return\n  }}\n  }}\n}}\n"
    )
    outcome = run(
        tmp_path,
        "affinec-opt",
        kernel,
        "-p",
        "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true}",
        "-t",
        "ptx",
    )
    assert outcome.problem is None and outcome.code == 0, outcome.report()
    function = f"func.func @f(%A: memref<4xf32>) {{{UNREACHABLE}  func.return\n}}\n"
    module = parse_module(make_context(), function)
    verify(module)
    out = np.ones(4, np.float32)
    Interpreter(module).run("f", out)
    assert out[0] == 0


def test_an_op_xdsls_llvm_backend_does_not_know(tmp_path):
    text = level("llvm").replace(
        "%a32 = llvm.fpext %a_1 : f16 to f32", "%a32 = arith.extf %a_1 : f16 to f32"
    )
    for target in ("llvm", "ptx"):
        outcome = run(tmp_path, "affinec-opt", text, "-t", target)
        line = line_of(text, "arith.extf")
        assert_error(outcome, "cannot emit it as LLVM IR", line=line)


def test_a_getelementptr_of_no_index_is_refused(tmp_path):
    """Found by the fuzzer (the Hopper seed's llvm level): the emitter failed on
    `%p[]` off a global (an IndexError); MLIR's parser refuses it."""
    text = level("llvm").replace(
        "%4 = llvm.getelementptr inbounds %a[%i1] : (!llvm.ptr<1>, i32) ->",
        "%4 = llvm.getelementptr inbounds %a[] : (!llvm.ptr<1>) ->",
    )
    for target in ("mlir", "ptx"):
        outcome = run(tmp_path, "affinec-opt", text, "-t", target)
        line = line_of(text, "%a[]")
        assert_error(outcome, "expected at least one index", line=line)


@pytest.mark.parametrize(
    ("gep", "message"),
    [
        (
            "inbounds| %p[1] : (!llvm.ptr) -> !llvm.ptr, f32",
            "expected one of 'inbounds'",
        ),
        (
            "nuw|wrap %p[1] : (!llvm.ptr) -> !llvm.ptr, f32",
            "expected one of 'inbounds'",
        ),
        ("%p[1] : (!llvm.ptr) -> i32, f32", "result #0 must be LLVM pointer"),
        ("%p[1] : (!llvm.ptr) -> (), f32", "expected one result type, got 0"),
        (
            "%p[1] : (!llvm.ptr) -> (!llvm.ptr, !llvm.ptr), f32",
            "expected one result type, got 2",
        ),
    ],
)
def test_a_malformed_getelementptr_is_refused_at_its_line(tmp_path, gep, message):
    """The no-wrap flags and the result types of `llvm.getelementptr` (one result
    type of no pointer crashed the parser, two were read as one)."""
    text = (
        "llvm.func @f(%p: !llvm.ptr) {\n"
        f"  %0 = llvm.getelementptr {gep}\n"
        "  llvm.return\n}\n"
    )
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, message, line=2)


# -- targets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["x86-asm", "arm-asm", "riscv-asm", "mps", "wat", "wgsl", "csl"]
)
def test_xdsls_other_targets_are_not_supported(tmp_path, target):
    """Once an assertion in xDSL's assembly printer, a NotImplementedError, or
    nothing printed at all."""
    outcome = run(tmp_path, "affinec-opt", level("naive"), "-t", target)
    assert_error(outcome, f"target '{target}' is not supported")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("ptx{arch=sm_99}", "arch must be one of sm_80, sm_90, sm_90a, got 'sm_99'"),
        ("ptx{opt-level=7}", "opt-level must be 0, 1, 2 or 3, got 7"),
        ("ptx{bogus=1}", "target 'ptx' has no option 'bogus' (its options: arch, opt"),
        (
            "ptx{opt-level=x}",
            "target 'ptx': option 'opt-level' takes an integer, got 'x'",
        ),
        ("mlir{bogus}", "target 'mlir' has no option 'bogus'"),
        ("ptx{arch=", "error: malformed target"),
        ("llvm{arch=sm_7}", "arch must be one of"),
    ],
)
def test_bad_target_options(tmp_path, target, message):
    outcome = run(tmp_path, "affinec-opt", level("llvm"), "-t", target)
    assert_error(outcome, message)


def test_an_op_xdsl_parses_but_cannot_print(tmp_path):
    text = level("naive").replace(
        "arith.constant 0.000000e+00 : f32", "arith.constant 0.000000e+00 : f128"
    )
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, "xDSL cannot print this op", line=line_of(text, "f128"))


# -- xDSL's verifiers and parser ------------------------------------------------------------


def test_a_bare_exception_from_an_xdsl_verifier(tmp_path):
    text = (
        "func.func @f(%A: memref<4x4xf32>, %i: index) {\n"
        "  %v = memref.load %A[%i] : memref<4x4xf32>\n  func.return\n}\n"
    )
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(
        outcome, "incorrect number of indices for load, expected 2 but got 1", line=2
    )


def test_a_block_declared_twice_after_a_forward_reference(tmp_path):
    """xDSL's parser met it as a KeyError."""
    text = level("cf", CONV)
    label = next(x for x in text.splitlines() if x.strip().startswith("^bb"))
    doubled = text.replace(label, f"{label}\n{label}", 1)
    outcome = run(tmp_path, "affinec-opt", doubled)
    line = line_of(doubled, label) + 1
    assert_error(
        outcome, f"re-declaration of block '{label.strip()[1:].split('(')[0]}'", line
    )


def test_a_token_where_a_block_should_start(tmp_path):
    """xDSL's own message was ' in block definition'."""
    text = level("naive").replace("    func.return\n", "    func.return\n  = \n")
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, "expected an operation, a block label")


# -- hangs ----------------------------------------------------------------------------------


def test_an_unterminated_string_does_not_hang(tmp_path):
    """xDSL's string-literal regex backtracks exponentially on a long line."""
    text = level("llvm", CONV)
    first = text.splitlines()[0]
    cut = first[: first.index('"') + 100]
    outcome = run(tmp_path, "affinec-opt", cut + "\n" + text)
    assert_error(outcome, "End of file reached before closing string literal", 1)


@pytest.mark.parametrize("bound", ["9223372036854775807", "100000000"])
def test_a_loop_that_would_run_for_ever_is_refused(tmp_path, bound):
    """Charged to the step budget when it starts: no iteration runs."""
    text = level("naive", CONV)
    text = text.replace("affine.for %s = 0 to 3", f"affine.for %s = 0 to {bound}")
    outcome = run(tmp_path, "affinec", text)
    assert_error(outcome, "the run goes past", line=line_of(text, "affine.for %s"))


def test_a_branch_back_for_ever_is_bounded(tmp_path):
    """A cf loop whose exit test never holds: charged per backward branch."""
    text = level("cf", CONV)
    lines = text.splitlines()
    k = next(k for k, x in enumerate(lines) if "cf.cond_br" in x)
    cond = lines[k].split("cf.cond_br ")[1].split(",")[0]
    indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
    lines.insert(k, f"{indent}%never = arith.constant true")
    lines[k + 1] = lines[k + 1].replace(f"cf.cond_br {cond},", "cf.cond_br %never,")
    outcome = run(tmp_path, "affinec", "\n".join(lines))
    assert_error(outcome, "the run goes past")


# -- arithmetic -----------------------------------------------------------------------------


def test_division_by_zero_in_an_affine_map_is_refused_by_the_verifier(tmp_path):
    text = level("naive").replace("%a[%i]", "%a[%i floordiv 0]")
    outcome = run(tmp_path, "affinec-opt", text, "-p", "affinec-canonicalize")
    assert_error(outcome, "divides by 0: divisors must be positive", line=5)


def test_division_by_zero_when_checking(tmp_path):
    text = level("lowered").replace(
        "%0 = arith.constant 1 : index",
        "%0 = arith.constant 1 : index\n    %z = arith.constant 0 : index\n    %q = arith.divsi %0, %z : index",
        1,
    )
    outcome = run(tmp_path, "affinec", text)
    assert_error(outcome, "integer division by zero", line=line_of(text, "arith.divsi"))


def test_constant_folding_leaves_a_division_by_zero_alone(tmp_path):
    text = (
        "func.func @f() -> i32 {\n  %a = arith.constant 7 : i32\n"
        "  %b = arith.constant 0 : i32\n  %c = arith.divsi %a, %b : i32\n"
        "  %d = arith.remui %a, %b : i32\n  func.return %c : i32\n}\n"
    )
    outcome = run(tmp_path, "affinec-opt", text, "-p", "canonicalize,cse")
    assert outcome.problem is None and outcome.code == 0, outcome.report()


# -- types ----------------------------------------------------------------------------------


def test_types_without_a_numpy_equivalent_are_not_supported():
    from xdsl.dialects.builtin import Float80Type, FloatTF32Type, IntegerType

    for t in (FloatTF32Type(), Float80Type(), IntegerType(3)):
        with pytest.raises(UnsupportedType, match=f"{t} is not supported"):
            numpy_dtype(t)
    assert element_size(IntegerType(3)) == 1  # sizes need no numpy type


def test_a_type_without_a_numpy_equivalent_is_a_located_not_supported(tmp_path):
    """Once an `f16` turned into `bf16` (which has one now, from ml_dtypes)."""
    text = level("naive").replace("f16", "tf32").replace('dtype=tf32"', 'dtype=f16"')
    check = run(tmp_path, "affinec", text)
    assert_error(check, "tf32 is not supported", line=line_of(text, "arith.truncf"))
    ptx = run(tmp_path, "affinec-opt", text, "-p", "affinec-default", "-t", "ptx")
    assert_error(ptx, "tf32")


# -- the interpreter's errors ---------------------------------------------------------------


def test_an_index_error_in_generated_code_is_located():
    """Python's IndexError (here from `memref.dim` past the rank) is located at the
    op whose generated line raised it, like the interpreter's own errors."""
    text = (
        "func.func @f(%A: memref<4xf32>) -> index {\n"
        "  %c5 = arith.constant 5 : index\n"
        "  %d = memref.dim %A, %c5 : memref<4xf32>\n"
        "  func.return %d : index\n}\n"
    )
    module = parse_module(make_context(), text, "dim.mlir")
    verify(module)
    with pytest.raises(InterpreterError) as info:
        Interpreter(module).run("f", np.zeros(4, np.float32))
    assert format_exception(info.value).startswith(
        "dim.mlir:3:8: error: '%d = memref.dim"
    )


def test_a_cast_to_another_shape_is_refused_before_an_out_of_bounds_access():
    text = (
        "func.func @f(%A: memref<4xf32>) {\n"
        '  %c = "memref.cast"(%A) : (memref<4xf32>) -> memref<8xf32>\n'
        "  affine.for %i = 0 to 8 {\n"
        "    %v = affine.load %c[%i] : memref<8xf32>\n  }\n  func.return\n}\n"
    )
    module = parse_module(make_context(), text, "cast.mlir")
    with pytest.raises(InterpreterError, match="another shape") as info:
        Interpreter(module)
    assert format_exception(info.value).startswith("cast.mlir:2:8: error:")


# -- sizes ----------------------------------------------------------------------------------


def test_a_spec_too_large_to_check_says_how_many_bytes(tmp_path):
    text = level("naive").replace("outer m=3 n=4", "outer m=300000 n=400000")
    outcome = run(tmp_path, "affinec", text)
    assert_error(outcome, f"the limit is {MAX_CHECK_BYTES:,}")
    assert "bytes for its inputs, output and float64 reference" in outcome.stderr


def test_a_spec_with_too_much_work_to_check_says_how_much(tmp_path):
    text = level("naive", MATMUL)
    text = text.replace("matmul m=5 n=4 k=6", "matmul m=500 n=400 k=600")
    outcome = run(tmp_path, "affinec", text)
    assert_error(outcome, f"the limit is {MAX_CHECK_POINTS:,}")


def test_a_buffer_too_large_to_allocate_says_how_many_bytes(tmp_path):
    text = level("naive", CONV)
    big = "memref<100000x100000xf32>"
    text = text.replace("memref<f32>", big).replace("%acc[]", "%acc[0, 0]")
    outcome = run(tmp_path, "affinec", text)
    line = line_of(text, "memref.alloca")
    assert_error(outcome, f"over the interpreter's limit of {MAX_BUFFER_BYTES:,}", line)
    assert "needs 40,000,000,000 bytes" in outcome.stderr


@pytest.mark.parametrize(
    ("blocks", "threads", "message"),
    [
        ("%0, %0, %0", "%big, %0, %0", "a block of 2,048 threads"),
        ("%huge, %huge, %0", "%1, %0, %0", "the run goes past"),
    ],
)
def test_a_grid_too_large_to_simulate_is_refused(tmp_path, blocks, threads, message):
    text = level("llvm").replace(
        "%1 = arith.constant 12 : index",
        "%1 = arith.constant 12 : index\n    %big = arith.constant 2048 : index\n"
        "    %huge = arith.constant 1000000 : index",
    )
    text = text.replace(
        "blocks in (%0, %0, %0) threads in (%1, %0, %0)",
        f"blocks in ({blocks}) threads in ({threads})",
    )
    outcome = run(tmp_path, "affinec", text)
    assert_error(outcome, message, line=line_of(text, "gpu.launch_func"))


# -- found by the fuzzer ---------------------------------------------------------------------


@pytest.mark.parametrize("bound", ["0", "-2"])
def test_a_reduction_loop_with_no_iterations(tmp_path, bound):
    """`affine-loop-tile` divided by the empty loop's extent (ZeroDivisionError) and
    built tiles of size 0 (a `floordiv 0` xDSL could not fold)."""
    text = level("naive", CONV).replace(
        "affine.for %s = 0 to 3", f"affine.for %s = 0 to {bound}"
    )
    outcome = run(tmp_path, "affinec", text, "-p", "affinec-default")
    assert outcome.problem is None and outcome.code == 1, outcome.report()
    stages = outcome.stdout.splitlines()[3:-1]
    assert stages and all(x.endswith("bit-identical") for x in stages), outcome.stdout


# -- command-line flags ---------------------------------------------------------------------

SPEC_FLAGS = {
    "conv": ["--n", "1", "--c", "2", "--h", "5", "--w", "5", "--k", "2", "--r", "3"]
    + ["--s", "3"],
    "matmul": ["--m", "4", "--n", "4", "--k", "4"],
    "outer": ["--m", "4", "--n", "4"],
}
BAD_VALUES = ["0", "-1", "99999999999999999999999", "x", "", "1.5", "1,,2", "9" * 5000]
"""Zero, negative, huge and malformed: each fails before any GPU work."""


def with_value(flags: list[str], flag: str, value: str) -> list[str]:
    """`flags` with `flag`'s value replaced (or added), spelt `--flag=value` so that
    argparse reads a negative value as one."""
    out, skip = [], False
    for k, word in enumerate(flags):
        if skip:
            skip = False
        elif word == flag and k + 1 < len(flags):
            skip = True
        else:
            out.append(word)
    return [*out, f"{flag}={value}"]


def affinec_cases():
    for kind, flags in SPEC_FLAGS.items():
        for flag in flags[::2]:
            for command in ("gen", "compile", "run"):
                yield [command, kind], flags, flag
    conv = SPEC_FLAGS["conv"]
    for flag in ("--stride", "--pad", "--dilation"):
        yield ["gen", "conv"], conv, flag
    for flag in (
        "--tile-sizes",
        "--reduction-tile-sizes",
        "--register-tile",
        "--unroll-steps",
        "--threads-per-block",
        "--index-bitwidth",
        "--arch",
    ):
        yield ["compile", "conv"], conv, flag
    for flag in ("--repeat", "--seed"):
        yield ["run", "conv"], conv, flag
    for flag in ("--only", "--dtype", "--layout"):
        yield ["bench"], [], flag


@pytest.mark.parametrize(
    ("command", "flags", "flag"),
    list(affinec_cases()),
    ids=lambda x: " ".join(x) if isinstance(x, list) and len(x) < 3 else None,
)
def test_flag_values_end_in_one_error_line(command, flags, flag, capsys):
    """`affinec`'s flags: zero, negative, huge and malformed values end in exit code
    0 (a value the command takes) or 1 with one `error:` line, never a traceback.
    None of these values lets `run` or `bench` reach a GPU."""
    from affinec.tools.cli import main as affinec

    for value in BAD_VALUES:
        argv = [*command, *with_value(flags, flag, value)]
        code = affinec(argv)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, argv
        if command[0] in ("run", "bench") and code == 0:
            pytest.fail(f"{argv} ran")
        if code == 1:
            lines = [x for x in captured.err.splitlines() if x.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: "), (argv, lines)
        else:
            assert code == 0, (argv, code, captured.err)


def test_check_seed_and_pipeline_flags(tmp_path):
    text = level("naive")
    for argv, message in (
        (("--seed", "-1"), "must be at least 0"),
        (("--seed", "x"), "expected an integer"),
        (("-p", "affine-loop-tile{tile-sizes=0}"), "tile size 0 must be positive"),
        (("-p", "affinec-map-threads{unroll-steps=-3}"), "unroll-steps must be"),
        (("-p", "cse{"), "unbalanced brackets"),
    ):
        assert_error(run(tmp_path, "affinec", text, *argv), message)


def test_a_run_too_large_for_the_host_says_how_many_bytes(capsys):
    from affinec.tools.cli import main as affinec

    assert (
        affinec(["run", "matmul", "--m", "3000000000", "--n", "640", "--k", "64"]) == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: running matmul") and "bytes of host memory" in err


def test_an_unknown_comparison_predicate_is_a_located_error(tmp_path):
    """Fuzzer finding (llvm level, a spec string pasted over `"slt"`): xDSL's
    parser raises ValueError through Python's `enum`, whose frame is innermost; the
    error is still xDSL's about the input, so a parse error at the op."""
    text = (
        "func.func @f(%a: i32) {\n"
        '  %0 = llvm.icmp "matmul m=8 n=8 k=16" %a, %a : i32\n'
        "  func.return\n}\n"
    )
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, "is not a valid ICmpPredicateFlag", line=2)


# -- numbers past 64 bits -------------------------------------------------------------------


def test_a_coefficient_past_64_bits_in_a_thread_band(tmp_path):
    """The shared-memory check enumerates indices in 64-bit numpy arithmetic: a
    coefficient of 2^63 made it overflow (found by the fuzzer); such indices are
    bounded by intervals instead."""
    text = next(
        s.text
        for s in seeds()
        if s.spec == CONV and s.level == "mma" and s.after == "affinec-contract-fma"
    )
    assert "(d0 + d1 * 50) floordiv 49" in text
    text = text.replace(
        "(d0 + d1 * 50) floordiv 49", "(d0 + d1 * 9223372036854775808) floordiv 49", 1
    )
    outcome = run(
        tmp_path, "affinec-opt", text, "-p", "affinec-convert-parallel-to-gpu"
    )
    assert outcome.problem is None, outcome.report()
    assert outcome.code in (0, 1), outcome.report()


def test_a_grid_bound_past_64_bits(tmp_path):
    """The rest of the tensor-core route on a grid band starting at 2^63 - 1 (found
    by the fuzzer at 2^63, which the parser now refuses as MLIR's does): refused at
    the band (it runs from past its upper bound), not an overflow in the
    shared-memory check."""
    from affinec.driver.config import config_for
    from affinec.driver.pipeline_names import pipeline_text
    from affinec.driver.pipelines import default_passes

    spec = MatmulSpec(m=8, n=8, k=16, dtype="f16")
    passes = default_passes(config_for(spec))
    text = next(
        s.text
        for s in seeds()
        if s.spec == spec.to_text() and s.after.startswith("affine-loop-tile")
    )
    bad = text.replace("(%i0, %j0) = (0, 0)", "(%i0, %j0) = (9223372036854775807, 0)")
    assert bad != text
    outcome = run(tmp_path, "affinec-opt", bad, "-p", pipeline_text(passes[1:]))
    assert_error(
        outcome,
        "dimension 0 of the grid-mapped band has no iteration",
        line=line_of(bad, "(%i0, %j0) = (9223372036854775807, 0)"),
    )


def test_a_reduction_of_two_billion_steps_is_refused_not_followed(tmp_path):
    """The shared-memory check followed every iteration of the loops holding
    barriers: a reduction of 0x7FC00000 steps (found by the fuzzer) ran for minutes.
    It follows at most MAX_TRIPS and refuses past them, at the loop."""
    from affinec.transforms.gpu.shared_memory_hazards import MAX_TRIPS

    text = str(build(MatmulSpec(m=5, n=4, k=6, epilogue="relu")))
    bad = text.replace("affine.for %p = 0 to 6", "affine.for %p = 0 to 0x7FC00000")
    assert bad != text
    passes = (
        "affine-loop-tile,affinec-split,affinec-sink,affinec-canonicalize,"
        "affine-data-copy-generate{generate-dma=true},affinec-place-buffers,"
        "affinec-insert-barriers"
    )
    outcome = run(tmp_path, "affinec-opt", bad, "-p", passes)
    assert_error(
        outcome,
        f"the shared-memory check follows at most {MAX_TRIPS:,} such iterations",
        line_of(bad, "0x7FC00000"),
    )
    assert outcome.seconds < 10


def test_a_reduction_past_2_to_the_63_is_refused_not_an_overflow(tmp_path):
    """Counting the iterations the shared-memory check follows overflowed Python's
    `len(range)` on a loop from -2^63 (found by the fuzzer)."""
    text = str(build(MatmulSpec(m=5, n=4, k=6, epilogue="relu")))
    bad = text.replace(
        "affine.for %p = 0 to 6", "affine.for %p = -9223372036854775808 to 6"
    )
    passes = (
        "affine-loop-tile,affinec-split,affinec-sink,affinec-canonicalize,"
        "affine-data-copy-generate{generate-dma=true},affinec-place-buffers,"
        "affinec-insert-barriers"
    )
    outcome = run(tmp_path, "affinec-opt", bad, "-p", passes)
    assert outcome.problem is None, outcome.report()
    assert outcome.code == 1


def test_an_index_bitwidth_mark_other_than_32_or_64_is_refused(tmp_path):
    """`convert-gpu-to-nvvm` followed a mutated `affinec.index_bitwidth` of 2^32 into
    integer types of that width (a minute of allocation; found by the fuzzer)."""
    text = next(s.text for s in seeds() if s.spec == MATMUL and s.level == "cf")
    assert "affinec.index_bitwidth = 32 : i64" in text
    bad = text.replace(
        "affinec.index_bitwidth = 32 : i64", "affinec.index_bitwidth = 4294967296 : i64"
    )
    outcome = run(
        tmp_path, "affinec-opt", bad, "-p",
        "convert-gpu-to-nvvm{index-bitwidth=0 use-bare-ptr-memref-call-conv=true}",
    )  # fmt: skip
    assert_error(outcome, "affinec.index_bitwidth must be 32 or 64, got 4294967296")


# -- Hopper ---------------------------------------------------------------------------------


def _hopper(after: str) -> str:
    return next(
        s.text for s in seeds() if s.spec.startswith("hopper") and s.after == after
    )


@pytest.mark.parametrize("n", ["99999999999999", "12", "0"])
def test_a_wgmma_of_an_impossible_width_is_a_parse_error(tmp_path, n):
    text = _hopper("convert-scf-to-cf")
    first = text.index("<m = 64, n = 32, k = 16>")
    text = text[:first] + f"<m = 64, n = {n}, k = 16>" + text[first + 24 :]
    outcome = run(tmp_path, "affinec-opt", text)
    assert_error(outcome, f"a wgmma's N is one of 8, 16, ..., 256, got {n}")


def test_a_barrier_group_too_large_for_shared_memory_is_refused(tmp_path):
    text = _hopper("hopper").replace(
        "num_barriers = 2>", "num_barriers = 9223372036854775807>"
    )
    outcome = run(tmp_path, "affinec-opt", text, "-p", "convert-nvgpu-to-nvvm")
    assert_error(outcome, "a barrier group has 1 to 29056 barriers")


def test_a_full_unroll_of_too_many_copies_is_refused_before_llvm(tmp_path, capsys):
    """Found by the fuzzer: a tap loop's bound of 3 mutated to 65,536 inside two
    other unrolled loops asked LLVM for 196,608 copies of an MMA body (its -O3 then
    ran for hours). `lower-affine` and `convert-scf-to-cf` refuse the hint."""
    from affinec.tools.opt import main as affinec_opt
    from affinec.transforms.affine.unrolling import MAX_UNROLLED_COPIES

    def module(outer: int, inner: int, op: str) -> str:
        loops = {
            "affine": (
                f"affine.for %i = 0 to {outer} {{\n"
                f"    affine.for %j = 0 to {inner} {{\n"
                "      affine.store %x, %A[%j] : memref<8xf32>\n"
                "    } {affinec.unroll}\n  } {affinec.unroll}"
            ),
            "scf": (
                f"%c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
                f"  %n = arith.constant {outer * inner} : index\n"
                "  scf.for %i = %c0 to %n step %c1 {\n"
                "    memref.store %x, %A[%c0] : memref<8xf32>\n  } {affinec.unroll}"
            ),
        }[op]
        return (
            "func.func @f(%A: memref<8xf32>, %x: f32) {\n  "
            + loops
            + "\n  func.return\n}\n"
        )

    for op, pipeline in (("affine", "lower-affine"), ("scf", "convert-scf-to-cf")):
        path = tmp_path / f"{op}.mlir"
        path.write_text(module(8, MAX_UNROLLED_COPIES // 8, op))  # just allowed
        assert affinec_opt([str(path), "-p", pipeline]) == 0
        capsys.readouterr()
        path.write_text(module(8, MAX_UNROLLED_COPIES // 8 + 1, op))
        assert affinec_opt([str(path), "-p", pipeline]) == 1
        err = capsys.readouterr().err
        assert f"{path}:" in err and "copies of this loop's body" in err, err


# The Python API: a wrong argument is a TypeError or ValueError that names it, not
# an AttributeError from deep inside, nor a knob quietly read as something else.


@pytest.mark.parametrize(
    ("knobs", "error", "message"),
    [
        ({"tile_sizes": "1,2"}, TypeError, "tile-sizes takes a tuple of integers"),
        ({"stages": "2"}, TypeError, "stages takes an integer, got '2'"),
        ({"stages": 2.5}, TypeError, "stages takes an integer, got 2.5"),
        ({"mma": 1}, TypeError, "mma takes True or False, got 1"),
        ({"wgmma_schedule": 3}, TypeError, "wgmma-schedule takes a string"),
        ({"stages": 0}, ValueError, "stages must be 1 or more, got 0"),
        ({"pad_channels": -4}, ValueError, "pad-channels must be 0 or more"),
    ],
)
def test_a_knob_of_the_wrong_type_or_range_is_refused(knobs, error, message):
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import KernelConfig

    with pytest.raises(error, match=re.escape(message)):
        KernelConfig(**knobs)
    with pytest.raises(error, match=re.escape(message)):
        compile_to_ptx(ConvSpec(1, 2, 5, 5, 2, 3, 3), **knobs)


def test_numpys_integers_are_knobs_as_pythons_are():
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import KernelConfig

    config = KernelConfig(tile_sizes=(np.int64(1), 2, 2, 2), stages=np.int32(1))
    assert config == KernelConfig(tile_sizes=(1, 2, 2, 2))
    assert type(config.stages) is int and type(config.tile_sizes[0]) is int
    spec = ConvSpec(1, 2, 5, 5, 2, 3, 3)
    assert (
        compile_to_ptx(spec, config).ptx
        == compile_to_ptx(spec, tile_sizes=(1, 2, 2, 2)).ptx
    )


@pytest.mark.parametrize("given", [None, CONV, 3])
def test_what_is_not_a_spec_is_refused_by_name(given):
    import affinec
    from affinec.driver.compiler import compile_to_ptx

    kind = type(given).__name__
    with pytest.raises(TypeError, match=f"expected a spec .* got {kind}"):
        build(given)
    with pytest.raises(TypeError, match=f"or a module of its naive IR, got {kind}"):
        compile_to_ptx(given)
    with pytest.raises(TypeError, match=f"or a module of its naive IR, got {kind}"):
        affinec.compile(given, arch="sm_80")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Pipeline("affine-loop-tile"), "Pipeline.parse(text) reads"),
        (
            lambda: Pipeline(["affine-loop-tile"]),
            "pass #0 of the pipeline is not a pass: a str",
        ),
        (lambda: Pipeline(None), "Pipeline takes a list of passes, got NoneType"),
        (
            lambda: Pipeline([]).run("module {}"),
            "expected a module (ModuleOp), got str",
        ),
        (lambda: Interpreter(None), "expected a module (ModuleOp), got NoneType"),
        (
            lambda: _compile(config={"stages": 2}),
            "config takes a KernelConfig, got dict",
        ),
        (lambda: _compile(pipeline=5), "Pipeline takes a list of passes, got int"),
        (lambda: parse_spec(None), "expected the text of a spec, got NoneType"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_named(call, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        call()


def test_llvms_optimisation_level_is_one_it_has():
    from affinec.backend.emitter import EmitterError

    with pytest.raises(EmitterError, match=re.escape("opt-level must be 0, 1, 2 or 3")):
        _compile(opt_level=7)


def _compile(**options):
    from affinec.driver.compiler import compile_to_ptx

    return compile_to_ptx(ConvSpec(1, 2, 5, 5, 2, 3, 3), **options)
