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
    raise ValueError(f"unknown model {name}")
