#!/bin/sh
# Accuracy effect of --precision bf16 (mixed precision), measured, not assumed:
#  1. lenet5 on Fashion-MNIST, the issue-3 recipe (5 epochs, batch 128, lr 0.05 cosine),
#     fp32 and bf16 with the same seeds: final test accuracy per run.
#  2. resnet18 on synthetic CIFAR (crop + flip), STEPS steps at batch 32, fp32 and bf16
#     for each seed: the mean training loss of the last 50 steps per run, so bf16's
#     curve can be set against fp32's run-to-run spread.
#   [SEEDS="0 1 2"] [STEPS=200] bench/bf16_accuracy.sh [DTRAIN] [THREADS]
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
SEEDS=${SEEDS:-"0 1 2"}
STEPS=${STEPS:-200}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
field() { sed -n "s/.*\"$1\":\([-0-9.e]*\).*/\1/p"; }
printf '%-9s %-5s %4s %12s %22s\n' model prec seed test_acc% mean_loss_last_50
for seed in $SEEDS; do
    for p in fp32 bf16; do
        "$DTRAIN" train --model lenet5 --data fashion-mnist --epochs 5 --batch-size 128 \
            --lr 0.05 --lr-schedule cosine --threads "$THREADS" --seed "$seed" \
            --precision "$p" --log "$out/l.jsonl" --quiet
        acc=$(grep '"event":"epoch"' "$out/l.jsonl" | tail -1 | field test_acc)
        printf '%-9s %-5s %4s %12.2f %22s\n' lenet5 "$p" "$seed" \
            "$(awk -v a="$acc" 'BEGIN { print 100 * a }')" -
    done
done
for seed in $SEEDS; do
    for p in fp32 bf16; do
        "$DTRAIN" train --model resnet18 --data synthetic:cifar10 --batch-size 32 \
            --max-steps "$STEPS" --epochs 1 --lr 0.05 --augment --threads "$THREADS" \
            --test-samples 256 --seed "$seed" --precision "$p" --log "$out/r.jsonl" --quiet
        loss=$(grep '"event":"step"' "$out/r.jsonl" | tail -50 | field loss |
            awk '{ s += $1 } END { printf "%.4f", s / NR }')
        printf '%-9s %-5s %4s %12s %22s\n' resnet18 "$p" "$seed" - "$loss"
    done
done
