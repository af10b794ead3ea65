"""ResNet-50 v1.5 and MobileNetV2 as torch modules, written from their architectures
(as `affinec.frontend.networks` lists their convolutions), randomly initialized: what
`affinec.torch.convert` is tried on.

    model = resnet50()                            # 53 Conv2d, each with a BatchNorm2d
    fast = affinec.torch.convert(model)          # 53 AffinecConv2d, batch norms folded

The batch norms get random running statistics (`randomize_batch_norms`), so that
folding them is a real test rather than the identity of fresh ones.
"""

from __future__ import annotations

import torch
from torch import nn

from affinec.frontend.networks import MOBILENET_V2_BLOCKS


def _conv_bn(
    c: int, k: int, r: int, stride: int = 1, groups: int = 1, act: type | None = None
) -> list[nn.Module]:
    layers: list[nn.Module] = [
        nn.Conv2d(c, k, r, stride, r // 2, groups=groups, bias=False),
        nn.BatchNorm2d(k),
    ]
    if act is not None:
        layers.append(act(inplace=True))
    return layers


class Bottleneck(nn.Module):
    """1×1, 3×3 (with the block's stride: v1.5), 1×1 ×4, and the shortcut."""

    def __init__(self, c: int, width: int, stride: int) -> None:
        super().__init__()
        out = 4 * width
        self.body = nn.Sequential(
            *_conv_bn(c, width, 1, act=nn.ReLU),
            *_conv_bn(width, width, 3, stride, act=nn.ReLU),
            *_conv_bn(width, out, 1),
        )
        self.shortcut = (
            nn.Sequential(*_conv_bn(c, out, 1, stride))
            if stride != 1 or c != out
            else nn.Identity()
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


def resnet50(num_classes: int = 1000) -> nn.Module:
    """ResNet-50 v1.5: a 7×7/2 stem, four stages of bottlenecks (3, 4, 6, 3)."""
    layers: list[nn.Module] = [
        *_conv_bn(3, 64, 7, 2, act=nn.ReLU),
        nn.MaxPool2d(3, 2, 1),
    ]
    c = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            layers.append(Bottleneck(c, width, stride))
            c = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes)]
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """A 1×1 expansion (none for t = 1), a 3×3 depthwise convolution, a linear 1×1
    projection; the input added where the shape is kept."""

    def __init__(self, c: int, out: int, stride: int, t: int) -> None:
        super().__init__()
        hidden = c * t
        layers = _conv_bn(c, hidden, 1, act=nn.ReLU6) if t != 1 else []
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6)
        layers += _conv_bn(hidden, out, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c == out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


def mobilenet_v2(num_classes: int = 1000) -> nn.Module:
    """MobileNetV2 at width 1.0: a 3×3/2 stem, 17 inverted residual blocks, a 1×1 to
    1280 channels."""
    layers: list[nn.Module] = _conv_bn(3, 32, 3, 2, act=nn.ReLU6)
    c = 32
    for t, out, blocks, first_stride in MOBILENET_V2_BLOCKS:
        for b in range(blocks):
            layers.append(InvertedResidual(c, out, first_stride if b == 0 else 1, t))
            c = out
    layers += _conv_bn(c, 1280, 1, act=nn.ReLU6)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, num_classes)]
    return nn.Sequential(*layers)


def randomize_batch_norms(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every batch norm random statistics and affine parameters (in place)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            k = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(k, generator=g) * 0.1)  # pyright: ignore
                m.running_var.copy_(torch.rand(k, generator=g) + 0.5)  # pyright: ignore
                m.weight.copy_(torch.rand(k, generator=g) + 0.5)
                m.bias.copy_(torch.randn(k, generator=g) * 0.1)
    return model


TORCH_NETWORKS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}
