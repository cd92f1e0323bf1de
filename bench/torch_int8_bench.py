#!/usr/bin/python3
"""The PyTorch side of bench/int8_compare.sh: inference (eval mode, no_grad) of a zoo
model in float32 and as PyTorch 1.13's own post-training static quantization (FX mode,
torch.ao.quantization, the onednn engine: Debian's build has no fbgemm), on random
images, same batch and threads as `dtrain bench --infer [--int8]`. The weights come
from a dtrain safetensors file if given (--init), so both sides time the same network;
the quantized model is calibrated on --calib batches of random images (speed does not
depend on the scales). Prints one JSON line per dtype."""
import argparse
import json
import os
import sys
import time

import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from safetensors_io import load_state_dict  # noqa: E402
from torch_models import build  # noqa: E402


def timed(model, x, steps):
    times = []
    with torch.no_grad():
        for step in range(-3, steps):
            t0 = time.perf_counter()
            model(x)
            if step >= 0:
                times.append(time.perf_counter() - t0)
    total = sum(times)
    times.sort()
    return x.shape[0] * steps / total, times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--init", help="dtrain float weights (safetensors)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--calib", type=int, default=4, help="calibration batches")
    ap.add_argument("--dtype", default="fp32,int8")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, shape = build(args.model)
    if args.init:
        state = load_state_dict(args.init)
        model.load_state_dict({k: v for k, v in state.items() if not k.startswith("optimizer.")})
    model.eval()
    x = torch.randn(args.batch_size, *shape)
    for dtype in args.dtype.split(","):
        m = model
        if dtype == "int8":
            torch.backends.quantized.engine = "onednn"
            prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), (x,))
            with torch.no_grad():
                for _ in range(args.calib):
                    prepared(torch.randn(args.batch_size, *shape))
            m = convert_fx(prepared)
        rate, median = timed(m, x, args.steps)
        print(json.dumps({"framework": "pytorch " + torch.__version__, "model": args.model,
                          "mode": "infer", "dtype": dtype,
                          "engine": "onednn (FX PTQ)" if dtype == "int8" else "default",
                          "batch_size": args.batch_size, "threads": args.threads,
                          "steps": args.steps, "images_per_s": round(rate, 1),
                          "ms_per_batch": round(1e3 * median, 3)}), flush=True)


if __name__ == "__main__":
    main()
