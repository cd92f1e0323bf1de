#!/bin/bash
# The bad-input catalogue (issue 14): each case must end with a non-zero status (not a
# crash, not a timeout), print the exact one-line message given, and leave its input
# files byte for byte as they were.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
. "$SRC/tests/wait_lib.sh"

# --- ranks that disagree: one line naming the option, both values and the ranks, at once
T="train --max-samples 64 --test-samples 32 --threads 1 --quiet --epochs 1"
mismatch() { # description, option words for rank 0, for rank 1, expected line
    expect "$1" "$4" "" mpirun -np 1 "$DTRAIN" $T $2 : -np 1 "$DTRAIN" $T $3
}
mismatch "ranks with different models" "--model lenet5" "--model mlp" \
    "dtrain train: ranks disagree on --model: lenet5 on rank 0, mlp on rank 1"
mismatch "ranks with different batch sizes" "--batch-size 32" "--batch-size 16" \
    "dtrain train: ranks disagree on --batch-size: 32 on rank 0, 16 on rank 1"
mismatch "ranks with different epochs" "--epochs 1" "--epochs 2" \
    "dtrain train: ranks disagree on --epochs: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different learning rates" "--lr 0.1" "--lr 0.01" \
    "dtrain train: ranks disagree on --lr: 0.1 on rank 0, 0.01 on rank 1"
mismatch "ranks with different seeds" "--seed 1" "--seed 2" \
    "dtrain train: ranks disagree on --seed: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different sample counts" "--max-samples 64" "--max-samples 48" \
    "dtrain train: ranks disagree on --max-samples: 64 on rank 0, 48 on rank 1"
mismatch "ranks with different all-reduce algorithms" "--allreduce ring" "--allreduce mpi" \
    "dtrain train: ranks disagree on --allreduce: ring on rank 0, mpi on rank 1"
mismatch "ranks with different bucket sizes" "--bucket-mb 1" "--bucket-mb 2" \
    "dtrain train: ranks disagree on --bucket-mb: 1 on rank 0, 2 on rank 1"
mismatch "ranks with different gradient formats" "" "--comm-dtype bf16" \
    "dtrain train: ranks disagree on --comm-dtype: fp32 on rank 0, bf16 on rank 1"
mismatch "ranks with different data shapes" "--model resnet20 --width 2 --data synthetic:mnist" \
    "--model resnet20 --width 2 --data synthetic:cifar10" \
    "dtrain train: ranks disagree on the model's parameter count: 4456 on rank 0, 4492 on rank 1"

# --- weights files: checked before training, never replaced when not a plain file
Q="--max-samples 64 --test-samples 32 --threads 1 --quiet"
"$DTRAIN" train $Q --max-steps 1 --save good.safetensors || echo "FAIL: cannot save weights"
mkdir -p adir
expect "--init on a folder" "dtrain train: cannot read adir: a folder, not a regular file" "" \
    "$DTRAIN" train $Q --init adir
expect "--save into a missing folder, before training" \
    "dtrain train: --save: cannot write nodir/w.safetensors: folder nodir: No such file or directory" "" \
    "$DTRAIN" train $Q --epochs 50 --save nodir/w.safetensors
ln -s good.safetensors link.safetensors
expect "--save onto a symlink" "dtrain train: --save: cannot write link.safetensors: a symbolic link (not replaced)" \
    "good.safetensors" "$DTRAIN" train $Q --save link.safetensors
[ -L link.safetensors ] || { failed=$((failed + 1)); echo "FAIL: the symlink was replaced"; }
expect "--save onto a device" "dtrain train: --save: cannot write /dev/null: not a regular file (not replaced)" "" \
    "$DTRAIN" train $Q --save /dev/null
expect "--save onto a folder" "dtrain train: --save: cannot write adir: a folder" "" \
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
nan_weights good.safetensors nan.safetensors
expect "--init with a NaN weight" "dtrain train: nan.safetensors: the weights hold NaN or infinite values" \
    "nan.safetensors" "$DTRAIN" train $Q --init nan.safetensors

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

# --- report --times: never overwrites its input; strict CSV
printf 'procs,batch_size,t_train,mine\n1,32,10,a\n2,32,6,b\n' >runs.csv
expect "report over its own input" \
    "dtrain report: runs.csv would be overwritten by the report's runs.csv (give --out DIR)" \
    "runs.csv" "$DTRAIN" report --times runs.csv
csv() { # name, header, row
    printf '%s\n%s\n' "$2" "$3" >"$1"
}
csv abc.csv procs,batch_size,t_train 1,32,abc
csv 2x.csv procs,batch_size,t_train 2x,32,1
csv empty.csv procs,batch_size,t_epoch,t_train 1,32,,10
csv frac.csv procs,batch_size,t_train 1.5,32,10
csv huge.csv procs,batch_size,t_train 2000000000,32,10
csv short.csv procs,batch_size,t_train 1,32
expect "CSV: a word as a number" "dtrain report: abc.csv line 2: t_train is not a number: 'abc'" \
    "abc.csv" "$DTRAIN" report --times abc.csv --out rep
expect "CSV: a number with a suffix" "dtrain report: 2x.csv line 2: procs is not a number: '2x'" \
    "2x.csv" "$DTRAIN" report --times 2x.csv --out rep
expect "CSV: an empty field" "dtrain report: empty.csv line 2: t_epoch is not a number: ''" \
    "empty.csv" "$DTRAIN" report --times empty.csv --out rep
expect "CSV: a fractional process count" \
    "dtrain report: frac.csv line 2: procs must be a whole number from 0 to 1048576, got '1.5'" \
    "frac.csv" "$DTRAIN" report --times frac.csv --out rep
expect "CSV: a process count that overflows" \
    "dtrain report: huge.csv line 2: procs must be a whole number from 0 to 1048576, got '2000000000'" \
    "huge.csv" "$DTRAIN" report --times huge.csv --out rep
expect "CSV: a short row" "dtrain report: short.csv line 2: 2 fields, the header has 3" \
    "short.csv" "$DTRAIN" report --times short.csv --out rep
python3 -c "print('procs,batch_size,t_train'); print('1,32,' + '1' * 2000000)" >long.csv
expect "CSV: a line of 2 MB" "dtrain report: long.csv line 2: longer than 1048576 bytes" \
    "long.csv" "$DTRAIN" report --times long.csv --out rep
python3 -c "
print('procs,batch_size,t_train')
for p in range(1, 70): print('%d,32,%g' % (p, 10.0 / p))" >p69.csv
expect "CSV: more process counts than the report holds" \
    "dtrain report: p69.csv line 66: more than 64 different process counts (the report's limit)" \
    "p69.csv" "$DTRAIN" report --times p69.csv --out rep
printf 'procs,batch_size,t_train\r\n1,32,10\r\n2,32,6\r\n' >crlf.csv
ok_case "CSV with CRLF line ends" "$DTRAIN" report --times crlf.csv --out rep
python3 -c "
print('procs,batch_size,t_train')
for p in range(1, 13):
    for b in range(1, 13): print('%d,%d,%g' % (p, 16 * b, 10.0 / p + b))" >sweep144.csv
ok_case "a report of 144 configs" "$DTRAIN" report --times sweep144.csv --out rep144
cases=$((cases + 1))
if [ "$(grep -c '^| ' rep144/report.md)" -ge 144 ]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: the 144-config report lacks rows"; fi

# --- no shell: an output folder with quotes and semicolons is only a name (gnuplot runs
# with an argument vector)
cases=$((cases + 1))
odd="o';touch INJECTED;'\"\$(touch INJECTED2)"
if "$DTRAIN" report --times crlf.csv --out "$odd" >/dev/null 2>&1 && [ -s "$odd/report.md" ] &&
    [ ! -e INJECTED ] && [ ! -e INJECTED2 ] && [ ! -e "$odd/INJECTED" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: an output folder's name ran as a command"
fi
cases=$((cases + 1))
if grep -rnE '\b(system|popen)\(' "$SRC/src" | grep -q .; then
    failed=$((failed + 1)); echo "FAIL: the sources call system() or popen()"
else
    passed=$((passed + 1))
fi

# --- runaways: bounded output, bounded time
P="predict --theta 1,1,1,1,1 --batch 128 --steps-per-epoch 100 --epochs 1 --servers 1,2"
expect "predict over 10^11 workers" \
    "dtrain predict: --workers expects a range LO..HI like 1..99, got '1..99999999999'" "" \
    "$DTRAIN" $P --workers 1..99999999999
expect "predict over 16 M workers" "dtrain predict: --workers 1..16777216: at most 65536 worker counts" "" \
    "$DTRAIN" $P --workers 1..16777216
expect "predict with an infinite theta" \
    "dtrain predict: --theta expects 5 non-negative numbers, got '1,1,1e400,1,1'" "" \
    "$DTRAIN" predict --theta 1,1,1e400,1,1 --batch 128 --steps-per-epoch 100 --epochs 1 --servers 1 --workers 1..4
python3 -c '
import json
print(json.dumps({"event": "run", "model": "lenet5", "steps_per_epoch": 10, "epochs": 1, "procs": 1}))
for i in range(50):
    print(json.dumps({"event": "step", "rank": 0, "epoch": 0, "step": i * 10 if i < 49 else 10**15,
                      "loss": 2.0 / (1 + i * 0.1) + 0.1}))' >hugesteps.jsonl
expect "fit-loss --online on huge step numbers" \
    "dtrain fit-loss: hugesteps.jsonl: --online would print 100000000000000 epochs of 10 steps (at most 10000)" \
    "hugesteps.jsonl" "$DTRAIN" fit-loss hugesteps.jsonl --online

# (a parameter server with a worker's evaluation longer than the peer timeout:
# tests/test_peer_timeout_eval.sh, run alone)

# --- a gzip bomb: 256 MiB of zeros behind a header declaring 10 images, stopped while
# inflating (not after)
mkdir -p bomb
cp /usr/share/datasets/fashion-mnist/*.gz bomb/ 2>/dev/null
python3 -c '
import gzip, struct
with gzip.open("bomb/train-images-idx3-ubyte.gz", "wb", compresslevel=1) as f:
    f.write(struct.pack(">IIII", 0x803, 10, 28, 28))
    for _ in range(16): f.write(bytes(1 << 24))'
expect "a gzip bomb" \
    "dtrain train: bomb/train-images-idx3-ubyte.gz: holds more than the 7856 bytes its header declares (a gzip bomb or a corrupt file); stopped while inflating" \
    "bomb/train-images-idx3-ubyte.gz" "$DTRAIN" train --data fashion-mnist:bomb --quiet --threads 1

# --- scale: a finished log is replaced only by a finished rerun of the same settings;
# killing the sweep ends its runs
S="$DTRAIN scale --model lenet5 --data synthetic:mnist --procs 1 --batch-sizes 32 --epochs 1 --max-samples 64 --test-samples 32 --threads 1 --out study"
$S --quiet >/dev/null 2>&1 || echo "FAIL: the first sweep"
# (no weights to start from: the run fails, not the profiles before it, which do not
# read them; missing data stops the sweep before any run, below)
expect "scale --force whose rerun fails" \
    "dtrain scale: run with 1 process, batch 32 failed (dtrain train: cannot open nodata.safetensors: No such file or directory; see study/run_p1_b32.jsonl.stderr)" \
    "study/run_p1_b32.jsonl study/run_p1_b32.jsonl.args" $S --quiet --force --init nodata.safetensors
expect "scale --force on missing data: stopped before any run" \
    "dtrain scale: cannot open nodata/train-images-idx3-ubyte: neither it nor train-images-idx3-ubyte.gz exists" \
    "study/run_p1_b32.jsonl study/run_p1_b32.jsonl.args" $S --quiet --force --data mnist:nodata
expect "scale over a log of other settings" \
    "dtrain scale: --out study holds runs of other settings (run_p1_b32.jsonl: '--max-samples 64' in the log, '--max-samples 48' now); give another --out, or --force to run them again" \
    "study/run_p1_b32.jsonl study/run_p1_b32.jsonl.args" $S --max-samples 48
cases=$((cases + 1))
if $S --max-samples 48 --force >rerun.out 2>&1 && grep -q '"dataset_size":48' study/run_p1_b32.jsonl; then
    passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL: scale --force did not run the new settings"; cat rerun.out; fi
# 50 epochs: on a fast machine 5 were over before the kill. The ranks' command lines
# hold the relative log path (killed/run_p2_b32.jsonl.partial).
$DTRAIN scale --model lenet5 --data synthetic:mnist --procs 2 --batch-sizes 32 --epochs 50 --threads 1 \
    --quiet --out killed >/dev/null 2>killed.err &
sweep=$!
# interrupted once the run is training (its first step record), not after a fixed time
started=0
wait_line killed/run_p2_b32.jsonl.partial '"event":"step"' 120 $sweep && started=1
kill -INT $sweep
wait $sweep
status=$?
for _ in $(seq 100); do pgrep -f "killed/run_p2" >/dev/null || break; sleep 0.1; done
cases=$((cases + 1))
if [ $started = 1 ] && [ $status -ne 0 ] && ! pgrep -f "killed/run_p2" >/dev/null &&
    [ "$(cat killed.err)" = "dtrain scale: stopped by signal 2 (Interrupt): the run with 2 processes, batch 32, was ended with it" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1)); echo "FAIL: killing dtrain scale (status $status) left:"
    pgrep -fa "killed/run_p2"; cat killed.err
    for p in $(pgrep -f "killed/run_p2"); do kill -9 "$p"; done
fi

bad_input_done
