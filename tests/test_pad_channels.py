"""`affinec-pad-channels`: the channel loop padded with zeros keeps the result, and
takes a 3-channel first layer to the tensor cores."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from affinec.base.diagnostics import PassError
from affinec.base.spec import ConvSpec, OuterSpec
from affinec.driver.config import config_for
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.passes.affinec_pad_channels import AffinecPadChannels
from affinec.testing import assert_equivalent, conv_specs, matmul_specs
from strategies import examples


@settings(max_examples=examples(10))
@given(
    st.one_of(
        # a group's channels are padded by no zeros: tests/test_grouped.py
        conv_specs().map(lambda s: dataclasses.replace(s, groups=1)),
        matmul_specs(),
    ),
    st.sampled_from([2, 3, 4, 8]),
)
def test_padding_the_channels_keeps_the_result(spec, multiple):
    module = assert_equivalent(AffinecPadChannels(multiple=multiple), spec)
    channels = spec.c if isinstance(spec, ConvSpec) else spec.k
    padded = -(-channels // multiple) * multiple
    assert f"0 to {padded} " in str(module) or padded == channels


def test_the_3_channel_first_layer_takes_the_tensor_cores():
    spec = ConvSpec(1, 3, 14, 14, 16, 7, 7, stride=2, padding=3, layout="nhwc",
                    filter_layout="rsck", dtype="f16", epilogue="bias-relu")  # fmt: skip
    config = config_for(spec)
    assert config.mma and config.coalesce_reduction and config.pad_channels == 4
    module = build(spec)
    Pipeline(default_passes(config)).run(module, check=True)
    names = {o.name for o in module.walk()}
    assert {"nvvm.mma.sync", "nvvm.ldmatrix"} <= names


def test_refusals():
    spec = ConvSpec(1, 3, 6, 6, 4, 3, 3)
    with pytest.raises(PassError, match="multiple must be between 1 and 64, got 0"):
        Pipeline([AffinecPadChannels(multiple=0)]).run(build(spec))
    with pytest.raises(PassError, match="has no channel reduction"):
        Pipeline([AffinecPadChannels()]).run(build(OuterSpec(4, 4)))
