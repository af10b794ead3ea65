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
