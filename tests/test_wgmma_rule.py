"""`config_for`'s rules for sm_90a: products and 1x1 convolutions over their flattened
pixels on `affinec-wgmma`, convolutions with filter taps or strides on its descriptor
route (`ss_config_for`) or else Hopper's kernel, where the channels are wide and the
tiles fill the chip; everything else as on sm_90."""

import pytest

from affinec.base.spec import ConvSpec, MatmulSpec, flattened_spec
from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import (
    MULTIPROCESSORS,
    WGMMA_PRODUCT_STAGES,
    WGMMA_PRODUCT_TILES,
    WIDE_PRODUCT_STAGES,
    WIDE_PRODUCT_TILE,
    arithmetic_intensity,
    config_for,
    grid_blocks,
    wgmma_config_for,
)
from affinec.driver.wgmma_taps_ss_rule import MIN_BLOCKS, ss_config_for
from affinec.frontend.networks import network


def _layer(name: str, batch: int) -> ConvSpec:
    (layer,) = [x for x in network("resnet50", batch) if x.name == name]
    return layer.spec


def test_a_wide_1x1_at_batch_32_goes_to_warpgroups_on_sm_90a_only():
    spec = _layer("stage4 1x1 512-256 @28", 32)
    config = config_for(spec, arch="sm_90a")
    assert config.tensor_core == "wgmma" and config.flatten_pixels
    assert config.tile_sizes == WGMMA_PRODUCT_TILES[0]
    assert config.stages == WGMMA_PRODUCT_STAGES and config.tma and config.in_flight
    assert config_for(spec, arch="sm_90").tensor_core == "mma.sync"


def test_a_long_compute_bound_product_takes_the_wide_warp_specialized_tile():
    wide = [MatmulSpec(4096, 4096, 4096, "f16"), MatmulSpec(2048, 2048, 2048, "f16"),
            _layer("stage5 1x1 1024-512 @14", 32)]  # fmt: skip
    for spec in wide:
        config = config_for(spec, arch="sm_90a")
        assert config.tile_sizes == WIDE_PRODUCT_TILE
        assert config.warp_specialize and config.stages == WIDE_PRODUCT_STAGES
        assert config.tma and config.in_flight and config.stage_output
    memory_bound = _layer("stage4 1x1 512-256 @28", 32)
    assert arithmetic_intensity(flattened_spec(memory_bound)) < 235
    narrow = [
        memory_bound,  # 170 flops a byte: bound by memory
        MatmulSpec(4096, 4096, 256, "f16"),  # four steps of reduction
        _layer("stage5 1x1 2048-512 @7", 32),  # 26 blocks of 128 x 256
        MatmulSpec(4096, 128, 4096, "f16"),  # narrower than the tile
    ]
    for spec in narrow:
        config = config_for(spec, arch="sm_90a")
        assert config.tile_sizes != WIDE_PRODUCT_TILE and not config.warp_specialize


@pytest.mark.parametrize(
    "name, batch, why",
    [
        ("stage5 1x1 2048-512 @7", 32, "52 blocks of 128x128, 104 of 128x64"),
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


def test_a_wide_1x1_whose_128_wide_tiles_leave_the_chip_idle_takes_64_wide_ones():
    spec = _layer("stage4 1x1 1024-256 @14", 32)  # 98 blocks of 128 x 128
    config = config_for(spec, arch="sm_90a")
    assert config.tensor_core == "wgmma" and config.tile_sizes == WGMMA_PRODUCT_TILES[1]
    assert grid_blocks(spec, config) >= MULTIPROCESSORS


def test_a_short_reduction_keeps_its_128_wide_tiles_or_none():
    # MobileNetV2's 1x1 160-960 at 7 x 7: 104 blocks of 128 x 128, three steps of
    # reduction: not enough for the 64-wide tile
    (expand,) = [
        x.spec for x in network("mobilenet_v2", 32) if x.name == "expand 1x1 160-960 @7"
    ]
    assert config_for(expand, arch="sm_90a").tensor_core == "mma.sync"
    (last,) = [
        x.spec for x in network("mobilenet_v2", 32) if x.name == "last 1x1 320-1280 @7"
    ]
    assert config_for(last, arch="sm_90a").tile_sizes == WGMMA_PRODUCT_TILES[1]


@pytest.mark.parametrize(
    "name, tile",
    [
        ("stage5 3x3 512 @7", (64, 64)),  # a 7 x 7 image: 49 of 128 pixels computed
        ("stage5 3x3/2 512 @14", (64, 64)),
        ("stage4 3x3 256 @14", (128, 64)),  # 64 and 128 compute as much: the larger
        ("stage3 3x3 128 @28", (128, 128)),
    ],
)
def test_hoppers_kernel_takes_the_largest_tile_that_computes_few_pixels_past_the_image(
    name, tile
):
    assert wgmma_config_for(_layer(name, 32), "sm_90a").wgmma_tile == tile


@pytest.mark.parametrize(
    "name",
    ["stage3 3x3/2 128 @56", "stage4 3x3 256 @14", "stage4 down 1x1/2 512-1024 @28"],
)
def test_a_wide_window_at_batch_32_is_read_by_descriptor_on_sm_90a_only(name):
    spec = _layer(name, 32)
    config = config_for(spec, arch="sm_90a")
    assert config == ss_config_for(spec, "sm_90a")
    assert config.tensor_core == "wgmma" and config.tma and not config.wgmma
    assert config.tile_sizes[-1] == 128
    assert grid_blocks(spec, config) >= MIN_BLOCKS
    assert not config_for(spec, arch="sm_90").wgmma
    assert config_for(spec, arch="sm_90").tensor_core == "mma.sync"


def test_a_window_whose_128_channel_blocks_leave_the_chip_idle_takes_hoppers_kernel():
    # ResNet-50's 3x3 512 at 7 x 7, batch 32: 16 x 4 blocks of 98 pixels by 128
    # channels; the descriptor route lost on its 64-channel blocks
    spec = _layer("stage5 3x3 512 @7", 32)
    with pytest.raises(ValueError, match="fewer than"):
        ss_config_for(spec, "sm_90a")
    assert config_for(spec, arch="sm_90a") == wgmma_config_for(spec, "sm_90a")


@pytest.mark.parametrize("batch", [8, 16, 32])
def test_the_descriptor_rule_takes_blocks_of_128_channels_only(batch):
    chosen = 0
    for net in ("resnet50", "vgg16"):
        for layer in network(net, batch):
            config = config_for(layer.spec, arch="sm_90a")
            if config.tensor_core == "wgmma" and len(config.tile_sizes) == 4:
                assert config.tile_sizes[-1] == 128, layer.name
                chosen += 1
    assert chosen >= 3


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
