#!/usr/bin/python3
"""Reference fixtures for dtrain's parity tests, made with PyTorch (Debian's
python3-torch). dtrain's tests read the files; they never need torch.

Each fixture (safetensors) holds: the initial state_dict under its own names,
two batches (input1/labels1, input2/labels2), the loss of each step (loss1, loss2),
the gradients of step 1 ("grad.<param>"), and the state_dict after two SGD steps
(momentum 0.9, weight decay 5e-4, lr in the metadata) under "after.<name>".
The reference is computed in float64 from float32 weights and inputs, then stored
as float32: it is then the exact answer the float32 C code should approach, not
one float32 rounding of it (oneDNN's and OpenBLAS's roundings differ).

    scripts/make_fixtures.py                  # writes tests/fixtures/*.safetensors
    scripts/make_fixtures.py --full BUILD/tests/test_parity
        # also makes full-width resnet18 and resnet20 fixtures in a temporary folder and
        # runs the C parity test on them (too big to commit; run by hand, outside CI)
"""
import argparse
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from torch_models import CifarResNet, LeNet5, LeNetCifar, ResNet18


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


def train_two_steps(model, batches, lr):
    """Two SGD steps; returns the losses, step-1 gradients and the final state."""
    dtype = next(model.parameters()).dtype
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    losses, grads = [], {}
    for step, (x, y) in enumerate(batches):
        opt.zero_grad()
        loss = F.cross_entropy(model(x.to(dtype)), y)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {k: p.grad.double() for k, p in model.named_parameters()}
        opt.step()
    return losses, grads, {k: v.double() for k, v in model.state_dict().items()}


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def make_fixture(path, model, name, width, input_shape, batch, seed, lr=0.1, f32_errors=False):
    torch.manual_seed(seed)
    model.train()
    tensors = {k: v.clone() for k, v in model.state_dict().items()}
    meta = {"model": name, "width": str(width), "batch": str(batch), "lr": str(lr),
            "torch": torch.__version__}
    if f32_errors:
        # PyTorch's own float32 error against the float64 reference on this very
        # fixture: deep ReLU nets flip a few units whose pre-activation is within
        # rounding of zero, and the C test allows what torch itself shows.
        rng = torch.get_rng_state()
        batches = [(torch.randn(batch, *input_shape), torch.randint(0, 10, (batch,)))
                   for _ in range(2)]
        torch.set_rng_state(rng)
        m32, m64 = copy.deepcopy(model), copy.deepcopy(model).double()
        _, g32, a32 = train_two_steps(m32, batches, lr)
        _, g64, a64 = train_two_steps(m64, batches, lr)
        meta["torch_f32_grad_err"] = "%.3g" % max(rel(g32[k], g64[k]) for k in g64)
        keys = [k for k in a64 if a64[k].is_floating_point()]
        diff = sum(((a32[k] - a64[k]) ** 2).sum() for k in keys)
        meta["torch_f32_state_err"] = "%.3g" % (diff / sum((a64[k] ** 2).sum() for k in keys)).sqrt()
        print(f"torch float32 vs float64 on this fixture: worst gradient error "
              f"{meta['torch_f32_grad_err']}, whole state after 2 steps "
              f"{meta['torch_f32_state_err']}")
    model = model.double()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    for step in (1, 2):
        x = torch.randn(batch, *input_shape)
        y = torch.randint(0, 10, (batch,))
        opt.zero_grad()
        loss = F.cross_entropy(model(x.double()), y)
        loss.backward()
        tensors[f"input{step}"] = x
        tensors[f"labels{step}"] = y
        tensors[f"loss{step}"] = loss.detach().reshape(1).float()
        if step == 1:
            for k, p in model.named_parameters():
                tensors[f"grad.{k}"] = p.grad.float()
        opt.step()
    for k, v in model.state_dict().items():
        tensors[f"after.{k}"] = v.float() if v.is_floating_point() else v.clone()
    save_safetensors(path, tensors, meta)
    print(f"wrote {path}: loss1 {tensors['loss1'].item():.6f}, "
          f"{sum(p.numel() for p in model.parameters())} parameters")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures"))
    ap.add_argument("--full", metavar="TEST_PARITY",
                    help="also check full-width resnet18 and resnet20 with this test_parity binary")
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(1)
    make_fixture(os.path.join(args.out, "lenet5.safetensors"), LeNet5(), "lenet5", 0,
                 (1, 28, 28), 4, 2)
    torch.manual_seed(3)
    make_fixture(os.path.join(args.out, "resnet18_w4.safetensors"), ResNet18(4), "resnet18", 4,
                 (3, 32, 32), 4, 4)
    torch.manual_seed(7)
    make_fixture(os.path.join(args.out, "lenet_cifar.safetensors"), LeNetCifar(), "lenet_cifar",
                 0, (3, 32, 32), 4, 8)
    # resnet20 at width 4 (4/8/16 channels): the whole graph, option-A shortcuts
    # included, in a small file; --full checks width 16.
    torch.manual_seed(9)
    make_fixture(os.path.join(args.out, "resnet20_w4.safetensors"), CifarResNet(3, 4), "resnet20",
                 4, (3, 32, 32), 4, 10)
    if args.full:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "resnet18_w64.safetensors")
            torch.manual_seed(5)
            # lr 0.1 at batch 8 makes full width diverge in two steps (loss 2.4 -> 9),
            # which amplifies rounding; 0.02 keeps the check about correctness.
            make_fixture(path, ResNet18(64), "resnet18", 64, (3, 32, 32), 8, 6, lr=0.02,
                         f32_errors=True)
            rc = subprocess.call([args.full, path])
            path = os.path.join(tmp, "resnet20_w16.safetensors")
            torch.manual_seed(11)
            # lr 0.02 as above (0.1 takes the loss from 2.6 to 4.3 in two steps).
            make_fixture(path, CifarResNet(3, 16), "resnet20", 16, (3, 32, 32), 8, 12, lr=0.02,
                         f32_errors=True)
            sys.exit(rc or subprocess.call([args.full, path]))


if __name__ == "__main__":
    main()
