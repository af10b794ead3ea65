"""What a newcomer trips on, each fixed at its cause: a kernel that prints as a
summary, `affinec check` on linalg input, whole-sentence pass summaries, and the
command lines ending quietly when their reader goes away."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from affinec.base.spec import ConvSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.passes import get_all_passes
from affinec.tools.cli import main as affinec
from affinec.tools.opt import main as affinec_opt
from affinec.tools.opt_passes import summary
from affinec.tools.pipes import BROKEN_PIPE_STATUS

LINALG_CONV = """\
func.func @conv(%x: memref<1x6x6x3xf32>, %w: memref<3x3x3x4xf32>, %y: memref<1x4x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<1x4x4x4xf32>)
  linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : memref<1x6x6x3xf32>, memref<3x3x3x4xf32>) outs(%y : memref<1x4x4x4xf32>)
  func.return
}
"""


# -- a compiled kernel prints as a summary ------------------------------------------


@pytest.fixture(scope="module")
def kernel():
    spec = ConvSpec(n=1, c=4, h=6, w=6, k=8, r=3, s=3)
    return compile_to_ptx(spec).runtime_kernel()


def test_kernel_str_is_a_summary_not_the_ptx(kernel):
    text = str(kernel)
    assert len(kernel.ptx) > 5000
    assert len(text) < 1000
    assert ".entry" not in text and "ld.global" not in text
    lines = text.splitlines()
    assert lines[0].startswith(f"affinec Kernel {kernel.name}(input: 1x4x6x6")
    assert f"  spec: {kernel.info['spec']}" in lines
    assert f"  config: {kernel.info['config']}" in lines
    assert "  arch: sm_80" in lines
    block = "x".join(map(str, kernel.block))
    assert any(
        line.startswith(f"  launch {kernel.name}: grid ") and f"block {block}" in line
        for line in lines
    )
    assert f"ptx: {len(kernel.ptx)} characters (kernel.ptx" in lines[-1]


def test_kernel_repr_is_one_line(kernel):
    text = repr(kernel)
    assert "\n" not in text and len(text) < 400
    assert text.startswith(f"<affinec Kernel '{kernel.name}' spec='conv n=1 c=4")
    assert f"ptx={len(kernel.ptx)} chars>" in text
    # a list of kernels prints as a list of summaries, too
    assert ".version" not in repr([kernel])


def test_kernel_str_names_registers_ptxas_measured(kernel):
    class Measured:  # what ptxas's report (affinec.backend.ptxas.Resources) holds
        def __init__(self, kernel: str, registers: int) -> None:
            self.kernel, self.registers = kernel, registers

    kernel.info["resources"] = [Measured(kernel.name, 40)]
    try:
        assert "40 registers per thread" in str(kernel)
    finally:
        del kernel.info["resources"]
    assert "registers" not in str(kernel)


# -- affinec check on linalg input ------------------------------------------------------


def test_check_runs_linalg_input_through_the_lowering_pass(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    path.write_text(LINALG_CONV)
    assert (
        affinec(["check", str(path), "-p", "affinec-lower-linalg,affinec-split"]) == 1
    )
    out, err = capsys.readouterr()
    # the lowering ran before the first checked stage; affinec-split then refuses
    # the untiled IR with its own located error, not a missing spec
    assert "input after affinec-lower-linalg" in out
    assert "spec: conv n=1 c=3 h=6 w=6 k=4 r=3 s=3" in out
    assert "affine-loop-tile" in err
    assert "no 'affinec.spec' attribute" not in err

    args = ["check", str(path), "-p", "affinec-lower-linalg,affine-loop-tile"]
    assert affinec([*args[:-1], args[-1] + "{tile-sizes=1,2,2,2}"]) == 0
    out, _ = capsys.readouterr()
    assert "input after affinec-lower-linalg" in out
    assert "bit-identical" in out and out.rstrip().splitlines()[-1].startswith("ok:")


def test_check_says_when_the_lowered_op_is_no_spec(tmp_path, capsys):
    """TOSA's filter layout is no spec: the lowering runs, and check says why it
    has nothing to compare with (rather than running the whole pipeline)."""
    path = tmp_path / "fhwc.mlir"
    path.write_text(
        LINALG_CONV.replace("linalg.conv_2d_nhwc_hwcf", "linalg.conv_2d_nhwc_fhwc")
        .replace("%w: memref<3x3x3x4xf32>", "%w: memref<4x3x3x3xf32>")
        .replace("memref<3x3x3x4xf32>)", "memref<4x3x3x3xf32>)")
    )
    argv = ["check", str(path), "-p", "affinec-lower-linalg,affinec-default"]
    assert affinec(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "the module records no spec after affinec-lower-linalg" in err


def test_check_says_how_to_check_linalg_input(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    path.write_text(LINALG_CONV)
    assert affinec(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert "start the pipeline with it (-p affinec-lower-linalg" in err


# -- pass summaries are whole sentences -------------------------------------------------


def test_summary_is_the_first_sentence_across_lines():
    doc = """Turn a function of one linalg op (or a contraction) into the
    naive IR of its spec. It records the spec.

    More detail."""
    assert summary(doc) == (
        "Turn a function of one linalg op (or a contraction) into the naive IR of "
        "its spec."
    )
    assert summary("Pad e.g. the channels to 8. Then stop.") == (
        "Pad e.g. the channels to 8."
    )
    assert summary(None) == ""


def test_every_listed_pass_summary_is_a_whole_sentence(capsys):
    assert affinec_opt(["--list-passes"]) == 0
    out = capsys.readouterr().out
    ours = set(get_all_passes())
    listed = {}
    for line in out.splitlines():
        name, _, text = line.strip().partition(": ")
        if line.startswith("  ") and not line.startswith("   ") and name in ours:
            listed[name] = text
    assert set(listed) == ours
    for name, text in listed.items():
        assert text.endswith("."), (name, text)
        # a sentence cut at a line's end ends on a word such as "the" or "shared"
        assert text.count("(") == text.count(")"), (name, text)
    assert listed["affinec-lower-linalg"].endswith("into the naive IR of its spec.")
    assert listed["affinec-plan-shared-memory"].endswith(
        "(the one owner of shared memory)."
    )


# -- a closed pipe ends the command quietly ---------------------------------------------


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_opt_ends_quietly_when_its_reader_goes_away(tmp_path, monkeypatch, capsys):
    path = tmp_path / "conv.mlir"
    path.write_text(LINALG_CONV)
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert affinec_opt([str(path)]) == BROKEN_PIPE_STATUS
    assert affinec_opt(["--list-passes"]) == BROKEN_PIPE_STATUS
    assert capsys.readouterr().err == ""


def test_cli_ends_quietly_when_its_reader_goes_away(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    flags = ["--n", "1", "--c", "2", "--h", "4", "--w", "4", "--k", "2"]
    assert affinec(["gen", "conv", *flags, "--r", "1", "--s", "1"]) == (
        BROKEN_PIPE_STATUS
    )
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "command",
    [
        ["affinec.tools.opt", "--list-passes"],
        ["affinec.tools.cli", "gen", "conv", "--n", "1", "--c", "2", "--h", "4"]
        + ["--w", "4", "--k", "2", "--r", "1", "--s", "1"],
    ],
    ids=["affinec-opt", "affinec"],
)
def test_a_closed_pipe_prints_nothing(command):
    """As `affinec-opt --list-passes | head -0` runs: the reader is gone before the
    first write. Nothing on stderr, not even Python's message at exit."""
    child = subprocess.Popen(
        [sys.executable, "-m", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).parent.parent,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == BROKEN_PIPE_STATUS
    assert err == ""


def test_a_missing_extra_is_one_line_from_the_command_line(monkeypatch, capsys):
    """A command that needs an extra the machine lacks (`affinec bench` on a GPU
    machine without torch) says which extra, in one line, without a traceback."""
    from affinec.base.extras import missing_extra
    from affinec.tools import cli

    def needs_torch(args):
        error = ModuleNotFoundError("No module named 'torch'", name="torch")
        raise missing_extra(error, "timing against cuDNN")

    parser = cli.build_parser()
    args = parser.parse_args(["bench"])
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", lambda argv: args)
    monkeypatch.setattr(args, "run", needs_torch)
    assert cli.main(["bench"]) == 1
    err = capsys.readouterr().err
    assert "pip install -e '.[torch]'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
