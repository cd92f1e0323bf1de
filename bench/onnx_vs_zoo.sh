#!/bin/sh
# An imported model against the zoo's own, same kernels: the CIFAR ResNet-18
# (scripts/torch_models.py's, the zoo's resnet18) exported by PyTorch as a user would
# (training mode, no constant folding) into a temporary folder, then `dtrain bench` on
# the zoo's resnet18 and on the .onnx, alternating, REPEATS times each; medians of the
# ms_per_step each run reports (itself a median over its steps) and their ratio.
#   bench/onnx_vs_zoo.sh [DTRAIN] [THREADS]     env: REPEATS (3), BATCH (128), STEPS (10),
#                                                    PRECISION (fp32 | bf16)
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
REPEATS=${REPEATS:-3}
BATCH=${BATCH:-128}
STEPS=${STEPS:-10}
PRECISION=${PRECISION:-fp32}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# (torch's export warnings kept out of the way, shown if it fails)
/usr/bin/python3 - "$here/../scripts" "$tmp/resnet18.onnx" 2>"$tmp/export.err" <<'PY' || true
import sys
sys.path.insert(0, sys.argv[1])
import torch
from torch_models import ResNet18
m = ResNet18(64).train()
torch.onnx.export(m, torch.randn(2, 3, 32, 32), sys.argv[2],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
PY
[ -s "$tmp/resnet18.onnx" ] || { cat "$tmp/export.err"; exit 1; }
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
: >"$tmp/zoo" && : >"$tmp/onnx"
r=0
while [ "$r" -lt "$REPEATS" ]; do
    for which in zoo onnx; do
        model=resnet18
        [ "$which" = onnx ] && model=$tmp/resnet18.onnx
        "$DTRAIN" bench --model "$model" --batch-size "$BATCH" --threads "$THREADS" \
            --steps "$STEPS" --precision "$PRECISION" | field ms_per_step >>"$tmp/$which"
    done
    r=$((r + 1))
done
zoo=$(median <"$tmp/zoo") onnx=$(median <"$tmp/onnx")
echo "resnet18 batch $BATCH, $THREADS threads, $PRECISION, $REPEATS alternating runs of $STEPS steps:"
echo "  zoo  ms/step $(paste -sd' ' "$tmp/zoo") -> median $zoo"
echo "  onnx ms/step $(paste -sd' ' "$tmp/onnx") -> median $onnx"
awk -v z="$zoo" -v o="$onnx" 'BEGIN { printf "  imported / zoo images/s: %.3f\n", z / o }'
