#!/bin/sh
# The main job of `make run`: train lenet5 for one epoch on synthetic MNIST-shaped
# data with a run log, then print the epoch record. Results land in runs/.
set -eu
DTRAIN=${1:-build/dtrain}
mkdir -p runs
"$DTRAIN" train --model lenet5 --data synthetic:mnist --epochs 1 --batch-size 128 \
    --lr 0.05 --log runs/main.jsonl --save runs/lenet5.safetensors
echo "run log: runs/main.jsonl   weights: runs/lenet5.safetensors"
grep '"event":"epoch"' runs/main.jsonl
