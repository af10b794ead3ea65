"""The four GPU decisions, one pass each: buffer placement, barriers, thread mapping,
conversion. Each level prints, re-parses and interprets like the one before it (the
hypothesis proof over random specs is `test_lowering.py`'s
`test_each_lowering_pass_keeps_the_result`); a barrier taken out is a data race the
interpreter reports at the mapped level, before any gpu op exists."""

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given

from affinec.base.diagnostics import PassError, verify
from affinec.base.locating_parser import parse_module
from affinec.base.spec import MatmulSpec
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import THREAD, mapping_of
from affinec.driver.pipeline import Pipeline
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import poisoned_output, random_inputs
from affinec.interpreter import Interpreter
from affinec.interpreter.shared_memory import DataRaceError
from affinec.ir.context import make_context
from strategies import conv_specs

INPUTS = Path(__file__).parent / "filecheck" / "lowering" / "inputs"
MATMUL = MatmulSpec(6, 5, 7)
MAPPED = "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads{threads-per-block=4}"


def _parse(text: str):
    module = parse_module(make_context(), text)
    verify(module)
    return module


def _matmul_shared():
    return _parse((INPUTS / "matmul_shared.mlir").read_text())


def _run(module, spec, seed=0):
    inputs = random_inputs(spec, np.random.default_rng(seed))
    out = poisoned_output(spec)
    Interpreter(module).run(contraction_of(spec).name, *inputs, out)
    return out


def test_placement_writes_memory_spaces():
    module = _matmul_shared()
    Pipeline.parse("affinec-place-buffers").run(module)
    spaces = {
        op.memref.name_hint: gpu.memory_space(op.memref.type)
        for op in module.walk()
        if op.name == "memref.alloc"
    }
    # %acc is indexed by the block bands' own variables; %tile is read across them.
    assert spaces == {
        "acc": gpu.PRIVATE_ADDRESS_SPACE,
        "tile": gpu.WORKGROUP_ADDRESS_SPACE,
    }


def test_barriers_go_between_the_copy_and_the_compute_and_are_idempotent():
    module = _matmul_shared()
    Pipeline.parse("affinec-place-buffers,affinec-insert-barriers").run(module)
    text = str(module)
    assert text.count("gpu.barrier") == 2
    Pipeline.parse("affinec-insert-barriers").run(module)
    assert str(module) == text


@pytest.mark.parametrize("generic", [False, True])
def test_every_decision_level_prints_reparses_and_interprets_alike(generic):
    from xdsl.printer import Printer

    module = _matmul_shared()
    expected = _run(module, MATMUL)
    for name in [*MAPPED.split(","), "affinec-convert-parallel-to-gpu"]:
        Pipeline.parse(name).run(module, check=False)
        stream = io.StringIO()
        Printer(stream=stream, print_generic_format=generic).print_op(module)
        reparsed = _parse(stream.getvalue())
        np.testing.assert_array_equal(_run(reparsed, MATMUL), expected)
        np.testing.assert_array_equal(_run(module, MATMUL), expected)


def test_the_mapped_level_has_thread_bands_and_no_block_bands():
    module = _matmul_shared()
    Pipeline.parse(MAPPED).run(module)
    mappings = [
        mapping_of(op) for op in module.walk() if isinstance(op, affine.ParallelOp)
    ]
    assert mappings.count("grid") == 1
    assert "block" not in mappings
    assert mappings.count(THREAD) == 4
    for op in module.walk():
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == THREAD:
            assert op.upperBoundsMap.data.results[0].eval([], []) == 4


def test_a_missing_barrier_is_a_race_at_the_mapped_level():
    module = _matmul_shared()
    Pipeline.parse(MAPPED).run(module)
    _run(module, MATMUL)  # with its barriers: no race
    barriers = [op for op in module.walk() if isinstance(op, gpu.BarrierOp)]
    for k in range(len(barriers)):
        broken = _matmul_shared()
        Pipeline.parse(MAPPED).run(broken)
        victim = [op for op in broken.walk() if isinstance(op, gpu.BarrierOp)][k]
        victim.detach()
        victim.erase()
        with pytest.raises(DataRaceError, match="data race on shared memory %tile"):
            _run(broken, MATMUL)


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("affinec-map-threads", "run affinec-place-buffers before affinec-map-threads"),
        (
            "affinec-insert-barriers",
            "run affinec-place-buffers before affinec-insert-barriers",
        ),
        (
            "affinec-place-buffers,affinec-convert-parallel-to-gpu",
            "run affinec-map-threads before affinec-convert-parallel-to-gpu",
        ),
        (
            "affinec-place-buffers,affinec-insert-barriers,affinec-map-threads,"
            "affinec-map-threads",
            "already mapped to threads",
        ),
    ],
)
def test_the_decisions_come_in_order(pipeline, message):
    module = _matmul_shared()
    *setup, last = Pipeline.parse(pipeline).passes
    Pipeline(setup).run(module)
    before = str(module)
    with pytest.raises(PassError, match=message):
        Pipeline([last]).run(module)
    assert str(module) == before


@given(conv_specs(max_channels=3, max_image=6))
def test_the_default_mapping_of_random_convolutions_is_exact(spec):
    module = build(spec)
    Pipeline.parse("affinec-tile-split-sink").run(module)
    Pipeline.parse("affinec-map-to-gpu").run(module, check=True)
