#!/bin/sh
# The main job of `make run`: train lenet5 for two epochs on Fashion-MNIST (Debian's
# dataset-fashion-mnist) with a run log, then print the epoch records. Results: runs/.
set -eu
DTRAIN=${1:-build/dtrain}
mkdir -p runs
"$DTRAIN" train --model lenet5 --data fashion-mnist --epochs 2 --batch-size 128 --lr-schedule cosine \
    --lr 0.05 --log runs/main.jsonl --save runs/lenet5.safetensors
echo "run log: runs/main.jsonl   weights: runs/lenet5.safetensors"
grep '"event":"epoch"' runs/main.jsonl
