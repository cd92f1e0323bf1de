#!/bin/sh
# Accuracy effect of --comm-dtype: lenet5 on Fashion-MNIST, 2 ranks, all-reduce and
# ps-sync (1 server + 2 workers), the same seed and schedule for fp32, bf16 and fp16.
# Prints one line per run: mode, dtype, final test accuracy, bytes sent per step.
#   [SEED=S] bench/comm_dtype_accuracy.sh [DTRAIN] [EPOCHS]
set -eu
DTRAIN=${1:-build/dtrain}
EPOCHS=${2:-3}
SEED=${SEED:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-10s %-5s %9s %16s\n' mode dtype test_acc bytes/step/rank
for mode in allreduce ps-sync; do
    procs=2
    [ "$mode" = ps-sync ] && procs=3
    for t in fp32 bf16 fp16; do
        mpirun -np "$procs" "$DTRAIN" train --mode "$mode" --comm-dtype "$t" --model lenet5 \
            --data fashion-mnist --epochs "$EPOCHS" --lr 0.05 --lr-schedule cosine --threads 1 \
            --seed "$SEED" --log "$out/log.jsonl" --quiet
        acc=$(grep '"event":"epoch"' "$out/log.jsonl" | tail -1 | sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p')
        bytes=$(grep '"event":"step"' "$out/log.jsonl" | head -1 | sed -n 's/.*"bytes_sent":\([0-9]*\).*/\1/p')
        printf '%-10s %-5s %8.2f%% %16s\n' "$mode" "$t" "$(awk -v a="$acc" 'BEGIN { print 100 * a }')" "$bytes"
    done
done
