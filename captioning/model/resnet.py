"""ResNet-18/34/50/101/152 built here, named and initialised exactly as torchvision builds them, so that torchvision's
state_dicts load and a seeded random init gives the same weights (tests/captioning/test_resnet.py checks both against
torchvision itself).

Why not torchvision's own: importing torchvision imports torch._dynamo (its ops do), ~2-3 s for every process that
builds a ResNet encoder and trains nothing (``caption``, the server's workers, the tests' tiny captioners). Only the
convolutional trunk is used; the classifier is built and dropped so that the random stream matches torchvision's.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from text_attn.core.empty_build import allocate

# backbone -> (block kind, blocks per stage): torchvision's table
_LAYERS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        # registration order is torchvision's (conv1, bn1, relu, conv2, bn2, downsample): the init loop follows it
        self.conv1 = _conv3x3(cin, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(cin, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)  # the stride on the 3x3 (torchvision's "ResNet v1.5")
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * 4)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    """The trunk: conv1, bn1, relu, maxpool, layer1..layer4 (torchvision's names; no avgpool or fc).

    ``init=False``: the tensors are allocated but not initialised (nothing is drawn from the random stream), for a
    caller that loads every one of them next (a model file, ImageNet weights): drawing ResNet-18's 11M random numbers
    takes ~0.1 s and ResNet-101's ~0.7 s, all thrown away."""

    def __init__(self, backbone: str, init: bool = True) -> None:
        super().__init__()
        if not init:
            with torch.device("meta"):  # shapes only: no memory written, no random numbers drawn
                self._build(backbone, init=False)
            allocate(self)
            return
        self._build(backbone, init=True)

    def _build(self, backbone: str, init: bool) -> None:
        kind, counts = _LAYERS[backbone]
        block = BasicBlock if kind == "basic" else Bottleneck
        self.expansion = block.expansion
        self._cin = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._stage(block, 64, counts[0], 1)
        self.layer2 = self._stage(block, 128, counts[1], 2)
        self.layer3 = self._stage(block, 256, counts[2], 2)
        self.layer4 = self._stage(block, 512, counts[3], 2)
        if not init:  # (on the meta device, kaiming_normal_ would import torch._dynamo: ~2 s)
            return
        # torchvision builds its classifier here: its default init draws from the random stream before the loop
        # below does, so it is built (and dropped) to keep a seeded init equal to torchvision's
        nn.Linear(512 * block.expansion, 1000)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _stage(self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self._cin != planes * block.expansion:  # built before the block, as torchvision does
            downsample = nn.Sequential(
                _conv1x1(self._cin, planes * block.expansion, stride), nn.BatchNorm2d(planes * block.expansion)
            )
        layers = [block(self._cin, planes, stride, downsample)]
        self._cin = planes * block.expansion
        layers += [block(self._cin, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:  # (B, 3, H, W) -> (B, 512 * expansion, H / 32, W / 32)
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))
