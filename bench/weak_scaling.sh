#!/bin/sh
# Weak scaling, 1 vs 2 ranks with one compute thread each (this machine has 2 cores):
# every rank runs the same number of steps of the same per-rank batch, so 2 ranks do
# twice the work; speed-up = 2 T(1) / T(2), efficiency = T(1) / T(2) (T = the training
# loop's wall time, t_epoch of the run log). For 2 ranks also the communication hidden
# by overlap, 1 - t_comm_exposed / t_comm, for --overlap auto (the default), on and off, from the per-rank
# means of the run log (the max over ranks also counts one rank waiting for a slower
# one; it is printed beside).
#   bench/weak_scaling.sh [DTRAIN]
set -eu
DTRAIN=${1:-build/dtrain}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() { grep '"event":"epoch"' "$1" | sed "s/.*\"$2\":\([0-9.e+-]*\).*/\1/"; }

printf '%-9s %5s %6s %6s %-10s %7s %7s %8s %10s %8s %8s %11s\n' model batch steps bucket mode T1_s T2_s speedup efficiency comm_s hidden hidden_max
for spec in "lenet5 128 300 synthetic:mnist 25" "resnet18 32 12 synthetic:cifar10 25" \
    "resnet18 32 12 synthetic:cifar10 4"; do
    set -- $spec
    model=$1 batch=$2 steps=$3 data=$4 bucket=$5
    common="--model $model --data $data --batch-size $batch --max-steps $steps --epochs 1 --lr 0.05 --threads 1 --loader-workers 1 --test-samples 256 --bucket-mb $bucket --quiet"
    "$DTRAIN" train $common --log "$tmp/one.jsonl"
    t1=$(get "$tmp/one.jsonl" t_epoch)
    for mode in auto on off; do
        flag="--overlap $mode"
        mpirun -np 2 "$DTRAIN" train $common $flag --log "$tmp/two.jsonl"
        t2=$(get "$tmp/two.jsonl" t_epoch)
        comm=$(get "$tmp/two.jsonl" t_comm_mean)
        exposed=$(get "$tmp/two.jsonl" t_comm_exposed_mean)
        comm_max=$(get "$tmp/two.jsonl" t_comm)
        exposed_max=$(get "$tmp/two.jsonl" t_comm_exposed)
        awk -v m="$model" -v b="$batch" -v s="$steps" -v bk="$bucket" -v mode="$mode" -v t1="$t1" -v t2="$t2" \
            -v c="$comm" -v e="$exposed" -v cm="$comm_max" -v em="$exposed_max" 'BEGIN {
            printf "%-9s %5d %6d %6s %-10s %7.2f %7.2f %8.2f %9.1f%% %8.3f %7.0f%% %10.0f%%\n",
                   m, b, s, bk, mode, t1, t2, 2 * t1 / t2, 100 * t1 / t2, c,
                   (c > 0 ? 100 * (1 - e / c) : 0), (cm > 0 ? 100 * (1 - em / cm) : 0) }'
    done
done
