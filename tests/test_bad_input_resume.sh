#!/bin/bash
# Bad input around --checkpoint and --resume (issue 25, items 2, 3, 8 and 9): a resume
# never cuts a log that is not its run's own, paths are recorded whole, what the
# checkpoint write needs is checked before the first step, every flag that changes
# the arithmetic must match, crafted numbers are refused, a finished run says so.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
here=$(pwd -P)
F="--max-samples 64 --test-samples 32 --threads 1 --quiet --batch-size 16"
# 4 steps an epoch (64 samples, batch 16)

steps_of() { grep -c '"event":"step"' "$1"; }

# --- item 2: a resume never cuts a log that is not its run's own
"$DTRAIN" train $F --checkpoint ra --log L.jsonl --max-steps 3 || echo "FAIL: run A"
cp L.jsonl A.jsonl
"$DTRAIN" train $F --log L.jsonl || echo "FAIL: run B" # an unrelated run takes the name
off=$(getmeta ra/checkpoint.safetensors log_offset 2>/dev/null || echo "?")
expect "resume onto another run's log of the same name" \
    "dtrain train: --resume ra: its run log $here/L.jsonl differs from the checkpoint's in its first $off bytes: another run wrote it? (give --log NEW to start a new log)" \
    "L.jsonl ra/checkpoint.safetensors" "$DTRAIN" train $F --resume ra --log L.jsonl
mkdir -p elsewhere
cp A.jsonl elsewhere/L.jsonl
expect "resume from another folder, --log naming that folder's file" \
    "dtrain train: --resume ../ra: --log L.jsonl is not the checkpoint's run log ($here/L.jsonl); give that one to continue it, or a file that does not exist to start a new log" \
    "elsewhere/L.jsonl" bash -c 'cd elsewhere && exec "$0" train $1 --resume ../ra --log L.jsonl' \
    "$DTRAIN" "$F"
expect "resume without --log when the run had one" \
    "dtrain train: --resume ra: the run goes on in its log $here/L.jsonl; give --log with that path to continue it, or --log NEW to start a new log" \
    "L.jsonl" "$DTRAIN" train $F --resume ra
rm L.jsonl
expect "resume when the run's log is gone" \
    "dtrain train: --resume ra: its run log $here/L.jsonl is gone; give --log NEW to start a new log, or restore it" \
    "" "$DTRAIN" train $F --resume ra --log L.jsonl
cp A.jsonl L.jsonl

# --- item 3: a --log path over 255 bytes is recorded whole and continued
long=$(printf 'd%.0s' $(seq 100))/$(printf 'e%.0s' $(seq 100))/$(printf 'f%.0s' $(seq 100))
mkdir -p "$long"
"$DTRAIN" train $F --checkpoint rl --log "$long/L.jsonl" --max-steps 3 &&
    "$DTRAIN" train $F --resume rl --log "$long/L.jsonl" 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ "$(steps_of "$long/L.jsonl")" -eq 4 ] &&
    grep -q '"event":"resume","step":3,' "$long/L.jsonl"; then
    pass "a 300-byte --log path: the log goes on after the resume"
else
    fail "a 300-byte --log path: the log goes on after the resume" "status $status, \
$(steps_of "$long/L.jsonl") step records (want 4)" "$(cat "$tmp/err")"
fi

# --- item 8: what the checkpoint needs, checked before the first step
mkdir -p cs
echo keep >target
ln -sf ../target cs/checkpoint.safetensors
"$DTRAIN" train $F --checkpoint cs --log cs.jsonl >/dev/null 2>"$tmp/err"
status=$?
if [ $status -ne 0 ] && [ "$(grep -c '^dtrain' "$tmp/err")" -eq 1 ] && [ ! -s cs.jsonl ] &&
    [ "$(cat target)" = keep ]; then
    pass "a symlinked DIR/checkpoint.safetensors is refused before training"
else
    fail "a symlinked DIR/checkpoint.safetensors is refused before training" \
        "status $status, log $(wc -c <cs.jsonl 2>/dev/null) bytes" "$(cat "$tmp/err")"
fi
longdata=$(printf 'g%.0s' $(seq 130))/$(printf 'h%.0s' $(seq 130))
mkdir -p "$longdata"
ln -sf /usr/share/datasets/fashion-mnist/* "$longdata/"
ok_case "a 270-byte --data path: the epoch's checkpoint is written and resumes" \
    bash -c '"$0" train $1 --data "fashion-mnist:$2" --checkpoint cd --epochs 2 --max-steps 4 &&
        "$0" train $1 --data "fashion-mnist:$2" --resume cd --epochs 2' "$DTRAIN" "$F" "$longdata"

# --- item 9: flags that change the arithmetic, crafted numbers, a finished run
"$DTRAIN" train $F --checkpoint rp --max-steps 3 || echo "FAIL: run for --precision"
craft() { # KEY VALUE: a copy of rp with one metadata value replaced, in ck
    rm -rf ck
    cp -r rp ck
    setmeta ck/checkpoint.safetensors "$1" "$2"
}
# On a CPU without bf16 (or under ONEDNN_MAX_CPU_ISA=AVX2) --precision bf16 is refused
# before the checkpoint is read: the mismatch both ways round, the CPU's line for bf16.
isa=$("$DTRAIN" bench --model logreg --steps 1 --threads 1 | sed -n 's/.*"isa":"\([^"]*\)".*/\1/p')
case $isa in
avx512_core_bf16 | avx512_core_amx)
    expect "an fp32 checkpoint resumed under --precision bf16" \
        "dtrain train: --resume rp: the checkpoint was written with the default --precision, this run has --precision bf16 (resume with the same flags)" \
        "rp/checkpoint.safetensors" "$DTRAIN" train $F --resume rp --precision bf16
    ;;
*)
    expect_match "an fp32 checkpoint resumed under --precision bf16, on a CPU without bf16 ($isa)" \
        "^dtrain train: bf16 precision: this CPU \($isa(; [A-Z_]+=[A-Za-z0-9_]+)?\) has neither AVX512-BF16 nor AMX \(oneDNN would emulate it slowly\); use --precision fp32$" \
        "rp/checkpoint.safetensors" "$DTRAIN" train $F --resume rp --precision bf16
    ;;
esac
craft flag.precision bf16
expect "a bf16 checkpoint resumed with the default --precision" \
    "dtrain train: --resume ck: the checkpoint was written with --precision bf16, this run has the default --precision (resume with the same flags)" \
    "ck/checkpoint.safetensors" "$DTRAIN" train $F --resume ck
# crafted FIELD VALUE "what" "exact line": the checkpoint with FIELD set to VALUE is
# refused with that line and left as it was
crafted() {
    craft "$1" "$2"
    expect "$3" "$4" "ck/checkpoint.safetensors" "$DTRAIN" train $F --resume ck
}
crafted epoch_pos 100000 "crafted epoch_pos past the epoch" \
    "dtrain train: --resume ck: the checkpoint's epoch_pos 100000 is past its epoch (64 samples, 64 per worker of 1)"
crafted step 9223372036854775807 "crafted step = LONG_MAX" \
    "dtrain train: --resume ck: the checkpoint's step 9223372036854775807 does not fit epoch 0 position 48 (at most 4 steps an epoch: 1..3)"
crafted opt_steps 9223372036854775807 "crafted opt_steps = LONG_MAX" \
    "dtrain train: --resume ck: the checkpoint's opt_steps 9223372036854775807 is more than one update per worker and step (step 3, workers 1)"
crafted epoch 2147483648 "crafted epoch past int" \
    "dtrain train: --resume ck: the checkpoint's epoch is '2147483648' (want 0..2147483647)"
crafted log "/$(printf 'x%.0s' $(seq 5000))" "a metadata value longer than the reader holds is refused, not cut" \
    "dtrain train: ck/checkpoint.safetensors: metadata entry log is too long (keys up to 63 bytes, values up to 4199)"
"$DTRAIN" train $F --checkpoint rf --log F.jsonl || echo "FAIL: run to the end"
sum=$(md5sum F.jsonl rf/checkpoint.safetensors)
"$DTRAIN" train $F --resume rf --log F.jsonl >/dev/null 2>"$tmp/err"
status=$?
if [ $status -eq 0 ] && [ "$(cat "$tmp/err")" = \
    "dtrain train: --resume rf: the run already finished at step 4" ] &&
    [ "$(md5sum F.jsonl rf/checkpoint.safetensors)" = "$sum" ]; then
    pass "resuming a finished run says so, exit 0, log untouched"
else
    fail "resuming a finished run says so, exit 0, log untouched" "status $status" \
        "$(cat "$tmp/err")"
fi

bad_input_done
