#!/usr/bin/python3
"""1-channel copies of issue 41's torchvision families for the int8 test on
Fashion-MNIST (tests/test_quant_families.sh): resnext50_32x4d and mobilenet_v2 from
torchvision's own classes at make_onnx_fixtures.py's widths, their first convolution
taking one channel of 28x28. squeezenet1_1 has none: its copy (squeezenet1_1_1ch below)
does not train, in PyTorch either (2 epochs of 6,000 images, lr 0.01 or 0.05, 1/4 or
1/2 of the channels: the loss stays at ln 10, 2.3026), and quantize rightly refuses a
network whose last activations are all 0. Exported as make_onnx_fixtures.py
exports (opset 17, training mode, no constant folding, a dynamic batch axis); .onnx
only: the test trains them, it needs no PyTorch reference.

    scripts/make_quant_fixtures.py [--out tests/fixtures/onnx]
"""
import argparse
import os

import torch
import torch.nn as nn

from make_onnx_fixtures import (export, tv_family_cases, tv_resnext_narrow,
                                tv_squeezenet1_1_narrow)


def one_channel(conv):
    """The same convolution taking one input channel, with PyTorch's default start."""
    return nn.Conv2d(1, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                     conv.dilation, conv.groups, conv.bias is not None)


def squeezenet1_1_1ch():
    m = tv_squeezenet1_1_narrow(4)
    m.features[0] = one_channel(m.features[0])
    return m


def resnext50_32x4d_1ch():
    m = tv_resnext_narrow(4, 4, 16)
    m.conv1 = one_channel(m.conv1)
    return m


def mobilenet_v2_1ch():
    m = dict((c[0], c[1]) for c in tv_family_cases())["mobilenet_v2"]()
    m.features[0][0] = one_channel(m.features[0][0])
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "onnx"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, build, seed in [("resnext50_32x4d_1ch", resnext50_32x4d_1ch, 201),
                              ("mobilenet_v2_1ch", mobilenet_v2_1ch, 202)]:
        torch.manual_seed(seed)
        path = os.path.join(args.out, f"{name}.onnx")
        export(build(), path, (1, 28, 28), 17)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
