"""The promoted and mapped levels: `affine-data-copy-generate`, register tiles,
FMA contraction, 32-bit indices. Each pass proven on the interpreter (bit for bit,
but FMA contraction, held to the dtype's tolerance), on random specs and options;
the reference design's footprint of ResNet-50's first layer; refusals located and
before rewriting."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import INDEX_BITWIDTH
from affinec.driver.config import KernelConfig, config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import (
    affine_passes,
    default_passes,
    gpu_to_nvvm_passes,
    map_to_gpu_passes,
)
from affinec.frontend.contraction import contraction_of
from affinec.frontend.naive import build
from affinec.interpreter.support import fused_multiply_add
from strategies import conv_specs, matmul_specs


def _reduction_tiles(draw, spec) -> tuple[int, ...]:
    """Order-keeping reduction tiles: leading tiles of 1, one cut dimension, the rest
    whole."""
    extents = [e for _, e in contraction_of(spec).reduction_index]
    cut = draw(st.integers(0, len(extents)))
    tiles = []
    for k, e in enumerate(extents):
        if k < cut:
            tiles.append(1)
        elif k == cut:
            tiles.append(draw(st.integers(1, e)))
        else:
            tiles.append(e)
    return tuple(tiles)


@st.composite
def promoted_configs(draw):
    spec = draw(st.one_of(conv_specs(max_channels=4, max_image=7), matmul_specs(8)))
    c = contraction_of(spec)
    extents = [e for _, e in c.output_index]
    tiles = tuple(draw(st.integers(1, min(e, 6))) for e in extents)
    registers = tuple(draw(st.integers(1, t)) for t in tiles)
    config = KernelConfig(
        tile_sizes=tiles,
        reduction_tile_sizes=_reduction_tiles(draw, spec),
        separate=draw(st.booleans()),
        register_tile=registers if draw(st.booleans()) else (),
        vector_width=0,
        unroll_steps=draw(st.sampled_from([0, 2])),
    )
    reduction_innermost = draw(st.booleans())
    return spec, config, reduction_innermost


@given(promoted_configs())
def test_promotion_and_register_tiles_keep_the_result(case):
    spec, config, reduction_innermost = case
    module = build(spec)
    passes = default_passes(config)
    if reduction_innermost and isinstance(spec, ConvSpec | MatmulSpec):
        for k, p in enumerate(passes):
            if p.name == "affine-data-copy-generate":
                passes[k] = type(p)(reduction_innermost=True)
    # Every pass but affinec-contract-fma bit-identical; it within the tolerance.
    Pipeline(passes).run(module, check=True)


@given(conv_specs(max_channels=4, max_image=7))
def test_the_default_configuration_compiles_and_keeps_the_result(spec):
    module = build(spec)
    Pipeline(default_passes(config_for(spec))).run(module, check=True)


def _shared_shapes(module) -> dict:
    return {
        op.memref.name_hint: op.memref.type.get_shape()
        for op in module.walk()
        if op.name == "memref.alloc"
        and gpu.memory_space(op.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
    }


def test_resnet50_first_layer_footprint_is_the_reference_designs():
    # A 16x16 output tile of a 7x7 stride-2 convolution reads 37x37 of the input
    # (one channel tile of 1 here) and 64x1x7x7 of the filter.
    spec = ConvSpec(1, 4, 224, 224, 64, 7, 7, stride=2, padding=3)
    module = build(spec)
    config = KernelConfig(tile_sizes=(1, 64, 16, 16), reduction_tile_sizes=(1, 7, 7))
    Pipeline(affine_passes(config)).run(module)
    shapes = _shared_shapes(module)
    assert shapes == {"input_shared": (1, 1, 37, 37), "filter_shared": (64, 1, 7, 7)}


def test_a_step_that_fixes_the_filter_row_copies_every_other_input_row():
    # Stride 2, one filter row a step: the block's 16 output rows read input rows
    # 2 * oh + r, a lattice of 16 rows, not the 31 of the box around them; along
    # the columns the whole row of taps is read (37).
    spec = ConvSpec(1, 4, 224, 224, 64, 7, 7, stride=2, padding=3)
    module = build(spec)
    config = KernelConfig(tile_sizes=(1, 64, 16, 16), reduction_tile_sizes=(1, 1, 7))
    Pipeline(affine_passes(config)).run(module)
    shapes = _shared_shapes(module)
    assert shapes == {"input_shared": (1, 1, 16, 37), "filter_shared": (64, 1, 1, 7)}
    # the compute band reads row %oh1 of the tile (input row 2 * %oh1 + r)
    assert "%input_shared[%n1_1, 0, %oh1_1, %ow1_1 * 2 + %s1]" in str(module)


@pytest.mark.parametrize(
    ("stride", "dilation", "rtiles"),
    [
        ((2, 3), (1, 1), (1, 1, 3)),
        ((3, 1), (2, 1), (1, 1, 3)),
        ((2, 2), (1, 1), (1, 2, 3)),
    ],
)
def test_strided_footprints_keep_the_result(stride, dilation, rtiles):
    spec = ConvSpec(2, 3, 13, 14, 5, 3, 3, stride=stride, dilation=dilation, padding=1)
    config = KernelConfig(tile_sizes=(1, 4, 3, 5), reduction_tile_sizes=rtiles)
    Pipeline(default_passes(config)).run(build(spec), check=True)


def test_copies_over_the_capacity_are_refused_before_rewriting():
    spec = ConvSpec(1, 64, 16, 16, 64, 3, 3, padding=1)
    module = build(spec)
    Pipeline.parse(
        "affine-loop-tile{tile-sizes=1,64,16,16 reduction-tile-sizes=64,3,3},"
        "affinec-split,affinec-sink,affinec-canonicalize"
    ).run(module)
    before = str(module)
    with pytest.raises(PassError, match=r"need \d+ bytes of shared memory, more than"):
        Pipeline.parse("affine-data-copy-generate{fast-mem-capacity=4}").run(module)
    assert str(module) == before
    with pytest.raises(PassError, match="fast-mem-capacity must be between"):
        Pipeline.parse("affine-data-copy-generate{fast-mem-capacity=0}").run(module)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("register-tile=1,2", "2 sizes for a band of 4 dimensions"),
        ("register-tile=1,0,1,1", "must be positive"),
        ("register-tile=1,2,4,4 threads-per-block=3", "needs 2 threads"),
        ("register-tile=1,2,2,2 vector-width=3", "vector-width 3 does not divide"),
        ("register-tile=1,2,2,2 unroll-steps=99", "unroll-steps must be between"),
    ],
)
def test_illegal_register_tiles_are_refused(options, message):
    module = build(ConvSpec(1, 2, 6, 6, 4, 3, 3, padding=1))
    Pipeline.parse(
        "affine-loop-tile{tile-sizes=1,4,4,4},affinec-split,affinec-sink,"
        "affinec-canonicalize,affine-data-copy-generate,affinec-place-buffers"
    ).run(module)
    before = str(module)
    with pytest.raises(PassError, match=message):
        Pipeline.parse(f"affinec-map-threads{{{options}}}").run(module)
    assert str(module) == before


def test_register_tiles_keep_the_accumulator_in_the_threads_registers():
    spec = ConvSpec(1, 4, 8, 8, 8, 3, 3, padding=1, layout="nhwc", filter_layout="rsck")
    module = build(spec)
    config = KernelConfig(
        tile_sizes=(1, 4, 8, 8),
        reduction_tile_sizes=(1, 1, 4),
        register_tile=(1, 2, 2, 4),
    )
    mapped = [*affine_passes(config), *map_to_gpu_passes(config)[:3]]
    Pipeline(mapped).run(module)
    private = [
        op.memref.type
        for op in module.walk()
        if op.name == "memref.alloc"
        and gpu.memory_space(op.memref.type) == gpu.PRIVATE_ADDRESS_SPACE
    ]
    assert [t.get_shape() for t in private] == [(1, 2, 2, 4)]
    threads = {
        op.upperBoundsMap.data.results[0].eval([], [])
        for op in module.walk()
        if isinstance(op, affine.ParallelOp)
        and op.attributes.get("affinec.mapping")
        and op.attributes["affinec.mapping"].data == "thread"
    }
    assert threads == {math.prod([1, 2, 4, 2])}  # 4 x 8 x 8 outputs over 2x2x4 tiles


def test_narrow_indices_marks_small_kernels_only():
    small = build(ConvSpec(1, 2, 6, 6, 4, 3, 3, padding=1))
    config = KernelConfig()
    passes = [
        *affine_passes(config),
        *map_to_gpu_passes(config),
        *gpu_to_nvvm_passes(config)[:2],  # outlining, narrowing
    ]
    assert passes[-1].name == "affinec-narrow-indices"
    Pipeline(passes).run(small)
    kernels = [op for op in small.walk() if isinstance(op, gpu.FuncOp)]
    assert kernels and all(
        k.attributes[INDEX_BITWIDTH].value.data == 32 for k in kernels
    )


def test_fused_multiply_add_rounds_once():
    # 1 + 2**-24 squared is 1 + 2**-23 + 2**-48: the product rounded to f32 loses the
    # last term, so a multiply then an add gives 2**-23 after cancelling; one
    # rounding keeps it.
    a = np.float32(1 + 2**-23)
    c = np.float32(-(1 + 2**-22))
    fused = fused_multiply_add(a, a, c)
    assert fused == np.float32(2**-46)
    assert np.float32(a * a) + c == np.float32(0)
    # and it agrees with exact arithmetic on random operands (f32 and f16)
    from fractions import Fraction

    rng = np.random.default_rng(0)
    for t in (np.float32, np.float16):
        for _ in range(500):
            x, y, z = (t(v) for v in rng.standard_normal(3))
            exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            got = fused_multiply_add(x, y, z)
            nearest = t(float(exact))
            candidates = [
                nearest,
                np.nextafter(nearest, t(1e4)),
                np.nextafter(nearest, t(-1e4)),
            ]
            best = min(abs(Fraction(float(v)) - exact) for v in candidates)
            assert abs(Fraction(float(got)) - exact) == best
