"""What the fuzzer found in 20,000 generated inputs to both command lines, each
fixed at its cause: (a) `affinec-default` after a split it cannot configure, (b)
affine constants past 64 bits, (c) `affinec-mma-sync` on an accumulator it does
not read with `affine.load`, (d) the naive band's passes on a module lowered to
`cf`, (e) `affine-loop-tile`'s default sizes on a dynamic batch, (f) `affinec
compile --wgmma` with its knobs and no `--stages`, (g) the locations of the ops
`affinec-wgmma-gemm` writes. The FileCheck tests show the same diagnostics
(`tests/filecheck/passes/split_reduction_then_default.mlir`,
`mlir/affine_constant_range.mlir`, `passes/mma_sync_accumulator_access.mlir`,
`passes/loop_tile_lowered_input.mlir`, `passes/loop_tile_dynamic_batch.mlir`,
`lowering/hopper_locations.mlir`).
"""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest
from mlir_opt import MlirOptError, mlir_opt, needs_mlir_opt
from xdsl.dialects.builtin import AffineMapAttr, FileLineColLoc
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.utils.exceptions import ParseError, VerifyException

from affinec.base.diagnostics import PassError, verify
from affinec.base.locating_parser import parse_module
from affinec.base.semi_affine import INDEX_MAX, INDEX_MIN, add, multiply
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec, Spec
from affinec.dialects import affine
from affinec.driver.config import config_for, flattened_spec
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.interpreter import interpret
from affinec.ir.context import make_context
from affinec.passes.affine_loop_tile import default_tile_sizes
from affinec.tools.cli import build_parser
from affinec.tools.cli import main as affinec_main
from affinec.tools.cli_flags import config_from_args, spec_from_args
from affinec.transforms.gpu.wgmma_plan import plan_of
from fuzzing import Case, Outcome, run_case


def run(tmp_path, tool: str, text: str, *argv: str) -> Outcome:
    """`tool` on `text` (as `input.mlir`), in-process, as the fuzzer runs it."""
    return run_case(Case(None, text, tool, argv), tmp_path)


def errors(outcome: Outcome) -> list[str]:
    """The error lines of a run that ended as the fuzzer asks (exit 1, no
    traceback)."""
    assert outcome.problem is None, outcome.report()
    assert outcome.code == 1, outcome.report()
    return [x for x in outcome.stderr.splitlines() if "error: " in x]


def naive(spec: Spec) -> str:
    return str(build(spec))


def line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment)].count("\n") + 1


# -- (a) a split affinec-default cannot configure ----------------------------------------

UNSUITED_SPLITS = [
    # 2 channels a group, 4 splits
    (ConvSpec(n=1, c=4, h=6, w=6, k=4, r=3, s=3, padding=(1, 1), groups=2), 4),
    # an outer product has no reduction
    (OuterSpec(m=3, n=4), 2),
    # 3 steps of reduction, 8 splits
    (MatmulSpec(m=8, n=8, k=3), 8),
    # a dynamic batch takes no split yet
    (
        ConvSpec(n=2, c=4, h=6, w=6, k=4, r=3, s=3, padding=(1, 1), dynamic_batch=True),
        2,
    ),
    (MatmulSpec(m=8, n=8, k=3), -1),
]


@pytest.mark.parametrize(
    "spec, splits",
    UNSUITED_SPLITS,
    ids=lambda x: x.to_text() if hasattr(x, "kind") else str(x),
)
def test_affinec_default_after_an_unsuited_split_says_what_the_split_says(
    tmp_path, spec, splits
):
    """`affinec-split-reduction{splits=N},affinec-default` where the split does not
    suit the spec: the split's own located refusal, word for word (building
    affinec-default for the split raised an internal ValueError before any pass
    ran)."""
    text = naive(spec)
    split = f"affinec-split-reduction{{splits={splits}}}"
    alone = errors(run(tmp_path, "affinec-opt", text, "-p", split))
    then_default = errors(
        run(tmp_path, "affinec-opt", text, "-p", f"{split},affinec-default")
    )
    assert then_default == alone
    assert re.match(r".*input\.mlir:\d+:\d+: error: '[\w.]+' op ", alone[0]), alone


def test_a_dynamic_batch_split_is_refused_in_words():
    spec = ConvSpec(
        n=2, c=4, h=6, w=6, k=4, r=3, s=3, padding=(1, 1), dynamic_batch=True
    )
    with pytest.raises(PassError, match=r"any batch \(batch=dynamic\).*no splits yet"):
        Pipeline.parse("affinec-split-reduction{splits=2}").run(build(spec))


def test_a_recorded_split_affinec_default_cannot_configure_is_refused_at_its_band(
    tmp_path,
):
    """A module whose split (`affinec.splits`) `config_for` cannot configure:
    affinec-default refuses it when it runs, at the band that records it."""
    module = build(MatmulSpec(m=8, n=8, k=3))
    Pipeline.parse("affinec-split-reduction{splits=3}").run(module)
    text = str(module).replace("affinec.splits = 3", "affinec.splits = 5")
    (error,) = errors(run(tmp_path, "affinec-opt", text, "-p", "affinec-default"))
    assert error == (
        f"{tmp_path}/input.mlir:{line_of(text, 'affine.parallel')}:5: error: "
        "'affine.parallel' op affinec-default: splits=5: the reduction has 3 steps"
    )


def test_a_split_that_suits_the_spec_still_compiles():
    spec = MatmulSpec(m=8, n=8, k=16)
    module = build(spec)
    Pipeline.for_module(
        "affinec-split-reduction{splits=2},affinec-default", module
    ).run(module)
    assert "gpu.module" in str(module)


# -- (b) affine constants past 64 bits ---------------------------------------------------

BIG = "9223372036854775808"  # 2^63

OUT_OF_RANGE = {
    "set": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        "  affine.for %i = 0 to 4 {\n"
        f"    affine.if affine_set<(d0) : (d0 - {BIG} >= 0)>(%i) {{\n"
        "      affine.store %v, %A[%i] : memref<4xf32>\n"
        "    }\n  }\n  func.return\n}\n"
    ),
    "negative set": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        "  affine.for %i = 0 to 4 {\n"
        f"    affine.if affine_set<(d0) : (d0 + -{BIG} >= 0)>(%i) {{\n"
        "      affine.store %v, %A[%i] : memref<4xf32>\n"
        "    }\n  }\n  func.return\n}\n"
    ),
    "subscript": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        "  affine.for %i = 0 to 4 {\n"
        f"    affine.store %v, %A[%i * {BIG}] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "map": (
        f"#m = affine_map<(d0) -> (d0 floordiv {BIG})>\n"
        "func.func @f(%i: index) -> index {\n"
        "  %j = affine.apply #m(%i)\n  func.return %j : index\n}\n"
    ),
    "upper bound": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        f"  affine.for %i = 0 to {BIG} {{\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "lower bound": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        "  affine.for %i = -9223372036854775809 to 4 {\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "step": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        f"  affine.for %i = 0 to 4 step {BIG} {{\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "parallel bound": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        f"  affine.parallel (%i) = (0) to ({BIG}) {{\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "parallel step": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        f"  affine.parallel (%i) = (0) to (4) step ({BIG}) {{\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "  }\n  func.return\n}\n"
    ),
    "generic step": (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        '  "affine.for"() <{lowerBoundMap = affine_map<() -> (0)>, upperBoundMap = '
        f"affine_map<() -> (4)>, step = {BIG} : index, operandSegmentSizes = "
        "array<i32: 0, 0, 0>}> ({\n"
        "  ^bb0(%i: index):\n"
        "    affine.store %v, %A[%i] : memref<4xf32>\n"
        "    affine.yield\n"
        "  }) : () -> ()\n  func.return\n}\n"
    ),
    "index constant": (
        "func.func @f() -> index {\n"
        "  %c = arith.constant -9223372036854775809 : index\n"
        "  func.return %c : index\n}\n"
    ),
}
"""Constants no `index` holds, where each kind of op takes one; the messages and
columns are mlir-opt 22's."""

EXPECTED = {
    "set": "3:39: error: constant too large for index",
    "negative set": "3:40: error: constant too large for index",
    "subscript": "3:30: error: constant too large for index",
    "map": "1:38: error: constant too large for index",
    "upper bound": "2:24: error: integer constant out of range for attribute",
    "lower bound": "2:20: error: integer constant out of range for attribute",
    "step": "2:31: error: integer constant out of range for attribute",
    "parallel bound": "2:34: error: constant too large for index",
    "parallel step": "2:43: error: constant too large for index",
    "generic step": "2:105: error: integer constant out of range for attribute",
    "index constant": "2:24: error: integer constant out of range for attribute",
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_a_constant_past_64_bits_is_refused_as_mlir_refuses_it(tmp_path, case):
    (error, *_) = errors(run(tmp_path, "affinec-opt", OUT_OF_RANGE[case]))
    assert error == f"{tmp_path}/input.mlir:{EXPECTED[case]}"


@needs_mlir_opt
@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE))
def test_mlir_opt_refuses_the_same_constants_in_the_same_words(tmp_path, case):
    path = tmp_path / "input.mlir"
    path.write_text(OUT_OF_RANGE[case])
    with pytest.raises(MlirOptError) as refused:
        mlir_opt("", str(path))
    first = next(x for x in str(refused.value).splitlines() if "error: " in x)
    assert first == f"{path}:{EXPECTED[case]}"


IN_RANGE = (
    "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
    "  affine.for %i = -9223372036854775808 to 4 {\n"
    "    affine.if affine_set<(d0) : (d0 - 9223372036854775807 >= 0)>(%i) {\n"
    "      affine.store %v, %A[%i] : memref<4xf32>\n"
    "    }\n  }\n  func.return\n}\n"
)


def test_the_largest_constants_that_fit_are_read(tmp_path):
    outcome = run(tmp_path, "affinec-opt", IN_RANGE)
    assert outcome.code == 0, outcome.report()
    assert "-9223372036854775808 to 4" in outcome.stdout
    assert "d0 - 9223372036854775807 >= 0" in outcome.stdout


@needs_mlir_opt
def test_mlir_opt_reads_the_largest_constants_that_fit():
    assert "9223372036854775807" in mlir_opt(IN_RANGE)


def _constants(e: AffineExpr) -> list[int]:
    return [s.value for s in e.dfs() if hasattr(s, "value")]


@pytest.mark.parametrize(
    "build_expr",
    [
        lambda d: add(add(d, AffineExpr.constant(INDEX_MAX)), AffineExpr.constant(1)),
        lambda d: add(add(d, AffineExpr.constant(INDEX_MIN)), AffineExpr.constant(-1)),
        lambda d: multiply(
            multiply(d, AffineExpr.constant(2**62)), AffineExpr.constant(4)
        ),
        lambda d: add(AffineExpr.constant(INDEX_MAX), AffineExpr.constant(INDEX_MAX)),
        lambda d: add(
            multiply(d, AffineExpr.constant(INDEX_MAX)),
            multiply(d, AffineExpr.constant(2)),
        ),
    ],
    ids=["sum", "difference", "product", "constants", "like terms"],
)
def test_a_fold_that_would_overflow_is_left_unfolded(build_expr):
    """Folding constants never makes one no `index` holds: the terms stay apart."""
    e = build_expr(AffineExpr.dimension(0))
    assert all(INDEX_MIN <= c <= INDEX_MAX for c in _constants(e)), e


def test_lower_affine_and_the_verifier_refuse_a_constant_built_past_64_bits():
    """The same constant built through the API (no parser to refuse it): the
    verifier names it, and lower-affine refuses it at the op, before rewriting."""
    text = (
        "func.func @f(%i: index) -> index {\n"
        "  %j = affine.apply affine_map<(d0) -> (d0 + 1)>(%i)\n"
        "  func.return %j : index\n}\n"
    )
    module = parse_module(make_context(), text)
    (apply_op,) = [o for o in module.walk() if isinstance(o, affine.ApplyOp)]
    apply_op.map = AffineMapAttr(
        AffineMap(1, 0, (AffineExpr.dimension(0) + AffineExpr.constant(2**63),))
    )
    with pytest.raises(VerifyException, match="too large for index"):
        verify(module)
    with pytest.raises(
        PassError, match="cannot lower the constant 9223372036854775808"
    ):
        Pipeline.parse("lower-affine").run(module, verify_each=False)


def test_lowered_constants_stay_index_constants_and_the_levels_agree():
    """The constants lower-affine makes (a negated or folded term) are index
    constants that print and read back, and the two levels compute the same."""
    text = (
        "func.func @f(%A: memref<4xf32>, %v: f32) {\n"
        "  affine.for %i = 0 to 4 {\n"
        "    affine.if affine_set<(d0) : (d0 - 9223372036854775807 >= 0)>(%i) {\n"
        "      affine.store %v, %A[%i] : memref<4xf32>\n"
        "    }\n"
        "    affine.if affine_set<(d0) : (-d0 + 9223372036854775807 >= 0)>(%i) {\n"
        "      affine.store %v, %A[%i] : memref<4xf32>\n"
        "    }\n  }\n  func.return\n}\n"
    )
    ctx = make_context()
    module = parse_module(ctx, text)
    before = np.zeros(4, np.float32)
    interpret(module, "f", before, np.float32(1.0))
    Pipeline.parse("lower-affine").run(module)
    reread = parse_module(make_context(), str(module))
    after = np.zeros(4, np.float32)
    interpret(reread, "f", after, np.float32(1.0))
    assert before.tolist() == after.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_an_overflowing_literal_is_a_parse_error_of_the_api_too():
    with pytest.raises(ParseError, match="constant too large for index"):
        parse_module(make_context(), OUT_OF_RANGE["set"])


# -- (c) affinec-mma-sync on an accumulator read another way -----------------------------


@pytest.fixture(scope="module")
def before_mma() -> tuple[str, str]:
    """A 16x16x16 f16 product just before affinec-mma-sync, and that pass."""
    spec = MatmulSpec(m=16, n=16, k=16, dtype="f16")
    passes = default_passes(config_for(spec))
    k = [p.name for p in passes].index("affinec-mma-sync")
    module = build(spec)
    Pipeline(passes[:k]).run(module)
    return str(module), Pipeline(passes[k : k + 1]).__str__()


@pytest.mark.parametrize("which", ["%old", "%sum"], ids=["compute", "write-back"])
def test_mma_sync_refuses_an_accumulator_it_does_not_read_with_affine_load(
    tmp_path, before_mma, which
):
    """A padded load of the accumulator (in the accumulation, or in the write-back)
    is refused at that load: the rewrite erased it while it still had uses."""
    text, mma = before_mma
    read = f"{which} = affine.load %acc["
    assert read in text
    bad = text.replace(read, f"{which} = affinec.padded_load %acc[")
    (error,) = errors(run(tmp_path, "affinec-opt", bad, "-p", mma))
    assert f"input.mlir:{line_of(bad, which + ' = affinec.padded_load')}:" in error
    assert (
        "'affinec.padded_load' op uses the accumulator: the MMA rewrite takes it read "
        "by affine.load and written by affine.store only"
    ) in error


def test_mma_sync_still_rewrites_the_accumulator_read_with_affine_load(
    tmp_path, before_mma
):
    text, mma = before_mma
    outcome = run(tmp_path, "affinec-opt", text, "-p", mma)
    assert outcome.code == 0, outcome.report()
    assert "nvgpu.mma.sync" in outcome.stdout


# -- (d) the naive band's passes on a module lowered to cf -------------------------------


@pytest.mark.parametrize(
    "pass_text, why",
    [
        ("affine-loop-tile", "affine-loop-tile tiles the unmapped affine.parallel"),
        (
            "affinec-split-reduction{splits=2}",
            "affinec-split-reduction runs on the naive IR",
        ),
        (
            "affinec-pad-channels{multiple=4}",
            "affinec-pad-channels runs on the naive IR",
        ),
    ],
)
def test_a_module_lowered_to_cf_is_refused_by_the_naive_bands_passes(
    tmp_path, pass_text, why
):
    module = build(MatmulSpec(m=8, n=8, k=3))
    Pipeline.parse("lower-affine,convert-scf-to-cf").run(module)
    text = str(module)
    blocks = len(module.body.block.first_op.body.blocks)  # pyright: ignore
    (error,) = errors(run(tmp_path, "affinec-opt", text, "-p", pass_text))
    assert error.startswith(
        f"{tmp_path}/input.mlir:{line_of(text, 'func.func')}:3: error: 'func.func' op "
        f"has {blocks} blocks, its control flow lowered to cf: {why}"
    )


# -- (e) affine-loop-tile's default sizes on a dynamic batch -----------------------------


def test_the_default_tile_of_an_unknown_extent_is_1():
    assert default_tile_sizes((None, 2, 3, 3))[0] == 1
    assert default_tile_sizes((None, 64, 56, 56)) == (1, 1, 16, 16)
    # the budget an unknown extent leaves goes to the others
    assert default_tile_sizes((2, None, 4)) == (2, 1, 4)


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(n=2, c=2, h=3, w=3, k=2, r=1, s=1, dynamic_batch=True),
        ConvSpec(n=3, c=2, h=4, w=4, k=3, r=3, s=3, padding=(1, 1), dynamic_batch=True),
        ConvSpec(n=1, c=2, h=2, w=2, k=1, r=1, s=1, layout="nhwc", dynamic_batch=True),
    ],
    ids=lambda s: s.to_text(),
)
def test_affine_loop_tile_takes_its_own_defaults_on_a_dynamic_batch(spec):
    """Tiled by its own defaults (it gave the batch a tile of 2 or more and refused
    it), checked by the interpreter against the naive IR."""
    module = build(spec)
    Pipeline.parse("affine-loop-tile").run(module, check=True)
    assert "to (symbol(%batch)" in str(module)


# -- (f) affinec compile --wgmma with its knobs and no --stages --------------------------

WGMMA_FLAGS = [
    ["--wgmma-tile", "128,128"],
    ["--wgmma-tile", "64,256"],
    ["--wgmma-schedule", "in-flight"],
    ["--wgmma-schedule", "specialized"],
    ["--wgmma-schedule", "cooperative", "--wgmma-tile", "128,256"],
    ["--splits", "2"],
    ["--splits", "4", "--wgmma-tile", "64,128"],
]


def _config(argv: list[str]):
    args = build_parser().parse_args(argv)
    spec = spec_from_args(args.kind, args)
    return spec, config_from_args(args, spec, args.arch)


MATMUL_ARGV = [
    "compile", "matmul", "--m", "256", "--n", "256", "--k", "256",
    "--dtype", "f16", "--arch", "sm_90a", "--wgmma",
]  # fmt: skip
CONV_ARGV = [
    "compile", "conv", "--n", "1", "--c", "256", "--h", "16", "--w", "16", "--k",
    "128", "--r", "3", "--s", "3", "--pad", "1", "--layout", "nhwc",
    "--filter-layout", "rsck", "--dtype", "f16", "--arch", "sm_90a", "--wgmma",
]  # fmt: skip


POINTWISE_ARGV = [
    "compile", "conv", "--n", "2", "--c", "256", "--h", "16", "--w", "16", "--k",
    "128", "--r", "1", "--s", "1", "--layout", "nhwc", "--filter-layout", "rsck",
    "--dtype", "f16", "--arch", "sm_90a", "--wgmma",
]  # fmt: skip
"""A 1x1 convolution: the route takes it as the product of its flattened pixels."""


@pytest.mark.parametrize(
    "argv",
    [MATMUL_ARGV, CONV_ARGV, POINTWISE_ARGV],
    ids=["matmul", "conv", "pointwise conv"],
)
@pytest.mark.parametrize("flags", WGMMA_FLAGS, ids=" ".join)
def test_wgmma_knobs_without_stages_give_a_stage_count_the_route_takes(argv, flags):
    """The stages are config_for's, or as many as the tile and schedule leave room
    for, never fewer than the schedule needs: the plan the pass builds has nothing
    to refuse (it got stages=1, which MMAs in flight cannot take)."""
    spec, config = _config([*argv, *flags])
    assert config is not None and config.wgmma
    tile = (config.wgmma_tile[0], config.wgmma_tile[1])
    if config.flatten_pixels:
        spec = flattened_spec(spec)
    plan = plan_of(
        spec, tile, config.stages, config.wgmma_schedule, splits=config.splits
    )
    assert config.stages >= (1 if config.wgmma_schedule == "waited" else 2)
    assert plan.problems() == []
    assert config.stages <= max(plan.steps, 2)


def test_the_stages_given_are_kept():
    _, config = _config([*MATMUL_ARGV, "--wgmma-tile", "128,128", "--stages", "3"])
    assert config is not None and config.stages == 3


@pytest.mark.parametrize(
    "flags",
    [["--wgmma-schedule", "specialized"], ["--splits", "2"]],
    ids=" ".join,
)
def test_affinec_compile_with_wgmma_knobs_writes_the_kernel(tmp_path, flags):
    out = tmp_path / "kernel.ptx"
    code, err = _affinec([*MATMUL_ARGV, *flags, "-o", str(out)])
    assert code == 0, err
    assert "wgmma.mma_async" in out.read_text()


def test_an_explicit_stage_count_the_schedule_cannot_take_is_still_refused(tmp_path):
    code, err = _affinec([*MATMUL_ARGV, "--stages", "1", "-o", str(tmp_path / "k.ptx")])
    assert code == 1, err
    assert "stages=1: 1 at least, 2 with MMAs in flight" in err
    assert "Traceback" not in err


def _affinec(argv: list[str]) -> tuple[int, str]:
    """`affinec ARGV` in-process: its exit code and standard error."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = affinec_main(argv)
    return code, err.getvalue()


# -- (g) the locations of the ops affinec-wgmma-gemm writes ------------------------------


def test_the_ops_affinec_wgmma_gemm_writes_are_located_at_the_users_function():
    spec = MatmulSpec(m=128, n=128, k=256, dtype="f16")
    text = naive(spec)
    module = parse_module(make_context(), text, "user.mlir")
    Pipeline.parse("nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm").run(module)
    function_line = line_of(text, "func.func")
    located = [o for o in module.walk() if isinstance(o.location, FileLineColLoc)]
    assert len(located) > 50
    for o in located:
        loc = o.location
        assert isinstance(loc, FileLineColLoc)
        if o is module:
            continue
        assert (loc.filename.data, loc.line.data) == ("user.mlir", function_line), (
            o.name
        )


def test_a_later_diagnostic_on_a_written_op_points_at_the_users_file(tmp_path):
    text = naive(MatmulSpec(m=128, n=128, k=256, dtype="f16"))
    pipeline = (
        "nvvm-attach-target{chip=sm_90a},affinec-wgmma-gemm,"
        "nvvm-attach-target{chip=sm_80},convert-nvgpu-to-nvvm"
    )
    (error,) = errors(run(tmp_path, "affinec-opt", text, "-p", pipeline))
    assert error.startswith(f"{tmp_path}/input.mlir:{line_of(text, 'func.func')}:3: ")
    assert "<stdin>" not in error
