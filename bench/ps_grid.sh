#!/bin/sh
# Parameter-server step times for (W workers, P servers) in {1,2,3} x {1,2}, ps-sync,
# lenet5 and resnet18, next to an all-reduce step at the same W. OVERSUBSCRIBED: up to
# 5 ranks on this 2-core machine, one thread each, so absolute times mix compute
# sharing with communication. Writes bench/results/ps_grid_<model>.csv (workers,
# servers,batch,step_time,server_busy_s,bytes_per_step) for `dtrain fit-speed`.
#   bench/ps_grid.sh [DTRAIN]
set -eu
DTRAIN=${1:-build/dtrain}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
here=$(dirname "$0")
mkdir -p "$here/results"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
num() { grep "\"event\":\"$2\"" "$1" | sed "s/.*\"$3\":\([0-9.e+-]*\).*/\1/" | head -1; }
for spec in "lenet5 64 40 synthetic:mnist" "resnet18 16 4 synthetic:cifar10"; do
    set -- $spec
    model=$1 b=$2 steps=$3 data=$4
    csv="$here/results/ps_grid_$model.csv"
    echo "workers,servers,batch,step_time,server_busy_s,bytes_per_step" >"$csv"
    common="--model $model --data $data --batch-size $b --max-steps $steps --epochs 1 --threads 1 --test-samples 64 --quiet"
    printf '%-9s %3s %3s %12s %12s %14s %14s\n' model W P "ps step ms" "server busy" "bytes/step" "allreduce ms"
    for w in 1 2 3; do
        ar=""
        if [ "$w" -gt 1 ]; then
            mpirun -np "$w" "$DTRAIN" train $common --log "$tmp/ar.jsonl"
            ar=$(awk -v t="$(num "$tmp/ar.jsonl" epoch t_train)" -v s="$steps" 'BEGIN { printf "%.1f", 1e3 * t / s }')
        else
            "$DTRAIN" train $common --log "$tmp/ar.jsonl"
            ar=$(awk -v t="$(num "$tmp/ar.jsonl" epoch t_train)" -v s="$steps" 'BEGIN { printf "%.1f", 1e3 * t / s }')
        fi
        for p in 1 2; do
            mpirun -np $((w + p)) "$DTRAIN" train $common --mode ps-sync --servers "$p" \
                --log "$tmp/ps.jsonl"
            t=$(num "$tmp/ps.jsonl" epoch t_train)
            busy=$(num "$tmp/ps.jsonl" ps_server busy_s)
            bytes=$(num "$tmp/ps.jsonl" step bytes_sent)
            step=$(awk -v t="$t" -v s="$steps" 'BEGIN { print t / s }')
            echo "$w,$p,$((w * b)),$step,$busy,$bytes" >>"$csv"
            awk -v m="$model" -v w="$w" -v p="$p" -v st="$step" -v bu="$busy" -v by="$bytes" -v ar="$ar" \
                'BEGIN { printf "%-9s %3d %3d %12.1f %11.3fs %14d %14s\n", m, w, p, 1e3 * st, bu, by, ar }'
        done
    done
    echo "CSV: $csv   (dtrain fit-speed $csv)"
done
