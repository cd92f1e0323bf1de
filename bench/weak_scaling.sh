#!/bin/sh
# Weak scaling, 1 vs 2 ranks with one compute thread each (this machine has 2 cores):
# every rank runs the same number of steps of the same per-rank batch, so 2 ranks do
# twice the work; efficiency = T(1) / T(2), speed-up = 2 T(1) / T(2) (T = the training
# loop's wall time, t_epoch of the run log). For 2 ranks also the communication hidden
# by overlap, 1 - t_comm_exposed / t_comm, for --overlap auto (the default), on and off,
# from the per-rank means of the run log (the max over ranks also counts one rank
# waiting for a slower one; it is printed beside).
# The machine's speed drifts by 10% and more between minutes (a shared host), so each
# config runs REPEATS times (default 3), interleaved: 1 rank, then 2 ranks with auto, on
# and off, then again. Each repeat's efficiency pairs its own T(1) with its T(2); the
# table gives the median and [min-max] over repeats. Row "pair": two independent
# 1-process runs at the same time (no MPI), the most 2 ranks could reach here.
#   bench/weak_scaling.sh [DTRAIN]       env: REPEATS (3), STEPS_RESNET (12)
set -eu
DTRAIN=${1:-build/dtrain}
REPEATS=${REPEATS:-3}
STEPS_RESNET=${STEPS_RESNET:-12}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
get() { grep '"event":"epoch"' "$1" | sed "s/.*\"$2\":\([0-9.e+-]*\).*/\1/"; }

printf '%-9s %5s %6s %6s %-5s %7s %7s %-22s %8s %7s %10s\n' model batch steps bucket mode T1_s T2_s "efficiency [min-max]" comm_s hidden hidden_max
for spec in "lenet5 128 300 synthetic:mnist 25" "resnet18 32 $STEPS_RESNET synthetic:cifar10 25" \
    "resnet18 32 $STEPS_RESNET synthetic:cifar10 4"; do
    set -- $spec
    model=$1 batch=$2 steps=$3 data=$4 bucket=$5
    common="--model $model --data $data --batch-size $batch --max-steps $steps --epochs 1 --lr 0.05 --threads 1 --loader-workers 1 --test-samples 256 --bucket-mb $bucket --quiet"
    : >"$tmp/rows"
    for r in $(seq "$REPEATS"); do
        "$DTRAIN" train $common --log "$tmp/one.jsonl"
        t1=$(get "$tmp/one.jsonl" t_epoch)
        for mode in auto on off; do
            mpirun -np 2 "$DTRAIN" train $common --overlap $mode --log "$tmp/two.jsonl"
            echo "$mode $t1 $(get "$tmp/two.jsonl" t_epoch) $(get "$tmp/two.jsonl" t_comm_mean)" \
                "$(get "$tmp/two.jsonl" t_comm_exposed_mean) $(get "$tmp/two.jsonl" t_comm)" \
                "$(get "$tmp/two.jsonl" t_comm_exposed)" >>"$tmp/rows"
        done
        # The ceiling: two independent 1-process runs at once, no communication and no
        # synchronisation; T(2) = the slower one's. What they lose is the machine's
        # (shared caches, memory bandwidth, the host), not the all-reduce's.
        "$DTRAIN" train $common --log "$tmp/pa.jsonl" &
        pair_pid=$!
        "$DTRAIN" train $common --log "$tmp/pb.jsonl"
        wait "$pair_pid"
        ta=$(get "$tmp/pa.jsonl" t_epoch) tb=$(get "$tmp/pb.jsonl" t_epoch)
        echo "pair $t1 $(awk -v a="$ta" -v b="$tb" 'BEGIN { print (a > b ? a : b) }') 0 0 0 0" >>"$tmp/rows"
    done
    for mode in auto on off pair; do
        grep "^$mode " "$tmp/rows" | awk -v m="$model" -v b="$batch" -v s="$steps" \
            -v bk="$bucket" -v mode="$mode" '
            function med(a, n,   i, j, t) { # median of a[1..n], sorted in place
                for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                    t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
            { n++; t1[n] = $2; t2[n] = $3; eff[n] = 100 * $2 / $3; c[n] = $4
              hid[n] = $4 > 0 ? 100 * (1 - $5 / $4) : 0; hm[n] = $6 > 0 ? 100 * (1 - $7 / $6) : 0 }
            END {
                e_lo = 1e9; e_hi = -1e9
                for (i = 1; i <= n; i++) { if (eff[i] < e_lo) e_lo = eff[i]; if (eff[i] > e_hi) e_hi = eff[i] }
                printf "%-9s %5d %6d %6s %-5s %7.2f %7.2f %5.1f%% [%5.1f-%5.1f%%]  %8.3f %6.0f%% %9.0f%%\n",
                    m, b, s, bk, mode, med(t1, n), med(t2, n), med(eff, n), e_lo, e_hi, med(c, n),
                    med(hid, n), med(hm, n) }'
    done
done
