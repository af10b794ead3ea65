"""The tuner's neighbours of `config_for`: each applies to its layers' route only,
none repeats the baseline, and the tuner measures them right after it."""

import pytest

from affinec.base.spec import ConvSpec
from affinec.driver.config import config_for
from affinec.frontend.networks import network
from affinec.tuning.measure import Measurement
from affinec.tuning.neighbours import VARIANTS, neighbours, variant_config
from affinec.tuning.space import search_space
from affinec.tuning.tuner import TuneOptions, tune


def _layer(name: str, batch: int = 1):
    return next(x for x in network("resnet50", batch) if x.name == name).spec


def test_window_variants_take_the_spec_s_filter_row_and_only_the_window_route():
    three = _layer("stage3 3x3/2 128 @56")
    assert config_for(three).unroll_taps
    assert variant_config(three, "row steps").reduction_tile_sizes == (1, 3, 16)
    # ResNet-50's first layer is coalesced, its 1x1s per tap: not the window route
    for name in ("conv1 7x7/2 3-64 @224", "stage2 1x1 64-64 @56"):
        with pytest.raises(ValueError, match="window route"):
            variant_config(_layer(name), "row steps")


def test_a_strided_1x1_has_no_flattened_neighbour():
    down = _layer("stage3 down 1x1/2 256-512 @56")
    names = [name for name, _ in neighbours(down)]
    assert names and not any(name.startswith("flat") for name in names)


@pytest.mark.parametrize("batch", [1, 32])
def test_neighbours_differ_from_the_baseline_and_from_each_other(batch):
    for layer in network("mobilenet_v2", batch):
        found = neighbours(layer.spec)
        configs = [config_for(layer.spec)] + [c for _, c in found]
        assert len(set(configs)) == len(configs), layer.name


def test_hopper_variants_are_sm_90a_s_and_name_what_stops_them():
    down = _layer("stage3 down 1x1/2 256-512 @56", 32)
    hopper = variant_config(down, "hopper", "sm_90a")
    assert hopper.wgmma and not hopper.flatten_pixels  # a strided 1x1: tap by tap
    assert variant_config(down, "hopper 64x64", "sm_90a").wgmma_tile == (64, 64)
    with pytest.raises(ValueError, match="sm_90a"):
        variant_config(down, "hopper", "sm_90")
    # a strided 1x1 is no product: the pipeline's TMA product kernel refuses it
    with pytest.raises(ValueError, match="products and 1x1s"):
        variant_config(down, "tma 128x64", "sm_90a")
    wide = _layer("stage4 1x1 1024-256 @14", 32)
    tma = variant_config(wide, "tma 128x64", "sm_90a")
    assert tma.tile_sizes == (128, 64) and tma.tma and tma.in_flight
    assert tma.flatten_pixels and tma.tensor_core == "wgmma"
    with pytest.raises(ValueError, match="sm_90a"):
        variant_config(wide, "tma 128x64", "sm_90")


def test_one_warpgroups_blocks_on_the_pipelines_hopper_routes():
    """The pipeline's counterparts of Hopper's kernel in 64 x 64 tiles: a wide 1x1
    as a product on TMA stages, a 3x3 by descriptor in a block of 64 pixels and 64
    output channels; each refuses the other's layers."""
    three = _layer("stage3 3x3 128 @28")
    ss = variant_config(three, "ss 64x64", "sm_90a")
    images, rows, columns, channels = ss.tile_sizes
    assert images * rows * columns <= 64 and channels == 64
    assert (
        ss.tensor_core == "wgmma" and ss.tma and ss.reduction_tile_sizes == (1, 1, 64)
    )
    wide = _layer("stage4 1x1 1024-256 @14")
    product = variant_config(wide, "tma 64x64", "sm_90a")
    assert product.tile_sizes == (64, 64) and product.flatten_pixels
    with pytest.raises(ValueError, match="taps or strides"):
        variant_config(wide, "ss 64x64", "sm_90a")
    # one warpgroup's tile takes products of 64 channels a side, as the template's
    # 64 x 64 kernel does; config_for's 128-row tiles want 128
    narrow = next(
        x.spec for x in network("mobilenet_v2", 1) if x.name == "project 1x1 384-96 @14"
    )
    assert variant_config(narrow, "tma 64x64", "sm_90a").tile_sizes == (64, 64)
    with pytest.raises(ValueError, match="128 channels or more"):
        variant_config(narrow, "tma 128x64", "sm_90a")
    with pytest.raises(ValueError, match="products and 1x1s"):
        variant_config(three, "tma 64x64", "sm_90a")
    with pytest.raises(ValueError, match="sm_90a"):
        variant_config(three, "ss 64x64", "sm_90")


def test_the_wide_product_tiles_keep_their_knobs_and_fit_the_product():
    """128 x 256 tiles, in four stages or three with a producer warpgroup; refused
    where the product has fewer output columns than the tile."""
    wide = _layer("stage5 1x1 2048-512 @7", 32)
    four = variant_config(wide, "tma 128x256", "sm_90a")
    assert four.tile_sizes == (128, 256) and four.stages == 4
    assert not four.warp_specialize
    ws = variant_config(wide, "tma 128x256 s3 ws", "sm_90a")
    assert ws.tile_sizes == (128, 256) and ws.stages == 3 and ws.warp_specialize
    assert ws.tma and ws.in_flight and ws.flatten_pixels
    narrow = _layer("stage4 1x1 1024-256 @14", 32)
    assert variant_config(narrow, "tma 128x256", "sm_90a").tile_sizes == (128, 256)
    with pytest.raises(ValueError, match="output columns"):
        variant_config(_layer("stage3 1x1 512-128 @28", 32), "tma 128x256", "sm_90a")


def test_hoppers_window_kernels_have_no_window_route_variants():
    # on sm_90a config_for reads ResNet-50's 3x3 256 at 14 x 14, batch 32, by
    # descriptor: the mma.sync window route's steps and block are not its knobs
    spec = _layer("stage4 3x3 256 @14", 32)
    assert config_for(spec, arch="sm_90a").tensor_core == "wgmma"
    for name in ("row steps", "half block s2"):
        with pytest.raises(ValueError, match="window route"):
            variant_config(spec, name, "sm_90a")
        variant_config(spec, name, "sm_90")  # the mma.sync window route's


def test_the_sm_90a_space_has_both_window_kernels_of_a_3x3():
    spec = _layer("stage5 3x3 512 @7", 32)
    space = search_space(spec, max_candidates=10, arch="sm_90a")
    windows = [c.config for c in space.candidates if c.origin == "window kernel"]
    assert any(c.tensor_core == "wgmma" and c.tma for c in windows)  # by descriptor
    assert any(c.wgmma for c in windows + [space.candidates[0].config])  # template
    assert not any(
        c.origin == "window kernel"
        for c in search_space(spec, max_candidates=10, arch="sm_90").candidates
    )


def test_an_unknown_variant_is_named():
    with pytest.raises(ValueError, match="unknown variant 'wide'.*row steps"):
        variant_config(_layer("stage2 1x1 64-64 @56"), "wide")


def test_the_space_puts_the_neighbours_after_the_baseline_within_its_bound():
    spec = _layer("stage2 1x1 64-64 @56", 32)
    space = search_space(spec, max_candidates=6)
    origins = [c.origin for c in space.candidates]
    near = [o for o in origins if o.startswith("neighbour")]
    assert origins[0] == "baseline" and origins[1 : 1 + len(near)] == near
    assert near and len(origins) <= 6 + 1
    assert {o.removeprefix("neighbour ") for o in near} <= set(VARIANTS)


class _Measurer:
    """Every kernel right, timed by the order it is measured in."""

    gpu = "fake"
    broken = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def measure(self, kernel, final: bool = False) -> Measurement:
        self.calls.append(kernel.info["config"])
        return Measurement(True, 1.0 / len(self.calls), 1e-4, seconds=0.0)

    def confirm(self, kernel, runs: int) -> Measurement:
        return Measurement(True, error=1e-4)

    def cudnn_ms(self, relu: bool = False, tf32: bool = False) -> None:
        return None

    def close(self) -> None:
        pass


def test_the_tuner_measures_the_neighbours_right_after_the_baseline():
    spec = ConvSpec(
        2, 32, 8, 8, 32, 1, 1, layout="nhwc", filter_layout="rsck", dtype="f16"
    )
    options = TuneOptions(max_candidates=3, top=1, explore=0, jobs=1, progress=False)
    result = tune(spec, _Measurer(), options)
    picked = [r.picked_by for r in sorted(result.measured, key=lambda r: r.index)]
    near = [r for r in result.records if r.origin.startswith("neighbour")]
    assert picked[0] == "baseline" and near
    assert picked[1 : 1 + len(near)] == ["neighbour"] * len(near)
    assert all(r.status == "measured" for r in near)
