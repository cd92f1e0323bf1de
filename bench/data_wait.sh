#!/bin/sh
# How long the trainer waits for data: lenet5 on Fashion-MNIST, batch 128, 2 epochs,
# for each loader worker count; prints t_data / t_epoch per epoch (target with one
# worker: under 5%). Uses the run log, i.e. the same counters users see.
#   bench/data_wait.sh [DTRAIN] [WORKERS...]     (default: 0 1 2)
set -eu
DTRAIN=${1:-build/dtrain}
shift 1 2>/dev/null || true
WORKERS=${*:-"0 1 2"}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%-8s %-6s %10s %10s %10s\n' workers epoch t_epoch_s t_data_s data_wait
for w in $WORKERS; do
    "$DTRAIN" train --model lenet5 --data fashion-mnist --epochs 2 --batch-size 128 --lr 0.05 \
        --loader-workers "$w" --threads 2 --log "$log" --quiet
    grep '"event":"epoch"' "$log" | while read -r line; do
        e=$(echo "$line" | sed 's/.*"epoch":\([0-9]*\).*/\1/')
        te=$(echo "$line" | sed 's/.*"t_epoch":\([0-9.e+-]*\).*/\1/')
        td=$(echo "$line" | sed 's/.*"t_data":\([0-9.e+-]*\).*/\1/')
        awk -v w="$w" -v e="$e" -v te="$te" -v td="$td" \
            'BEGIN { printf "%-8s %-6s %10.3f %10.4f %9.2f%%\n", w, e + 1, te, td, 100 * td / te }'
    done
done
