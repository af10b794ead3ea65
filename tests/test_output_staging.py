"""`affinec-stage-output`: the write-back through a shared tile keeps the result bit for
bit on every route (tensor cores or not), every later pass keeps it, and a write-back
it cannot stage is left alone with a remark saying why."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from affinec.base.diagnostics import collecting_remarks
from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.passes.affinec_place_buffers import AffinecPlaceBuffers
from affinec.passes.affinec_stage_output import AffinecStageOutput
from affinec.testing import assert_equivalent, conv_specs, kernel_configs


def staged(config):
    """The default route of `config`, with the output staged right after placement
    (where the default pipeline stages it on the tensor cores)."""
    passes = [
        p
        for p in default_passes(dataclasses.replace(config, stage_output=False))
        if not isinstance(p, AffinecStageOutput)
    ]
    place = next(k for k, p in enumerate(passes) if isinstance(p, AffinecPlaceBuffers))
    return [*passes[: place + 1], AffinecStageOutput(), *passes[place + 1 :]]


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from(["f16", "f32"]))
    spec = draw(
        conv_specs(max_channels=16, max_image=6).map(
            lambda s: dataclasses.replace(s, dtype=dtype, layout="nhwc")
        )
    )
    return spec, draw(kernel_configs(spec))


@settings(max_examples=max(4, settings().max_examples // 3))  # each runs ~20 stages
@given(cases())
def test_staging_keeps_the_result_on_every_route(case):
    spec, config = case
    assert_equivalent(staged(config), spec)


def _remarks(spec, config):
    with collecting_remarks() as remarks:
        module = build(spec)
        Pipeline(staged(config)).run(module)
    return module, remarks


SMALL = ConvSpec(
    1, 16, 6, 6, 32, 3, 3, padding=1, dtype="f16", layout="nhwc",
    filter_layout="rsck", epilogue="bias-relu",
)  # fmt: skip


def test_a_partial_tile_of_channels_is_copied_in_whole_vectors():
    # 24 channels in blocks of 16: the second block's last 8 are cut off, a whole
    # vector of 8 halves; the copy-out's guard keeps to the first
    from affinec.driver.config import config_for

    spec = dataclasses.replace(SMALL, k=24)
    config = dataclasses.replace(config_for(spec), tile_sizes=(1, 6, 6, 16))
    module = assert_equivalent(staged(config), spec)  # every level interpreted
    assert ": vector<8xf16>, !llvm.ptr<1>" in str(module)  # 16 bytes to global


@pytest.mark.parametrize(
    "spec, why",
    [
        (
            dataclasses.replace(SMALL, layout="nchw", filter_layout="kcrs"),
            "the output's innermost index does not run in aligned 16-byte vectors "
            "(8 elements) across the block's 6 values of %ow1",
        ),
        (
            dataclasses.replace(SMALL, k=12),
            "the output's innermost index does not run in aligned 16-byte vectors "
            "(8 elements) across the block's 12 values of %k1",
        ),
        (
            MatmulSpec(8, 12, 16, "f16"),
            "the output's innermost index does not run in aligned 16-byte vectors "
            "(8 elements) across the block's 12 values of %j1",
        ),
    ],
)
def test_a_write_back_it_cannot_stage_is_left_alone_and_said_why(spec, why):
    from affinec.driver.config import config_for

    module, remarks = _remarks(spec, config_for(spec))
    assert any(m == f"the output is not staged: {why}" for _, m in remarks), remarks
    assert "output_shared" not in str(module)
