#!/usr/bin/python3
"""Reference fixtures for dtrain's parity tests, made with PyTorch (Debian's
python3-torch). dtrain's tests read the files; they never need torch.

Each fixture (safetensors) holds: the initial state_dict under its own names,
two batches (input1/labels1, input2/labels2), the loss of each step (loss1, loss2),
the gradients of step 1 ("grad.<param>"), and the state_dict after two SGD steps
(lr 0.1, momentum 0.9, weight decay 5e-4) under "after.<name>".

    scripts/make_fixtures.py                  # writes tests/fixtures/*.safetensors
    scripts/make_fixtures.py --full BUILD/tests/test_parity
        # also makes a full-width resnet18 fixture in a temporary folder and runs the
        # C parity test on it (too big to commit; run by hand, outside CI)
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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


def save_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        a = t.detach().cpu().contiguous().numpy()
        dtype = {np.float32: "F32", np.int64: "I64"}[a.dtype.type]
        raw = a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def make_fixture(path, model, name, width, input_shape, batch, seed):
    torch.manual_seed(seed)
    model = model.float()
    model.train()
    tensors = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    for step in (1, 2):
        x = torch.randn(batch, *input_shape)
        y = torch.randint(0, 10, (batch,))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        tensors[f"input{step}"] = x
        tensors[f"labels{step}"] = y
        tensors[f"loss{step}"] = loss.detach().reshape(1)
        if step == 1:
            for k, p in model.named_parameters():
                tensors[f"grad.{k}"] = p.grad.clone()
        opt.step()
    for k, v in model.state_dict().items():
        tensors[f"after.{k}"] = v.clone()
    save_safetensors(path, tensors, {"model": name, "width": str(width), "batch": str(batch),
                                     "torch": torch.__version__})
    print(f"wrote {path}: loss1 {tensors['loss1'].item():.6f}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures"))
    ap.add_argument("--full", metavar="TEST_PARITY",
                    help="also check full-width resnet18 with this test_parity binary")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(1)
    make_fixture(os.path.join(args.out, "lenet5.safetensors"), LeNet5(), "lenet5", 0,
                 (1, 28, 28), 4, 2)
    torch.manual_seed(3)
    make_fixture(os.path.join(args.out, "resnet18_w4.safetensors"), ResNet18(4), "resnet18", 4,
                 (3, 32, 32), 4, 4)
    if args.full:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "resnet18_w64.safetensors")
            torch.manual_seed(5)
            make_fixture(path, ResNet18(64), "resnet18", 64, (3, 32, 32), 8, 6)
            sys.exit(subprocess.call([args.full, path]))


if __name__ == "__main__":
    main()
