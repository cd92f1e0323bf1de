#!/usr/bin/python3
"""The PyTorch side of bench/compare_torch.sh: the same training step as
`dtrain bench` (forward, cross-entropy, backward, SGD with momentum and weight
decay) on random data, same batch and threads. Prints one JSON line."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from torch_models import build  # noqa: E402
import torchvision_models  # noqa: E402  (bench/: onnx_models.sh's torchvision models)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--channels-last", action="store_true",
                    help="model and input in channels_last (NHWC) memory format")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 mixed precision: torch.autocast('cpu', torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model in torchvision_models.NAMES:
        model, shape = torchvision_models.build(args.model)
    else:
        model, shape = build(args.model)
    model.train()
    x = torch.randn(args.batch_size, *shape)
    with torch.no_grad():
        classes = model(x[:2]).shape[1]
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    y = torch.randint(0, classes, (args.batch_size,))
    times = []
    for step in range(-3, args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= 0:
            times.append(dt)
    total = sum(times)
    times.sort()
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": args.model,
                      "batch_size": args.batch_size, "threads": args.threads,
                      "channels_last": args.channels_last, "bf16": args.bf16,
                      "steps": args.steps, "images_per_s": round(args.batch_size * args.steps / total, 1),
                      "ms_per_step": round(1e3 * times[len(times) // 2], 3),
                      "ms_min": round(1e3 * times[0], 3), "ms_max": round(1e3 * times[-1], 3)}))


if __name__ == "__main__":
    main()
