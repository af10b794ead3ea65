"""MLIR's own tests, read as MLIR reads them: what mlir-opt 22 accepts is accepted
and printed back, what it refuses is refused in its words (`--verify-diagnostics`
meets the `expected-error` lines written for mlir-opt), and a pass refuses what it
does not lower instead of leaving it in place."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlir_opt import MlirOptError, mlir_opt, needs_mlir_opt, same_ir

from affinec.base.diagnostics import format_exception, verify
from affinec.base.locating_parser import parse_module
from affinec.driver.pipeline import Pipeline
from affinec.ir.context import make_context
from affinec.tools.opt import main as affinec_opt

FILECHECK = Path(__file__).parent / "filecheck"
WORDING = FILECHECK / "mlir" / "nvgpu_linalg_wording.mlir"


def _opt(tmp_path: Path, text: str, *flags: str) -> tuple[int, str, str]:
    """affinec-opt on `text`: exit code, stdout, stderr."""
    import contextlib
    import io

    path = tmp_path / "input.mlir"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = affinec_opt([str(path), *flags])
    return code, out.getvalue(), err.getvalue()


# -- gpu.module's targets ---------------------------------------------------------------

TWO_TARGETS = """\
gpu.module @both [#nvvm.target, #rocdl.target<chip = "gfx90a">] {
  gpu.func @kernel(%x: f32) kernel {
    gpu.return
  }
}
gpu.module @amd [#rocdl.target<O = 1, chip = "gfx942", abi = "500", flags = {unsafe_math, fast}, link = ["lib.bc"]>] {
}
gpu.module @defaults [#rocdl.target, #rocdl.target<flags = {}>] {
}
"""


def test_a_gpu_module_for_two_vendors_round_trips(tmp_path):
    code, out, err = _opt(tmp_path, TWO_TARGETS)
    assert (code, err) == (0, "")
    assert 'gpu.module @both [#nvvm.target, #rocdl.target<chip = "gfx90a">] {' in out
    # MLIR's order of options, its sorted flags, its defaults left out
    assert (
        '[#rocdl.target<O = 1, chip = "gfx942", abi = "500", flags = {fast, '
        'unsafe_math}, link = ["lib.bc"]>]' in out
    )
    assert "[#rocdl.target, #rocdl.target<flags = {}>] {\n  }" in out
    assert "^bb0" not in out  # an empty module prints as MLIR prints it
    code, again, _ = _opt(tmp_path, out)
    assert (code, again) == (0, out)
    code, generic, _ = _opt(tmp_path, out, "--print-op-generic")
    assert code == 0
    assert _opt(tmp_path, generic)[1] == out


def test_a_rocdl_target_option_twice_is_refused(tmp_path):
    code, _, err = _opt(
        tmp_path, 'gpu.module @m [#rocdl.target<chip = "a", chip = "b">] {\n}\n'
    )
    assert code == 1
    assert "duplicate or unknown struct parameter name: chip" in err
    assert err.startswith(f"{tmp_path / 'input.mlir'}:1:42: error:")


def test_a_target_that_is_no_target_is_still_refused(tmp_path):
    code, _, err = _opt(tmp_path, "gpu.module @m [1 : i32] {\n}\n")
    assert code == 1
    assert "attribute 'targets' failed to satisfy constraint" in err


@needs_mlir_opt
def test_mlir_opt_reads_the_two_vendor_module_as_the_same_ir(tmp_path):
    ours = _opt(tmp_path, TWO_TARGETS)[1]
    theirs = mlir_opt(TWO_TARGETS)
    assert same_ir(ours, theirs)
    assert same_ir(mlir_opt(ours, "--mlir-print-op-generic"), ours)


# -- invalid IR refused in MLIR's words -------------------------------------------------


def test_affinec_meets_the_expected_errors():
    """The cases of the wording file, each refused with the text mlir-opt gives."""
    assert (
        affinec_opt([str(WORDING), "--split-input-file", "--verify-diagnostics"]) == 0
    )


@needs_mlir_opt
def test_mlir_opt_meets_the_same_expected_errors():
    mlir_opt(WORDING.read_text(), "--split-input-file", "--verify-diagnostics")


@pytest.mark.parametrize(
    ("ir", "message"),
    [
        (
            "linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, "
            "strides = dense<1.0> : tensor<2xf32>} ins(%x, %w : memref<1x8x8x3xf32>, "
            "memref<3x3x3x4xf32>) outs(%y : memref<1x6x6x4xf32>)",
            "attribute 'strides' failed to satisfy constraint: 64-bit signless int "
            "elements attribute of shape [2]",
        ),
        (
            "%d = nvgpu.tma.create.descriptor %g box[%c, %c] : memref<*xf16> -> "
            "<tensor = memref<128x128xf16, 3>, swizzle = swizzle_128b, l2promo = "
            "none, oob = zero, interleave = none>",
            "the tensormap descriptor must have last dimension of 128 bytes but it "
            "is 256 bytes",
        ),
        (
            "%d = nvgpu.tma.create.descriptor %g box[%c, %c] : memref<*xf16> -> "
            "<tensor = memref<128x64xf16, 3>, swizzle = swizzle_256b, l2promo = "
            "none, oob = zero, interleave = none>",
            "expected ::mlir::nvgpu::TensorMapSwizzleKind to be one of: none, "
            "swizzle_32b, swizzle_64b, swizzle_128b",
        ),
    ],
    ids=["float-strides", "swizzle-span", "swizzle-name"],
)
def test_invalid_ir_accepted_before_is_refused_as_mlir_refuses_it(ir, message):
    text = (
        "func.func @f(%x: memref<1x8x8x3xf32>, %w: memref<3x3x3x4xf32>, "
        "%y: memref<1x6x6x4xf32>, %g: memref<*xf16>, %c: index) {\n"
        f"  {ir}\n  func.return\n}}\n"
    )
    with pytest.raises(Exception) as info:  # noqa: B017 (a parse or verify error)
        verify(parse_module(make_context(), text, "f.mlir"))
    located = format_exception(info.value, {"f.mlir": text})
    assert located.startswith("f.mlir:2:"), located
    assert message in located
    if (mlir := _mlir_error(text)) is not None:
        assert message in mlir


def _mlir_error(text: str) -> str | None:
    """mlir-opt's error for `text`, where mlir-opt 22 is installed."""
    from mlir_opt import MLIR_OPT

    if MLIR_OPT is None:
        return None
    with pytest.raises(MlirOptError) as info:
        mlir_opt(text.replace("func.return", "return"))
    return str(info.value)


# -- affinec-lower-linalg refuses the ops it does not lower -----------------------------

CONV = """\
func.func @conv(%x: memref<1x8x8x3xf32>, %w: memref<3x3x3x4xf32>, %y: memref<1x6x6x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<1x6x6x4xf32>)
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : memref<1x8x8x3xf32>, memref<3x3x3x4xf32>) outs(%y : memref<1x6x6x4xf32>)
  func.return
}
"""


@pytest.mark.parametrize(
    ("text", "line", "op"),
    [
        (
            "func.func @pool(%x: memref<1x3x8x8xf32>, %w: memref<2x2xf32>, "
            "%y: memref<1x3x7x7xf32>) {\n  linalg.pooling_nchw_max {dilations = "
            "dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, "
            "%w : memref<1x3x8x8xf32>, memref<2x2xf32>) outs(%y : "
            "memref<1x3x7x7xf32>)\n  func.return\n}\n",
            2,
            "linalg.pooling_nchw_max",
        ),
        (
            CONV + "func.func @relu(%y: memref<4xf32>, %z: memref<4xf32>) {\n"
            "  linalg.add ins(%y, %y : memref<4xf32>, memref<4xf32>) outs(%z : "
            "memref<4xf32>)\n  func.return\n}\n",
            8,
            "linalg.add",
        ),
        (
            CONV + "func.func @zero(%z: memref<4xf32>) {\n"
            "  %zero = arith.constant 0.0 : f32\n"
            "  linalg.fill ins(%zero : f32) outs(%z : memref<4xf32>)\n"
            "  func.return\n}\n",
            9,
            "linalg.fill",
        ),
    ],
    ids=["pooling", "elementwise-beside-a-conv", "fill-elsewhere"],
)
def test_lower_linalg_refuses_an_op_it_does_not_lower(tmp_path, text, line, op):
    code, out, err = _opt(tmp_path, text, "-p", "affinec-lower-linalg")
    assert code == 1 and out == ""
    assert err.startswith(f"{tmp_path / 'input.mlir'}:{line}:3: error: '{op}' op ")
    assert "is not an op affinec-lower-linalg lowers; it lowers " in err
    assert "linalg.conv_2d_nhwc_hwcf" in err.split("lowers; ")[1]


def test_lower_linalg_still_lowers_its_ops():
    module = parse_module(make_context(), CONV)
    Pipeline.parse("affinec-lower-linalg").run(module)
    assert not [o for o in module.walk() if o.dialect_name() == "linalg"]


# -- what was still open ------------------------------------------------------------------

SUBVIEW_SYMBOL = """\
func.func @valid_symbols(%a: index, %b: index, %n: index) {
  %c1 = arith.constant 1 : index
  %c0 = arith.constant 0 : index
  %m = memref.alloc(%a, %b) : memref<?x?xf32>
  affine.for %i = 0 to %n step 768 {
    %d1 = memref.dim %m, %c1 : memref<?x?xf32>
    affine.for %j = 0 to %d1 step 264 {
      %d0 = memref.dim %m, %c0 : memref<?x?xf32>
      %v = memref.subview %m[%c0, %c0][%d0, %j][%c1, %c1] : memref<?x?xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
      %s = memref.dim %v, DIMENSION : memref<?x?xf32, strided<[?, ?], offset: ?>>
      affine.for %k = 0 to %s step 768 {
      }
    }
  }
  func.return
}
"""


def test_a_subview_size_that_is_a_symbol_gives_a_symbol(tmp_path):
    """`memref.dim` of a subview along a size that is a symbol (the dim of a
    memref allocated at the top) is a symbol, as MLIR has it; along a size that
    is a loop's induction variable it is not."""
    code, out, err = _opt(tmp_path, SUBVIEW_SYMBOL.replace("DIMENSION", "%c0"))
    assert (code, err) == (0, "")
    assert "affine.for %k = 0 to %s step 768 {" in out
    bound_by_j = SUBVIEW_SYMBOL.replace("DIMENSION", "%c1")
    code, _, err = _opt(tmp_path, bound_by_j)
    assert code == 1
    assert ":11:7: error: 'affine.for' op operand cannot be used as a symbol" in err
    if (theirs := _mlir_error(bound_by_j)) is not None:
        assert "operand cannot be used as a symbol" in theirs
        mlir_opt(SUBVIEW_SYMBOL.replace("DIMENSION", "%c0"))


PREFETCH = """\
func.func @prefetch(%A: memref<16x64xf32>, %B: memref<16x64xf32>, %n: index) {
  affine.for %i = 0 to 15 {
    affine.for %j = 0 to 64 step 8 {
      affine.prefetch %A[%i + 1, %j + symbol(%n)], read, locality<3>, data : memref<16x64xf32>
      affine.prefetch %B[%i, %j], write, locality<0>, instr : memref<16x64xf32>
      %v = affine.load %A[%i, %j] : memref<16x64xf32>
      affine.store %v, %B[%i, %j] : memref<16x64xf32>
    }
  }
  func.return
}
"""


def test_lower_affine_lowers_prefetch_to_memref_prefetch(tmp_path):
    import numpy as np

    from affinec.interpreter import Interpreter

    code, out, err = _opt(tmp_path, PREFETCH, "-p", "lower-affine")
    assert (code, err) == (0, "")
    assert "affine." not in out
    prefetches = [
        line.strip() for line in out.splitlines() if "memref.prefetch" in line
    ]
    assert len(prefetches) == 2
    assert prefetches[0].startswith("memref.prefetch %A[")
    assert prefetches[0].endswith("], read, locality<3>, data : memref<16x64xf32>")
    assert prefetches[1] == (
        "memref.prefetch %B[%i, %j], write, locality<0>, instr : memref<16x64xf32>"
    )
    # a hint: the interpreter runs both levels alike
    a = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    outputs = []
    for text in (PREFETCH, out):
        b = np.zeros((16, 64), np.float32)
        Interpreter(parse_module(make_context(), text)).run("prefetch", a, b, 3)
        outputs.append(b)
    assert (outputs[0] == outputs[1]).all() and outputs[0][3, 8] == a[3, 8]
    if (path := _mlir_opt_path()) is not None:
        import subprocess

        theirs = subprocess.run(
            [path, "-lower-affine"], input=PREFETCH, capture_output=True, text=True
        )
        ours_read = mlir_opt(out)  # mlir-opt reads affinec's memref.prefetch
        assert theirs.returncode == 0
        assert ours_read.count("memref.prefetch") == 2
        assert theirs.stdout.count("memref.prefetch") == 2


def _mlir_opt_path() -> str | None:
    from mlir_opt import MLIR_OPT

    return MLIR_OPT


def test_memref_prefetch_is_verified_in_mlirs_words(tmp_path):
    text = (
        "func.func @f(%A: memref<4x4xf32>, %i: index) {\n"
        "  memref.prefetch %A[%i], read, locality<3>, data : memref<4x4xf32>\n"
        "  func.return\n}\n"
    )
    code, _, err = _opt(tmp_path, text)
    assert code == 1 and "'memref.prefetch' op too few indices" in err
    code, _, err = _opt(
        tmp_path, text.replace("[%i]", "[%i, %i]").replace("<3>", "<4>")
    )
    assert code == 1
    assert "attribute 'localityHint' failed to satisfy constraint" in err


def test_a_file_of_aliases_alone_is_an_empty_module(tmp_path):
    text = (
        "#map0 = affine_map<(d0) -> (d0)>\n"
        "#map1 = affine_map<(d0, d1)[s0] -> (d0 + s0, d1 floordiv 2)>\n"
        "#set0 = affine_set<(d0) : (d0 >= 0)>\n"
    )
    code, out, err = _opt(tmp_path, text)
    assert (code, out, err) == (0, "builtin.module {\n}\n\n", "")
    code, _, err = _opt(tmp_path, text + "#map1 = affine_map<(d0) -> (d0)>\n")
    assert code == 1 and ":4:" in err  # an alias defined twice is still refused
    if _mlir_opt_path() is not None:
        assert same_ir(out, mlir_opt(text))


def test_data_copy_options_are_refused_at_a_place_in_the_text(tmp_path):
    text = (
        "func.func @f(%A: memref<8xf32>) {\n  affine.for %i = 0 to 8 {\n"
        "    %v = affine.load %A[%i] : memref<8xf32>\n  }\n  func.return\n}\n"
    )
    for option in ("fast-mem-space=0", "slow-mem-space=1", "fast-mem-capacity=0"):
        code, _, err = _opt(
            tmp_path, text, "-p", f"affine-data-copy-generate{{{option}}}"
        )
        assert code == 1
        assert err.startswith(f"{tmp_path / 'input.mlir'}:1:1: error: 'func.func' op ")
        assert option.split("=")[0] in err


# -- --verify-diagnostics on MLIR's own cases ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "#m = affine_map<(d0) -> (d0 floordiv 4)>\n"
            "func.func @f() {\n  affine.for %i = #m(%i) to 10 {\n  }\n"
            "  func.return\n}\n",
            [
                ":3:14: error: region entry argument '%i' is already in use",
                ":3:22: note: previously referenced here",
            ],
        ),
        (
            "func.func @f() {\n  affine.for %i#0 = 0 to 7 {\n  }\n  func.return\n}\n",
            [":2:16: error: result number not allowed in argument list"],
        ),
        (
            "func.func @f(%C: memref<f32>) {\n  %c0 = arith.constant 0 : i32\n"
            '  "affine.store"(%c0, %C) <{map = affine_map<() -> ()>}> : (i32, '
            "memref<f32>) -> ()\n  func.return\n}\n",
            [
                ":3:3: error: 'affine.store' op value to store must have the same "
                "type as memref element type"
            ],
        ),
    ],
    ids=["note-at-first-use", "result-number", "store-type"],
)
def test_mlir_parse_and_verify_errors_in_its_words(tmp_path, text, expected):
    """As mlir-opt 22 words and places them (checked against it where installed)."""
    code, _, err = _opt(tmp_path, text)
    assert code == 1
    reported = [
        line for line in err.splitlines() if ": error: " in line or ": note: " in line
    ]
    assert reported == [str(tmp_path / "input.mlir") + e for e in expected]
    if (path := _mlir_opt_path()) is not None:
        import subprocess

        theirs = subprocess.run(
            [path, str(tmp_path / "input.mlir")], capture_output=True, text=True
        ).stderr
        for e in expected:
            assert e.split(" error: ")[-1].split(" note: ")[-1] in theirs


SPARSE_MMA = """\
func.func @sparse(%a: vector<4x2xf16>, %b: vector<4x2xf16>, %c: vector<2x2xf16>, %m: vector<2xi16>) -> vector<2x2xf16> {
  %d = nvgpu.mma.sp.sync(%a, %b, %c) metadata(%m) {mmaShape = [16, 8, 32], sparsitySelector = 1 : i32} : (vector<4x2xf16>, vector<4x2xf16>, vector<2x2xf16>) -> vector<2x2xf16>
  func.return %d : vector<2x2xf16>
}
"""


def test_sparse_mma_is_read_printed_back_and_refused_by_the_lowering(tmp_path):
    code, out, err = _opt(tmp_path, SPARSE_MMA)
    assert (code, err) == (0, "")
    assert "nvgpu.mma.sp.sync(%a, %b, %c) metadata(%m) {mmaShape = [" in out
    assert "sparsitySelector = 1 : i32}" in out
    assert _opt(tmp_path, out)[1] == out
    code, _, err = _opt(tmp_path, SPARSE_MMA, "-p", "convert-nvgpu-to-nvvm")
    assert code == 1
    assert ":2:8: error: 'nvgpu.mma.sp.sync' op is not lowered" in err
    if _mlir_opt_path() is not None:
        assert same_ir(out, mlir_opt(SPARSE_MMA))
