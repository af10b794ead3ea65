"""Every illegal option or input of the affine passes is refused with a `PassError`
naming the op and the option, before anything is rewritten."""

from __future__ import annotations

import pytest

from affinec.base.diagnostics import PassError
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec, MatmulSpec, OuterSpec
from affinec.driver.pipeline import Pipeline, PipelineError
from affinec.frontend.naive import build
from affinec.ir.context import make_context
from affinec.tools.opt import main as affinec_opt

CONV = str(build(ConvSpec(n=1, c=2, h=5, w=5, k=3, r=3, s=3, padding=1)))
OUTER = str(build(OuterSpec(m=4, n=5)))
MATMUL = str(build(MatmulSpec(m=4, n=5, k=6)))
TILED = "affine-loop-tile{tile-sizes=1,2,2,2}"


def refusal(text: str, pipeline: str) -> PassError:
    module = parse_module(make_context(), text)
    with pytest.raises(PassError) as info:
        Pipeline.parse(pipeline).run(module)
    # The refusing pass is the last one: the module is as the passes before it left it.
    passes = Pipeline.parse(pipeline).passes
    expected = parse_module(make_context(), text)
    Pipeline(passes[:-1]).run(expected)
    assert str(module) == str(expected), f"{passes[-1].name} rewrote before refusing"
    return info.value


@pytest.mark.parametrize(
    ("pipeline", "op", "message"),
    [
        (
            "affine-loop-tile{tile-sizes=1,0,2,2}",
            "affine.parallel",
            "tile-sizes=1,0,2,2: tile size 0 must be positive",
        ),
        (
            "affine-loop-tile{tile-sizes=-4}",
            "affine.parallel",
            "tile-sizes=-4: tile size -4 must be positive",
        ),
        (
            "affine-loop-tile{tile-sizes=1,2,2,2,2}",
            "affine.parallel",
            "tile-sizes=1,2,2,2,2 gives 5 sizes but the op has 4 dimensions",
        ),
        (
            "affine-loop-tile{reduction-tile-sizes=1,0}",
            "affine.for",
            "reduction-tile-sizes=1,0: tile size 0 must be positive",
        ),
        (
            "affine-loop-tile{reduction-tile-sizes=1,3,3,1}",
            "affine.for",
            "reduction-tile-sizes=1,3,3,1 gives 4 sizes but the op has 3 loops",
        ),
        (
            "affine-loop-tile{reduction-tile-sizes=2,1}",
            "affine.for",
            "reduction-tile-sizes=2,1 changes the order of summation over the band "
            "of extents 2,3,3",
        ),
        (
            "affine-loop-tile{reduction-tile-sizes=1,2,2}",
            "affine.for",
            "pass reassociate=true to accept a different rounding",
        ),
        (
            f"{TILED},affine-loop-tile",
            "affine.parallel",
            "is already mapped to 'grid'",
        ),
        (
            "affinec-split",
            "builtin.module",
            "has no affine.parallel mapped to 'block': affinec-split runs after "
            "affine-loop-tile",
        ),
        (
            f"{TILED},affinec-sink",
            "affine.parallel",
            "its body holds 'memref.alloca' beside its loop nests (run affinec-split "
            "first",
        ),
        (
            f"{TILED},affinec-split,affinec-sink{{depth=0}}",
            "builtin.module",
            "depth=0: the depth must be positive",
        ),
        (
            f"{TILED},affinec-split,affinec-sink{{depth=7}}",
            "affine.parallel",
            "depth=7 but its body is a perfect nest of only 6 loops",
        ),
        (
            "affinec-sink",
            "builtin.module",
            "has no affine.parallel mapped to 'block': affinec-sink runs after",
        ),
    ],
)
def test_conv_option_errors(pipeline: str, op: str, message: str) -> None:
    error = refusal(CONV, pipeline)
    assert error.op is not None and error.op.name == op
    assert message in error.message


def test_reduction_sizes_without_a_reduction() -> None:
    error = refusal(OUTER, "affine-loop-tile{reduction-tile-sizes=2}")
    assert error.op is not None and error.op.name == "affine.parallel"
    assert "has no reduction loops, but reduction-tile-sizes=2 was given" in (
        error.message
    )


def test_reassociate_accepts_what_the_order_check_refuses() -> None:
    module = build(ConvSpec(n=1, c=2, h=5, w=5, k=3, r=3, s=3, padding=1))
    Pipeline.parse("affine-loop-tile{reduction-tile-sizes=2,1 reassociate=true}").run(
        module
    )


NON_SIMPLE_PARALLEL = """
func.func @f(%A: memref<16xf32>) {
  affine.parallel (%i) = (1) to (16) step (2) {
    %v = affine.load %A[%i] : memref<16xf32>
    affine.store %v, %A[%i] : memref<16xf32>
  }
  func.return
}
"""

NON_SIMPLE_FOR = """
func.func @f(%A: memref<16xf32>) {
  affine.parallel (%i) = (0) to (16) {
    affine.for %j = 2 to 8 {
      %v = affine.load %A[%j] : memref<16xf32>
      affine.store %v, %A[%i] : memref<16xf32>
    }
  }
  func.return
}
"""

REDUCE = """
func.func @f(%A: memref<16xf32>) {
  %r = affine.parallel (%i) = (0) to (16) reduce ("addf") -> (f32) {
    %v = affine.load %A[%i] : memref<16xf32>
    affine.yield %v : f32
  }
  func.return
}
"""

ESCAPING_IV = """
func.func @f(%A: memref<16xindex>) {
  affine.parallel (%i) = (0) to (16) {
    %x = arith.addi %i, %i : index
    affine.store %x, %A[%i] : memref<16xindex>
  }
  func.return
}
"""

TRIANGULAR = """
func.func @f(%A: memref<16x16xf32>, %B: memref<16xf32>) {
  affine.parallel (%i) = (0) to (16) {
    affine.for %j = 0 to 16 {
      affine.for %k = 0 to affine_map<(d0) -> (d0)>(%j) {
        %v = affine.load %A[%j, %k] : memref<16x16xf32>
        affine.store %v, %B[%i] : memref<16xf32>
      }
    }
  }
  func.return
}
"""

ITER_ARGS = """
func.func @f(%A: memref<16x16xf32>, %B: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.parallel (%i) = (0) to (16) {
    %s = affine.for %j = 0 to 16 iter_args(%acc = %zero) -> (f32) {
      %v = affine.load %A[%i, %j] : memref<16x16xf32>
      %t = arith.addf %acc, %v : f32
      affine.yield %t : f32
    }
    affine.store %s, %B[%i] : memref<16xf32>
  }
  func.return
}
"""

NO_PARALLEL = """
func.func @f(%A: memref<16xf32>) {
  affine.for %i = 0 to 16 {
    %v = affine.load %A[%i] : memref<16xf32>
    affine.store %v, %A[%i] : memref<16xf32>
  }
  func.return
}
"""


@pytest.mark.parametrize(
    ("text", "pipeline", "op", "message"),
    [
        (
            NON_SIMPLE_PARALLEL,
            "affine-loop-tile",
            "affine.parallel",
            "is not a simple loop (dimension 0 has a lower bound other than 0 or a "
            "step other than 1); affine-loop-tile (tile-sizes) takes only simple "
            "loops: run affine-loop-normalize first",
        ),
        (
            NON_SIMPLE_FOR,
            "affine-loop-tile",
            "affine.for",
            "is not a simple loop (lower bound 0, step 1); affine-loop-tile "
            "(reduction-tile-sizes) takes only simple loops",
        ),
        (REDUCE, "affine-loop-tile", "affine.parallel", "has reductions"),
        (
            ESCAPING_IV,
            "affine-loop-tile",
            "affine.parallel",
            "cannot be tiled (tile-sizes): %i is used by 'arith.addi', which has no "
            "affine map to fold the tiled index into",
        ),
        (
            TRIANGULAR,
            "affine-loop-tile",
            "affine.for",
            "has a bound that depends on an enclosing loop of its band",
        ),
        (ITER_ARGS, "affine-loop-tile", "affine.for", "has iter_args"),
        (
            NO_PARALLEL,
            "affine-loop-tile{reduction-tile-sizes=2}",
            "builtin.module",
            "reduction-tile-sizes applies to affinec's tiling of an affine.parallel, "
            "and the module has none",
        ),
    ],
)
def test_tiling_input_errors(text: str, pipeline: str, op: str, message: str) -> None:
    error = refusal(text, pipeline)
    assert error.op is not None and error.op.name == op
    assert message in error.message


def test_nothing_is_rewritten_before_a_refusal() -> None:
    """The first function is legal, the second is not: neither is tiled."""
    text = MATMUL.replace("func.return\n  }\n}", "func.return\n  }\n") + (
        NON_SIMPLE_PARALLEL.replace("@f", "@g") + "}"
    )
    error = refusal(text, "affine-loop-tile")
    assert "is not a simple loop" in error.message


BLOCK_OUTSIDE_GRID = """
func.func @f(%A: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  affine.parallel (%i) = (0) to (16) {
    %acc = memref.alloca() : memref<f32>
    affine.store %zero, %acc[] : memref<f32>
    affine.for %j = 0 to 4 {
      %v = affine.load %acc[] : memref<f32>
      affine.store %v, %acc[] : memref<f32>
    }
    %s = affine.load %acc[] : memref<f32>
    affine.store %s, %A[%i] : memref<16xf32>
  } {affinec.mapping = "block"}
  func.return
}
"""


def _grid(body: str) -> str:
    return f"""
func.func @f(%A: memref<16xf32>, %S: memref<f32>) {{
  %zero = arith.constant 0.0 : f32
  affine.parallel (%i0) = (0) to (4) {{
    affine.parallel (%i1) = (0) to (4) {{
{body}
    }} {{affinec.mapping = "block"}}
  }} {{affinec.mapping = "grid"}}
  func.return
}}
"""


CROSSING_VALUE = _grid("""
      %acc = memref.alloca() : memref<f32>
      %w = arith.addf %zero, %zero : f32
      affine.store %zero, %acc[] : memref<f32>
      affine.for %j = 0 to 4 {
        %v = affine.load %acc[] : memref<f32>
        affine.store %v, %acc[] : memref<f32>
      }
      %s = affine.load %acc[] : memref<f32>
      %t = arith.addf %s, %w : f32
      affine.store %t, %A[%i0 * 4 + %i1] : memref<16xf32>
""")

ESCAPING_ACC = _grid("""
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %j = 0 to 4 {
        %v = memref.load %acc[] : memref<f32>
        affine.store %v, %acc[] : memref<f32>
      }
      %s = affine.load %acc[] : memref<f32>
      affine.store %s, %A[%i0 * 4 + %i1] : memref<16xf32>
""")

SHARED_WRITE = _grid("""
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %j = 0 to 4 {
        %v = affine.load %S[] : memref<f32>
        affine.store %v, %S[] : memref<f32>
      }
      %s = affine.load %acc[] : memref<f32>
      affine.store %s, %A[%i0 * 4 + %i1] : memref<16xf32>
""")


@pytest.mark.parametrize(
    ("text", "op", "message"),
    [
        (
            BLOCK_OUTSIDE_GRID,
            "affine.parallel",
            "is mapped to 'block' but not nested in an affine.parallel mapped to "
            "'grid'",
        ),
        (
            CROSSING_VALUE,
            "affine.parallel",
            "cannot be split: %w is computed in the initialization part and used in "
            "the write-back part",
        ),
        (
            ESCAPING_ACC,
            "affine.parallel",
            "cannot be split: %acc is used by 'memref.load', not only affine loads "
            "and stores",
        ),
        (
            SHARED_WRITE,
            "affine.parallel",
            "cannot be split: %S is written at an index that several iterations share",
        ),
    ],
)
def test_split_errors(text: str, op: str, message: str) -> None:
    error = refusal(text, "affinec-split")
    assert error.op is not None and error.op.name == op
    assert message in error.message


def _sinkable(loops: str, inner: str = "") -> str:
    return _grid(f"""
      affine.for %c0 = 0 to {loops} {{
        affine.for %c1 = 0 to 2 {{
          {inner}
        }}
      }} {{affinec.tile}}
""")


SHARED_ACCUMULATOR = _sinkable(
    "4",
    """%v = affine.load %S[] : memref<f32>
          affine.store %v, %S[] : memref<f32>""",
)

VARYING_INDEX = _sinkable(
    "4",
    """%v = affine.load %A[%i1 + %c1] : memref<16xf32>
          affine.store %v, %A[%i1 + %c1] : memref<16xf32>""",
)

BOUND_USES_BLOCK_IV = _grid("""
      affine.for %c0 = 0 to affine_map<(d0) -> (d0)>(%i1) {
        %v = affine.load %A[%i1] : memref<16xf32>
        affine.store %v, %A[%i1] : memref<16xf32>
      } {affinec.tile}
""")

CARRIED_VALUES = _grid("""
      %t = affine.for %c0 = 0 to 4 iter_args(%x = %zero) -> (f32) {
        affine.yield %x : f32
      } {affinec.tile}
""")

PASSED_VALUE = _grid("""
      %t = affine.for %c0 = 0 to 4 iter_args(%x = %zero) -> (f32) {
        affine.yield %x : f32
      } {affinec.tile}
      affine.for %c1 = 0 to 2 {
        affine.store %t, %A[%i1] : memref<16xf32>
      } {affinec.tile}
""")


@pytest.mark.parametrize(
    ("text", "op", "message"),
    [
        (
            PASSED_VALUE,
            "affine.for",
            "passes values out of its loop nest, so the block loop cannot be "
            "distributed over its loop nests",
        ),
        (
            SHARED_ACCUMULATOR,
            "affine.parallel",
            "cannot be sunk below the reduction loops: %S is written at an index "
            "that several iterations share (a loop-carried dependence between "
            "iterations)",
        ),
        (
            VARYING_INDEX,
            "affine.parallel",
            "cannot be sunk below the reduction loops: %A is written at an index "
            "that varies inside the loop",
        ),
        (
            BOUND_USES_BLOCK_IV,
            "affine.for",
            "has bounds that use the block loop's induction variables, so the block "
            "loop cannot move below it (depth=1)",
        ),
        (
            CARRIED_VALUES,
            "affine.for",
            "carries values (iter_args), so the block loop cannot move below it "
            "(depth=1)",
        ),
    ],
)
def test_sink_errors(text: str, op: str, message: str) -> None:
    error = refusal(text, "affinec-sink")
    assert error.op is not None and error.op.name == op
    assert message in error.message


@pytest.mark.parametrize(
    "pipeline",
    [
        "affine-loop-tile{tile-sizes=a}",
        "affine-loop-tile{tile-size=a}",
        "affinec-sink{depth=x}",
    ],
)
def test_malformed_options_are_pipeline_errors(pipeline: str) -> None:
    with pytest.raises(PipelineError):
        Pipeline.parse(pipeline)


def test_affinec_opt_prints_one_located_line(tmp_path, capsys) -> None:
    path = tmp_path / "conv.mlir"
    path.write_text(CONV)
    code = affinec_opt([str(path), "-p", "affine-loop-tile{tile-sizes=1,0}"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{path}:4:5: error: 'affine.parallel' op tile-sizes=1,0: tile size 0" in err
    assert "Traceback" not in err
