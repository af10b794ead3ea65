"""Depthwise convolutions with their channels in vectors: the naive IR sums the
window alone, its channel the innermost output dimension in NHWC;
`depthwise_config` (the tuner's variant 'depthwise vectors', not yet `config_for`'s:
no GPU has timed it) gives each thread a 16-byte vector of channels (8, 4 or 2 where the channel count
needs it) by a row of pixels; `affinec-map-threads` writes a register tile's chunk
as one vector store (`affinec/transforms/gpu/register_vectors.py`). Every pass's
output is checked by the interpreter against the one before, on random depthwise
shapes, and the PTX of MobileNetV2's first depthwise layer moves its channels in
16-byte accesses."""

import re
from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from affinec.backend.ptxas import find_ptxas
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.dialects import affine
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import (
    KernelConfig,
    channel_vector,
    config_for,
    depthwise_config,
    grid_blocks,
    strided_depthwise_config,
)
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.contraction import contraction_of, is_depthwise
from affinec.frontend.naive import build
from affinec.frontend.networks import network
from affinec.testing import conv_specs, epilogues
from affinec.tuning.neighbours import TUNER_NEIGHBOURS, variant_config
from strategies import examples


@st.composite
def depthwise_specs(draw, max_channels: int = 20, max_image: int = 9) -> ConvSpec:
    """Depthwise convolutions (one channel and one filter a group): 3x3 and 5x5,
    strides 1 and 2, any channel count (not only multiples of 8), NHWC most often."""
    r = draw(st.sampled_from([3, 5]))
    stride = draw(st.sampled_from([1, 2]))
    padding = draw(st.integers(0, r // 2))
    h = draw(st.integers(max(1, r - 2 * padding), max_image))
    w = draw(st.integers(max(1, r - 2 * padding), max_image))
    c = draw(st.integers(2, max_channels))
    layout = draw(st.sampled_from(["nhwc", "nhwc", "nchw"]))
    return ConvSpec(
        n=draw(st.integers(1, 2)),
        c=c,
        h=h,
        w=w,
        k=c,
        r=r,
        s=r,
        stride=stride,
        padding=padding,
        layout=layout,
        filter_layout=draw(st.sampled_from(["rsck", "kcrs"])),
        dtype=draw(st.sampled_from(["f16", "f16", "bf16", "f32"])),
        epilogue=draw(epilogues()),
        groups=c,
    )


def _vector_stores(module) -> list[affine.VectorStoreOp]:
    """The vector stores into the function's output (a convolution's or a
    product's)."""
    return [
        o
        for o in module.walk()
        if isinstance(o, affine.VectorStoreOp) and o.memref.name_hint in ("output", "C")
    ]


def _checked(spec, config: KernelConfig) -> list[affine.VectorStoreOp]:
    """Every pass's output checked against the one before; the vector stores of
    the output right after `affinec-map-threads`."""
    stores: list[affine.VectorStoreOp] = []

    def after(p, module, seconds) -> None:
        if p.name == "affinec-map-threads":
            stores.extend(_vector_stores(module))

    Pipeline(default_passes(config)).run(build(spec), check=True, callback=after)
    return stores


@settings(max_examples=examples(16), deadline=None)
@given(depthwise_specs())
def test_the_vector_rule_keeps_every_level_equal(spec):
    config = depthwise_config(spec)
    width = channel_vector(spec)
    stores = _checked(spec, config)
    if spec.layout == "nhwc" and width > 1:
        # a thread's vector of channels, stored whole, a store per pixel it owns
        assert config.vector_width == width
        assert stores and all(
            s.value.type.get_shape() == (width,)  # pyright: ignore
            for s in stores
        )
    elif spec.layout == "nhwc":  # odd channels: strided across the block
        assert not stores


@settings(max_examples=examples(10), deadline=None)
@given(depthwise_specs(max_channels=24), st.data())
def test_any_block_and_vector_keep_every_level_equal(spec, data):
    # blocks that cut the channels or pixels short (partial tiles), narrower
    # vectors, rows of any length: stored as vectors where a chunk is whole and
    # aligned, element by element where not
    assume(spec.layout == "nhwc")
    names = [n for n, _ in contraction_of(spec).output_index]
    extents = [e for _, e in contraction_of(spec).output_index]
    g, ow = names.index("g"), names.index("ow")
    width = data.draw(st.sampled_from([1, 2, 4, 8]), "width")
    chunks = data.draw(st.integers(1, max(1, extents[g] // width)), "chunks")
    tiles = [
        data.draw(st.integers(1, min(e, 4)), n)
        for n, e in zip(names, extents, strict=True)
    ]
    tiles[g] = chunks * width
    registers = [1] * len(tiles)
    registers[g] = width
    registers[ow] = data.draw(st.integers(1, tiles[ow]), "row")
    config = KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=(spec.r, spec.s),
        register_tile=tuple(registers),
        vector_width=width,
        unroll_steps=data.draw(st.sampled_from([0, spec.s])),
        stages=2,
    )
    stores = _checked(spec, config)
    element = {"f32": 4}.get(spec.dtype, 2)
    whole = (
        width > 1
        and width * element <= 16
        and spec.c % width == 0
        and spec.c % tiles[g] == 0
    )
    assert bool(stores) == whole


@settings(max_examples=examples(10), deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 3).map(lambda x: 4 * x),
    st.sampled_from(["bias", "residual", "scale,bias,relu", "none"]),
    st.data(),
)
def test_a_products_chunks_read_and_store_vectors(m, n, epilogue, data):
    # an f32 product whose thread owns 4 contiguous columns: its output and the
    # epilogue's operands along them (bias, residual) move as 4-float vectors
    spec = MatmulSpec(m, n, 5, "f32", epilogue)
    config = KernelConfig(
        tile_sizes=(data.draw(st.integers(1, m)), n),
        reduction_tile_sizes=(5,),
        register_tile=(1, 4),
        vector_width=4,
    )
    assert _checked(spec, config)
    loads: list = []

    def after(p, module, seconds) -> None:
        if p.name == "affinec-map-threads":
            loads.extend(o for o in module.walk() if isinstance(o, affine.VectorLoadOp))

    Pipeline(default_passes(config)).run(build(spec), callback=after)
    operands = {"bias", "residual"} & set(epilogue.split(","))
    assert {str(x.memref.name_hint) for x in loads} >= operands


def test_the_naive_ir_has_no_unit_loops():
    text = str(build(DEPTHWISE_5X5))
    assert "affine.parallel (%n, %oh, %ow, %g)" in text
    assert "%filter[%r, %s, 0, %g]" in text
    assert "affine.for %c" not in text


DEPTHWISE_5X5 = ConvSpec(
    2, 24, 9, 9, 24, 5, 5, stride=2, padding=2, groups=24, layout="nhwc",
    filter_layout="rsck", dtype="f16", epilogue="bias,relu6",
)  # fmt: skip


@pytest.mark.parametrize(
    "c, width",
    [(32, 8), (24, 8), (20, 4), (6, 2), (5, 1)],
)
def test_the_vector_is_the_widest_that_divides_the_channels(c, width):
    spec = replace(DEPTHWISE_5X5, c=c, k=c, groups=c)
    assert channel_vector(spec) == width
    assert channel_vector(replace(spec, dtype="f32")) == min(width, 4)


def test_config_for_takes_the_vectors_and_the_strided_rule_is_a_named_variant():
    # the vectors beat the channels strided across the block on the H100: the
    # strided rule stays a variant the tuner tries
    vectors = variant_config(DEPTHWISE_5X5, "depthwise vectors")
    assert vectors == depthwise_config(DEPTHWISE_5X5) == config_for(DEPTHWISE_5X5)
    assert vectors.vector_width == 8
    before = variant_config(DEPTHWISE_5X5, "depthwise strided")
    assert before == strided_depthwise_config(DEPTHWISE_5X5) != vectors
    assert "depthwise strided" in TUNER_NEIGHBOURS
    assert before.vector_width == 1
    assert not _checked(DEPTHWISE_5X5, before)
    assert is_depthwise(DEPTHWISE_5X5)


def test_a_small_grid_takes_smaller_blocks_and_the_unfilled_variant_does_not():
    # MobileNetV2's 3x3 576 at 14x14, stride 2, batch 1: 9 blocks of 7x7 pixels
    # unfilled; filled, a thread's row shrinks to fill the chip
    (layer,) = [
        x
        for x in network("mobilenet_v2", 1)
        if x.name.startswith("depthwise 3x3/2 576")
    ]
    unfilled = variant_config(layer.spec, "depthwise unfilled")
    filled = variant_config(layer.spec, "depthwise vectors")
    assert grid_blocks(layer.spec, unfilled) < grid_blocks(layer.spec, filled)
    assert filled.vector_width == unfilled.vector_width == 8
    small = replace(layer.spec, h=6, w=6, c=16, k=16, groups=16)
    assert _checked(small, variant_config(small, "depthwise unfilled"))


def _mobilenet_v2_first_depthwise() -> ConvSpec:
    (layer,) = [
        x
        for x in network("mobilenet_v2", 32)
        if x.name.startswith("depthwise 3x3/1 32 @112")
    ]
    return layer.spec


def _instructions(ptx: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in re.findall(r"\b((?:ld|st)\.(?:global|shared)(?:\.nc)?\.[a-z0-9.]+)", ptx):
        counts[m] = counts.get(m, 0) + 1
    return counts


def test_mobilenet_v2s_depthwise_layer_moves_16_byte_vectors():
    # 3x3, 32 channels at 112x112, batch 32: each thread stores its 8 pixels as 8
    # 16-byte vectors of 8 channels and reads the input tile in 16-byte shared
    # loads; the tiles come in by 16-byte asynchronous copies
    spec = _mobilenet_v2_first_depthwise()
    kernel = compile_to_ptx(spec, depthwise_config(spec), arch="sm_90a")
    counts = _instructions(kernel.ptx)
    assert counts.get("st.global.v4.b32") == 8
    assert not [x for x in counts if x.startswith("st.global") and "v4" not in x]
    assert counts.get("ld.shared.v4.b32", 0) > 0
    assert not [x for x in counts if x.startswith("ld.shared") and "v4" not in x]
    # the input and the filter come in by 16-byte asynchronous copies alone
    assert not [x for x in counts if x.startswith(("ld.global", "st.shared"))]
    copies = re.findall(
        r"cp\.async\.\w+\.shared\.global \[[^]]+\], \[[^]]+\], (\d+)", kernel.ptx
    )
    assert copies and set(copies) == {"16"}


@pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas")
def test_mobilenet_v2s_depthwise_layer_does_not_spill():
    spec = _mobilenet_v2_first_depthwise()
    resources = compile_to_ptx(spec, depthwise_config(spec), arch="sm_90a").resources()
    assert resources.spill_stores == resources.spill_loads == 0
    assert resources.local_memory == 0


def test_what_a_depthwise_convolution_does_not_take_is_refused_by_name():
    # no channels summed: nothing for the tensor cores' k, a split or a padding
    from affinec.base.diagnostics import PassError
    from affinec.passes.affinec_pad_channels import AffinecPadChannels

    f32 = replace(DEPTHWISE_5X5, dtype="f32")
    with pytest.raises(ValueError, match="depthwise convolution sums its window"):
        config_for(f32, tf32=True)
    with pytest.raises(ValueError, match="1 channels a group"):
        config_for(DEPTHWISE_5X5, splits=2)
    with pytest.raises(PassError, match="no channel reduction to pad"):
        Pipeline([AffinecPadChannels(multiple=4)]).run(build(DEPTHWISE_5X5))
    mma = KernelConfig(tile_sizes=(1, 3, 5, 24), reduction_tile_sizes=(5, 5), mma=True)
    with pytest.raises(PassError, match="the tensor cores take no such dimension"):
        Pipeline(default_passes(mma)).run(build(DEPTHWISE_5X5))


@settings(max_examples=examples(8), deadline=None)
@given(conv_specs(max_channels=8, max_image=5), st.data())
def test_a_dense_convolutions_chunks_keep_every_level_equal(spec, data):
    # any f32 convolution in NHWC whose thread owns 4 contiguous output channels:
    # stored (and its residual read) as 4-float vectors where the chunk is aligned
    spec = replace(spec, dtype="f32", layout="nhwc", k=4 * spec.k, groups=1)
    names = [n for n, _ in contraction_of(spec).output_index]
    extents = [e for _, e in contraction_of(spec).output_index]
    tiles = [
        data.draw(st.integers(1, min(e, 3)), n)
        for n, e in zip(names, extents, strict=True)
    ]
    channels = names.index("k")
    tiles[channels] = 4 * data.draw(st.integers(1, spec.k // 4), "chunks")
    registers = [1] * len(tiles)
    registers[channels] = 4
    config = KernelConfig(
        tile_sizes=tuple(tiles),
        reduction_tile_sizes=tuple(e for _, e in contraction_of(spec).reduction_index),
        register_tile=tuple(registers),
        vector_width=4,
    )
    stores = _checked(spec, config)
    assert bool(stores) == (spec.k % tiles[channels] == 0)


def test_the_shared_tiles_are_padded_for_the_16_byte_loads():
    # the accumulation reads each tap's 8 channels as one 16-byte vector, which the
    # bank model sees: the planner pads the input tile's rows so that a phase of 8
    # lanes (two rows of four vectors) hits every bank once
    from affinec.transforms.gpu.bands import grid_parallels
    from affinec.transforms.gpu.bank_conflicts import conflicts

    spec = _mobilenet_v2_first_depthwise()
    passes = default_passes(depthwise_config(spec))
    names = [p.name for p in passes]
    module = build(spec)
    Pipeline(passes[: names.index("affinec-plan-shared-memory") + 1]).run(module)
    (grid,) = grid_parallels(module)
    loads = [a for a in conflicts(grid) if isinstance(a.op, affine.VectorLoadOp)]
    assert {a.buffer.name_hint for a in loads} == {"input_shared", "filter_shared"}
    assert all(a.wavefronts == a.ideal for a in loads)
