"""Equivalence of the affine passes under the interpreter: for random specs and random
legal options, every prefix of the tile/split/sink/canonicalize pipeline computes
bit for bit what the naive IR computes (`Pipeline.run(check=True)` interprets after
every pass and names the first that differs).

The passes keep the order of summation, so equality is exact; only
`reassociate=true` (reduction tiles that reorder the sum) is held to the dtype's
tolerance against the float64 reference instead, because reordering a float sum
changes its rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from affinec.base.spec import ConvSpec, MatmulSpec, Spec
from affinec.driver.pipeline import Pipeline
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.frontend.reference import (
    TOLERANCE,
    poisoned_output,
    random_inputs,
    reference,
    relative_error,
)
from affinec.interpreter import interpret
from affinec.passes.affine_loop_tile import AffineLoopTilePass
from affinec.passes.affinec_canonicalize import AffinecCanonicalizePass
from affinec.passes.affinec_sink import AffinecSinkPass
from affinec.passes.affinec_split import AffinecSplitPass
from affinec.transforms.affine.analysis import summation_order_kept
from strategies import conv_specs, matmul_specs, outer_specs


def output_extents(spec: Spec) -> list[int]:
    return [e for _, e in contraction_of(spec).output_index]


def reduction_extents(spec: Spec) -> list[int]:
    return [e for _, e in contraction_of(spec).reduction_index]


@st.composite
def tile_sizes(draw, extents: list[int]) -> tuple[int, ...]:
    """Block sizes for some leading dimensions, dividing or not, up to past the
    extent; sometimes none (the pass's defaults)."""
    if draw(st.booleans()):
        return ()
    count = draw(st.integers(1, len(extents)))
    return tuple(draw(st.integers(1, e + 1)) for e in extents[:count])


@st.composite
def order_keeping_reduction_sizes(draw, extents: list[int]) -> tuple[int, ...]:
    """Reduction sizes that keep the order of summation: some leading dimensions in
    tiles of 1, then one in tiles of any size, the rest whole (or larger); sometimes
    none (the pass's defaults)."""
    if not extents or draw(st.booleans()):
        return ()
    cut = draw(st.integers(0, len(extents) - 1))
    sizes = [1] * cut
    sizes.append(draw(st.integers(1, extents[cut] + 1)))
    sizes += [draw(st.integers(e, e + 1)) for e in extents[cut + 1 :]]
    sizes = sizes[: draw(st.integers(1, len(sizes)))]
    whole: list[int | None] = [None] * (len(extents) - len(sizes))
    assert summation_order_kept(extents, [*sizes, *whole])
    return tuple(sizes)


@st.composite
def specs_and_options(draw, specs=None):
    if specs is None:
        specs = st.one_of(conv_specs(), matmul_specs(), outer_specs())
    spec = draw(specs)
    tile = AffineLoopTilePass(
        tile_sizes=draw(tile_sizes(output_extents(spec))),
        reduction_tile_sizes=draw(
            order_keeping_reduction_sizes(reduction_extents(spec))
        ),
        separate=draw(st.booleans()),
    )
    return spec, tile


def passes_after(tile: AffineLoopTilePass) -> list:
    return [tile, AffinecSplitPass(), AffinecSinkPass(), AffinecCanonicalizePass()]


@given(specs_and_options(conv_specs()))
def test_every_prefix_is_bit_identical_conv(case) -> None:
    spec, tile = case
    Pipeline(passes_after(tile)).run(build(spec), check=True)


@given(specs_and_options(st.one_of(matmul_specs(), outer_specs())))
def test_every_prefix_is_bit_identical_matmul_and_outer(case) -> None:
    spec, tile = case
    Pipeline(passes_after(tile)).run(build(spec), check=True)


@given(specs_and_options(st.one_of(conv_specs(), matmul_specs())))
def test_canonicalize_first_then_sink(case) -> None:
    """Canonicalization between the passes (single-iteration tile loops removed
    before sinking) changes nothing either."""
    spec, tile = case
    passes = [
        tile,
        AffinecCanonicalizePass(),
        AffinecSplitPass(),
        AffinecCanonicalizePass(),
        AffinecSinkPass(),
    ]
    Pipeline(passes).run(build(spec), check=True)


@given(conv_specs(), st.data())
def test_sinking_below_every_reduction_loop(spec: ConvSpec, data) -> None:
    """`depth` = the whole reduction band: the reference design's sinking listing."""
    tile = AffineLoopTilePass(
        tile_sizes=data.draw(tile_sizes(output_extents(spec))),
    )
    passes = [tile, AffinecSplitPass(), AffinecSinkPass(depth=6)]
    Pipeline(passes).run(build(spec), check=True)


@given(st.one_of(conv_specs(), matmul_specs()), st.data())
def test_reassociating_reduction_tiles_stay_within_tolerance(spec: Spec, data) -> None:
    """Reduction sizes drawn freely may reorder the sum: the result then matches the
    float64 reference within the dtype's tolerance rather than bit for bit."""
    extents = reduction_extents(spec)
    sizes = tuple(data.draw(st.integers(1, e)) for e in extents)
    tile = AffineLoopTilePass(
        reduction_tile_sizes=sizes,
        reassociate=True,
        separate=data.draw(st.booleans()),
    )
    module = build(spec)
    Pipeline(passes_after(tile)).run(module, check=True)
    inputs = random_inputs(spec, np.random.default_rng(0))
    out = poisoned_output(spec)
    interpret(module, contraction_of(spec).name, *inputs, out)
    assert relative_error(out, reference(spec, *inputs)) <= TOLERANCE[spec.dtype]


def test_named_pipeline_runs_on_a_spec() -> None:
    module = build(MatmulSpec(m=5, n=7, k=3, epilogue="bias-relu"))
    Pipeline.parse("affinec-tile-split-sink").run(module, check=True)


@pytest.mark.parametrize(
    "spec",
    [
        ConvSpec(n=1, c=2, h=6, w=5, k=3, r=3, s=3, padding=1, layout="nhwc"),
        ConvSpec(n=2, c=1, h=5, w=5, k=2, r=2, s=2, filter_layout="rsck", dtype="f16"),
    ],
)
def test_separated_named_pipeline(spec: ConvSpec) -> None:
    module = build(spec)
    Pipeline.parse("affinec-tile-split-sink-separate").run(module, check=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "affine-loop-tile{tile-sizes=1,64,16,16 separate=true},affinec-split",
            "affine-loop-tile{tile-sizes=1,64,16,16 separate=true},affinec-split",
        ),
        (
            "builtin.module(func.func(affine-loop-tile{reduction-tile-sizes=1}),"
            "affinec-sink{depth=2})",
            "affine-loop-tile{reduction-tile-sizes=1},affinec-sink{depth=2}",
        ),
        (
            "affinec-tile-split-sink",
            "affine-loop-tile,affinec-split,affinec-sink,affinec-canonicalize",
        ),
    ],
)
def test_pipeline_text_round_trips(text: str, expected: str) -> None:
    """Pipelines print as `affinec-opt -p` spells them (kebab-case options) and
    parse back to the same passes."""
    pipeline = Pipeline.parse(text)
    assert str(pipeline) == expected
    assert Pipeline.parse(str(pipeline)).passes == pipeline.passes
