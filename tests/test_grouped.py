"""Grouped and depthwise convolutions: the spec (`groups`), the contraction with its
group dimension, the float64 reference, every level of the route `config_for` picks
(the tensor cores where a group has 16 channels or more, a block within one group;
else SIMT, depthwise among them), and the passes that must refuse what a group's
channel index would break. The hypothesis strategies draw `groups` for every pass's
test too (the tensor cores' among them)."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for, depthwise_config
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.contraction import contraction_of, is_depthwise
from affinec.frontend.naive import build
from affinec.frontend.reference import contraction_reference, random_inputs, reference
from affinec.passes.affinec_pad_channels import AffinecPadChannels
from affinec.testing import conv_specs
from strategies import examples

DEPTHWISE = ConvSpec(
    1, 8, 7, 7, 8, 3, 3, stride=2, padding=1, groups=8, layout="nhwc",
    filter_layout="rsck", dtype="f16", epilogue="bias,relu6",
)  # fmt: skip


def test_the_spec_and_its_shapes():
    spec = ConvSpec(2, 8, 6, 6, 12, 3, 3, groups=4, filter_layout="rsck")
    assert spec.group_channels == 2
    assert spec.filter_shape == (3, 3, 2, 12)
    assert spec.flops == 2 * 2 * 12 * 4 * 4 * 2 * 9
    assert spec.to_text().endswith(" groups=4")
    assert "groups" not in ConvSpec(1, 8, 6, 6, 12, 3, 3).to_text()  # as before
    c = contraction_of(spec)
    assert [n for n, _ in c.output_index] == ["n", "g", "k", "oh", "ow"]
    assert str(c).startswith("output[n, g * 3 + k, oh, ow] = +(input[n, g * 2 + c,")


@settings(max_examples=examples(20))
@given(conv_specs(max_channels=8, max_image=6))
def test_the_reference_is_the_contractions_definition(spec):
    inputs = random_inputs(spec, np.random.default_rng(0))
    np.testing.assert_allclose(
        reference(spec, *inputs),
        contraction_reference(contraction_of(spec), *inputs),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize(
    "spec, mma",
    [
        (ConvSpec(1, 8, 6, 6, 16, 3, 3, padding=1, groups=4), False),
        (DEPTHWISE, False),
        (ConvSpec(1, 32, 6, 6, 64, 1, 1, groups=2, layout="nhwc",
                  filter_layout="rsck", dtype="bf16", epilogue="bias,residual,relu"),
         True),
        (ConvSpec(2, 64, 7, 7, 32, 3, 3, stride=2, padding=1, groups=4,
                  layout="nhwc", filter_layout="rsck", dtype="f16"), True),
        # NCHW: the group's channels are not made the tiles' innermost yet
        (ConvSpec(1, 32, 6, 5, 32, 3, 3, padding=1, groups=2, dtype="f16"), False),
    ],
)  # fmt: skip
def test_every_level_of_the_route_config_for_picks(spec, mma):
    config = config_for(spec)
    assert config.mma == mma
    Pipeline(default_passes(config)).run(build(spec), check=True)
    kernel = compile_to_ptx(spec, arch="sm_90").runtime_kernel()
    shapes = {p.name: tuple(p.shape) for p in kernel.parameters}
    assert shapes["filter"] == spec.filter_shape
    if mma:
        assert "mma.sync.aligned.m16n8k16" in compile_to_ptx(spec, arch="sm_90").ptx


def test_tf32_asks_for_tensor_cores_a_grouped_nchw_convolution_cannot_have():
    with pytest.raises(ValueError, match="grouped convolution in NHWC with RSCK"):
        config_for(ConvSpec(1, 32, 6, 6, 32, 3, 3, groups=2), tf32=True)


def test_a_block_across_groups_is_refused_by_the_tensor_cores_at_the_band():
    spec = ConvSpec(
        1, 32, 6, 6, 32, 3, 3, padding=1, groups=2, layout="nhwc",
        filter_layout="rsck", dtype="f16",
    )  # fmt: skip
    across = dataclasses.replace(config_for(spec), tile_sizes=(1, 6, 6, 2, 16))
    with pytest.raises(
        PassError, match="%g1 indexes both tiles .a grouped convolution"
    ):
        Pipeline(default_passes(across)).run(build(spec))


def test_padding_a_groups_channels_is_refused():
    # past a group's channels come the next group's, not zeros
    spec = ConvSpec(1, 6, 5, 5, 4, 3, 3, groups=2)
    with pytest.raises(PassError, match="together with other terms"):
        Pipeline([AffinecPadChannels(multiple=4)]).run(build(spec))


def test_a_depthwise_block_tiles_the_channels():
    # one filter a group: the groups are the output channels, tiled and vectorized
    # as a dense convolution's are (not one channel a block)
    config = depthwise_config(DEPTHWISE)
    names = [n for n, _ in contraction_of(DEPTHWISE).output_index]
    assert config.tile_sizes[names.index("g")] == 8
    assert config.register_tile[names.index("g")] == config.vector_width == 8


@pytest.mark.parametrize(
    "spec, out, red, text",
    [
        (DEPTHWISE, "n oh ow g", "r s",
         "output[n, oh, ow, g] = relu6(+(input[n, oh * 2 + r - 1, ow * 2 + s - 1, g] "
         "* filter[r, s, 0, g]) + bias[g])"),
        (ConvSpec(1, 6, 5, 5, 6, 3, 3, groups=6), "n g oh ow", "r s",
         "output[n, g, oh, ow] = +(input[n, g, oh + r, ow + s] * filter[g, 0, r, s])"),
        # a channel multiplier of 2: two filters a group, a grouped convolution
        (ConvSpec(1, 4, 5, 5, 8, 3, 3, groups=4, layout="nhwc", filter_layout="rsck"),
         "n oh ow g k", "r s c", None),
    ],
)  # fmt: skip
def test_a_depthwise_contraction_has_no_unit_dimensions(spec, out, red, text):
    # one input channel and one filter a group: the channel is an output dimension
    # (the innermost in NHWC, which the threads' vectors run along), the window
    # alone is summed; no size-1 filter or group-channel loop
    c = contraction_of(spec)
    assert " ".join(n for n, _ in c.output_index) == out
    assert " ".join(n for n, _ in c.reduction_index) == red
    assert is_depthwise(spec) == (text is not None)
    if text is not None:
        assert str(c) == text
