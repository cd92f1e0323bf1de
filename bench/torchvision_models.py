#!/usr/bin/python3
"""The models of bench/onnx_models.sh, built from torchvision's own classes (10 classes,
3x32x32 CIFAR-sized input), for both sides: bench/torch_bench.py times them, and
`export` writes them as docs/onnx.md's recipe does (training mode, no constant folding,
dynamic batch axis; opset 17, as issue 41's fixtures) for `dtrain bench --model X.onnx`.
`costs` prints one JSON line of a training step's work at a batch: the FLOPs of its
products (convolutions, linear layers, attention's two batched matmuls; forward x 3 for
forward + both backward products, multiply-adds x 2), and the bytes its depthwise
convolutions must move at least (each of forward, backward-data and backward-weights
reads one activation and writes or reads the other once: 3 x (input + output) x 4 bytes).
`dw-time` reads `dtrain bench --profile-out`'s per-op times and prints the depthwise
convolutions' own time (forward + backward, by their module names, as the ONNX export
names dtrain's ops) beside the bytes they must move.
  torchvision_models.py export NAME FILE.onnx
  torchvision_models.py costs NAME BATCH
  torchvision_models.py dw-time NAME BATCH PROFILE.json"""
import json
import sys

import torch
import torchvision

NAMES = ("mobilenet_v2", "vit")


def build(name):
    """(model in training mode, per-sample input shape)."""
    torch.manual_seed(0)
    if name == "mobilenet_v2":  # full width
        model = torchvision.models.mobilenet_v2(num_classes=10)
    elif name == "vit":  # issue 41's ViT fixture's architecture at full fixture size
        model = torchvision.models.VisionTransformer(image_size=32, patch_size=4, num_layers=4,
                                                     num_heads=4, hidden_dim=96, mlp_dim=384,
                                                     num_classes=10)
    else:
        raise SystemExit("torchvision_models.py: unknown model '%s' (one of %s)" % (name, ", ".join(NAMES)))
    return model.train(), (3, 32, 32)


def export(name, path):
    model, shape = build(name)
    torch.onnx.export(model, torch.randn(2, *shape), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def depthwise_names(model):
    return {n for n, m in model.named_modules()
            if isinstance(m, torch.nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels}


def dw_time(name, batch, profile_path):
    model, shape = build(name)
    names = depthwise_names(model)
    with open(profile_path) as f:
        prof = json.load(f)
    ops = [o for o in prof["ops"] if o["kind"] == "conv2d" and o["name"] in names]
    if len(ops) != len(names):
        raise SystemExit("torchvision_models.py: %d of the %d depthwise convolutions found in %s"
                         % (len(ops), len(names), profile_path))
    print(json.dumps({"model": name, "dw_layers": len(ops),
                      "dw_ms": round(sum(o["forward_ms"] + o["backward_ms"] for o in ops), 3),
                      "step_ms": round(prof["step_ms"], 3)}))


def costs(name, batch):
    model, shape = build(name)
    macs = [0]  # forward multiply-adds of the whole batch
    dw_elems = [0]  # depthwise convolutions' input + output elements
    dw_layers = [0]

    def conv_hook(m, inp, out):
        x = inp[0]
        macs[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        if m.groups > 1 and m.groups == m.in_channels:
            dw_elems[0] += x.numel() + out.numel()
            dw_layers[0] += 1

    def linear_hook(m, inp, out):
        macs[0] += out.numel() * m.in_features

    def mha_hook(m, inp, out):
        # its projections run as F.linear inside, not as modules; its output (torchvision
        # passes the inputs by keyword, out of a hook's reach) is batch_first [N, T, E]
        n, t, e = out[0].shape
        macs[0] += n * t * 4 * e * e + n * 2 * t * t * e

    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            m.register_forward_hook(conv_hook)
        elif isinstance(m, torch.nn.Linear):
            m.register_forward_hook(linear_hook)
        elif isinstance(m, torch.nn.MultiheadAttention):
            m.register_forward_hook(mha_hook)
    with torch.no_grad():
        model(torch.randn(batch, *shape))
    print(json.dumps({"model": name, "batch_size": batch, "train_gflop": round(3 * 2 * macs[0] / 1e9, 4),
                      "dw_layers": dw_layers[0], "dw_mbytes": round(3 * 4 * dw_elems[0] / 1e6, 3)}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "costs":
        costs(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "dw-time":
        dw_time(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        raise SystemExit("usage: torchvision_models.py export NAME FILE.onnx | costs NAME BATCH"
                         " | dw-time NAME BATCH PROFILE.json")
