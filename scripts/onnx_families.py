#!/usr/bin/python3
"""Which of torchvision's classification models dtrain imports (docs/onnx.md,
"torchvision's families"): each builder of Debian's python3-torchvision (0.14, which has
no torchvision.models.list_models: the builders are found by their `weights` argument),
at full width, 10 classes, dropout and stochastic depth 0, no aux heads, exported as
docs/onnx.md says (training mode, no constant folding, opset 17, a dynamic batch axis)
at a small input (32x32; inception_v3 75x75; 224x224 where the export needs it) into a
temporary folder, then `dtrain models` on it: its parameter count against PyTorch's, or
the operators it is refused by; and where it imports at 32x32, its eval-mode logits on 8
CIFAR-10-format images (random pixels, dtrain's normalisation) from `dtrain eval --init
(PyTorch's state) --logits` against PyTorch's own eval-mode forward (float32): the worst
difference over the largest |logit|. Run by hand (minutes, gigabytes), not in CI:

    scripts/onnx_families.py BUILD/dtrain [--only NAME,NAME] [--max-params 150e6]
"""
import argparse
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import warnings

import numpy as np
import torch
import torch.nn as nn
import torchvision
import torchvision.models as tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402 (beside this script)

# dtrain's CIFAR-10 normalisation (src/data/dataset.c)
CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32).reshape(3, 1, 1)
CIFAR_STD = np.array([0.2023, 0.1994, 0.2010], np.float32).reshape(3, 1, 1)
EVAL_IMAGES = 8


def builders():
    """torchvision.models' classification builders: its public functions taking
    `weights` (the detection, segmentation, video and quantized ones live in
    submodules, not here)."""
    found = []
    for name, fn in sorted(vars(tvm).items()):
        if (isinstance(fn, types.FunctionType) and not name.startswith("_") and name.islower()
                and "weights" in inspect.signature(fn).parameters):
            found.append((fn.__module__.rsplit(".", 1)[-1], name, fn))
    return found


def build(name, fn):
    kw = {"weights": None, "num_classes": 10}
    if name in ("googlenet", "inception_v3"):
        kw.update(aux_logits=False, init_weights=False)
    if name.startswith("vit_"):
        kw["image_size"] = 32 if name != "vit_h_14" else 28
    model = fn(**kw)
    for mod in model.modules():  # random masks are PyTorch's own numbers; see docs/onnx.md
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
        if isinstance(mod, torchvision.ops.StochasticDepth):
            mod.p = 0.0
    return model


def export(model, path, side):
    torch.onnx.export(model.train(), torch.randn(2, 3, side, side), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})


def refused_ops(line):
    """The operators a refusal names (test_parity.c's refused_ops, in Python)."""
    m = re.search(r"this graph needs: (.*)$", line)
    if m:
        return ", ".join(re.findall(r"(?:^|, )([^ ,]+) \(", m.group(1)))
    m = re.search(r": node '.*?' \(([^)]*)\): (.*)$", line)
    return f"{m.group(1)} ({m.group(2)[:70]})" if m else line[:120]


def eval_logits(dtrain, model, path, tmp):
    """dtrain's eval-mode logits of PyTorch's state on EVAL_IMAGES random CIFAR-10-format
    images against PyTorch's: the worst |difference| over the largest |logit| (a string)."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (EVAL_IMAGES, 3, 32, 32), dtype=np.uint8)
    labels = np.arange(EVAL_IMAGES, dtype=np.uint8) % 10
    data = os.path.join(tmp, "cifar")
    os.makedirs(data, exist_ok=True)
    records = np.concatenate([labels[:, None], pixels.reshape(EVAL_IMAGES, -1)], 1).tobytes()
    for f in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        with open(os.path.join(data, f), "wb") as out:
            out.write(records)
    weights, logits = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "logits.safetensors")
    safetensors_io.write(weights, {k: v.detach().float().numpy() for k, v in
                                   model.state_dict().items()
                                   if not k.endswith("num_batches_tracked")}, {})
    r = subprocess.run([dtrain, "eval", "--model", path, "--data", f"cifar10:{data}", "--init",
                        weights, "--logits", logits], capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        line = next((ln for ln in r.stderr.splitlines() if ln.startswith("dtrain")), r.stderr)
        return f"dtrain eval failed: {line[:150]}"
    got = safetensors_io.read(logits)[0]["logits"]
    x = (pixels.astype(np.float32) / np.float32(255) - CIFAR_MEAN) / CIFAR_STD
    with torch.no_grad():
        want = model.eval()(torch.from_numpy(x)).numpy()
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    return f"eval logits {err:.1e} off PyTorch's"


def check(dtrain, family, name, fn, tmp, max_params):
    torch.manual_seed(0)
    model = build(name, fn)
    params = sum(p.numel() for p in model.parameters())
    if params > max_params:
        return f"not exported: {params / 1e6:.0f} M parameters (past --max-params)"
    path = os.path.join(tmp, f"{name}.onnx")
    side, why = (75 if name == "inception_v3" else 32), ""
    try:
        export(model, path, side)
    except Exception as e:  # noqa: BLE001 (the exporter raises many kinds)
        why = str(e).splitlines()[0][:100]
        side = 224
        try:
            export(model, path, side)
        except Exception as e2:  # noqa: BLE001
            return f"PyTorch cannot export it: {str(e2).splitlines()[0][:150]}"
    try:
        r = subprocess.run([dtrain, "models", path], capture_output=True, text=True, timeout=600)
        at = f" at {side}x{side}" + (f" ({why})" if why and side == 224 else "")
        if r.returncode != 0:
            line = next((ln for ln in r.stderr.splitlines() if ln.startswith("dtrain")), r.stderr)
            return f"refused{at}: {refused_ops(line)}"
        m = re.search(rf"{re.escape(name)}\.onnx\s+([0-9,]+)", r.stdout)
        got = int(m.group(1).replace(",", "")) if m else -1
        if got != params:
            return f"imports{at}, but {got} parameters where PyTorch has {params}"
        logits = (eval_logits(dtrain, model, path, tmp) if side == 32 else
                  "logits not compared (dtrain's eval reads 32x32 CIFAR-10 here)")
        return f"imports{at}: {params:,} parameters, as PyTorch; {logits}"
    finally:
        shutil.rmtree(tmp)
        os.makedirs(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dtrain")
    ap.add_argument("--only", help="comma-separated builder names")
    ap.add_argument("--max-params", type=float, default=150e6,
                    help="skip bigger models (their exports pass protobuf's 2 GiB or this "
                         "machine's memory; their families' smaller members are checked)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    only = set(args.only.split(",")) if args.only else None
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}", flush=True)
    print("| family | model | dtrain |\n|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for family, name, fn in builders():
            if only and name not in only:
                continue
            try:
                result = check(args.dtrain, family, name, fn, tmp, args.max_params)
            except Exception as e:  # noqa: BLE001: one model's failure is its row
                result = f"not checked: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
            print(f"| {family} | {name} | {result} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
