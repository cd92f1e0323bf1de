#!/usr/bin/python3
"""1-channel copies of issue 41's torchvision families for the int8 test on
Fashion-MNIST (tests/test_quant_families.sh): resnext50_32x4d and mobilenet_v2 from
torchvision's own classes at make_onnx_fixtures.py's widths, their first convolution
taking one channel of 28x28. squeezenet1_1 has none: its copy (squeezenet1_1_1ch below)
does not train, in PyTorch either. Tried with torch's SGD, 2 epochs unless said: lr
0.001 to 0.3, momentum 0 and 0.9, weight decay 0 and 5e-4, batch 8 to 64, a linear
warm-up over the first epoch, 1/4, 1/2 and all of the channels, 6,000 and all 60,000
images, 14 epochs at lr 0.01 and 0.04, the final convolution started at std 0.001 to
0.1 or Kaiming's instead of torchvision's 0.01: the loss stays at ln 10 (2.3026) and the
final ReLU's outputs end at 0 or one class. Quantize rightly refuses a network whose
last activations are all 0. Exported as make_onnx_fixtures.py
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
