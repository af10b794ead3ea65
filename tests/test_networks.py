"""The networks the benchmarks measure, written from their architectures."""

import pytest

from affinec.driver.compiler import compile_to_ptx
from affinec.driver.config import config_for
from affinec.frontend.networks import network


def test_resnet50_has_53_convolutions_in_23_shapes():
    layers = network("resnet50", batch=1)
    assert len(layers) == 23 and sum(x.count for x in layers) == 53
    # About 4.1 billion multiply-adds an image.
    flops = sum(x.count * x.spec.flops for x in layers)
    assert 8.0e9 < flops < 8.4e9
    assert len({x.spec for x in layers}) == 23


def test_vgg16_has_13_convolutions():
    layers = network("vgg16", batch=2, dtype="bf16")
    assert sum(x.count for x in layers) == 13
    assert all(x.spec.dtype == "bf16" and x.spec.n == 2 for x in layers)
    assert 30.5e9 < sum(x.count * x.spec.flops for x in layers) / 2 < 31e9


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="unknown network 'resnet18'"):
        network("resnet18", 1)
    with pytest.raises(ValueError, match="batch must be at least 1"):
        network("vgg16", 0)


@pytest.mark.parametrize("name", ["conv1", "stage5 3x3/2", "stage5 1x1 2048-512"])
def test_real_layers_compile(name):
    """The first layer (3 channels), a strided 3x3 and the deepest 1x1 (the whole
    network compiles with benchmarks/networks.py --compile-only)."""
    (layer,) = [x for x in network("resnet50", 1) if x.name.startswith(name)]
    compiled = compile_to_ptx(layer.spec, config_for(layer.spec), arch="sm_90")
    assert compiled.resources().spill_stores == 0


def test_mobilenet_v2_has_52_convolutions_and_17_depthwise():
    layers = network("mobilenet_v2", batch=1)
    assert sum(x.count for x in layers) == 52
    depthwise = [x for x in layers if x.spec.groups > 1]
    assert sum(x.count for x in depthwise) == 17
    assert all(x.spec.groups == x.spec.c == x.spec.k for x in depthwise)
    last = layers[-1].spec
    assert (last.c, last.k, last.h) == (320, 1280, 7)


def test_a_depthwise_layer_compiles_on_the_simt_route():
    from affinec.driver.compiler import compile_to_ptx
    from affinec.driver.config import config_for

    (layer,) = [
        x for x in network("mobilenet_v2", 1) if x.name == "depthwise 3x3/2 144 @56"
    ]
    assert not config_for(layer.spec).mma
    assert ".entry" in compile_to_ptx(layer.spec, arch="sm_90").ptx


def test_efficientnet_b0_has_49_convolutions_with_5x5_depthwise():
    layers = network("efficientnet_b0", batch=1)
    assert sum(x.count for x in layers) == 49
    depthwise = [x for x in layers if x.spec.groups > 1]
    assert sum(x.count for x in depthwise) == 16
    assert {x.spec.r for x in depthwise} == {3, 5}
    assert all(x.spec.padding == (x.spec.r // 2,) * 2 for x in depthwise)
    head = layers[-1].spec
    assert (head.c, head.k, head.h) == (320, 1280, 7)
