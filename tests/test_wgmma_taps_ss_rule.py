"""`ss_config_for`: the descriptor route's block for a convolution with taps or
strides, by waves of blocks times a block's work; the blocks it was fitted to pick,
what it refuses, and the sweep variant that measures it against `config_for`."""

from dataclasses import replace

import pytest

from affinec.base.spec import ConvSpec
from affinec.driver.grid_geometry import grid_blocks
from affinec.driver.wgmma_taps_ss_rule import (
    MIN_BLOCKS,
    ss_config_for,
    ss_cost,
)
from affinec.frontend.networks import network
from affinec.tuning.neighbours import variant_config


def _layer(net: str, name: str, batch: int = 32) -> ConvSpec:
    (spec,) = [x.spec for x in network(net, batch) if x.name == name]
    return spec


# the fastest block measured of each layer (H100, 2026-12-07, batch 32; ResNet-50's
# 3x3 512 at 7 x 7 ran fastest on 64 channels, slower than the template: refused)
FITTED = [
    ("resnet50", "stage3 3x3 128 @28", (1, 16, 16, 128)),
    ("resnet50", "stage4 3x3 256 @14", (1, 9, 14, 128)),
    ("vgg16", "3x3 128-128 @112", (1, 16, 16, 128)),
    ("vgg16", "3x3 128-256 @56", (1, 9, 28, 128)),
    ("vgg16", "3x3 256-256 @56", (1, 9, 28, 128)),
    ("vgg16", "3x3 256-512 @28", (1, 6, 28, 128)),
    ("vgg16", "3x3 512-512 @28", (1, 6, 28, 128)),
    ("vgg16", "3x3 512-512 @14", (1, 14, 14, 128)),
]

# the strided layers, which the fit never saw: the fastest block measured
STRIDED = [
    ("stage3 3x3/2 128 @56", (1, 16, 16, 128)),
    ("stage4 3x3/2 256 @28", (1, 9, 14, 128)),
    ("stage3 down 1x1/2 256-512 @56", (1, 6, 28, 128)),
    ("stage4 down 1x1/2 512-1024 @28", (1, 14, 14, 128)),
    ("stage5 down 1x1/2 1024-2048 @14", (5, 7, 7, 128)),
]


@pytest.mark.parametrize("net, name, tile", FITTED)
def test_the_rule_picks_the_block_measured_fastest(net, name, tile):
    config = ss_config_for(_layer(net, name), "sm_90a")
    assert config.tile_sizes == tile
    assert config.tensor_core == "wgmma" and config.tma
    assert config.reduction_tile_sizes == (1, 1, 64)


@pytest.mark.parametrize("name, tile", STRIDED)
def test_on_strided_layers_the_rule_picks_the_block_measured_fastest(name, tile):
    config = ss_config_for(_layer("resnet50", name), "sm_90a")
    assert config.tile_sizes == tile and config.tma


def test_fewer_waves_of_smaller_blocks_cost_less_than_a_half_empty_wave():
    # 256 at 14^2, batch 32: 14x14 boxes make 64 blocks of 256 rows (half the chip
    # idle); 9x14 boxes 128 blocks of 128 rows, one wave of half the work
    spec = _layer("resnet50", "stage4 3x3 256 @14")
    chosen = ss_config_for(spec, "sm_90a")
    assert grid_blocks(spec, chosen) >= MIN_BLOCKS
    whole = replace(chosen, tile_sizes=(1, 14, 14, 128))
    assert grid_blocks(spec, whole) == 64
    assert ss_cost(spec, chosen) < ss_cost(spec, whole)


@pytest.mark.parametrize(
    "net, name, batch, why",
    [
        ("resnet50", "stage2 3x3 64 @56", 32, "64 channels in"),
        ("resnet50", "stage4 3x3 256 @14", 1, "4 blocks: fewer than 112"),
        ("resnet50", "stage5 3x3 512 @7", 32, "64 blocks: fewer than 112"),
        (
            "resnet50",
            "stage4 1x1 1024-256 @14",
            32,
            "convolutions with taps or strides",
        ),
    ],
)
def test_what_the_rule_does_not_take_is_named(net, name, batch, why):
    with pytest.raises(ValueError, match=why):
        ss_config_for(_layer(net, name, batch), "sm_90a")


def test_the_sweep_variant_is_the_rule_and_needs_sm_90a():
    spec = _layer("vgg16", "3x3 256-512 @28")
    assert variant_config(spec, "ss", "sm_90a") == ss_config_for(spec, "sm_90a")
    with pytest.raises(ValueError, match="sm_90a"):
        variant_config(spec, "ss", "sm_90")
