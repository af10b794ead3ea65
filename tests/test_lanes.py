"""Bands run as lanes (`affinec.interpreter.lanes`): the same bits as iteration by
iteration, the same errors, and the bands it does not take still run."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from affinec.base.diagnostics import verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import ConvSpec
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import affine_passes
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter, InterpreterError
from affinec.interpreter.lanes import plan_lanes
from affinec.ir.context import make_context
from affinec.testing import kernel_configs, specs
from strategies import examples, with_nans


def _runs(module, spec, seed: int) -> list[np.ndarray]:
    """The output of `module` run as lanes and iteration by iteration."""
    name = contraction_of(spec).name
    outputs = []
    for lanes in (True, False):
        inputs = with_nans(random_inputs(spec, np.random.default_rng(seed)), seed)
        out = poisoned_output(spec)
        Interpreter(module, lanes=lanes).run(name, *inputs, out)
        outputs.append(out)
    return outputs


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@given(spec=specs(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(40), deadline=None)
def test_the_naive_level_as_lanes_is_bit_identical(spec, seed):
    module = build(spec)
    assert "LANE_IVS" in Interpreter(module).source  # every naive band takes lanes
    lanes, iterations = _runs(module, spec, seed)
    assert _same_bits(lanes, iterations)


@given(data=st.data(), seed=st.integers(0, 2**16))
@settings(max_examples=examples(20), deadline=None)
def test_the_tiled_level_as_lanes_is_bit_identical(data, seed):
    """After the affine passes the block bands (inside the grid's loops) run as
    lanes: partial tiles, promoted buffers and their copies included."""
    spec = data.draw(specs())
    config = data.draw(kernel_configs(spec))
    module = build(spec)
    Pipeline(affine_passes(config)).run(module)
    lanes, iterations = _runs(module, spec, seed)
    assert _same_bits(lanes, iterations)


def _module(body: str, signature: str):
    module = parse_module(make_context(), f"func.func @f({signature}) {{\n{body}\n}}")
    verify(module)
    return module


OUT_OF_BOUNDS = """
affine.parallel (%i, %j) = (0, 0) to (3, 4) {
  %v = affine.load %A[%i + %j] : memref<5xf32>
  affine.store %v, %B[%i, %j] : memref<3x4xf32>
}
func.return
"""


def test_an_access_out_of_bounds_is_the_same_error_as_lanes():
    module = _module(OUT_OF_BOUNDS, "%A: memref<5xf32>, %B: memref<3x4xf32>")
    messages = []
    for lanes in (True, False):
        with pytest.raises(InterpreterError) as info:
            Interpreter(module, lanes=lanes).run(
                "f", np.zeros(5, np.float32), np.zeros((3, 4), np.float32)
            )
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "index [5] is out of bounds for a memref of shape [5]" in messages[0]


@pytest.mark.parametrize(
    "body",
    [
        # an affine.if whose condition differs between iterations
        "affine.parallel (%i) = (0) to (4) {\n"
        "  affine.if affine_set<(d0) : (d0 - 2 >= 0)>(%i) {\n"
        "    affine.store %x, %B[%i] : memref<4xf32>\n  }\n}\nfunc.return",
        # a loop whose bound differs between iterations
        "affine.parallel (%i) = (0) to (4) {\n"
        "  affine.for %k = 0 to affine_map<(d0) -> (d0)>(%i) {\n"
        "    affine.store %x, %B[%k] : memref<4xf32>\n  }\n}\nfunc.return",
        # a loop-carried value
        "affine.parallel (%i) = (0) to (4) {\n"
        "  %s = affine.for %k = 0 to 3 iter_args(%a = %x) -> (f32) {\n"
        "    %b = arith.addf %a, %x : f32\n    affine.yield %b : f32\n  }\n"
        "  affine.store %s, %B[%i] : memref<4xf32>\n}\nfunc.return",
    ],
)
def test_a_band_that_does_not_take_lanes_runs_iteration_by_iteration(body):
    module = _module(body, "%x: f32, %B: memref<4xf32>")
    band = next(op for op in module.walk() if op.name == "affine.parallel")
    assert plan_lanes(band) is None  # pyright: ignore[reportArgumentType]
    results = []
    for lanes in (True, False):
        out = np.zeros(4, np.float32)
        Interpreter(module, lanes=lanes).run("f", np.float32(1.5), out)
        results.append(out)
    assert _same_bits(*results)


def test_stores_of_every_lane_to_one_place_leave_the_last():
    module = _module(
        "affine.parallel (%i) = (0) to (5) {\n"
        "  %v = affine.load %A[%i] : memref<5xf32>\n"
        "  affine.store %v, %B[0] : memref<1xf32>\n}\nfunc.return",
        "%A: memref<5xf32>, %B: memref<1xf32>",
    )
    out = np.zeros(1, np.float32)
    Interpreter(module).run("f", np.arange(5, dtype=np.float32), out)
    assert out[0] == 4.0


def test_large_private_buffers_run_in_fewer_lanes():
    spec = ConvSpec(1, 2, 4, 4, 2, 3, 3, padding=1)
    module = build(spec)
    band = next(op for op in module.walk() if op.name == "affine.parallel")
    plan = plan_lanes(band)  # pyright: ignore[reportArgumentType]
    assert plan is not None and plan.lanes > 1000


def test_a_map_that_ignores_the_band_index_is_the_same_for_every_lane():
    # (d0) -> (0) of the band's index: one element for all lanes (the last stays)
    module = _module(
        "affine.parallel (%i) = (0) to (5) {\n"
        "  %z = affine.apply affine_map<(d0) -> (0)>(%i)\n"
        "  %v = affine.load %A[%i] : memref<5xf32>\n"
        "  affine.store %v, %B[%z] : memref<1xf32>\n}\nfunc.return",
        "%A: memref<5xf32>, %B: memref<1xf32>",
    )
    band = next(op for op in module.walk() if op.name == "affine.parallel")
    plan = plan_lanes(band)  # pyright: ignore[reportArgumentType]
    assert plan is not None
    results = []
    for lanes in (True, False):
        out = np.zeros(1, np.float32)
        Interpreter(module, lanes=lanes).run("f", np.arange(5, dtype=np.float32), out)
        results.append(out)
    assert results[0][0] == results[1][0] == 4.0
