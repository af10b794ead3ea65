"""`config_for`'s rules for sm_90a: products and 1x1 convolutions over their flattened
pixels on `affinec-wgmma`, and convolutions with filter taps on Hopper's kernel, where
the channels are wide and the tiles fill the chip; everything else as on sm_90."""

import pytest

from affinec.base.spec import ConvSpec, MatmulSpec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import (
    MULTIPROCESSORS,
    WGMMA_PRODUCT_STAGES,
    WGMMA_PRODUCT_TILE,
    config_for,
    grid_blocks,
    wgmma_config_for,
    wgmma_grid_blocks,
)
from affinec.frontend.networks import network


def _layer(name: str, batch: int) -> ConvSpec:
    (layer,) = [x for x in network("resnet50", batch) if x.name == name]
    return layer.spec


def test_a_wide_1x1_at_batch_32_goes_to_warpgroups_on_sm_90a_only():
    spec = _layer("stage4 1x1 512-256 @28", 32)
    config = config_for(spec, arch="sm_90a")
    assert config.tensor_core == "wgmma" and config.flatten_pixels
    assert config.tile_sizes == WGMMA_PRODUCT_TILE
    assert config.stages == WGMMA_PRODUCT_STAGES and config.tma and config.in_flight
    assert config_for(spec, arch="sm_90").tensor_core == "mma.sync"


@pytest.mark.parametrize(
    "name, batch, why",
    [
        ("stage5 1x1 2048-512 @7", 32, "52 blocks of 128x128: split instead"),
        ("stage2 1x1 256-64 @56", 32, "64 output channels"),
        ("stage2 1x1 64-256 @56", 32, "64 channels reduced"),
        ("stage4 1x1 512-256 @28", 1, "a grid of 13 blocks"),
        ("stage4 3x3 256 @14", 1, "a filter with taps, a grid of few blocks"),
        ("stage2 3x3 64 @56", 32, "a filter with taps, 64 channels"),
    ],
)
def test_narrow_or_small_products_stay_on_mma_sync(name, batch, why):
    config = config_for(_layer(name, batch), arch="sm_90a")
    assert config.tensor_core == "mma.sync" and not config.wgmma, why


@pytest.mark.parametrize("name", ["stage3 3x3/2 128 @56", "stage4 3x3 256 @14"])
def test_a_wide_window_at_batch_32_goes_to_hoppers_kernel_on_sm_90a_only(name):
    spec = _layer(name, 32)
    config = config_for(spec, arch="sm_90a")
    assert config == wgmma_config_for(spec, "sm_90a")
    assert wgmma_grid_blocks(spec, config) >= MULTIPROCESSORS
    assert not config_for(spec, arch="sm_90").wgmma


def test_products_that_fill_the_chip_take_it_too():
    big = MatmulSpec(4096, 4096, 1024, "f16")
    assert config_for(big, arch="sm_90a").tensor_core == "wgmma"
    small = MatmulSpec(512, 512, 512, "f16")
    assert grid_blocks(small, config_for(big, arch="sm_90a")) < MULTIPROCESSORS
    assert config_for(small, arch="sm_90a").tensor_core == "mma.sync"
    assert (
        config_for(MatmulSpec(4096, 4096, 1024, "f32"), arch="sm_90a").tensor_core
        != "wgmma"
    )


def test_the_rules_configuration_is_checked_by_the_interpreter_at_every_pass():
    # the rule's configuration on a 1x1 convolution small enough to interpret: one
    # block of 128 x 128 (8 x 16 pixels), three steps of the reduction. (16 x 16
    # pixels made two blocks and twice the time; the tensor maps' second block of
    # flattened pixels is test_wgmma_tma's.)
    config = config_for(_layer("stage4 1x1 512-256 @28", 32), arch="sm_90a")
    spec = ConvSpec(
        1, 192, 8, 16, 128, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16"
    )
    compiled = compile_to_ptx(spec, config, arch="sm_90a", check=True)
    assert "wgmma.mma_async" in compiled.ptx
