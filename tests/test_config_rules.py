"""`config_for`'s measured rules for the layers real networks are slow on: a
depthwise convolution's whole window a step, a strided window-route tile stored by
phase, a projection over few pixels on one wave of small tiles. Each configuration a rule makes runs through the whole pipeline, every pass's output
checked by the interpreter against the naive IR."""

import pytest

from affinec.base.spec import ConvSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import (
    DEPTHWISE_STAGES,
    MULTIPROCESSORS,
    config_for,
    flattened_spec,
    grid_blocks,
)
from affinec.driver.pipeline import Pipeline
from affinec.driver.pipelines import default_passes
from affinec.frontend.naive import build
from affinec.frontend.networks import network
from affinec.tuning.neighbours import neighbours, variant_config


def _conv(n, c, size, k, r, stride=1, groups=1, layout="nhwc", filters="rsck"):
    return ConvSpec(
        n, c, size, size, k, r, r, stride=stride, padding=r // 2, groups=groups,
        layout=layout, filter_layout=filters, dtype="f16",
    )  # fmt: skip


def _checked(spec: ConvSpec) -> None:
    Pipeline(default_passes(config_for(spec))).run(build(spec), check=True)


@pytest.mark.parametrize("r, stride", [(3, 1), (5, 2)])
def test_a_depthwise_convolution_takes_its_whole_window_a_step(r, stride):
    spec = _conv(1, 16, 8, 16, r, stride, groups=16)
    config = config_for(spec)
    assert not config.mma
    assert config.reduction_tile_sizes == (r, r)
    assert config.stages == DEPTHWISE_STAGES
    _checked(spec)


def test_a_depthwise_convolution_in_nchw_takes_its_window_on_strided_channels():
    # its window is its whole reduction in either layout; its channels are not
    # contiguous, so no vectors along them
    spec = _conv(1, 16, 8, 16, 3, groups=16, layout="nchw", filters="kcrs")
    config = config_for(spec)
    assert config.reduction_tile_sizes == (3, 3) and config.vector_width == 0
    _checked(spec)


def test_other_grouped_convolutions_keep_their_steps():
    # two input channels a group: unmeasured, the rule is for depthwise ones
    spec = _conv(1, 8, 8, 4, 3, groups=4)
    assert config_for(spec).stages == 1
    _checked(spec)


def test_a_strided_window_tile_is_stored_by_phase():
    (layer,) = [x for x in network("resnet50", 32) if x.name == "stage3 3x3/2 128 @56"]
    config = config_for(layer.spec)
    assert config.unroll_taps and config.split_phases
    unstrided = [x for x in network("resnet50", 32) if x.name == "stage3 3x3 128 @28"]
    assert not config_for(unstrided[0].spec).split_phases


@pytest.mark.parametrize("variant", ["half block s2", "half block s2 phases"])
def test_the_halved_window_block_the_tuner_tries_keeps_the_result(variant):
    # a neighbour the tuner measures (timed faster on ResNet-50's 3x3s at batch 1,
    # not yet on the shapes a rule would be reported on): not config_for's
    spec = _conv(1, 32, 16, 32, 3, stride=2)
    config = variant_config(spec, variant)
    whole = config_for(spec)
    assert config.tile_sizes[2] == -(-whole.tile_sizes[2] // 2) and config.stages == 2
    assert config in [c for _, c in neighbours(spec)]
    Pipeline(default_passes(config)).run(build(spec), check=True)


def _mobilenet_layer(name: str, batch: int) -> ConvSpec:
    (layer,) = [x for x in network("mobilenet_v2", batch) if x.name == name]
    return layer.spec


@pytest.mark.parametrize(
    "name, tile, warps",
    [
        ("project 1x1 960-160 @7", (64, 32), (2, 1)),  # 125 blocks of 64 x 32
        ("project 1x1 960-320 @7", (64, 64), (2, 2)),  # 250 of 64 x 32, 125 of 64 x 64
    ],
)
def test_a_projection_over_few_pixels_takes_one_wave_of_small_tiles(name, tile, warps):
    spec = _mobilenet_layer(name, 32)
    config = config_for(spec)
    assert config.flatten_pixels and config.splits == 1
    assert (config.tile_sizes, config.warp_grid) == (tile, warps)
    assert grid_blocks(flattened_spec(spec), config) >= MULTIPROCESSORS // 2
    assert grid_blocks(flattened_spec(spec), config) <= MULTIPROCESSORS


def test_one_wave_leaves_short_reductions_and_tiny_grids_to_their_rules():
    # 576 channels: the short product's 64 x 64 tiles; batch 1: 49 rows, a split
    short = config_for(_mobilenet_layer("project 1x1 576-160 @7", 32))
    assert short.flatten_pixels and short.tile_sizes == (64, 64)
    tiny = config_for(_mobilenet_layer("project 1x1 960-160 @7", 1))
    assert tiny.splits > 1


def test_the_one_wave_tiles_are_checked_by_the_interpreter_at_every_pass():
    # the rule's configuration on a 1x1 small enough to interpret: 25 flattened
    # pixels (one row tile, partial) by 64 channels (two column tiles), two steps of
    # the reduction
    config = config_for(_mobilenet_layer("project 1x1 960-160 @7", 32))
    assert config.flatten_pixels
    compiled = compile_to_ptx(_conv(1, 128, 5, 64, 1), config, check=True)
    assert "mma.sync" in compiled.ptx
