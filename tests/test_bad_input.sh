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

# --- weights files: checked before training, never replaced when not a plain file
Q="--max-samples 64 --test-samples 32 --threads 1 --quiet"
"$DTRAIN" train $Q --max-steps 1 --save good.safetensors || echo "FAIL: cannot save weights"
mkdir -p adir
expect "--init on a folder" "dtrain train: cannot read adir: not a regular file" "" \
    "$DTRAIN" train $Q --init adir
expect "--save into a missing folder, before training" \
    "dtrain train: cannot write nodir/w.safetensors: folder nodir: No such file or directory" "" \
    "$DTRAIN" train $Q --epochs 50 --save nodir/w.safetensors
ln -s good.safetensors link.safetensors
expect "--save onto a symlink" "dtrain train: cannot write link.safetensors: a symbolic link (not replaced)" \
    "good.safetensors" "$DTRAIN" train $Q --save link.safetensors
[ -L link.safetensors ] || { failed=$((failed + 1)); echo "FAIL: the symlink was replaced"; }
expect "--save onto a device" "dtrain train: cannot write /dev/null: not a regular file (not replaced)" "" \
    "$DTRAIN" train $Q --save /dev/null
expect "--save onto a folder" "dtrain train: cannot write adir: a folder" "" \
    "$DTRAIN" train $Q --save adir

# a long path is not cut into a temporary name that could be another file
long=$(printf 'd%.0s' $(seq 1 200))
mkdir -p "$long/$long"
w="$long/$long/$(printf 'w%.0s' $(seq 1 200)).safetensors"
cases=$((cases + 1))
if "$DTRAIN" train $Q --max-steps 1 --save "$w" && [ -s "$w" ] && [ "$(ls -A "$long/$long" | wc -l)" -eq 1 ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: save to a ${#w}-character path"
fi
# a save killed by a signal leaves a temporary file; the next save to that path removes it
stale=$(python3 -c '
import sys
h = 0xcbf29ce484222325
for c in sys.argv[1].encode(): h = ((h ^ c) * 0x100000001b3) % 2**64
print(".%s.%016x.%d.tmp" % (sys.argv[1][:64], h, 2**22 + 12345))' good.safetensors)
echo partial >"$stale"
cases=$((cases + 1))
if "$DTRAIN" train $Q --max-steps 1 --save good.safetensors && [ ! -e "$stale" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: a killed save's temporary file $stale was left"
fi

# --- silent wrong results: diverged or NaN weights are an error, never saved
expect "--lr 1e6 diverges" \
    "dtrain train: the weights diverged in epoch 0 (test loss not finite; learning rate 1e+06 too high?); stopping without saving" \
    "" "$DTRAIN" train $Q --max-samples 256 --max-steps 2 --lr 1e6 --save diverged.safetensors
[ ! -e diverged.safetensors ] || { failed=$((failed + 1)); echo "FAIL: diverged weights saved"; }
python3 - good.safetensors nan.safetensors <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
b[8 + n:8 + n + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
PY
expect "--init with a NaN weight" "dtrain train: nan.safetensors: the weights hold NaN or infinite values" \
    "nan.safetensors" "$DTRAIN" train $Q --init nan.safetensors
expect "a run log on a full disk" "dtrain train: cannot finish run log: No space left on device" "" \
    "$DTRAIN" train $Q --max-steps 1 --log /dev/full

# --- safetensors headers that must not load
craft() { # out, header JSON (data: 16 zero bytes)
    python3 -c '
import struct, sys
h = sys.argv[2].encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(16))' "$1" "$2"
}
craft dup.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'
craft overlap.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}'
craft frac.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0.5,8.5]}}'
expect "safetensors with a name twice" "dtrain train: dup.safetensors: tensor a appears twice in the header" \
    "dup.safetensors" "$DTRAIN" train $Q --init dup.safetensors
expect "safetensors with overlapping tensors" \
    "dtrain train: overlap.safetensors: tensors a and b overlap (bytes 0..8 and 4..12)" \
    "overlap.safetensors" "$DTRAIN" train $Q --init overlap.safetensors
expect "safetensors with fractional offsets" "dtrain train: frac.safetensors: tensor a: bad data_offsets" \
    "frac.safetensors" "$DTRAIN" train $Q --init frac.safetensors

echo "$cases cases: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
