#!/bin/bash
# The bad-input catalogue (issue 14): each case must end with a non-zero status (not a
# crash, not a timeout), print the exact one-line message given, and leave its input
# files byte for byte as they were.
set -u
DTRAIN=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
passed=0
failed=0
cases=0

# expect "description" "exact line" "files left untouched (space-separated)" command...
# Under mpirun, Open MPI adds its own banner after our line: only lines starting with
# "dtrain" count, and there must be exactly one.
expect() {
    what=$1 line=$2 files=$3
    shift 3
    cases=$((cases + 1))
    sums=""
    [ -n "$files" ] && sums=$(cd "$tmp" && md5sum $files)
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    grep '^dtrain' "$tmp/err" >"$tmp/ours"
    ok=1
    { [ "$status" -ne 0 ] && [ "$status" -lt 124 ]; } || ok=0
    [ "$(wc -l <"$tmp/ours")" -eq 1 ] && [ "$(cat "$tmp/ours")" = "$line" ] || ok=0
    if [ -n "$files" ] && [ "$(cd "$tmp" && md5sum $files 2>&1)" != "$sums" ]; then ok=0; fi
    if [ $ok -eq 1 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what (status $status); expected: $line"
        cat "$tmp/err"
    fi
}

# --- ranks that disagree: one line naming the option, both values and the ranks, at once
T="train --max-samples 64 --test-samples 32 --threads 1 --quiet --epochs 1"
mismatch() { # description, option words for rank 0, for rank 1, expected line
    expect "$1" "$4" "" mpirun -np 1 "$DTRAIN" $T $2 : -np 1 "$DTRAIN" $T $3
}
mismatch "ranks with different models" "--model lenet5" "--model mlp" \
    "dtrain: rank 0: ranks disagree on --model: lenet5 on rank 0, mlp on rank 1"
mismatch "ranks with different batch sizes" "--batch-size 32" "--batch-size 16" \
    "dtrain: rank 0: ranks disagree on --batch-size: 32 on rank 0, 16 on rank 1"
mismatch "ranks with different epochs" "--epochs 1" "--epochs 2" \
    "dtrain: rank 0: ranks disagree on --epochs: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different learning rates" "--lr 0.1" "--lr 0.01" \
    "dtrain: rank 0: ranks disagree on --lr: 0.1 on rank 0, 0.01 on rank 1"
mismatch "ranks with different seeds" "--seed 1" "--seed 2" \
    "dtrain: rank 0: ranks disagree on --seed: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different sample counts" "--max-samples 64" "--max-samples 48" \
    "dtrain: rank 0: ranks disagree on --max-samples: 64 on rank 0, 48 on rank 1"
mismatch "ranks with different all-reduce algorithms" "--allreduce ring" "--allreduce mpi" \
    "dtrain: rank 0: ranks disagree on --allreduce: ring on rank 0, mpi on rank 1"
mismatch "ranks with different bucket sizes" "--bucket-mb 1" "--bucket-mb 2" \
    "dtrain: rank 0: ranks disagree on --bucket-mb: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different gradient formats" "" "--comm-dtype bf16" \
    "dtrain: rank 0: ranks disagree on --comm-dtype: fp32 on rank 0, bf16 on rank 1"
mismatch "ranks with different data shapes" "--model resnet20 --width 2 --data synthetic:mnist" \
    "--model resnet20 --width 2 --data synthetic:cifar10" \
    "dtrain: rank 0: ranks disagree on the model's parameter count: 4456 on rank 0, 4492 on rank 1"

echo "$cases cases: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
