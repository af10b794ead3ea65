"""The convolutions of networks people run, written from their architectures.

A network is its distinct convolution shapes, each with the number of times the
network runs it; the model's time is the sum of count × time. Shapes are in the
order the forward pass first meets them, NHWC activations and RSCK filters, f16
unless asked otherwise, no fused epilogue (the benchmark compares the convolutions
alone).

    layers = network("resnet50", batch=32)      # 23 distinct shapes, 53 convolutions
    sum(layer.count for layer in layers)        # 53

ResNet-50 is v1.5 (the stride of a downsampling block on its 3×3 convolution, as
torchvision's), VGG-16 configuration D, MobileNetV2 at width 1.0 (its inverted
residual blocks: a 1×1 expansion, a 3×3 depthwise convolution, a 1×1 projection);
EfficientNet-B0 (its MBConv blocks with 3×3 and 5×5 depthwise convolutions); all at
224×224.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from affinec.base.spec import ConvSpec


@dataclass(frozen=True)
class Layer:
    name: str
    spec: ConvSpec
    count: int
    """How many of the network's convolutions have this shape."""


def _conv(
    batch: int, c: int, size: int, k: int, r: int, stride: int = 1, groups: int = 1
) -> ConvSpec:
    return ConvSpec(
        n=batch, c=c, h=size, w=size, k=k, r=r, s=r, stride=stride,
        padding=r // 2, layout="nhwc", filter_layout="rsck", dtype="f16",
        groups=groups,
    )  # fmt: skip


def resnet50(batch: int) -> list[Layer]:
    """ResNet-50 v1.5's 53 convolutions as 23 distinct shapes."""
    layers = [Layer("conv1 7x7/2 3-64 @224", _conv(batch, 3, 224, 64, 7, 2), 1)]
    size, channels = 56, 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        out = 4 * width
        stride = 1 if stage == 0 else 2
        after = size // stride
        name = f"stage{stage + 2}"
        layers += [
            Layer(f"{name} 1x1 {channels}-{width} @{size}", _conv(batch, channels, size, width, 1), 1),
            Layer(f"{name} 3x3/{stride} {width} @{size}", _conv(batch, width, size, width, 3, stride), 1),
            Layer(f"{name} 1x1 {width}-{out} @{after}", _conv(batch, width, after, out, 1), blocks),
            Layer(f"{name} down 1x1/{stride} {channels}-{out} @{size}", _conv(batch, channels, size, out, 1, stride), 1),
            Layer(f"{name} 1x1 {out}-{width} @{after}", _conv(batch, out, after, width, 1), blocks - 1),
        ]  # fmt: skip
        if stride == 2:
            layers.append(
                Layer(f"{name} 3x3 {width} @{after}", _conv(batch, width, after, width, 3), blocks - 1)
            )  # fmt: skip
        else:  # the first stage's 3x3s keep the size: one shape for all blocks
            first = layers[-4]
            layers[-4] = replace(
                first, name=f"{name} 3x3 {width} @{size}", count=blocks
            )
        size, channels = after, out
    return _merged(layers)


def vgg16(batch: int) -> list[Layer]:
    """VGG-16's 13 convolutions (all 3×3, padding 1) as 9 distinct shapes."""
    plan = [(3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112),
            (128, 256, 56), (256, 256, 56), (256, 256, 56), (256, 512, 28),
            (512, 512, 28), (512, 512, 28), (512, 512, 14), (512, 512, 14),
            (512, 512, 14)]  # fmt: skip
    layers = [
        Layer(f"3x3 {c}-{k} @{size}", _conv(batch, c, size, k, 3), 1)
        for c, k, size in plan
    ]
    return _merged(layers)


MOBILENET_V2_BLOCKS = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)  # fmt: skip
"""(expansion t, output channels c, blocks n, first block's stride s) a stage."""


def mobilenet_v2(batch: int) -> list[Layer]:
    """MobileNetV2's 52 convolutions: the stem, 17 inverted residual blocks (17
    depthwise 3×3, 16 expansions, 17 projections) and the last 1×1."""
    stages = [(t, 3, c, n, s) for t, c, n, s in MOBILENET_V2_BLOCKS]
    layers, size, channels = _inverted_residuals(batch, stages)
    layers.append(
        Layer(
            f"last 1x1 {channels}-1280 @{size}",
            _conv(batch, channels, size, 1280, 1),
            1,
        )
    )
    return _merged(layers)


def _inverted_residuals(
    batch: int, stages: list[tuple[int, int, int, int, int]]
) -> tuple[list[Layer], int, int]:
    """The stem (3×3/2, 3 to 32 channels at 224²) and the inverted residual blocks of
    `stages` — (expansion, depthwise kernel, output channels, blocks, first block's
    stride) each: a 1×1 expansion (none at expansion 1), a depthwise convolution, a
    1×1 projection; with the size and channels they end at."""
    layers = [Layer("stem 3x3/2 3-32 @224", _conv(batch, 3, 224, 32, 3, 2), 1)]
    size, channels = 112, 32
    for t, r, out, blocks, first_stride in stages:
        for b in range(blocks):
            stride = first_stride if b == 0 else 1
            hidden = channels * t
            if t != 1:
                layers.append(
                    Layer(f"expand 1x1 {channels}-{hidden} @{size}", _conv(batch, channels, size, hidden, 1), 1)
                )  # fmt: skip
            layers.append(
                Layer(f"depthwise {r}x{r}/{stride} {hidden} @{size}", _conv(batch, hidden, size, hidden, r, stride, groups=hidden), 1)
            )  # fmt: skip
            size //= stride
            layers.append(
                Layer(f"project 1x1 {hidden}-{out} @{size}", _conv(batch, hidden, size, out, 1), 1)
            )  # fmt: skip
            channels = out
    return layers, size, channels


EFFICIENTNET_B0_STAGES = (
    (1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2),
    (6, 5, 112, 3, 1), (6, 5, 192, 4, 2), (6, 3, 320, 1, 1),
)  # fmt: skip
"""(expansion, depthwise kernel, output channels, blocks, first block's stride) a
stage of EfficientNet-B0."""


def efficientnet_b0(batch: int) -> list[Layer]:
    """EfficientNet-B0's 49 convolutions: the stem, 16 MBConv blocks (16 depthwise
    3×3 or 5×5, 15 expansions, 16 projections) and the head's 1×1. Its
    squeeze-and-excitation 1×1s, over one pixel, are left out: they are matrix-vector
    products, not convolutions worth a kernel."""
    layers, size, channels = _inverted_residuals(batch, list(EFFICIENTNET_B0_STAGES))
    layers.append(
        Layer(
            f"head 1x1 {channels}-1280 @{size}",
            _conv(batch, channels, size, 1280, 1),
            1,
        )
    )
    return _merged(layers)


def _merged(layers: list[Layer]) -> list[Layer]:
    """Layers of equal shape as one, counts added, in first-met order."""
    merged: dict[ConvSpec, Layer] = {}
    for layer in layers:
        if layer.count == 0:
            continue
        if layer.spec in merged:
            seen = merged[layer.spec]
            merged[layer.spec] = replace(seen, count=seen.count + layer.count)
        else:
            merged[layer.spec] = layer
    return list(merged.values())


NETWORKS = {
    "resnet50": resnet50,
    "vgg16": vgg16,
    "mobilenet_v2": mobilenet_v2,
    "efficientnet_b0": efficientnet_b0,
}


def network(name: str, batch: int, dtype: str = "f16") -> list[Layer]:
    """The distinct convolutions of network `name` at `batch`, in `dtype`."""
    if name not in NETWORKS:
        raise ValueError(
            f"unknown network '{name}' (expected one of {', '.join(NETWORKS)})"
        )
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    return [
        replace(layer, spec=replace(layer.spec, dtype=dtype))
        for layer in NETWORKS[name](batch)
    ]
