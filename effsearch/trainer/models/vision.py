"""The built-in image models, and the adapter feeding one-channel images to a model that takes more.

The built-ins have the interface CORDS's own models have: ``forward(x, last=False,
freeze=False)`` returns ``(logits, embedding)`` when ``last``, and ``get_embedding_dim()``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from effsearch.config import MODEL_WIDTHS


class Classifier(nn.Module):
    """A feature extractor followed by one linear layer. ``min_side``: the smallest image side its
    poolings take (2 ** the number of 2x2 max-pools); a smaller image is zero-padded up to it.
    Progressive resizing at 0.3 with ColOut leaves 5-6 of 32 pixels, and ResNet-9's third pooling
    then failed ("Output size is too small"): now such a step trains on the padded image. An image
    at least ``min_side`` wide passes untouched (one comparison a step)."""

    def __init__(self, features: nn.Module, dim: int, num_classes: int, min_side: int = 1) -> None:
        super().__init__()
        self.features = features
        self.embDim = dim
        self.linear = nn.Linear(dim, num_classes)
        self.min_side = min_side

    def forward(
        self, x: torch.Tensor, last: bool = False, freeze: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        h, w = x.shape[-2], x.shape[-1]
        if h < self.min_side or w < self.min_side:
            ph, pw = max(0, self.min_side - h), max(0, self.min_side - w)
            x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))
        if freeze:
            with torch.no_grad():
                emb = self.features(x)
        else:
            emb = self.features(x)
        out = self.linear(emb)
        return (out, emb) if last else out

    def get_embedding_dim(self) -> int:
        return self.embDim


def conv_bn(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )


def tiny_cnn(channels: int, num_classes: int, width: int = 0) -> Classifier:
    w = width or MODEL_WIDTHS["tiny-cnn"]
    feats = nn.Sequential(
        conv_bn(channels, w),
        nn.MaxPool2d(2),
        conv_bn(w, 2 * w),
        nn.MaxPool2d(2),
        conv_bn(2 * w, 4 * w),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
    )
    return Classifier(feats, 4 * w, num_classes, min_side=4)


class Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.block = nn.Sequential(conv_bn(c, c), conv_bn(c, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def resnet9(channels: int, num_classes: int, width: int = 0) -> Classifier:
    """cifar10-fast's ResNet-9 (Page, 2018), width-scalable."""
    w = width or MODEL_WIDTHS["resnet9"]
    feats = nn.Sequential(
        conv_bn(channels, w),
        conv_bn(w, 2 * w),
        nn.MaxPool2d(2),
        Residual(2 * w),
        conv_bn(2 * w, 4 * w),
        nn.MaxPool2d(2),
        conv_bn(4 * w, 8 * w),
        nn.MaxPool2d(2),
        Residual(8 * w),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
    )
    return Classifier(feats, 8 * w, num_classes, min_side=8)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def cifar_resnet(channels: int, num_classes: int, depth: int, width: int = 0) -> Classifier:
    """He et al. 2016's CIFAR ResNet (basic blocks, 6n+2 layers)."""
    n = (depth - 2) // 6
    w = width or MODEL_WIDTHS[f"resnet{depth}"]
    layers = [nn.Conv2d(channels, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
    cin = w
    for stage, cout in enumerate((w, 2 * w, 4 * w)):
        for i in range(n):
            layers.append(BasicBlock(cin, cout, 2 if (i == 0 and stage > 0) else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return Classifier(nn.Sequential(*layers), cin, num_classes)


def resnet_bottleneck(
    channels: int, num_classes: int, width: int = 0, blocks: tuple[int, ...] = (2, 2, 2)
) -> Classifier:
    """A CIFAR ResNet of torchvision ``Bottleneck`` blocks (the blocks Composer's
    StochasticDepth replaces): 3 stages, expansion 4."""
    from torchvision.models.resnet import Bottleneck  # here: torchvision's import takes seconds (torch._dynamo)

    w = width or MODEL_WIDTHS["resnet-bottleneck"]
    layers = [nn.Conv2d(channels, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
    cin = w
    for stage, planes in enumerate((w, 2 * w, 4 * w)):
        for i in range(blocks[stage]):
            stride = 2 if (i == 0 and stage > 0) else 1
            down = None
            if stride != 1 or cin != planes * Bottleneck.expansion:
                down = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False), nn.BatchNorm2d(planes * 4))
            layers.append(Bottleneck(cin, planes, stride=stride, downsample=down))
            cin = planes * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return Classifier(nn.Sequential(*layers), cin, num_classes)


def build_model(name: str, channels: int, num_classes: int, width: int = 0) -> Classifier:
    if name == "tiny-cnn":
        return tiny_cnn(channels, num_classes, width)
    if name == "resnet9":
        return resnet9(channels, num_classes, width)
    if name == "resnet20":
        return cifar_resnet(channels, num_classes, 20, width)
    if name == "resnet56":
        return cifar_resnet(channels, num_classes, 56, width)
    if name == "resnet-bottleneck":
        return resnet_bottleneck(channels, num_classes, width)
    raise ValueError(f"unknown model {name!r}")


class RepeatChannels(nn.Module):
    """Feeds a model whose first layer takes ``channels`` channels images of one channel,
    repeated (Fashion-MNIST into a 3-channel torchvision ResNet)."""

    def __init__(self, module: nn.Module, channels: int) -> None:
        super().__init__()
        self.module = module
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x.expand(-1, self.channels, -1, -1))


class PixelValues(nn.Module):
    """A transformers image classifier (``ViTForImageClassification`` from a factory) called as
    one: ``pixel_values`` in, its output's ``logits`` out."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(pixel_values=x).logits
