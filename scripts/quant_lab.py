#!/usr/bin/python3
"""The course lab's int8 quantization of a LeNet, done in PyTorch on dtrain's float
weights and data, and checked against `dtrain quantize --scheme lab`.

    /usr/bin/python3 scripts/quant_lab.py --dtrain build/dtrain --model lenet5 \\
        --init w.safetensors [--data fashion-mnist] [--calib-samples 512] [--test-samples N]

The lab's steps, in its order and float32 arithmetic (docs/quantization.md):
  1. each layer's weights: min, max (dtrain's --report draws the 60-bin histograms);
  2. weights per layer: scale n_w = 127 / (max - min), q = clamp(round(w n_w), -128, 127);
  3. forward hooks record the input of conv1 and every conv/linear layer's output (before
     its ReLU) over the calibration images: min, max, mean +- 3 sigma printed per layer;
  4. input scale 127 / (max - min) of the input; each layer's output scale
     n_o = (127 / (max - min)) / (n_w * P), P the input scale times n_w * n_o of every
     preceding layer; outputs rounded and clamped to [-128, 127] (then ReLU, pooling);
  5. biases at the accumulator's scale, round(b * n_w * P), as int32.
Then dtrain's file must hold the same integer weights and weight scales (bit for bit),
the same activation-derived scales (within 1e-6: the ranges come from two float forward
passes that round differently in the last bits) and biases (within 1), and `dtrain eval
--logits` the same int8 logits within one step and the same accuracy.
Exit status 0 only if every check holds.

With --fixture OUT (and --init), it writes the small fixture tests/test_quant.c checks
dtrain against without torch: the float weights, 48 calibration and 32 test inputs, and
the lab's scales, integers and int8 logits on them.

Inputs are decoded as dtrain decodes them (the dataset's own normalisation, e.g.
Fashion-MNIST's 0.1307/0.3081 or CIFAR's, not the lab's 0.5/0.5): the check is of the
quantization arithmetic. synthetic:cifar10 is regenerated here with dtrain's
counter-based generator.
"""

import argparse
import gzip
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from torch_models import LeNet5, LeNetCifar  # noqa: E402

F32 = torch.float32
LAYERS = ["conv1", "conv2", "fc1", "fc2", "fc3"]


# ---- files ----

read_safetensors = safetensors_io.read
write_safetensors = safetensors_io.write


# ---- data, decoded as dtrain decodes it ----

def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    magic, count = struct.unpack(">II", raw[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw[16:], np.uint8).reshape(count, 1, rows, cols)
    return np.frombuffer(raw[8:], np.uint8).astype(np.int32)


def idx_file(folder, base):
    raw = os.path.join(folder, base)
    return raw if os.path.exists(raw) else raw + ".gz"


MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return z ^ (z >> np.uint64(31))


def rng_values(seed, stream, counters):
    """dtrain's dt_rng: value = mix64(key ^ counter * C), key from (seed, stream)."""
    with np.errstate(over="ignore"):
        key = mix64(np.uint64(seed) * np.uint64(0x9e3779b97f4a7c15) + mix64(np.uint64(stream + 1)))
        return mix64(key ^ (counters.astype(np.uint64) * np.uint64(0xd1b54a32d192ed03)))


def uniform(values):
    return (values >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


SYNTHETIC_SEED = 20261122


def synthetic_cifar(train, indices):
    seed = SYNTHETIC_SEED + (0 if train else 1)
    count = 3 * 32 * 32
    images = np.empty((len(indices), 3, 32, 32), np.uint8)
    labels = np.empty(len(indices), np.int32)
    for k, index in enumerate(indices):
        first = rng_values(seed, index, np.arange(count + 1))
        label = int(((first[0] >> np.uint64(32)) * np.uint64(10)) >> np.uint64(32))
        t = uniform(rng_values(SYNTHETIC_SEED, (1 << 40) + label, np.arange(count)))
        u = uniform(first[1:])
        images[k] = (np.float32(255.0) * (np.float32(0.6) * t + np.float32(0.4) * u)).astype(
            np.uint8).reshape(3, 32, 32)
        labels[k] = label
    return images, labels


def load_data(spec, train, count):
    """(images uint8 [n, c, h, w], labels, mean, std) of the first `count` samples."""
    if spec == "fashion-mnist" or spec.startswith("fashion-mnist:") or spec.startswith("mnist:"):
        folder = spec.split(":", 1)[1] if ":" in spec else "/usr/share/datasets/fashion-mnist"
        prefix = "train" if train else "t10k"
        images = read_idx(idx_file(folder, prefix + "-images-idx3-ubyte"))[:count]
        labels = read_idx(idx_file(folder, prefix + "-labels-idx1-ubyte"))[:count]
        return images, labels, [0.1307], [0.3081]
    if spec == "synthetic:cifar10":
        n = min(count, 50000 if train else 10000)
        images, labels = synthetic_cifar(train, range(n))
        return images, labels, [0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]
    sys.exit("quant_lab.py: data %s: use fashion-mnist[:DIR], mnist:DIR or synthetic:cifar10" % spec)


def decode(images, mean, std):
    """dtrain's ToTensor + Normalize in float32: x * (1 / (255 std)) + (-mean / std)."""
    out = np.empty(images.shape, np.float32)
    for c in range(images.shape[1]):
        scale = np.float32(1.0) / (np.float32(255.0) * np.float32(std[c]))
        shift = -np.float32(mean[c]) / np.float32(std[c])
        out[:, c] = images[:, c].astype(np.float32) * scale + shift
    return torch.from_numpy(out)


# ---- the lab ----

def load_model(name, init):
    model = {"lenet5": LeNet5, "lenet_cifar": LeNetCifar}[name]()
    weights, _ = read_safetensors(init)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    return model.eval(), weights


def profile_activations(model, x, batch=128):
    """Step 3: forward hooks record conv1's input and every layer's output (before
    ReLU), as the lab's hooks do."""
    acts = {"input": [], **{name: [] for name in LAYERS}}
    hooks = []
    for name in LAYERS:
        def hook(layer, inputs, output, name=name):
            if name == "conv1":
                acts["input"].append(inputs[0].detach().reshape(-1))
            acts[name].append(output.detach().reshape(-1))
        hooks.append(getattr(model, name).register_forward_hook(hook))
    with torch.no_grad():
        for i in range(0, len(x), batch):
            model(x[i:i + batch])
    for h in hooks:
        h.remove()
    return {k: torch.cat(v) for k, v in acts.items()}


def lab_scale(t):
    """127 / (max - min), float32 throughout."""
    return torch.tensor(127.0, dtype=F32) / (t.max() - t.min())


def quantize_lab(model, acts):
    q = {"input.act_scale": lab_scale(acts["input"])}
    p = q["input.act_scale"]  # the scale of the current layer's input
    for name in LAYERS:
        layer = getattr(model, name)
        w, b = layer.weight.detach(), layer.bias.detach()
        n_w = lab_scale(w)
        acc = n_w * p
        target = lab_scale(acts[name])
        n_o = target / acc
        q[name + ".weight"] = torch.clamp(torch.round(w * n_w), -128, 127)
        bias = torch.round(b * acc)
        if (bias.abs() > 2147483520).any():
            sys.exit("quant_lab.py: %s's bias overflows int32" % name)
        q[name + ".bias"] = bias
        q[name + ".weight_scale"] = n_w
        q[name + ".output_scale"] = n_o
        p = p * (n_w * n_o)
        q[name + ".act_scale"] = p
    return q


def forward_lab(model, q, x):
    """The quantized LeNet: integers between layers, each layer's accumulator exact
    (float64), then ((float)acc + bias) * n_o rounded half to even and clamped."""
    def requant(acc, name):
        y = (acc.to(F32) + q[name + ".bias"].reshape(1, -1, *([1] * (acc.dim() - 2)))) \
            * q[name + ".output_scale"]
        return torch.clamp(torch.round(y), -128, 127)

    d = torch.float64
    x = torch.clamp(torch.round(x * q["input.act_scale"]), -128, 127)
    pad = model.conv1.padding
    x = requant(F.conv2d(x.to(d), q["conv1.weight"].to(d), padding=pad), "conv1")
    x = F.max_pool2d(F.relu(x), 2)
    x = requant(F.conv2d(x.to(d), q["conv2.weight"].to(d)), "conv2")
    x = torch.flatten(F.max_pool2d(F.relu(x), 2), 1)
    x = F.relu(requant(F.linear(x.to(d), q["fc1.weight"].to(d)), "fc1"))
    x = F.relu(requant(F.linear(x.to(d), q["fc2.weight"].to(d)), "fc2"))
    return requant(F.linear(x.to(d), q["fc3.weight"].to(d)), "fc3")  # int8 logits


def print_steps(model, acts):
    print("step 1: weights per layer (histograms: dtrain quantize --report)")
    for name in LAYERS:
        w = getattr(model, name).weight.detach()
        print("  %-6s min %+.4f max %+.4f" % (name, w.min(), w.max()))
    print("step 3: activations over the calibration images (before ReLU)")
    for name in ["input"] + LAYERS:
        a = acts[name].double()
        m, s = a.mean().item(), a.std(unbiased=False).item()
        print("  %-6s min %+.4f max %+.4f  mean-3sigma %+.4f mean+3sigma %+.4f"
              % (name, a.min(), a.max(), m - 3 * s, m + 3 * s))


# ---- checks against dtrain ----

def compare_file(q, path):
    """The weights and their scales must be dtrain's to the bit (same float inputs). The
    activation ranges come from two float forward passes (dtrain's and PyTorch's) whose
    sums round differently in the last bits, so the scales derived from them may differ
    by a few ulps and a bias (rounded at such a scale) by 1."""
    got, meta = read_safetensors(path)
    problems, worst = [], 0.0
    if meta.get("scheme") != "lab":
        problems.append("%s: scheme %s, not lab" % (path, meta.get("scheme")))
    for name, want in q.items():
        if name not in got:
            problems.append("%s missing from dtrain's file" % name)
            continue
        have = got[name].reshape(-1)
        w = want.reshape(-1).numpy()
        if name.endswith(("weight", "bias")):
            d = np.abs(w.astype(np.int64) - have.astype(np.int64))
            if d.max() > (1 if name.endswith("bias") else 0):
                problems.append("%s: %d of %d integers differ, by up to %d"
                                % (name, int((d > 0).sum()), w.size, d.max()))
        elif name.endswith("weight_scale"):
            if not np.array_equal(have.astype(np.float32), w.astype(np.float32)):
                problems.append("%s: dtrain %r, PyTorch %r" % (name, have.tolist(), w.tolist()))
        else:
            rel = float(np.max(np.abs(have.astype(np.float64) / w.astype(np.float64) - 1)))
            worst = max(worst, rel)
            if rel > 1e-6:
                problems.append("%s: dtrain %r, PyTorch %r" % (name, have.tolist(), w.tolist()))
    print("file: integer weights and weight scales identical; activation scales within "
          "%.2g relative" % worst)
    return problems


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("quant_lab.py: %s failed: %s" % (" ".join(cmd), done.stderr.strip()))
    return done.stdout


def check_dtrain(args, model, q, x_test, y_test):
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        qpath, lpath = os.path.join(tmp, "q.safetensors"), os.path.join(tmp, "logits.safetensors")
        common = ["--model", args.model, "--data", args.data, "--threads", str(args.threads)]
        run([args.dtrain, "quantize", *common, "--init", args.init, "--out", qpath,
             "--scheme", "lab", "--calib-samples", str(args.calib_samples)])
        problems += compare_file(q, qpath)
        run([args.dtrain, "eval", *common, "--init", qpath, "--logits", lpath, "--json",
             "--test-samples", str(len(y_test))])
        got, _ = read_safetensors(lpath)
    ours = forward_lab(model, q, x_test).numpy()
    theirs = np.rint(got["logits"] * q["fc3.act_scale"].item())  # back to int8
    diff = np.abs(ours - theirs)
    acc_ours = float((ours.argmax(1) == y_test).mean())
    acc_theirs = float((got["logits"].argmax(1) == y_test).mean())
    print("int8 logits on %d test samples: %d of %d differ, by at most %g step(s)"
          % (len(y_test), int((diff > 0).sum()), diff.size, diff.max()))
    print("accuracy: PyTorch lab %.4f, dtrain %.4f" % (acc_ours, acc_theirs))
    if diff.max() > 1:
        problems.append("int8 logits differ by more than one step")
    if not np.array_equal(got["labels"], y_test):
        problems.append("dtrain's test labels differ from the data read here")
    if acc_ours != acc_theirs:
        problems.append("accuracy %.4f here, %.4f in dtrain" % (acc_ours, acc_theirs))
    return problems


def write_fixture(args, model, weights, x_cal, q, x_test):
    tensors = {"float." + k: v for k, v in weights.items()}
    tensors["calib_inputs"] = x_cal.numpy()
    tensors["test_inputs"] = x_test.numpy()
    for k, v in q.items():
        a = v.numpy()
        kind = np.int8 if k.endswith("weight") else np.int32 if k.endswith("bias") else np.float32
        tensors["lab." + k] = a.astype(kind).reshape(a.shape if a.ndim else (1,))
    tensors["lab.logits_q"] = forward_lab(model, q, x_test).numpy().astype(np.int32)
    write_safetensors(args.fixture, tensors, {"model": args.model, "data": args.data,
                                              "made_by": "scripts/quant_lab.py --fixture"})
    print("wrote %s" % args.fixture)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="lenet5", choices=["lenet5", "lenet_cifar"])
    ap.add_argument("--init", required=True, help="float weights (dtrain train --save)")
    ap.add_argument("--data", default=None)
    ap.add_argument("--dtrain", help="the dtrain binary to check")
    ap.add_argument("--calib-samples", type=int, default=512)
    ap.add_argument("--test-samples", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fixture", help="write the test fixture here instead of checking")
    args = ap.parse_args()
    if args.data is None:
        args.data = "fashion-mnist" if args.model == "lenet5" else "synthetic:cifar10"
    torch.set_num_threads(args.threads)
    model, weights = load_model(args.model, args.init)
    if args.fixture:
        args.calib_samples, args.test_samples = 48, 32
    img, _, mean, std = load_data(args.data, True, args.calib_samples)
    x_cal = decode(img, mean, std)
    acts = profile_activations(model, x_cal)
    q = quantize_lab(model, acts)
    timg, y_test, _, _ = load_data(args.data, False, args.test_samples)
    x_test = decode(timg, mean, std)
    if args.fixture:
        write_fixture(args, model, weights, x_cal, q, x_test)
        return
    print_steps(model, acts)
    print("step 2, 4, 5: scales (multipliers, q = round(x * scale))")
    print("  input  %.9g" % q["input.act_scale"])
    for name in LAYERS:
        print("  %-6s weight %.9g  output %.9g  next input %.9g"
              % (name, q[name + ".weight_scale"], q[name + ".output_scale"],
                 q[name + ".act_scale"]))
    if not args.dtrain:
        return
    problems = check_dtrain(args, model, q, x_test, np.asarray(y_test))
    for p in problems:
        print("MISMATCH: " + p)
    print("dtrain's lab scheme %s the PyTorch lab" % ("differs from" if problems else "matches"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
