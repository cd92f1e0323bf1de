"""The reference PyTorch models dtrain reproduces (same architectures and
state_dict names), shared by the fixture script and the side-by-side benchmark."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LogReg(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(784, 10)

    def forward(self, x):
        return self.linear(torch.flatten(x, 1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc3(F.relu(self.fc2(x)))


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """The CIFAR ResNet-18 (kuangliu/pytorch-cifar), with a width knob."""

    def __init__(self, width=64, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        in_planes = width
        for i in range(4):
            planes = width << i
            stride = 1 if i == 0 else 2
            blocks = [BasicBlock(in_planes, planes, stride), BasicBlock(planes, planes, 1)]
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
            in_planes = planes
        self.linear = nn.Linear(in_planes, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.avg_pool2d(out, 4)
        return self.linear(torch.flatten(out, 1))


class LeNetCifar(nn.Module):
    """The classic CIFAR-10 course LeNet (PyTorch's CIFAR-10 tutorial): 3x32x32, no padding."""

    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LambdaLayer(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class CifarBasicBlock(nn.Module):
    """akamaster/pytorch_resnet_cifar10's BasicBlock with option A: a shape change is
    x[:, :, ::2, ::2] with planes // 4 zero channels on each side (no parameters)."""

    def __init__(self, in_planes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            lo = (planes - in_planes) // 2
            hi = planes - in_planes - lo
            self.shortcut = LambdaLayer(
                lambda x: F.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, lo, hi), "constant", 0))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """He et al. 2016's CIFAR ResNet of depth 6n+2 (akamaster's resnet_cifar: resnet20 is
    n = 3), with a width knob (16 in the paper). Pooling is global, so any square input
    works; the first conv takes the data's channels."""

    def __init__(self, n, width=16, classes=10, in_channels=3):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        in_planes = width
        for i in range(3):
            planes = width << i
            blocks = []
            for b in range(n):
                blocks.append(CifarBasicBlock(in_planes, planes, 2 if i > 0 and b == 0 else 1))
                in_planes = planes
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.linear = nn.Linear(in_planes, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.avg_pool2d(out, out.size()[3])
        return self.linear(torch.flatten(out, 1))


CIFAR_RESNET_BLOCKS = {"resnet20": 3, "resnet32": 5, "resnet44": 7, "resnet56": 9}


# ---- torchvision's ImageNet models, written out (torchvision is not packaged here) ----
# Module names and state_dict order as torchvision.models 0.14; width = the first conv's
# channels (64), every layer scaled by width / 64 (rounded down, at least 1) as in dtrain.
# Initialisation is PyTorch's default per layer (dtrain's models use torchvision's
# per-model schemes; the fixtures carry their initial weights, so only the names and
# the maths matter here).

def scaled(c, width):
    return max(1, c * width // 64)


class AlexNet(nn.Module):
    def __init__(self, width=64, classes=1000, dropout=0.5):
        super().__init__()
        c = [width, scaled(192, width), scaled(384, width), scaled(256, width),
             scaled(256, width)]
        self.features = nn.Sequential(
            nn.Conv2d(3, c[0], 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        hidden = scaled(4096, width)
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(c[4] * 36, hidden), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.ReLU(inplace=True),
            nn.Linear(hidden, classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
             512, 512, 512, "M"]


class VGG(nn.Module):
    """torchvision's VGG with cfg D (vgg16, vgg16_bn)."""

    def __init__(self, width=64, classes=1000, batch_norm=False, dropout=0.5):
        super().__init__()
        layers, c_in = [], 3
        for v in VGG16_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            c = scaled(v, width)
            layers.append(nn.Conv2d(c_in, c, 3, padding=1))
            if batch_norm:
                layers.append(nn.BatchNorm2d(c))
            layers.append(nn.ReLU(inplace=True))
            c_in = c
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        hidden = scaled(4096, width)
        self.classifier = nn.Sequential(
            nn.Linear(c_in * 49, hidden), nn.ReLU(True), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.ReLU(True), nn.Dropout(dropout),
            nn.Linear(hidden, classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


class Bottleneck(nn.Module):
    """torchvision's Bottleneck (v1.5: the stride on the 3x3 conv)."""
    expansion = 4

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_planes != planes * 4:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes * 4, 1, stride, bias=False),
                nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ImageNetResNet(nn.Module):
    """torchvision's ResNet layout (7x7 stem, max pool, four stages, global pool, fc) at
    stem width `width`; block(in_planes, planes, stride) makes one residual block and
    block.expansion is its output channels over planes."""

    def __init__(self, block, stages, width=64, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_planes = width
        for i, n in enumerate(stages):
            planes = width << i
            blocks = []
            for b in range(n):
                blocks.append(block(in_planes, planes, 2 if i > 0 and b == 0 else 1))
                in_planes = planes * block.expansion
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_planes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def ResNet50(width=64, classes=1000):
    return ImageNetResNet(Bottleneck, [3, 4, 6, 3], width, classes)


class BasicConv2d(nn.Module):
    def __init__(self, c_in, c_out, **kw):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, bias=False, **kw)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class Inception(nn.Module):
    """torchvision's Inception block: its "5x5" branch (branch3) is a 3x3 conv."""

    def __init__(self, c_in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj):
        super().__init__()
        self.branch1 = BasicConv2d(c_in, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(BasicConv2d(c_in, ch3x3red, kernel_size=1),
                                     BasicConv2d(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(c_in, ch5x5red, kernel_size=1),
                                     BasicConv2d(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True),
                                     BasicConv2d(c_in, pool_proj, kernel_size=1))

    def forward(self, x):
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


GOOGLENET_BLOCKS = [("inception3a", (64, 96, 128, 16, 32, 32)),
                    ("inception3b", (128, 128, 192, 32, 96, 64)),
                    ("inception4a", (192, 96, 208, 16, 48, 64)),
                    ("inception4b", (160, 112, 224, 24, 64, 64)),
                    ("inception4c", (128, 128, 256, 24, 64, 64)),
                    ("inception4d", (112, 144, 288, 32, 64, 64)),
                    ("inception4e", (256, 160, 320, 32, 128, 128)),
                    ("inception5a", (256, 160, 320, 32, 128, 128)),
                    ("inception5b", (384, 192, 384, 48, 128, 128))]


class GoogLeNet(nn.Module):
    """torchvision's googlenet(aux_logits=False, transform_input=False)."""

    def __init__(self, width=64, classes=1000, dropout=0.2):
        super().__init__()
        s = lambda c: scaled(c, width)  # noqa: E731
        self.conv1 = BasicConv2d(3, width, kernel_size=7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = BasicConv2d(width, width, kernel_size=1)
        self.conv3 = BasicConv2d(width, s(192), kernel_size=3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        c_in = s(192)
        for name, ch in GOOGLENET_BLOCKS:
            ch = [s(c) for c in ch]
            setattr(self, name, Inception(c_in, *ch))
            c_in = ch[0] + ch[2] + ch[4] + ch[5]
            if name == "inception3b":
                self.maxpool3 = nn.MaxPool2d(3, 2, ceil_mode=True)
            if name == "inception4e":
                self.maxpool4 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(c_in, classes)

    def forward(self, x):
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        for name, _ in GOOGLENET_BLOCKS:
            x = getattr(self, name)(x)
            if name == "inception3b":
                x = self.maxpool3(x)
            if name == "inception4e":
                x = self.maxpool4(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


IMAGENET_MODELS = {"alexnet": AlexNet, "vgg16": VGG, "vgg16_bn": VGG, "resnet50": ResNet50,
                   "googlenet": GoogLeNet}


def build_imagenet(name, width=64, classes=1000, no_dropout=False):
    """An ImageNet model by dtrain's name; no_dropout builds its dropout layers with p = 0."""
    kw = {"dropout": 0.0} if no_dropout and name != "resnet50" else {}
    if name == "vgg16_bn":
        kw["batch_norm"] = True
    return IMAGENET_MODELS[name](width, classes, **kw)


def build(name, width=None):
    """Model and input shape (C, H, W) by dtrain's model name (width: the ResNets' stem
    channels, None for the model's default)."""
    if name == "logreg":
        return LogReg(), (1, 28, 28)
    if name == "mlp":
        return MLP(), (1, 28, 28)
    if name == "lenet5":
        return LeNet5(), (1, 28, 28)
    if name == "resnet18":
        return ResNet18(width or 64), (3, 32, 32)
    if name == "lenet_cifar":
        return LeNetCifar(), (3, 32, 32)
    if name in CIFAR_RESNET_BLOCKS:
        return CifarResNet(CIFAR_RESNET_BLOCKS[name], width or 16), (3, 32, 32)
    if name in IMAGENET_MODELS:
        return build_imagenet(name, width or 64), (3, 224, 224)
    raise ValueError(f"unknown model {name}")
