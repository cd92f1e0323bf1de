#!/bin/bash
# Bad input around a run's state (issue 40): a checkpoint's tensors are checksummed, a
# changed --model graph is caught between ranks and on resume, one run per --log /
# --checkpoint DIR / scale --out, a finished run's --resume still writes --save, a
# checkpoint past `ulimit -f` fails in one line, an unwritable --save FILE.onnx keeps
# the weights.
set -u
DTRAIN=$1
case $DTRAIN in /*) ;; */*) DTRAIN=$(pwd)/$DTRAIN ;; esac
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
. "$SRC/tests/wait_lib.sh"
F="--max-samples 64 --test-samples 32 --threads 1 --quiet --batch-size 16"
FX="$SRC/tests/fixtures/onnx"

# tensor_edit FILE MODE A [B]: flip: one byte of A's data inverted; swap: the data of
# A and B (same size) exchanged
tensor_edit() {
    python3 - "$@" <<'EOF'
import json, struct, sys
path, mode, a = sys.argv[1:4]
b = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def span(name):
    s, e = h[name]["data_offsets"]
    return 8 + n + s, 8 + n + e
s, e = span(a)
if mode == "flip":
    b[(s + e) // 2] ^= 0xff
else:
    s2, e2 = span(sys.argv[4])
    assert e - s == e2 - s2
    b[s:e], b[s2:e2] = b[s2:e2], b[s:e]
open(path, "wb").write(b)
EOF
}

# --- item 1: a checkpoint's tensors carry crc32s, checked on --resume and on read
"$DTRAIN" train $F --checkpoint ck --max-steps 3 || echo "FAIL: the checkpointed run"
cp -r ck ck_good
tensor_edit ck/checkpoint.safetensors flip fc2.bias
expect_match "resume of a checkpoint with a flipped byte" \
    "^dtrain train: ck/checkpoint.safetensors: tensor fc2.bias does not match its checksum \(crc32 [0-9a-f]{8}, recorded [0-9a-f]{8}\): the file is damaged$" \
    "ck/checkpoint.safetensors" "$DTRAIN" train $F --resume ck --checkpoint ck
rm -r ck && cp -r ck_good ck
tensor_edit ck/checkpoint.safetensors swap conv1.weight optimizer.momentum.conv1.weight
expect_match "resume of a checkpoint with a weight and its momentum swapped" \
    "^dtrain train: ck/checkpoint.safetensors: tensor conv1.weight does not match its checksum \(crc32 [0-9a-f]{8}, recorded [0-9a-f]{8}\): the file is damaged$" \
    "ck/checkpoint.safetensors" "$DTRAIN" train $F --resume ck --checkpoint ck
rm -r ck && cp -r ck_good ck
setmeta ck/checkpoint.safetensors format dtrain-checkpoint-2
expect "resume of a checkpoint without checksums (an older dtrain's)" \
    "dtrain train: --resume ck: the checkpoint was written by an older dtrain (dtrain-checkpoint-2, without checksums of its tensors and its graph), so it cannot be verified; its weights go on with --init ck/checkpoint.safetensors --checkpoint NEWDIR (momentum and position start afresh)" \
    "ck/checkpoint.safetensors" "$DTRAIN" train $F --resume ck --checkpoint ck
rm -r ck && cp -r ck_good ck
"$DTRAIN" train $F --save w.safetensors || echo "FAIL: the saved run"
tensor_edit w.safetensors flip conv2.weight
expect_match "eval --init of a saved file with a flipped byte" \
    "^dtrain eval: w.safetensors: tensor conv2.weight does not match its checksum \(crc32 [0-9a-f]{8}, recorded [0-9a-f]{8}\): the file is damaged$" \
    "w.safetensors" "$DTRAIN" eval --init w.safetensors --test-samples 32 --threads 1

# --- item 4: --resume of a finished run with --save writes the save
"$DTRAIN" train $F --checkpoint rf || echo "FAIL: the run to its end"
"$DTRAIN" train $F --resume rf --save done.safetensors >/dev/null 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ -s done.safetensors ] && [ "$(cat "$tmp/err")" = \
    "dtrain train: --resume rf: the run already finished at step 4; its weights in done.safetensors" ] &&
    "$DTRAIN" eval --init done.safetensors --test-samples 32 --threads 1 >/dev/null 2>&1; then
    pass "resuming a finished run with --save writes the saved weights"
else
    fail "resuming a finished run with --save writes the saved weights" "status $status" \
        "$(cat "$tmp/err")"
fi

# --- item 2: the model's graph is compared between ranks and against a checkpoint
# net.onnx with its first BatchNorm's epsilon changed: the same tensors, another graph
python3 - "$FX/resnet18_w4.onnx" net_eps.onnx <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
old = b"epsilon\x15" + struct.pack("<f", 1e-5)
assert old in b
open(sys.argv[2], "wb").write(b.replace(old, b"epsilon\x15" + struct.pack("<f", 1e-3), 1))
EOF
cp "$FX/resnet18_w4.onnx" net.onnx
N="--model net.onnx --data synthetic:cifar10 --max-samples 64 --test-samples 16 --batch-size 16 --threads 1 --quiet"
"$DTRAIN" train $N --checkpoint cn --max-steps 2 || echo "FAIL: the ONNX run"
cp net_eps.onnx net.onnx
expect_match "resume on a changed graph of the same --model file" \
    "^dtrain train: --resume cn: the checkpoint was written for another graph of --model net.onnx \(graph hash [0-9a-f]{16}, this run's [0-9a-f]{16}\): the model changed since$" \
    "cn/checkpoint.safetensors" "$DTRAIN" train $N --resume cn --checkpoint cn
if command -v mpirun >/dev/null; then
    mkdir -p host0 host1
    cp "$FX/resnet18_w4.onnx" host0/net.onnx
    cp net_eps.onnx host1/net.onnx # a stale copy at the same path on "another host"
    expect_match "two ranks whose --model path holds different graphs" \
        "^dtrain train: ranks disagree on the model's graph \(hash of its ops and shapes\): [0-9a-f]{16} on rank 0, [0-9a-f]{16} on rank 1$" \
        "" mpirun -np 1 -wdir "$tmp/host0" "$DTRAIN" train $N : -np 1 -wdir "$tmp/host1" "$DTRAIN" train $N
else
    echo "no mpirun: the two-rank graph case is not run"
fi

# --- item 5: a checkpoint or --save past `ulimit -f` (in 1 KiB blocks): one line, no
# file left behind (the lenet5 checkpoint is ~500 KB, the weights ~250 KB)
expect "a checkpoint past ulimit -f" \
    "dtrain train: cannot write cf/checkpoint.safetensors: File too large" "" \
    bash -c 'ulimit -f 100; exec "$0" train $1 --checkpoint cf' "$DTRAIN" "$F"
if [ -d cf ] && [ -z "$(ls -A cf | grep -vx .launch.lock)" ]; then pass "...and leaves no file"; else
    fail "...and leaves no file" "$(ls -A cf 2>&1)"; fi
expect "--save past ulimit -f" \
    "dtrain train: cannot write big.safetensors: File too large" "" \
    bash -c 'ulimit -f 100; exec "$0" train $1 --save big.safetensors' "$DTRAIN" "$F"
if [ -z "$(ls -A | grep big)" ]; then pass "...and leaves no file"; else
    fail "...and leaves no file" "$(ls -A | grep big)"; fi

# --- item 6: --save FILE.onnx that cannot be written at the end (its --model file
# moved during the run) keeps the weights as safetensors beside it, never over an
# existing file, and says so in one line
cp "$FX/resnet18_w4.onnx" mv.onnx
echo "not ours" >out.safetensors
"$DTRAIN" train --model mv.onnx --data synthetic:cifar10 --max-samples 64 --test-samples 16 \
    --batch-size 16 --threads 1 --quiet --epochs 20 --test-delay 0:50 --log mv.jsonl \
    --save out.onnx 2>"$tmp/mv.err" &
job=$!
if wait_line mv.jsonl '"event":"step"' 60 "$job"; then
    # stopped at once while the model moves (80 steps of 50 ms: ~4 s left after the
    # first), so a loaded machine's slow poll does not find the run ended
    kill -STOP "$job"
    mv mv.onnx moved.onnx
    kill -CONT "$job"
    wait "$job"
    status=$?
    if [ $status -eq 1 ] && [ "$(grep -c '^dtrain' "$tmp/mv.err")" = 1 ] &&
        grep -Eq "^dtrain train: .*mv\.onnx.*; the trained weights are in out\.1\.safetensors instead \(--init reads them\)$" "$tmp/mv.err" &&
        [ "$(cat out.safetensors)" = "not ours" ] && [ ! -e out.onnx ] &&
        "$DTRAIN" eval --model moved.onnx --data synthetic:cifar10 --init out.1.safetensors \
            --test-samples 16 --threads 1 >/dev/null 2>&1; then
        pass "--save FILE.onnx with the model moved during the run keeps the weights"
    else
        fail "--save FILE.onnx with the model moved during the run keeps the weights" \
            "status $status" "$(cat "$tmp/mv.err")" "$(ls out*)"
    fi
else
    fail "--save FILE.onnx: the run did not start" "$(cat "$tmp/mv.err")"
    kill "$job"
fi

# --- item 7: hier's 16-bit wire is between nodes only; on one node the run summed in
# fp32 under a record saying bf16: refused
if command -v mpirun >/dev/null; then
    for t in bf16 fp16; do
        expect_match "--allreduce hier --comm-dtype $t on one node" \
            "^dtrain train: --allreduce hier --comm-dtype $t: the 2 ranks share one node, where hier sums in fp32 \((shm|ring)\) and sends nothing between nodes, the only place its 16-bit wire is used; give --allreduce ring for $t here$" \
            "" mpirun -np 2 "$DTRAIN" train $F --allreduce hier --comm-dtype $t
    done
fi

# --- item 3: one run per --log, per --checkpoint DIR, per scale --out; refused with
# the holder's pid (a run slowed to 50 ms a step, stopped once the case ran)
SLOW="--max-samples 64 --test-samples 32 --threads 1 --quiet --batch-size 16 --epochs 1000 --test-delay 0:50"
# hold "what" ARGS...: starts a slow run in the background, waits until its log says it
# is training (a step record in hold.jsonl, or the line given in $HOLD_LOG)
hold() {
    rm -f hold.jsonl
    "$@" >hold.out 2>&1 &
    holder=$!
    wait_line "${HOLD_LOG:-hold.jsonl}" "${HOLD_RE:-\"event\":\"step\"}" 60 "$holder" ||
        { fail "$1: the holding run did not start" "$(cat hold.out)"; return 1; }
}
release() { kill -TERM "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; }

if hold "$DTRAIN" train $SLOW --log hold.jsonl; then
    expect "a second run on the same --log" \
        "dtrain train: --log hold.jsonl is in use by another dtrain train (pid $holder): one run per log; wait for it to end or stop it" \
        "" "$DTRAIN" train $F --log hold.jsonl
    release
    # the holder's log (growing meanwhile) kept its one run record: not cut, not mixed
    [ "$(grep -c '"event":"run"' hold.jsonl)" = 1 ] && head -1 hold.jsonl | grep -q '"epochs":1000,' &&
        pass "...and the holder's log stays its own" ||
        fail "...and the holder's log stays its own" "$(grep -c '"event":"run"' hold.jsonl) run records"
fi
if hold "$DTRAIN" train $SLOW --log hold.jsonl --checkpoint hk; then
    expect "a second run on the same --checkpoint DIR" \
        "dtrain train: --checkpoint hk is in use by another dtrain train (pid $holder): one run per checkpoint directory; wait for it to end or stop it" \
        "" "$DTRAIN" train $F --checkpoint hk
    release
fi
rm -rf hk
# launch's job (its descendant) takes launch's lock as its own; a plain train --resume
# beside it is refused
if hold "$DTRAIN" launch --quiet -- "$DTRAIN" train $SLOW --log hold.jsonl --checkpoint hk \
    --checkpoint-every 2steps; then
    wait_line hold.jsonl '"event":"step","rank":0,"epoch":0,"step":3' 60 "$holder" ||
        fail "launch: no step 3"
    sum=$(md5sum hk/checkpoint.safetensors 2>/dev/null)
    expect "train --resume beside a running launch on that DIR" \
        "dtrain train: --checkpoint hk is in use by another dtrain launch (pid $holder): one run per checkpoint directory; wait for it to end or stop it" \
        "" "$DTRAIN" train $SLOW --log hold.jsonl --checkpoint hk --resume hk
    release
    # launch's own job did not refuse its supervisor: it ran and wrote checkpoints
    [ -n "$sum" ] && [ "$(grep -c '"event":"run"' hold.jsonl)" = 1 ] &&
        pass "...and launch's job trains under launch's lock" ||
        fail "...and launch's job trains under launch's lock" "$(cat hold.out)"
fi
HOLD_LOG=study/run_p1_b16.jsonl.partial hold "$DTRAIN" scale --model logreg --data synthetic:mnist \
    --max-samples 256 --test-samples 32 --batch-sizes 16 --procs 1 --epochs 1000 \
    --test-delay 0:50 --out study && {
    expect "a second scale on the same --out" \
        "dtrain scale: --out study is in use by another dtrain scale (pid $holder): one study per folder; wait for it to end or stop it" \
        "" "$DTRAIN" scale --model logreg --data synthetic:mnist --max-samples 256 \
        --test-samples 32 --batch-sizes 16 --procs 1 --epochs 1 --out study
    release
}

# --- launch's lock and its job (the review of h/state): the job's train takes byte 1
# of DIR/.launch.lock beside launch's byte 0, naming launch by DTRAIN_LAUNCH_LOCK
# launch as a container's first process (pid 1) does not refuse its own job
if unshare -pf --mount-proc true 2>/dev/null; then
    unshare -pf --mount-proc "$DTRAIN" launch --quiet -- "$DTRAIN" train $F --checkpoint p1 \
        --max-steps 2 >/dev/null 2>"$tmp/p1.err"
    status=$?
    if [ $status -eq 0 ] && [ -s p1/checkpoint.safetensors ]; then
        pass "launch as pid 1 runs its job"
    else
        fail "launch as pid 1 runs its job" "status $status" "$(cat "$tmp/p1.err")"
    fi
else
    echo "no unshare -pf here: the launch-as-pid-1 case is not run"
fi
# a launch inside a launch on the same DIR says why it is refused
"$DTRAIN" launch --quiet -- "$DTRAIN" launch --quiet -- "$DTRAIN" train $F --checkpoint nl \
    --max-steps 2 >/dev/null 2>"$tmp/nl.err"
status=$?
if [ $status -ne 0 ] && grep -Eqx "dtrain launch: nl is in use by another dtrain launch \(pid [0-9]+\): one run per checkpoint directory; wait for it to end or stop it" "$tmp/nl.err" &&
    [ ! -e nl/checkpoint.safetensors ]; then
    pass "a launch inside a launch on one DIR is refused in one line"
else
    fail "a launch inside a launch on one DIR is refused in one line" "status $status" "$(cat "$tmp/nl.err")"
fi
# two trains under one launch on one DIR: the second is refused (the first holds byte 1);
# the trailing --checkpoint tw is for launch, which locks the DIR its job names
"$DTRAIN" launch --quiet -- bash -c '
    "$0" train $1 --epochs 1000 --test-delay 0:50 --log a2.jsonl --checkpoint tw &
    first=$!
    for i in $(seq 600); do
        grep -q "\"event\":\"step\"" a2.jsonl 2>/dev/null && break
        kill -0 $first 2>/dev/null || break
        sleep 0.1
    done
    "$0" train $1 --log b2.jsonl --checkpoint tw 2>b2.err
    echo $? >b2.status
    kill $first; wait $first; true' "$DTRAIN" "$F" --checkpoint tw >/dev/null 2>"$tmp/tw.err"
if [ "$(cat b2.status 2>/dev/null)" = 1 ] && [ ! -e b2.jsonl ] &&
    grep -Eqx "dtrain train: --checkpoint tw is in use by another dtrain train \(pid [0-9]+\): one run per checkpoint directory; wait for it to end or stop it" b2.err; then
    pass "two trains under one launch on one DIR: the second is refused"
else
    fail "two trains under one launch on one DIR: the second is refused" \
        "status $(cat b2.status 2>/dev/null)" "$(cat b2.err 2>/dev/null)" "$(cat "$tmp/tw.err")"
fi
# a train whose DTRAIN_LAUNCH_LOCK names another launch than the holder is refused; one
# in another pid namespace (where the kernel names the holder pid 0) is told the
# holder's pid and host from the lock file
if hold "$DTRAIN" launch --quiet -- "$DTRAIN" train $SLOW --log hold.jsonl --checkpoint hv; then
    expect_match "train naming another launch in DTRAIN_LAUNCH_LOCK beside a running launch" \
        "^dtrain train: --checkpoint hv is in use by another dtrain launch \(pid $holder\): one run per checkpoint directory; wait for it to end or stop it$" \
        "" env DTRAIN_LAUNCH_LOCK="1 $(hostname) 1" "$DTRAIN" train $F --log other.jsonl --checkpoint hv
    if unshare -pf --mount-proc true 2>/dev/null; then
        expect "train in another pid namespace beside a running launch" \
            "dtrain train: --checkpoint hv is in use by another dtrain launch (pid $holder on $(hostname), as its lock file says): one run per checkpoint directory; wait for it to end or stop it" \
            "" unshare -pf --mount-proc "$DTRAIN" train $F --log other.jsonl --checkpoint hv
    fi
    release
fi

bad_input_done
