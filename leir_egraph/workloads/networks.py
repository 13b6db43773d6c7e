"""Whole networks (family ``network``, level 3): MLPs, classic CNNs and their building blocks,
transformers, recurrent networks, a U-Net, NetVLAD and Mamba-style selective scans.

Every model is plain ``nn.Module`` code written here the way the papers' reference code (and
torchvision, which is not a dependency) writes it, so that translating it exercises what a
user's model file exercises: ``nn.Sequential`` stacks, residual adds, ``torch.cat`` of
branches, ``view``/``transpose`` channel shuffles, ``Tensor.unfold`` patch embeddings,
``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``, ``nn.LSTM``/``nn.GRU``/``nn.RNN``
(bidirectional, several layers, initial and final states), recurrent cells in Python loops over
time, shape arithmetic in ``forward`` (``B, T, C = x.shape``) and selective scans.

``small`` draws keep every input under 20,000 elements and each program to a few hundred nests
(CPU verification in seconds); ``paper`` draws use the models' usual sizes (ResNet-18 at
224x224, ViT-Tiny, GPT-2-small width, 512-wide LSTMs, ...) for shape-only translation. Modules
are in eval mode; norm layers get seeded running statistics so that eval-mode BatchNorm is not
the identity.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import CausalSelfAttention
from .registry import Input, kind

FAMILY = "network"
LEVEL = 3


def network(name: str, small: dict, paper: dict):
    """``@network("ResNet18", small={...}, paper={...})`` on ``make(dims, dtype)``."""
    def wrap(make):
        def seeded(d, dtype):
            module, plan = make(d, dtype)
            _running_statistics(module)
            return module, plan
        seeded.__doc__ = make.__doc__
        return kind(name, FAMILY, LEVEL, small, paper)(seeded)
    return wrap


def _running_statistics(module: nn.Module) -> None:
    """Non-trivial running mean/variance for every BatchNorm (from torch's seeded generator)."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.normal_(0, 0.2)
                m.running_var.uniform_(0.5, 1.5)


def conv_bn(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
    """Conv (no bias), BatchNorm, activation: the block every CNN below is made of."""
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def image(d) -> list[Input]:
    return [Input((d["batch"], d["channels"], d["size"], d["size"]))]


# ---------------------------------------------------------------- MLPs

class MLP(nn.Module):
    def __init__(self, features, hidden, depth, classes):
        super().__init__()
        layers, width = [], features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.body(x.flatten(1)))


@network("MLPStack", small={"batch": (2, 8), "features": (8, 32), "hidden": (8, 24),
                            "depth": (2, 4), "classes": (2, 10)},
         paper={"batch": (1, 256), "features": 784, "hidden": [512, 1024, 2048], "depth": 3,
                "classes": 10})
def _mlp(d, dtype):
    """Linear+ReLU layers and a classifier."""
    return MLP(d["features"], d["hidden"], d["depth"], d["classes"]), \
        [Input((d["batch"], d["features"]))]


class ResidualMLP(nn.Module):
    """Pre-norm residual MLP blocks (LayerNorm, Linear, GELU, Dropout, Linear)."""

    def __init__(self, width, expansion, depth):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.LayerNorm(width), nn.Linear(width, width * expansion), nn.GELU(),
            nn.Dropout(0.1), nn.Linear(width * expansion, width)) for _ in range(depth))
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return self.norm(x)


@network("ResidualMLP", small={"batch": (2, 6), "width": (8, 16), "expansion": 2, "depth": 2},
         paper={"batch": (1, 256), "width": [256, 512, 768], "expansion": 4, "depth": 4})
def _residual_mlp(d, dtype):
    return ResidualMLP(d["width"], d["expansion"], d["depth"]), [Input((d["batch"], d["width"]))]


class MixerBlock(nn.Module):
    """MLP-Mixer: token mixing on the transposed sequence, then channel mixing."""

    def __init__(self, tokens, channels, hidden):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.tokens = nn.Sequential(nn.Linear(tokens, hidden), nn.GELU(), nn.Linear(hidden, tokens))
        self.channels = nn.Sequential(nn.Linear(channels, hidden), nn.GELU(),
                                      nn.Linear(hidden, channels))

    def forward(self, x):
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


@network("MLPMixerBlock", small={"batch": (1, 3), "tokens": (4, 9), "channels": (4, 12),
                                 "hidden": (8, 16)},
         paper={"batch": (1, 64), "tokens": 196, "channels": 512, "hidden": 2048})
def _mixer(d, dtype):
    return MixerBlock(d["tokens"], d["channels"], d["hidden"]), \
        [Input((d["batch"], d["tokens"], d["channels"]))]


# ---------------------------------------------------------------- classic CNNs

class LeNet5(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, 5), nn.Tanh(), nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(),
            nn.Linear(84, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


@network("LeNet5", small={"batch": (1, 4), "channels": 1, "size": 32, "classes": 10},
         paper={"batch": (1, 256), "channels": 1, "size": 32, "classes": 10})
def _lenet(d, dtype):
    """LeCun et al. 1998 (tanh, average pooling)."""
    return LeNet5(d["channels"], d["classes"]), image(d)


class AlexNet(nn.Module):
    """torchvision's AlexNet layout with every width scaled by ``w`` (1 = the original)."""

    def __init__(self, w, hidden, classes, small_input):
        super().__init__()
        c = [int(64 * w), int(192 * w), int(384 * w), int(256 * w), int(256 * w)]
        first = (nn.Conv2d(3, c[0], 5, 2, 2) if small_input else nn.Conv2d(3, c[0], 11, 4, 2))
        self.features = nn.Sequential(
            first, nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2) if small_input else (6, 6))
        area = 4 if small_input else 36
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(c[4] * area, hidden), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


@network("AlexNet", small={"batch": (1, 2), "channels": 3, "size": 32, "width": 0.0625,
                           "hidden": (16, 32), "classes": 10},
         paper={"batch": (1, 128), "channels": 3, "size": 224, "width": 1.0, "hidden": 1024,
                "classes": 1000})
def _alexnet(d, dtype):
    """Krizhevsky et al. 2012 (torchvision layout; the small draw uses a 5x5 stride-2 stem)."""
    return AlexNet(d["width"], d["hidden"], d["classes"], d["size"] < 64), image(d)


class VGG(nn.Module):
    """VGG-11 with BatchNorm, CIFAR layout (five 2x2 max pools to 1x1, one linear classifier)."""

    CONFIG = [1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M"]

    def __init__(self, width, classes):
        super().__init__()
        layers, cin = [], 3
        for v in self.CONFIG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers.append(conv_bn(cin, v * width))
                cin = v * width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, classes)

    def forward(self, x):
        return self.classifier(self.features(x).view(x.size(0), -1))


@network("VGG11", small={"batch": (1, 2), "channels": 3, "size": 32, "width": (2, 4),
                         "classes": 10},
         paper={"batch": (1, 128), "channels": 3, "size": 32, "width": 64, "classes": 10})
def _vgg(d, dtype):
    """Simonyan & Zisserman 2014, configuration A with BatchNorm."""
    return VGG(d["width"], d["classes"]), image(d)


# ---------------------------------------------------------------- ResNets

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, groups=1, base_width=64):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """ResNet-50's bottleneck; ``groups``/``base_width`` make it ResNeXt's."""
    expansion = 4

    def __init__(self, cin, planes, stride=1, groups=1, base_width=64):
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """torchvision's ResNet with base width ``width`` (64 = the original); a small input gets a
    3x3 stem without max pooling (the CIFAR variant)."""

    def __init__(self, block, layers, width, classes, small_input):
        super().__init__()
        self.cin = width
        if small_input:
            self.stem = conv_bn(3, width, 3)
        else:
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, 1))
        self.layer1 = self._stage(block, width, layers[0], 1)
        self.layer2 = self._stage(block, width * 2, layers[1], 2)
        self.layer3 = self._stage(block, width * 4, layers[2], 2)
        self.layer4 = self._stage(block, width * 8, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 8 * block.expansion, classes)

    def _stage(self, block, planes, blocks, stride):
        layers = [block(self.cin, planes, stride)]
        self.cin = planes * block.expansion
        layers += [block(self.cin, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


RESNET_SMALL = {"batch": (1, 2), "channels": 3, "size": (8, 16), "width": (2, 4),
                "classes": (2, 10)}
RESNET_PAPER = {"batch": (1, 128), "channels": 3, "size": 224, "width": 64, "classes": 1000}


@network("ResNet18", small=RESNET_SMALL, paper=RESNET_PAPER)
def _resnet18(d, dtype):
    """He et al. 2016, basic blocks [2, 2, 2, 2]."""
    return ResNet(BasicBlock, [2, 2, 2, 2], d["width"], d["classes"], d["size"] < 64), image(d)


@network("ResNet50", small={**RESNET_SMALL, "width": 2},
         paper={**RESNET_PAPER, "batch": (1, 32)})
def _resnet50(d, dtype):
    """He et al. 2016, bottleneck blocks [3, 4, 6, 3]."""
    return ResNet(Bottleneck, [3, 4, 6, 3], d["width"], d["classes"], d["size"] < 64), image(d)


BLOCK_SMALL = {"batch": (1, 2), "channels": (4, 8), "size": (6, 10), "stride": [1, 2]}
BLOCK_PAPER = {"batch": (1, 128), "channels": [64, 128, 256], "size": [14, 28, 56],
               "stride": [1, 2]}


@network("ResNetBasicBlock", small=BLOCK_SMALL, paper=BLOCK_PAPER)
def _basic_block(d, dtype):
    """One basic block; with stride 2 the shortcut is a strided 1x1 projection."""
    c = d["channels"]
    return BasicBlock(c, c * d["stride"], d["stride"]), image(d)


@network("ResNetBottleneckBlock", small=BLOCK_SMALL, paper=BLOCK_PAPER)
def _bottleneck_block(d, dtype):
    c = d["channels"]
    return Bottleneck(c * 4, c, d["stride"]), \
        [Input((d["batch"], c * 4, d["size"], d["size"]))]


@network("ResNeXtBlock", small={**BLOCK_SMALL, "cardinality": [2, 4]},
         paper={**BLOCK_PAPER, "cardinality": 32})
def _resnext_block(d, dtype):
    """Xie et al. 2017: the bottleneck with a grouped 3x3 convolution (cardinality groups)."""
    c, g = d["channels"], d["cardinality"]
    block = Bottleneck(c * 4, c, d["stride"], groups=g, base_width=4 if c >= 64 else 64 // g)
    return block, [Input((d["batch"], c * 4, d["size"], d["size"]))]


class SqueezeExcite(nn.Module):
    def __init__(self, channels, reduced, act=nn.ReLU, gate=nn.Sigmoid):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.act = act()
        self.expand = nn.Conv2d(reduced, channels, 1)
        self.gate = gate()

    def forward(self, x):
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


class SEBasicBlock(BasicBlock):
    """Hu et al. 2018: a basic block whose residual branch is rescaled per channel."""

    def __init__(self, cin, planes, stride=1):
        super().__init__(cin, planes, stride)
        self.se = SqueezeExcite(planes, max(1, planes // 4))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.se(self.bn2(self.conv2(out)))
        return self.relu(out + identity)


@network("SEResNetBlock", small=BLOCK_SMALL, paper=BLOCK_PAPER)
def _se_block(d, dtype):
    c = d["channels"]
    return SEBasicBlock(c, c * d["stride"], d["stride"]), image(d)


# ---------------------------------------------------------------- DenseNet

class DenseLayer(nn.Module):
    def __init__(self, cin, growth, bn_size):
        super().__init__()
        self.norm1, self.relu1 = nn.BatchNorm2d(cin), nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2, self.relu2 = nn.BatchNorm2d(bn_size * growth), nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, features):
        x = torch.cat(features, 1)
        x = self.conv1(self.relu1(self.norm1(x)))
        return self.conv2(self.relu2(self.norm2(x)))


class DenseBlock(nn.Module):
    """Huang et al. 2017: every layer sees the concatenation of all earlier feature maps;
    then the transition (BN, ReLU, 1x1 conv, 2x2 average pooling)."""

    def __init__(self, cin, layers, growth, bn_size):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(cin + k * growth, growth, bn_size)
                                    for k in range(layers))
        total = cin + layers * growth
        self.transition = nn.Sequential(nn.BatchNorm2d(total), nn.ReLU(inplace=True),
                                        nn.Conv2d(total, total // 2, 1, bias=False),
                                        nn.AvgPool2d(2, 2))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return self.transition(torch.cat(features, 1))


@network("DenseNetBlock", small={"batch": (1, 2), "channels": (4, 8), "size": [6, 8],
                                 "layers": (2, 4), "growth": (2, 4)},
         paper={"batch": (1, 64), "channels": 64, "size": 56, "layers": 6, "growth": 32})
def _dense_block(d, dtype):
    return DenseBlock(d["channels"], d["layers"], d["growth"], 4 if d["growth"] >= 32 else 2), \
        image(d)


# ---------------------------------------------------------------- mobile networks

class MobileNetV1(nn.Module):
    """Howard et al. 2017: a stem and depthwise-separable blocks (3x3 depthwise + 1x1)."""

    def __init__(self, width, blocks, classes):
        super().__init__()
        layers, c = [conv_bn(3, width, 3, 2)], width
        for k in range(blocks):
            stride = 2 if k % 2 else 1
            wider = c * 2 if stride == 2 else c
            layers += [conv_bn(c, c, 3, stride, groups=c), conv_bn(c, wider, 1)]
            c = wider
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


@network("MobileNetV1", small={"batch": (1, 2), "channels": 3, "size": (8, 16), "width": (4, 8),
                               "blocks": (2, 4), "classes": 10},
         paper={"batch": (1, 128), "channels": 3, "size": 224, "width": 32, "blocks": 13,
                "classes": 1000})
def _mobilenet_v1(d, dtype):
    return MobileNetV1(d["width"], d["blocks"], d["classes"]), image(d)


class InvertedResidual(nn.Module):
    """MobileNetV2 (Sandler et al. 2018): expand 1x1, depthwise 3x3, project 1x1 (linear);
    a residual add when the shape is kept."""

    def __init__(self, cin, cout, stride, expand, act=nn.ReLU6, se=False):
        super().__init__()
        hidden = cin * expand
        layers = [conv_bn(cin, hidden, 1, act=act)] if expand != 1 else []
        layers.append(conv_bn(hidden, hidden, 3, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden, max(1, cin // 4), act=nn.SiLU))
        layers.append(conv_bn(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


@network("MobileNetV2Block", small={**BLOCK_SMALL, "expand": [2, 6]},
         paper={**BLOCK_PAPER, "channels": [24, 32, 64, 96], "expand": 6})
def _inverted_residual(d, dtype):
    c, s = d["channels"], d["stride"]
    return nn.Sequential(InvertedResidual(c, c, 1, d["expand"]),
                         InvertedResidual(c, c * s, s, d["expand"])), image(d)


@network("EfficientNetMBConv", small={**BLOCK_SMALL, "expand": [4, 6]},
         paper={**BLOCK_PAPER, "channels": [24, 40, 80, 112], "expand": 6})
def _mbconv(d, dtype):
    """Tan & Le 2019: the inverted residual with SiLU and squeeze-and-excitation."""
    c, s = d["channels"], d["stride"]
    return nn.Sequential(InvertedResidual(c, c, 1, d["expand"], nn.SiLU, se=True),
                         InvertedResidual(c, c * s, s, d["expand"], nn.SiLU, se=True)), image(d)


def channel_shuffle(x, groups: int):
    """ShuffleNet's channel shuffle, written as its paper's reference code writes it."""
    n, c, h, w = x.size()
    x = x.view(n, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(n, -1, h, w)


class ShuffleV1Unit(nn.Module):
    """Zhang et al. 2018: grouped 1x1 conv, channel shuffle, depthwise 3x3, grouped 1x1; the
    stride-2 unit concatenates a 3x3 average-pooled shortcut."""

    def __init__(self, cin, cout, groups, stride):
        super().__init__()
        self.groups, self.stride = groups, stride
        mid = cout // 4
        out = cout - cin if stride == 2 else cout
        self.gconv1 = conv_bn(cin, mid, 1, groups=groups)
        self.dwconv = conv_bn(mid, mid, 3, stride, groups=mid, act=None)
        self.gconv2 = conv_bn(mid, out, 1, groups=groups, act=None)

    def forward(self, x):
        out = channel_shuffle(self.gconv1(x), self.groups)
        out = self.gconv2(self.dwconv(out))
        if self.stride == 2:
            return F.relu(torch.cat([F.avg_pool2d(x, 3, 2, 1), out], 1))
        return F.relu(x + out)


@network("ShuffleNetV1Unit", small={"batch": (1, 2), "width": (1, 2), "size": [6, 8],
                                    "groups": [2, 4]},
         paper={"batch": (1, 128), "width": 20, "size": [14, 28], "groups": 3})
def _shuffle_v1(d, dtype):
    """A unit and a stride-2 unit; 4*groups*width channels (240 with 3 groups at paper size)."""
    g = d["groups"]
    c = 4 * g * d["width"]
    return nn.Sequential(ShuffleV1Unit(c, c, g, 1), ShuffleV1Unit(c, 2 * c, g, 2)), \
        [Input((d["batch"], c, d["size"], d["size"]))]


class ShuffleV2Unit(nn.Module):
    """Ma et al. 2018: split the channels in two, transform one half (1x1, depthwise 3x3,
    1x1), concatenate and shuffle (``F.channel_shuffle``)."""

    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.branch = nn.Sequential(conv_bn(half, half, 1), conv_bn(half, half, 3, groups=half,
                                                                    act=None),
                                    conv_bn(half, half, 1))

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        return F.channel_shuffle(torch.cat((a, self.branch(b)), dim=1), 2)


@network("ShuffleNetV2Unit", small={"batch": (1, 2), "channels": [4, 8], "size": (6, 10)},
         paper={"batch": (1, 128), "channels": [116, 232], "size": [14, 28]})
def _shuffle_v2(d, dtype):
    return nn.Sequential(ShuffleV2Unit(d["channels"]), ShuffleV2Unit(d["channels"])), image(d)


class Fire(nn.Module):
    """SqueezeNet's fire module: 1x1 squeeze, then 1x1 and 3x3 expands concatenated."""

    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU(inplace=True))
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU(inplace=True))
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1),
                                     nn.ReLU(inplace=True))

    def forward(self, x):
        x = self.squeeze(x)
        return torch.cat([self.expand1(x), self.expand3(x)], 1)


class SqueezeNet(nn.Module):
    """Iandola et al. 2016 (v1.1 layout, widths scaled by ``w``); the classifier is a 1x1
    convolution and global average pooling."""

    def __init__(self, w, classes):
        super().__init__()
        s, e = max(1, 16 * w // 16), max(1, 64 * w // 16)
        self.features = nn.Sequential(
            nn.Conv2d(3, 4 * w, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(4 * w, s, e), Fire(2 * e, s, e), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(2 * e, 2 * s, 2 * e), Fire(4 * e, 2 * s, 2 * e))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(4 * e, classes, 1),
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


@network("SqueezeNet", small={"batch": (1, 2), "channels": 3, "size": (24, 40), "width": (2, 4),
                              "classes": 10},
         paper={"batch": (1, 128), "channels": 3, "size": 224, "width": 16, "classes": 1000})
def _squeezenet(d, dtype):
    return SqueezeNet(d["width"], d["classes"]), image(d)


@network("SqueezeNetFire", small={"batch": (1, 2), "channels": (4, 8), "size": (6, 10),
                                  "squeeze": (2, 4), "expand": (4, 8)},
         paper={"batch": (1, 128), "channels": 128, "size": 55, "squeeze": 32, "expand": 128})
def _fire(d, dtype):
    return Fire(d["channels"], d["squeeze"], d["expand"]), image(d)


class Inception(nn.Module):
    """GoogLeNet's inception module: 1x1; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pool then 1x1;
    the four branches concatenated."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pool):
        super().__init__()
        self.b1 = conv_bn(cin, c1, 1)
        self.b2 = nn.Sequential(conv_bn(cin, c3r, 1), conv_bn(c3r, c3, 3))
        self.b3 = nn.Sequential(conv_bn(cin, c5r, 1), conv_bn(c5r, c5, 5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1), conv_bn(cin, pool, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


@network("InceptionModule", small={"batch": (1, 2), "channels": (4, 8), "size": (6, 10),
                                   "width": (2, 4)},
         paper={"batch": (1, 128), "channels": 192, "size": 28, "width": 16})
def _inception(d, dtype):
    """Szegedy et al. 2015 (module 3a has width 16: 64, 96->128, 16->32, 32)."""
    w = d["width"]
    return Inception(d["channels"], 4 * w, 6 * w, 8 * w, w, 2 * w, 2 * w), image(d)


# ---------------------------------------------------------------- transformers

class ViT(nn.Module):
    """Dosovitskiy et al. 2021: patches cut with ``Tensor.unfold`` and embedded linearly, a
    class token, learned position embeddings, pre-norm ``nn.TransformerEncoderLayer`` blocks
    (GELU), the class token's final LayerNorm and a linear head."""

    def __init__(self, size, patch, channels, dim, depth, heads, mlp, classes):
        super().__init__()
        self.patch = patch
        tokens = (size // patch) ** 2
        self.embed = nn.Linear(channels * patch * patch, dim)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(
            dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
            for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        B, C, H, W = x.shape
        p = self.patch
        patches = x.unfold(2, p, p).unfold(3, p, p)                 # B, C, H/p, W/p, p, p
        patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B, (H // p) * (W // p), C * p * p)
        x = torch.cat([self.cls.expand(B, -1, -1), self.embed(patches)], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


@network("ViT", small={"batch": (1, 2), "channels": 3, "size": 8, "patch": 4, "dim": (8, 12),
                       "depth": (1, 2), "heads": 2, "classes": (2, 10)},
         paper={"batch": (1, 64), "channels": 3, "size": 224, "patch": 16, "dim": 192,
                "depth": 12, "heads": 3, "classes": 1000})
def _vit(d, dtype):
    """ViT-Tiny at paper size."""
    dim = d["dim"] - d["dim"] % d["heads"]
    return ViT(d["size"], d["patch"], d["channels"], dim, d["depth"], d["heads"], 4 * dim,
               d["classes"]), image(d)


class AttentionBlock(nn.Module):
    """A pre-norm transformer block around ``nn.MultiheadAttention`` (sequence-first layout,
    causal mask, the attention weights returned as a second output)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        T = x.size(0)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        h = self.ln1(x)
        a, weights = self.attn(h, h, h, attn_mask=mask)
        x = x + a
        return x + self.mlp(self.ln2(x)), weights


@network("MultiheadAttentionBlock", small={"batch": (1, 3), "seq": (3, 6), "dim": [8, 12],
                                           "heads": [2, 4]},
         paper={"batch": (1, 64), "seq": [128, 256, 512], "dim": 768, "heads": 12})
def _mha_block(d, dtype):
    return AttentionBlock(d["dim"], d["heads"]), [Input((d["seq"], d["batch"], d["dim"]))]


class SwinBlock(nn.Module):
    """Liu et al. 2021: attention inside non-overlapping windows with a learned relative
    position bias; the shifted variant rolls the map by half a window and masks attention
    between regions that were not neighbours."""

    def __init__(self, dim, heads, size, window, shift):
        super().__init__()
        self.dim, self.heads, self.window, self.shift = dim, heads, window, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("bias_index", rel[..., 0] * (2 * window - 1) + rel[..., 1])
        mask = torch.zeros(size, size)
        if shift:
            regions = (slice(0, -window), slice(-window, -shift), slice(-shift, None))
            label = 0
            for h in regions:
                for w in regions:
                    mask[h, w] = label
                    label += 1
        windows = self._windows(mask[None, :, :, None]).squeeze(-1)
        self.register_buffer("attn_mask", (windows[:, None, :] != windows[:, :, None])
                             .float() * -100.0)

    def _windows(self, x):
        B, H, W, C = x.shape
        w = self.window
        x = x.view(B, H // w, w, W // w, w, C).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, w * w, C)

    def forward(self, x):
        B, H, W, C = x.shape
        w, heads = self.window, self.heads
        shortcut = x
        x = self.norm1(x)
        if self.shift:
            x = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        win = self._windows(x)                                      # nW*B, w*w, C
        qkv = self.qkv(win).reshape(win.shape[0], w * w, 3, heads, C // heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q * (C // heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.bias_table[self.bias_index.view(-1)].view(w * w, w * w, heads)
        att = att + bias.permute(2, 0, 1).unsqueeze(0)
        nw = self.attn_mask.shape[0]
        att = att.view(B, nw, heads, w * w, w * w) + self.attn_mask.unsqueeze(1).unsqueeze(0)
        att = att.view(-1, heads, w * w, w * w).softmax(dim=-1)
        out = self.proj((att @ v).transpose(1, 2).reshape(win.shape[0], w * w, C))
        out = out.view(B, H // w, W // w, w, w, C).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)
        if self.shift:
            out = torch.roll(out, shifts=(self.shift, self.shift), dims=(1, 2))
        x = shortcut + out
        return x + self.mlp(self.norm2(x))


@network("SwinBlock", small={"batch": (1, 2), "size": [4, 8], "window": 2, "dim": [4, 8],
                             "heads": 2},
         paper={"batch": (1, 64), "size": 56, "window": 7, "dim": 96, "heads": 3})
def _swin(d, dtype):
    """A regular and a shifted block (Swin-T stage 1 at paper size)."""
    s, w = d["size"], d["window"]
    return nn.Sequential(SwinBlock(d["dim"], d["heads"], s, w, 0),
                         SwinBlock(d["dim"], d["heads"], s, w, w // 2)), \
        [Input((d["batch"], s, s, d["dim"]))]


class NewGELU(nn.Module):
    def forward(self, x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class GPTBlock(nn.Module):
    """minGPT's Block: ln_1, causal self-attention (the zoo's MinGPT attention), residual;
    ln_2, MLP (c_fc, NewGELU, c_proj), residual."""

    def __init__(self, dim, heads, seq):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = CausalSelfAttention("mha", dim, heads, heads, seq, seq, (), dim)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(dim, 4 * dim), c_proj=nn.Linear(4 * dim, dim),
                                      act=NewGELU()))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.c_proj(m.act(m.c_fc(self.ln_2(x))))


@network("MinGPTBlock", small={"batch": (1, 2), "seq": (3, 6), "dim": [8, 12], "heads": [2, 4]},
         paper={"batch": (1, 32), "seq": 1024, "dim": 768, "heads": 12})
def _gpt_block(d, dtype):
    return GPTBlock(d["dim"], d["heads"], d["seq"]), [Input((d["batch"], d["seq"], d["dim"]))]


class GPT(nn.Module):
    """minGPT's GPT: token and position embeddings, blocks, final LayerNorm, tied-free LM head."""

    def __init__(self, vocab, seq, dim, heads, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@network("MinGPT", small={"batch": (1, 2), "seq": (3, 5), "dim": 8, "heads": 2, "layers": 2,
                          "vocab": (8, 16)},
         paper={"batch": (1, 16), "seq": 256, "dim": 192, "heads": 6, "layers": 6,
                "vocab": 8192})
def _gpt(d, dtype):
    """A tiny GPT over token ids (gpt-mini at paper size)."""
    return GPT(d["vocab"], d["seq"], d["dim"], d["heads"], d["layers"]), \
        [Input((d["batch"], d["seq"]), "labels", d["vocab"])]


class Encoder(nn.Module):
    """``nn.TransformerEncoder`` (post-norm, ReLU) with a padding mask and a final norm."""

    def __init__(self, dim, heads, layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(dim),
                                             enable_nested_tensor=False)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


@network("TransformerEncoder", small={"batch": (2, 3), "seq": (3, 6), "dim": [8, 12],
                                      "heads": 2, "layers": 2},
         paper={"batch": (1, 64), "seq": 512, "dim": 512, "heads": 8, "layers": 6})
def _encoder(d, dtype):
    """Vaswani et al. 2017's encoder (the base model at paper size)."""
    shape = (d["batch"], d["seq"])
    return Encoder(d["dim"], d["heads"], d["layers"]), \
        [Input(shape + (d["dim"],)), Input(shape, "padding")]


class Seq2Seq(nn.Module):
    """``nn.Transformer`` (encoder-decoder) with a causal target mask, as in the PyTorch
    translation tutorial."""

    def __init__(self, dim, heads, layers):
        super().__init__()
        self.transformer = nn.Transformer(dim, heads, layers, layers, 2 * dim, dropout=0.1,
                                          batch_first=True)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
        return self.transformer(src, tgt, tgt_mask=mask)


@network("TransformerSeq2Seq", small={"batch": (1, 2), "src": (3, 5), "tgt": (2, 4), "dim": 8,
                                      "heads": 2, "layers": 1},
         paper={"batch": (1, 64), "src": 128, "tgt": 128, "dim": 512, "heads": 8, "layers": 6})
def _seq2seq(d, dtype):
    """Vaswani et al. 2017's encoder-decoder."""
    return Seq2Seq(d["dim"], d["heads"], d["layers"]), \
        [Input((d["batch"], d["src"], d["dim"])), Input((d["batch"], d["tgt"], d["dim"]))]


# ---------------------------------------------------------------- recurrent networks

class RNNClassifier(nn.Module):
    """A recurrent layer over the sequence and a linear head on its last output."""

    def __init__(self, cell, features, hidden, layers, bidirectional, classes):
        super().__init__()
        self.rnn = cell(features, hidden, num_layers=layers, bidirectional=bidirectional,
                        batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), classes)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


SEQ_SMALL = {"batch": (1, 3), "seq": (2, 5), "features": (3, 6), "hidden": (3, 6),
             "classes": (2, 5)}
SEQ_PAPER = {"batch": (1, 64), "seq": [64, 128], "features": [256, 512], "hidden": [512, 1024],
             "classes": 10}


@network("RNNTanh", small={**SEQ_SMALL, "layers": 2}, paper={**SEQ_PAPER, "layers": 2})
def _rnn(d, dtype):
    """Elman RNN, two layers, tanh."""
    return RNNClassifier(nn.RNN, d["features"], d["hidden"], d["layers"], False, d["classes"]), \
        [Input((d["batch"], d["seq"], d["features"]))]


class StatefulLSTM(nn.Module):
    """``nn.LSTM`` returning its output sequence and final hidden and cell states."""

    def __init__(self, features, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=layers)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h, c


@network("LSTM", small={**SEQ_SMALL, "layers": 1}, paper={**SEQ_PAPER, "layers": 2})
def _lstm(d, dtype):
    """Sequence-first input; output, h_n and c_n are all outputs."""
    return StatefulLSTM(d["features"], d["hidden"], d["layers"]), \
        [Input((d["seq"], d["batch"], d["features"]))]


class BiLSTM(nn.Module):
    """A bidirectional two-layer LSTM started from given states."""

    def __init__(self, features, hidden):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x, h0, c0):
        out, (h, c) = self.lstm(x, (h0, c0))
        return out, h, c


@network("BiLSTM", small=SEQ_SMALL, paper=SEQ_PAPER)
def _bilstm(d, dtype):
    state = (4, d["batch"], d["hidden"])
    return BiLSTM(d["features"], d["hidden"]), \
        [Input((d["batch"], d["seq"], d["features"])), Input(state), Input(state)]


class BiGRU(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.gru = nn.GRU(features, hidden, bidirectional=True)

    def forward(self, x):
        return self.gru(x)


@network("BiGRU", small=SEQ_SMALL, paper=SEQ_PAPER)
def _bigru(d, dtype):
    """A bidirectional GRU returning (output, h_n)."""
    return BiGRU(d["features"], d["hidden"]), [Input((d["seq"], d["batch"], d["features"]))]


class GRUTagger(nn.Module):
    """Token ids -> embedding -> two-layer GRU -> per-token linear head."""

    def __init__(self, vocab, features, hidden, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, features)
        self.gru = nn.GRU(features, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens):
        out, _ = self.gru(self.embed(tokens))
        return self.head(out)


@network("GRUTagger", small={**SEQ_SMALL, "vocab": (5, 12)}, paper={**SEQ_PAPER, "vocab": 8192})
def _gru_tagger(d, dtype):
    return GRUTagger(d["vocab"], d["features"], d["hidden"], d["classes"]), \
        [Input((d["batch"], d["seq"]), "labels", d["vocab"])]


class LSTMCellLoop(nn.Module):
    """An ``nn.LSTMCell`` stepped over time in Python (the loop unrolls when traced), the
    hidden states stacked, and the final cell state returned too."""

    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.cell = nn.LSTMCell(features, hidden)

    def forward(self, x):
        B, T, _ = x.shape
        h = x.new_zeros(B, self.hidden)
        c = x.new_zeros(B, self.hidden)
        outputs = []
        for t in range(T):
            h, c = self.cell(x[:, t, :], (h, c))
            outputs.append(h)
        return torch.stack(outputs, dim=1), c


@network("LSTMCellLoop", small=SEQ_SMALL, paper={**SEQ_PAPER, "seq": 32})
def _lstm_cell_loop(d, dtype):
    return LSTMCellLoop(d["features"], d["hidden"]), [Input((d["batch"], d["seq"], d["features"]))]


class GatedRNN(nn.Module):
    """A hand-written GRU-style recurrence: one projection of input and state, gates cut with
    ``chunk``, the state carried over time and written into a preallocated output with
    ``out[:, t] = h``."""

    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        self.gates = nn.Linear(features + hidden, 2 * hidden)
        self.candidate = nn.Linear(features + hidden, hidden)

    def forward(self, x):
        B, T, _ = x.shape
        h = x.new_zeros(B, self.hidden)
        out = x.new_zeros(B, T, self.hidden)
        for t in range(T):
            xh = torch.cat([x[:, t], h], dim=-1)
            r, z = torch.sigmoid(self.gates(xh)).chunk(2, dim=-1)
            n = torch.tanh(self.candidate(torch.cat([x[:, t], r * h], dim=-1)))
            h = (1 - z) * n + z * h
            out[:, t] = h
        return out, h


@network("GatedRNNLoop", small=SEQ_SMALL, paper={**SEQ_PAPER, "seq": 32})
def _gated_rnn(d, dtype):
    return GatedRNN(d["features"], d["hidden"]), [Input((d["batch"], d["seq"], d["features"]))]


# ---------------------------------------------------------------- U-Net and NetVLAD

class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(conv_bn(cin, cout), conv_bn(cout, cout))


class UNet(nn.Module):
    """Ronneberger et al. 2015 with ``depth`` levels: max-pool downsampling, transposed-conv
    (or nearest) upsampling, skip connections concatenated, a 1x1 output convolution."""

    def __init__(self, channels, classes, width, depth, transposed):
        super().__init__()
        widths = [width * 2 ** k for k in range(depth + 1)]
        self.inc = DoubleConv(channels, widths[0])
        self.down = nn.ModuleList(DoubleConv(widths[k], widths[k + 1]) for k in range(depth))
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(widths[k + 1], widths[k], 2, stride=2) if transposed else
            nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                          nn.Conv2d(widths[k + 1], widths[k], 1))
            for k in reversed(range(depth)))
        self.dec = nn.ModuleList(DoubleConv(2 * widths[k], widths[k])
                                 for k in reversed(range(depth)))
        self.outc = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.down:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up, dec in zip(self.up, self.dec):
            x = dec(torch.cat([skips.pop(), up(x)], dim=1))
        return self.outc(x)


UNET_SMALL = {"batch": 1, "channels": (1, 3), "size": [8, 16], "width": (2, 4), "depth": 2,
              "classes": (1, 3)}
UNET_PAPER = {"batch": (1, 16), "channels": 3, "size": 256, "width": 32, "depth": 4,
              "classes": 2}


@network("UNet", small=UNET_SMALL, paper=UNET_PAPER)
def _unet(d, dtype):
    return UNet(d["channels"], d["classes"], d["width"], d["depth"], True), image(d)


@network("UNetUpsample", small=UNET_SMALL, paper=UNET_PAPER)
def _unet_upsample(d, dtype):
    """Nearest-neighbour upsampling and a 1x1 convolution instead of transposed convs."""
    return UNet(d["channels"], d["classes"], d["width"], d["depth"], False), image(d)


class NetVLAD(nn.Module):
    """Arandjelovic et al. 2016 on a small convolutional backbone: soft assignment of every
    local descriptor to K clusters (1x1 conv + softmax), residuals to the centroids summed per
    cluster, intra-normalised, flattened and L2-normalised."""

    def __init__(self, channels, dim, clusters, alpha=10.0):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(channels, dim), conv_bn(dim, dim))
        self.centroids = nn.Parameter(torch.rand(clusters, dim))
        self.assign = nn.Conv2d(dim, clusters, 1)
        with torch.no_grad():
            self.assign.weight.copy_((2.0 * alpha * self.centroids)[:, :, None, None])
            self.assign.bias.copy_(-alpha * self.centroids.norm(dim=1))

    def forward(self, x):
        x = F.normalize(self.backbone(x), p=2, dim=1)
        N, D = x.shape[:2]
        soft = F.softmax(self.assign(x).view(N, -1, x.shape[2] * x.shape[3]), dim=1)
        flat = x.view(N, D, -1)
        residual = flat.unsqueeze(1) - self.centroids.unsqueeze(0).unsqueeze(-1)
        vlad = (residual * soft.unsqueeze(2)).sum(dim=-1)
        vlad = F.normalize(vlad, p=2, dim=2)
        return F.normalize(vlad.view(N, -1), p=2, dim=1)


@network("NetVLAD", small={"batch": (1, 2), "channels": 3, "size": (4, 8), "dim": (4, 8),
                           "clusters": (2, 4)},
         paper={"batch": (1, 32), "channels": 3, "size": 30, "dim": 512, "clusters": 64})
def _netvlad(d, dtype):
    return NetVLAD(d["channels"], d["dim"], d["clusters"]), image(d)


# ---------------------------------------------------------------- selective scans (Mamba)

def selective_scan(u, delta, A, B, C, D):
    """Mamba's reference selective scan (``selective_scan_ref``): per step
    ``x = exp(delta*A)*x + delta*B*u``, ``y = <x, C>``; then ``y + D*u``.
    Shapes: u, delta (b, d, l); A (d, n); B, C (b, n, l); D (d,)."""
    delta_a = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    delta_bu = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
    x = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for i in range(u.shape[2]):
        x = delta_a[:, :, i] * x + delta_bu[:, :, i]
        ys.append(torch.einsum("bdn,bn->bd", x, C[:, :, i]))
    return torch.stack(ys, dim=2) + u * D[:, None]


class SelectiveScan(nn.Module):
    """The scan alone, with a learned A (``-exp(A_log)``) and D; delta through softplus."""

    def __init__(self, d, n):
        super().__init__()
        self.A_log = nn.Parameter(torch.log(torch.arange(1, n + 1).float()).repeat(d, 1))
        self.D = nn.Parameter(torch.ones(d))

    def forward(self, u, delta, B, C):
        return selective_scan(u, F.softplus(delta), -torch.exp(self.A_log), B, C, self.D)


@network("MambaSelectiveScan", small={"batch": (1, 2), "d": (2, 6), "n": (2, 4), "seq": (3, 6)},
         paper={"batch": (1, 8), "d": 1536, "n": 16, "seq": 128})
def _scan(d, dtype):
    b, dd, n, L = d["batch"], d["d"], d["n"], d["seq"]
    return SelectiveScan(dd, n), [Input((b, dd, L)), Input((b, dd, L)), Input((b, n, L)),
                                  Input((b, n, L))]


class MambaBlock(nn.Module):
    """Gu & Dao 2023's Mamba block (mamba_simple): input projection into x and the gate z, a
    causal depthwise Conv1d, SiLU, the data-dependent delta, B and C, the selective scan,
    the SiLU gate and the output projection; with a pre-norm residual."""

    def __init__(self, dim, state, expand, conv, rank):
        super().__init__()
        inner = expand * dim
        self.inner, self.state, self.rank = inner, state, rank
        self.norm = nn.LayerNorm(dim)
        self.in_proj = nn.Linear(dim, 2 * inner, bias=False)
        self.conv1d = nn.Conv1d(inner, inner, conv, groups=inner, padding=conv - 1)
        self.x_proj = nn.Linear(inner, rank + 2 * state, bias=False)
        self.dt_proj = nn.Linear(rank, inner)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(inner, 1))
        self.D = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, dim, bias=False)

    def forward(self, hidden):
        B, L, _ = hidden.shape
        x, z = self.in_proj(self.norm(hidden)).chunk(2, dim=-1)
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :L])           # causal: drop the tail
        dt, Bm, Cm = self.x_proj(x.transpose(1, 2)).split([self.rank, self.state, self.state],
                                                          dim=-1)
        delta = F.softplus(self.dt_proj(dt)).transpose(1, 2)
        y = selective_scan(x, delta, -torch.exp(self.A_log), Bm.transpose(1, 2),
                           Cm.transpose(1, 2), self.D)
        y = y.transpose(1, 2) * F.silu(z)
        return hidden + self.out_proj(y)


@network("MambaBlock", small={"batch": (1, 2), "seq": (3, 6), "dim": (4, 6), "state": (2, 4)},
         paper={"batch": (1, 8), "seq": 128, "dim": 768, "state": 16})
def _mamba(d, dtype):
    dim = d["dim"]
    return MambaBlock(dim, d["state"], 2, 4, max(1, math.ceil(dim / 16))), \
        [Input((d["batch"], d["seq"], dim))]
