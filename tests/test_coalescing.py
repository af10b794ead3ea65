"""`affinec-coalesce-reduction`: a filter row's columns x the channels as one
reduction loop over collapsed shared tiles, the tensor cores' k for convolutions with
few channels (ResNet-50's first layer: 7 x 4 = 28 of k = 32).

The pass itself keeps every bit (same iterations, same order); the MMA levels after
it are held to the dtype's tolerance, proven by the warp-level interpreter on random
specs. Bands the pass cannot coalesce are left alone; rows ldmatrix cannot read
aligned are refused at the load.
"""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec
from affinec.dialects import affine
from affinec.driver.benchmark import DESIGN_CONVOLUTIONS, with_format
from affinec.driver.config import KernelConfig, config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import affine_passes, default_passes
from affinec.frontend.naive import build

CONV1_LIKE = ConvSpec(
    n=1,
    c=4,
    h=20,
    w=20,
    k=16,
    r=7,
    s=7,
    stride=2,
    padding=3,
    layout="nhwc",
    filter_layout="rsck",
    dtype="f16",
)


def _coalesced(spec: ConvSpec, **knobs) -> KernelConfig:
    config = config_for(spec, tf32=spec.dtype == "f32")
    assert config.coalesce_reduction, spec.to_text()
    return dataclasses.replace(config, **knobs)


@st.composite
def coalescible_specs(draw):
    # Rows of k start every stride x channels elements: 16 bytes for ldmatrix.
    dtype = draw(st.sampled_from(["f16", "bf16", "f32"]))
    c, stride_w = draw(
        st.sampled_from(
            [(4, 2), (2, 2), (4, 1)] if dtype == "f32" else [(4, 2), (8, 1), (2, 4)]
        )
    )
    r, s = draw(st.integers(1, 3)), draw(st.integers(2, 5))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(r, 8))
    w = draw(st.integers(max(1, s - 2 * padding[1]), 12))
    return ConvSpec(
        n=draw(st.integers(1, 2)),
        c=c,
        h=h,
        w=w,
        k=draw(st.integers(1, 12)),
        r=r,
        s=s,
        stride=(draw(st.integers(1, 2)), stride_w),
        padding=padding,
        layout="nhwc",
        filter_layout="rsck",
        dtype=dtype,
        epilogue=draw(st.sampled_from(["none", "relu", "bias-relu"])),
    )


@given(coalescible_specs(), st.sampled_from([(1, 1), (1, 2), (2, 1)]), st.booleans())
def test_coalesced_tensor_cores_keep_the_result(spec, warps, one_row_a_step):
    rows = 1 if one_row_a_step else spec.r
    config = _coalesced(
        spec,
        warp_grid=warps,
        reduction_tile_sizes=(rows, spec.s, spec.c),
        stages=2 if one_row_a_step and spec.r > 1 else 1,
    )
    Pipeline(default_passes(config)).run(build(spec), check=True)


def test_the_pass_coalesces_columns_and_channels_over_collapsed_tiles():
    config = _coalesced(
        CONV1_LIKE, tile_sizes=(1, 4, 4, 16), reduction_tile_sizes=(7, 7, 4), stages=1
    )
    module = build(CONV1_LIKE)
    Pipeline(affine_passes(config)).run(module, check=True)  # bit for bit
    text = str(module)
    # 13 = (4 - 1) * 2 + 7 input rows and columns, x 4 channels; 7 x 28 filter rows
    assert "memref<1x13x52xf16, 3 : i64>" in text
    assert "memref<7x28x16xf16, 3 : i64>" in text
    assert "affine.for %sc = 0 to 28" in text
    assert "%input_shared[%n1_1, %oh1_1 * 2 + %r1, %ow1_1 * 8 + %sc]" in text
    assert "%filter_shared[%r1, %sc, %k1_1]" in text


def test_the_pass_is_identity_where_the_loops_do_not_match():
    # KCRS filters: the channel loop is outside the columns' loop.
    spec = dataclasses.replace(CONV1_LIKE, layout="nchw", filter_layout="kcrs")
    assert not config_for(spec).coalesce_reduction
    config = dataclasses.replace(
        config_for(dataclasses.replace(spec, c=16)), coalesce_reduction=True
    )
    with_pass, without = build(spec), build(spec)
    Pipeline(affine_passes(config)).run(with_pass)
    off = dataclasses.replace(config, coalesce_reduction=False)
    Pipeline(affine_passes(off)).run(without)
    assert str(with_pass) == str(without)


def test_the_mma_step_pads_k_past_the_last_pixels_row():
    config = _coalesced(CONV1_LIKE, reduction_tile_sizes=(1, 7, 4), stages=2)
    module = build(CONV1_LIKE)
    passes = default_passes(config)
    mma = next(k for k, p in enumerate(passes) if p.name == "affinec-mma-sync")
    Pipeline(passes[: mma + 1]).run(module)
    allocs = [
        str(o.results[0].type)
        for o in module.walk()
        if o.name == "memref.alloc" and "3 : i64" in str(o.results[0].type)
    ]
    # k = 28 -> 32: the filter's rows, and 4 more elements past the input row's last
    # pixel's (zeroed once; the copies never write them), then padded against bank
    # conflicts and to 16-byte rows.
    assert any(t.startswith("memref<2x1x32x") for t in allocs), allocs
    loads = [o for o in module.walk() if o.name == "nvgpu.ldmatrix"]
    assert len(loads) == 2


def test_rows_ldmatrix_cannot_read_aligned_are_refused():
    spec = dataclasses.replace(CONV1_LIKE, c=3, k=8, h=12, w=12)
    config = KernelConfig(
        tile_sizes=(1, 4, 4, 8),
        reduction_tile_sizes=(1, 7, 3),
        reassociate=True,
        coalesce_reduction=True,
        mma=True,
        warp_grid=(1, 1),
    )
    with pytest.raises(
        PassError, match=r"k is %sc, .* rows start 6 elements apart along %ow"
    ):
        Pipeline(default_passes(config)).run(build(spec))


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_config_for_coalesces_resnet50s_first_layer(dtype):
    spec = with_format(DESIGN_CONVOLUTIONS["resnet50-conv1"], dtype)
    config = config_for(spec, tf32=dtype == "f32")
    assert config.mma and config.coalesce_reduction
    assert config.reduction_tile_sizes == (1, 7, 4)  # one filter row a step
    # not where one tap's channels already fill k, nor where rows would misalign
    assert not config_for(
        with_format(DESIGN_CONVOLUTIONS["conv3x3-128"], dtype), tf32=dtype == "f32"
    ).coalesce_reduction
    three = config_for(dataclasses.replace(spec, c=3))
    if dtype == "f32":  # f32 takes the tensor cores only as tf32, asked for
        assert not three.coalesce_reduction and not three.pad_channels
    else:  # 3 channels misalign the rows of k; padded to 4 with zeros, they line up
        assert three.coalesce_reduction and three.pad_channels == 4


def test_the_coalesced_loop_is_one_affine_for():
    config = _coalesced(CONV1_LIKE, reduction_tile_sizes=(1, 7, 4), stages=1)
    module = build(CONV1_LIKE)
    Pipeline(affine_passes(config)).run(module)
    loops = [o for o in module.walk() if isinstance(o, affine.ForOp)]
    assert any(str(o.upperBoundMap.data) == "() -> (28)" for o in loops)


def test_an_infinite_input_also_reaches_the_pixel_whose_window_ends_before_it():
    # The documented difference: k's padding (28 -> 32) multiplies the next input
    # column (2 * ow + 4 here) by zero filter rows; inf x 0 is NaN. Everywhere else
    # the outputs agree with the reference, finite where it is.
    import numpy as np

    from affinec.frontend.reference import reference
    from affinec.interpreter import interpret

    spec = dataclasses.replace(CONV1_LIKE, h=12, w=12, k=8)
    config = _coalesced(spec, tile_sizes=(1, 6, 6, 8), stages=1)
    module = build(spec)
    passes = default_passes(config)
    mma = next(k for k, p in enumerate(passes) if p.name == "affinec-mma-sync")
    Pipeline(passes[: mma + 1]).run(module)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(spec.input_shape).astype(np.float16)
    w = rng.standard_normal(spec.filter_shape).astype(np.float16)
    x[0, 5, 8, :] = np.inf  # row 5, column 8: in the windows of ow = 3, 4, 5
    out = np.zeros(spec.output_shape, np.float16)
    interpret(module, "conv", x, w, out)
    with np.errstate(invalid="ignore"):  # inf - inf in the reference's sums
        expected = reference(spec, x, w)
    extra = np.zeros(spec.output_shape, bool)
    extra[0, 1:5, 2, :] = True  # rows whose windows hold row 5; 2 * 2 + 4 = 8
    finite = np.isfinite(expected)
    assert np.isnan(out[extra & finite]).all() and (extra & finite).any()
    assert np.isfinite(out[finite & ~extra]).all()
