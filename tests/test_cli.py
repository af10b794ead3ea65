"""The command lines: `affinec` and `affinec-opt`, their outputs and their errors."""

import re

import pytest
from hypothesis import given, settings

from affinec.backend.runtime import cuda_available
from affinec.backend.sass import sass_available
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.frontend.naive import build
from affinec.tools.cli import main as affinec
from affinec.tools.opt import main as affinec_opt
from strategies import conv_specs, examples

CONV_FLAGS = [
    "--n",
    "1",
    "--c",
    "3",
    "--h",
    "6",
    "--w",
    "6",
    "--k",
    "4",
    "--r",
    "3",
    "--s",
    "3",
]


def _flags(spec: ConvSpec) -> list[str]:
    flags = []
    for name in ("n", "c", "h", "w", "k", "r", "s"):
        flags += [f"--{name}", str(getattr(spec, name))]
    return flags + [
        "--stride",
        "{},{}".format(*spec.stride),
        "--pad",
        "{},{}".format(*spec.padding),
        "--dilation",
        "{},{}".format(*spec.dilation),
        "--layout",
        spec.layout,
        "--filter-layout",
        spec.filter_layout,
        "--dtype",
        spec.dtype,
        "--epilogue",
        spec.epilogue,
        "--groups",
        str(spec.groups),
    ]


@settings(max_examples=examples(10))
@given(conv_specs())
def test_gen_then_check_accepts_any_convolution(tmp_path_factory, spec):
    path = tmp_path_factory.mktemp("gen") / "conv.mlir"
    assert affinec(["gen", "conv", *_flags(spec), "-o", str(path)]) == 0
    assert path.read_text() == str(build(spec)) + "\n"
    assert affinec(["check", str(path)]) == 0


def test_gen_matmul_and_outer(capsys):
    assert affinec(["gen", "matmul", "--m", "4", "--n", "5", "--k", "6"]) == 0
    assert "func.func @matmul(%A: memref<4x6xf32>" in capsys.readouterr().out
    assert affinec(["gen", "outer", "--m", "4", "--n", "5", "--dtype", "f16"]) == 0
    assert "memref<4x5xf16>" in capsys.readouterr().out


def test_check_reports_each_stage(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    affinec(["gen", "conv", *CONV_FLAGS, "--pad", "1", "-o", str(path)])
    assert affinec(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "spec: conv n=1 c=3 h=6 w=6 k=4 r=3 s=3" in out
    assert "input" in out and "ok: every stage within 1e-05" in out


def test_check_fails_when_the_ir_is_wrong(tmp_path, capsys):
    """An off-by-one in the filter access: interpretation works, the answer is wrong."""
    text = str(build(ConvSpec(1, 2, 5, 5, 2, 3, 3, padding=1)))
    wrong = text.replace("%filter[%k, %c, %r, %s]", "%filter[%k, %c, 2 - %r, %s]")
    assert wrong != text
    path = tmp_path / "wrong.mlir"
    path.write_text(wrong)
    assert affinec(["check", str(path)]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_check_stops_when_the_input_itself_does_not_run(tmp_path, capsys):
    """A reduction longer than its tensors (found by the fuzzer: every later stage
    ran out its step budget, minutes in all): reported at the input, no pass run."""
    text = str(build(MatmulSpec(8, 8, 48, dtype="f16")))
    bad = text.replace("affine.for %p = 0 to 48", "affine.for %p = 0 to 65536")
    assert bad != text
    path = tmp_path / "long.mlir"
    path.write_text(bad)
    assert affinec(["check", str(path), "-p", "affinec-default"]) == 1
    captured = capsys.readouterr()
    assert "index [0, 48] is out of bounds" in captured.err
    assert "FAILED: the input itself does not run; no pass was checked" in captured.out
    assert "affine-loop-tile" not in captured.out


def test_demo_agrees_with_numpy(capsys):
    assert affinec(["demo"]) == 0
    out = capsys.readouterr().out
    assert "affine.parallel (%n, %k, %oh, %ow)" in out
    assert "ok: every stage within" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["gen", "conv", *CONV_FLAGS[:-2], "--s", "0"],
            "ConvSpec.s must be a positive",
        ),
        (["gen", "conv", *CONV_FLAGS, "--r", "9"], "dilated filter extent 9 is larger"),
        (["gen", "matmul", "--m", "2", "--n", "2", "--k", "-1"], "MatmulSpec.k"),
        (["check", "/nonexistent.mlir"], "cannot open '/nonexistent.mlir'"),
        (
            ["compile", "conv", *CONV_FLAGS, "--tf32", "--stages", "2"],
            "tf32 multiplies on the tensor cores: it needs mma",
        ),
        (
            ["compile", "conv", *CONV_FLAGS, "--tf32", "--dtype", "f16"],
            "tf32 takes f32 operands",
        ),
        (
            ["compile", "conv", *CONV_FLAGS, "--mma"],
            "tensor cores take f16 or bf16 operands",
        ),
        # knobs out of range are refused, not read as their defaults
        (["compile", "conv", *CONV_FLAGS, "--stages", "0"], "stages must be 1 or"),
        (["compile", "conv", *CONV_FLAGS, "--splits", "0"], "splits must be 1 or"),
        (["compile", "conv", *CONV_FLAGS, "--splits", "-2", "--no-fma"], "splits"),
        (["compile", "conv", *CONV_FLAGS, "--pad-channels=-4"], "pad-channels must"),
        (
            ["compile", "conv", *CONV_FLAGS, "--c", "16", "--layout", "nhwc"]
            + ["--filter-layout", "rsck", "--dtype", "f16", "--arch", "sm_90a"]
            + ["--k", "16", "--wgmma", "--wgmma-tile=0,64"],
            "tile-sizes must be positive, got (0, 64)",
        ),
    ],
)
def test_affinec_errors_are_one_line(argv, message, capsys):
    assert affinec(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "command", "unknown"),
    [
        (["gen", "conv", *CONV_FLAGS, "--padding", "1"], "gen conv", "--padding 1"),
        (["gen", "matmul", "--m", "2", "--n", "2", "--k", "2", "x"], "gen matmul", "x"),
        (["check", "a.mlir", "--bogus"], "check", "--bogus"),
    ],
)
def test_an_unknown_flag_is_refused_by_the_command_it_was_given_to(
    argv, command, unknown, capsys
):
    assert affinec(argv) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: affinec {command}: unrecognized arguments: {unknown} "
        f"(see 'affinec {command} --help')\n"
    )


def test_check_locates_ir_errors(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @f() {\n  %x = arith.addf %y, %y : f32\n  func.return\n}\n"
    )
    assert affinec(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:")
    path.write_text("func.func @f() {\n  func.return\n}\n")
    assert affinec(["check", str(path)]) == 1
    assert "no 'affinec.spec' attribute" in capsys.readouterr().err


def test_check_refuses_an_unknown_pass(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    affinec(["gen", "conv", *CONV_FLAGS, "-o", str(path)])
    assert affinec(["check", str(path), "-p", "affine-loop-tyle"]) == 1
    assert "unknown pass 'affine-loop-tyle'" in capsys.readouterr().err


# -- affinec-opt ---------------------------------------------------------------------------


@pytest.fixture
def conv_file(tmp_path):
    path = tmp_path / "conv.mlir"
    path.write_text(str(build(ConvSpec(1, 2, 4, 4, 2, 3, 3, padding=1))))
    return path


def test_opt_round_trips_and_accepts_mlir_pipelines(conv_file, capsys):
    assert affinec_opt([str(conv_file)]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == conv_file.read_text().strip()
    argv = [str(conv_file), "--pass-pipeline=builtin.module(func.func(cse),dce)"]
    assert affinec_opt(argv) == 0
    assert "affine.parallel" in capsys.readouterr().out


def test_the_default_pipeline_takes_config_for_from_the_modules_spec(tmp_path, capsys):
    # An f16 NHWC convolution with 16 channels: affinec-default goes through the mma
    # level (config_for's tensor-core configuration), to PTX with mma.sync; without
    # an affinec.spec attribute it keeps the defaults (no tensor cores).
    spec = ConvSpec(
        1,
        16,
        8,
        8,
        16,
        3,
        3,
        padding=1,
        layout="nhwc",
        filter_layout="rsck",
        dtype="f16",
    )
    path = tmp_path / "conv.mlir"
    text = str(build(spec))
    path.write_text(text)
    argv = [str(path), "-p", "affinec-default", "--mlir-print-ir-after-all"]
    assert affinec_opt(argv) == 0
    err = capsys.readouterr().err
    assert "IR Dump After affinec-mma-sync" in err and "nvgpu.mma.sync" in err
    assert affinec_opt([str(path), "-p", "affinec-default", "-t", "ptx"]) == 0
    assert "mma.sync.aligned.m16n8k16" in capsys.readouterr().out
    bare = tmp_path / "bare.mlir"
    bare.write_text(text.replace('attributes {affinec.spec = "', 'attributes {x = "'))
    assert affinec_opt([str(bare), "-p", "affinec-default", "-t", "ptx"]) == 0
    assert "mma.sync" not in capsys.readouterr().out


def test_opt_prints_ir_around_passes_and_timing(conv_file, capsys):
    argv = [
        str(conv_file),
        "-p",
        "cse",
        "--mlir-print-ir-before-all",
        "--mlir-print-ir-after-all",
        "--mlir-timing",
    ]
    assert affinec_opt(argv) == 0
    err = capsys.readouterr().err
    assert "// -----// IR Dump Before cse //----- //" in err
    assert "// -----// IR Dump After cse //----- //" in err
    assert "Execution time report" in err and "Parse" in err and "Total" in err


def test_opt_lists_passes(capsys):
    assert affinec_opt(["--list-passes"]) == 0
    out = capsys.readouterr().out
    assert "affinec passes:" in out and "named pipelines:" in out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("%filter[%k, %c, %r, %s]", "%filter[%k, %c, %r]"), "map has 3 results"),
        (("arith.mulf %a, %b : f32", "arith.mulf %a, %b : f16"), "f16"),
        (("memref.alloca()", "memref.alloca(%k)"), "incorrect number of dynamic sizes"),
    ],
)
def test_opt_errors_point_at_the_line(conv_file, capsys, edit, message):
    text = conv_file.read_text()
    assert edit[0] in text
    line = text[: text.index(edit[0])].count("\n") + 1
    conv_file.write_text(text.replace(*edit))
    assert affinec_opt([str(conv_file)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{conv_file}:{line}:"), err
    assert "error: " in err and message in err
    assert err.splitlines()[-1].strip() == "^"


def test_opt_undefined_values_are_errors(conv_file, capsys):
    conv_file.write_text(conv_file.read_text().replace("mulf %a, %b", "mulf %a, %q"))
    assert affinec_opt([str(conv_file)]) == 1
    err = capsys.readouterr().err
    # at the use, in MLIR's words
    line = next(
        k
        for k, text in enumerate(conv_file.read_text().splitlines(), 1)
        if "%q" in text
    )
    assert err.startswith(f"{conv_file}:{line}:")
    assert "error: use of undeclared SSA value name" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "no-such-pass"], "error: unknown pass 'no-such-pass'"),
        (["-p", "cse{bogus=1}"], "error: pass 'cse'"),
        (["-p", "builtin.module(cse"], "error: unbalanced brackets"),
        (["-p", "cse", "--pass-pipeline", "dce"], "not both"),
    ],
)
def test_opt_pipeline_errors(conv_file, argv, message, capsys):
    assert affinec_opt([str(conv_file), *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_compile_writes_ptx(tmp_path, capsys):
    path = tmp_path / "conv.ptx"
    assert affinec(["compile", "conv", *CONV_FLAGS, "--pad", "1", "-o", str(path)]) == 0
    ptx = path.read_text()
    assert ".visible .entry conv_kernel(" in ptx and ".target sm_80" in ptx


@pytest.mark.skipif(not sass_available(), reason="needs cuobjdump and nvdisasm")
def test_compile_writes_the_sass_ptxas_makes(tmp_path, capsys):
    ptx, sass = tmp_path / "conv.ptx", tmp_path / "conv.sass"
    spec = ConvSpec(
        1,
        16,
        8,
        8,
        16,
        3,
        3,
        padding=1,
        dtype="f16",
        layout="nhwc",
        filter_layout="rsck",
    )
    argv = ["compile", "conv", *_flags(spec), "-o", str(ptx), "--sass", str(sass)]
    assert affinec(argv) == 0
    instructions = sass.read_text().splitlines()
    assert "EXIT" in instructions and "/*" not in sass.read_text()
    assert sum(i.startswith("HMMA.16816.F32") for i in instructions) > 0


def test_compile_tf32_alone_is_the_tensor_core_configuration(tmp_path, capsys):
    path = tmp_path / "conv.ptx"
    argv = ["compile", "conv", *CONV_FLAGS, "--layout", "nhwc", "--filter-layout"]
    assert affinec([*argv, "rsck", "--tf32", "-o", str(path)]) == 0
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in path.read_text()


@pytest.mark.skipif(cuda_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize(
    "argv", [["run", "conv", *CONV_FLAGS], ["bench", "--only", "conv3x3-128"]]
)
def test_gpu_commands_say_there_is_no_gpu(argv, capsys):
    assert affinec(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no CUDA GPU available") and "Traceback" not in err


@pytest.mark.gpu
def test_run_checks_and_times_on_the_gpu(capsys):
    assert affinec(["run", "conv", *CONV_FLAGS, "--pad", "1", "--dtype", "f16"]) == 0
    out = capsys.readouterr().out
    # what `affinec run` prints: the check against float64, then the time
    checked = re.search(
        r"against float64: relative error (\S+) \(ok: tolerance (\S+)\)", out
    )
    assert checked, out
    assert float(checked.group(1)) <= float(checked.group(2))
    timed = re.search(r"time: (\S+) ms \(median of \d+ batches\), (\S+) TFLOP/s", out)
    assert timed and float(timed.group(1)) > 0 and float(timed.group(2)) > 0, out


def test_xdsl_opt_sees_our_dialects_and_passes():
    """The `xdsl.universe` entry point: plain xdsl-opt knows affinec's own dialects
    and passes (the re-syntaxed affine and gpu stay xDSL's there)."""
    from xdsl.universe import Universe

    multiverse = Universe.get_multiverse()
    assert {"affinec", "nvvm"} <= set(multiverse.all_dialects)
    assert {"affine-loop-tile", "affinec-split", "affinec-sink"} <= set(
        multiverse.all_passes
    )


def test_our_passes_refuse_xdsl_affine_ops():
    """Ops parsed with xDSL's own affine dialect would be walked past silently."""
    from xdsl.context import Context
    from xdsl.dialects import get_all_dialects
    from xdsl.parser import Parser

    from affinec.base.diagnostics import PassError
    from affinec.passes.affine_loop_tile import AffineLoopTilePass

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    module = Parser(
        ctx, generic_text(build(ConvSpec(1, 2, 4, 4, 2, 3, 3)))
    ).parse_module()
    with pytest.raises(PassError, match="comes from xDSL's 'affine' dialect"):
        AffineLoopTilePass().apply(ctx, module)


def generic_text(module) -> str:
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    return out.getvalue()


def test_versions(capsys):
    import affinec as package

    assert package.__version__.count(".") >= 2
    for tool, name in ((affinec, "affinec"), (affinec_opt, "affinec-opt")):
        try:
            code = tool(["--version"])
        except SystemExit as e:  # argparse's --version exits
            code = e.code
        assert code == 0
        assert capsys.readouterr().out.startswith(f"{name} {package.__version__}")


def test_python_dash_m_affinec_is_the_command():
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "affinec", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.startswith("affinec ")


def test_affinec_opt_reads_standard_input_as_dash(monkeypatch, capsys):
    import io

    text = str(build(ConvSpec(1, 2, 4, 4, 2, 3, 3)))
    stdin = io.TextIOWrapper(io.BytesIO(text.encode()))
    monkeypatch.setattr("sys.stdin", stdin)
    assert affinec_opt(["-", "-p", "affinec-tile-split-sink"]) == 0
    assert "affinec.mapping" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"func.func @f(")))
    assert affinec_opt(["-"]) == 1
    assert capsys.readouterr().err.startswith("<stdin>:1:")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("tiles-sizes=1", "has no option 'tiles-sizes'; did you mean 'tile-sizes'?"),
        ("tile-sizes=a", "option 'tile-sizes' takes integers separated by commas"),
        ("separate=3", "option 'separate' takes true or false, got '3'"),
        ("tile-size=1,2", "option 'tile-size' takes an integer, got '1,2'"),
    ],
)
def test_pass_option_errors_speak_the_users_spelling(tmp_path, capsys, option, message):
    path = tmp_path / "conv.mlir"
    path.write_text(str(build(ConvSpec(1, 2, 4, 4, 2, 3, 3))))
    assert affinec_opt([str(path), "-p", f"affine-loop-tile{{{option}}}"]) == 1
    err = capsys.readouterr().err
    assert message in err and "_" not in err.split("(its options")[0]


def test_mlirs_print_and_timing_flags(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    path.write_text(str(build(ConvSpec(1, 2, 4, 4, 2, 3, 3))))
    assert affinec_opt([str(path), "-mlir-print-op-generic"]) == 0
    assert capsys.readouterr().out.startswith('"builtin.module"()')
    pipeline = ["-p", "affinec-tile-split-sink"]
    assert (
        affinec_opt([str(path), *pipeline, "--mlir-print-ir-after=affinec-split"]) == 0
    )
    dumps = capsys.readouterr().err
    assert dumps.count("IR Dump After") == 1 and "After affinec-split " in dumps
    assert affinec_opt([str(path), *pipeline, "--mlir-print-ir-before=nosuch"]) == 1
    assert "unknown pass 'nosuch'" in capsys.readouterr().err
    assert affinec_opt([str(path), *pipeline, "--time-passes"]) == 0
    assert "Execution time report" in capsys.readouterr().err


def test_list_passes_describes_each_option(capsys):
    assert affinec_opt(["--list-passes"]) == 0
    out = capsys.readouterr().out
    assert "tile-sizes: integers separated by commas" in out
    assert "missing trailing sizes are 1" in out
    assert "'tuple[int, ...]'" not in out


def test_every_named_pipeline_builds_and_the_tool_loads_no_recipe_before():
    import subprocess
    import sys

    from affinec.driver.pipeline_names import NAMED_PIPELINES
    from affinec.driver.pipelines import named_passes

    for name in NAMED_PIPELINES:
        assert named_passes(name, None, 1), name
    with pytest.raises(KeyError, match="no pipeline is called 'nope'"):
        named_passes("nope", None, 1)
    # affinec-opt -p some-pass loads that pass, not every pass the recipes name
    code = (
        "import sys\n"
        "from affinec.tools.opt import main\n"
        "assert 'affinec.driver.pipelines' not in sys.modules\n"
        "assert 'affinec.passes.affinec_mma_sync' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    # a pass on a module without kernels: no hazard check (numpy, ml_dtypes) loaded
    code = (
        "import sys\n"
        "from affinec.tools.opt import main\n"
        "sys.argv = ['affinec-opt', '-p', 'cse']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "assert 'affinec.transforms.gpu.shared_memory_hazards' not in sys.modules\n"
        "assert 'numpy' not in sys.modules\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], input="builtin.module {}", text=True, check=True
    )


def test_affinec_reference_is_always_the_module():
    import subprocess
    import sys

    code = (
        "import affinec, types\n"
        "first = affinec.reference\n"
        "import affinec.frontend.reference as module\n"
        "assert isinstance(first, types.ModuleType) and first is module\n"
        "assert affinec.reference is module and callable(module.reference)\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_affinec_opt_usage_errors_are_one_line_and_exit_1(tmp_path, capsys):
    path = tmp_path / "conv.mlir"
    path.write_text(str(build(ConvSpec(1, 2, 4, 4, 2, 3, 3))))
    for argv in ([str(path), "-p", "-p"], [str(path), "--no-such-flag"]):
        try:
            code = affinec_opt(argv)
        except SystemExit as e:
            code = e.code
        assert code == 1
        err = capsys.readouterr().err
        assert err.startswith("error: affinec-opt: ") and err.count("\n") == 1


def test_tune_flags_may_come_before_the_kind(capsys):
    spec = ["--n", "1", "--c", "8", "--h", "8", "--w", "8", "--k", "8", "--r", "3",
            "--s", "3"]  # fmt: skip
    flags = ["--dry-run", "--no-progress", "--max-candidates", "2", "--jobs", "1"]
    assert affinec(["tune", *flags, "conv", *spec]) == 0
    before = capsys.readouterr().out
    assert affinec(["tune", "conv", *spec, *flags]) == 0
    assert "ranked by the cost model only" in before
    assert before.splitlines()[:3] == capsys.readouterr().out.splitlines()[:3]


def test_affinec_opts_help_lists_only_the_targets_it_emits(capsys):
    import contextlib

    with contextlib.suppress(SystemExit):  # argparse's --help exits
        affinec_opt(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "mlir (the IR, the default), llvm" in text
    assert "riscv" not in text and "x86-asm" not in text


HEAVY_MODULES = ("numpy", "llvmlite.binding", "affinec.interpreter", "numba")
"""What reading IR and generating it do without (each costs a tenth of a second or
more to import; numba seconds)."""


@pytest.mark.parametrize(
    "tool, argv",
    [
        ("affinec.tools.cli", ["gen", "conv", "--n", "1", "--c", "4", "--h", "9",
                               "--w", "9", "--k", "8", "--r", "3", "--s", "3"]),
        ("affinec.tools.cli", ["gen", "matmul", "--m", "8", "--n", "8", "--k", "8"]),
        ("affinec.tools.opt", ["tests/filecheck/lowering/convert_nvgpu_to_nvvm.mlir"]),
        ("affinec.tools.opt", ["tests/filecheck/lowering/hopper.mlir",
                               "-p", "nvvm-attach-target{chip=sm_90a},"
                               "convert-nvgpu-to-nvvm"]),
    ],
)  # fmt: skip
def test_generating_and_reading_ir_import_no_numpy_llvm_or_interpreter(tool, argv):
    """`affinec gen`, and `affinec-opt` reading (and lowering) the Hopper dialects,
    start in half a second: the heavy modules are imported by the commands and
    functions that use them."""
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        f"from {tool} import main\n"
        f"sys.argv = ['tool', *{argv!r}]\n"
        "try:\n"
        "    code = main()\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "assert not code, code\n"
        f"print([m for m in {HEAVY_MODULES!r} if m in sys.modules])\n"
    )
    root = Path(__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-300:]


def test_a_file_that_is_not_utf8_is_named_with_its_first_bad_byte(tmp_path, capsys):
    path = tmp_path / "latin1.mlir"
    path.write_bytes(b"// caf\xe9\nbuiltin.module {\n}\n")
    message = f"error: {path} is not UTF-8 text: byte 0xe9 at offset 6 (line 1)\n"
    assert affinec_opt([str(path)]) == 1
    assert capsys.readouterr().err == message
    assert affinec(["check", str(path)]) == 1
    assert capsys.readouterr().err == message


def test_the_command_line_loads_no_tuner_to_compile():
    """`affinec compile` (its parser, whose `tune` flags show the candidate limit)
    does without the tuner's search space and cost model."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from affinec.tools.cli import build_parser\n"
        "build_parser()\n"
        "assert 'affinec.tuning.space' not in sys.modules\n"
        "assert 'affinec.tuning.cost' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
