#!/bin/bash
# The bad-input catalogue, outputs (issue 25): every file a command writes is checked
# before any work (no symlink or device, never an input nor another output), paths read
# from inside files are not trusted, NaN and diverged weights are never used or saved,
# and a study folder holding another study is not overwritten.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"

Q="--max-samples 64 --test-samples 32 --threads 1 --quiet"
"$DTRAIN" train $Q --max-steps 1 --save w.st || fail "cannot save weights"
"$DTRAIN" train $Q --max-steps 1 --checkpoint cx || fail "cannot write a checkpoint"

# --- outputs that would replace an input or each other: refused at setup, inputs intact
expect "--log onto --init's file" "dtrain train: --log w.st would overwrite --init w.st (the same file)" \
    "w.st" "$DTRAIN" train $Q --init w.st --log w.st
ln w.st hard.st
expect "--log onto a hard link of --init's file" \
    "dtrain train: --log hard.st would overwrite --init w.st (the same file)" \
    "w.st" "$DTRAIN" train $Q --init w.st --log hard.st
expect "--log onto the checkpoint being resumed" \
    "dtrain train: --log cx/checkpoint.safetensors would overwrite --resume cx/checkpoint.safetensors (the same file)" \
    "cx/checkpoint.safetensors" "$DTRAIN" train $Q --resume cx --log cx/checkpoint.safetensors
expect "--save onto the checkpoint" \
    "dtrain train: --checkpoint cx/checkpoint.safetensors and --save cx/checkpoint.safetensors are the same file (give each its own)" \
    "cx/checkpoint.safetensors" "$DTRAIN" train $Q --checkpoint cx --save cx/checkpoint.safetensors
expect "--log and --save one new file" "dtrain train: --log X and --save X are the same file (give each its own)" \
    "" "$DTRAIN" train $Q --log X --save X
[ ! -e X ] || fail "--log X --save X left X"
expect "quantize --out onto --init" "dtrain quantize: --out w.st would overwrite --init w.st (the same file)" \
    "w.st" "$DTRAIN" quantize --model lenet5 --init w.st --out w.st --calib-samples 32
mkdir -p rep
cp w.st rep/report.md
expect "quantize --report over --init" \
    "dtrain quantize: --report rep/report.md would overwrite --init rep/report.md (the same file)" \
    "rep/report.md" "$DTRAIN" quantize --model lenet5 --init rep/report.md --out q0.st --report rep --calib-samples 32
expect "eval --logits onto --init" "dtrain eval: --logits w.st would overwrite --init w.st (the same file)" \
    "w.st" "$DTRAIN" eval --model lenet5 --init w.st --logits w.st --test-samples 32
expect "bench --profile-out onto --init" \
    "dtrain bench: --profile-out w.st would overwrite --init w.st (the same file)" \
    "w.st" "$DTRAIN" bench --model lenet5 --init w.st --profile-out w.st --steps 2

# --- a fresh run does not replace another run's checkpoint (nor the same run's, started
# again without --resume: its log would be cut too); launch continues it instead
cp cx/checkpoint.safetensors cx.before
expect "a fresh run over a checkpoint" \
    "dtrain train: --checkpoint cx already holds a checkpoint: add --resume cx to continue that run, or give another folder" \
    "cx/checkpoint.safetensors" "$DTRAIN" train $Q --max-steps 2 --checkpoint cx
mkdir -p lx
"$DTRAIN" train $Q --epochs 2 --max-steps 1 --checkpoint lx --log lx.jsonl || fail "a run of 1 step"
if "$DTRAIN" launch --quiet -- "$DTRAIN" train $Q --epochs 2 --checkpoint lx --log lx.jsonl \
    2>launch.err && grep -q '"event":"resume","step":1' lx.jsonl; then pass; else
    fail "launch over a checkpoint did not continue it" "$(cat launch.err)"; fi

# --- the run log: never through a symlink, never onto a device; a full disk is an error
ln -s w.st link.jsonl
expect "--log onto a symlink" "dtrain train: --log: cannot write link.jsonl: a symbolic link (not replaced)" \
    "w.st" "$DTRAIN" train $Q --log link.jsonl
[ -L link.jsonl ] || fail "the symlink was replaced"
expect "--log onto a device" "dtrain train: --log: cannot write /dev/full: not a regular file (not replaced)" "" \
    "$DTRAIN" train $Q --log /dev/full
# A disk that fills: a 1 KiB file size limit (SIGXFSZ ignored, so the write fails with
# EFBIG) stops the run at the end of its first epoch.
expect "a run log that cannot grow" "dtrain train: cannot write big.jsonl: File too large" "" \
    bash -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' - "$DTRAIN" train $Q --epochs 100000 --log big.jsonl

# --- files named inside files: a quantized file's float weights are checked (a regular
# file of the recorded size) before they are read; eval ends by itself and says why
"$DTRAIN" quantize --model lenet5 --init w.st --out q.st --calib-samples 32 >/dev/null ||
    fail "cannot quantize"
retarget() { # in, out, float_weights path: rewrites the metadata (size record dropped)
    python3 - "$@" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["float_weights"] = sys.argv[3]
h["__metadata__"].pop("float_weights_bytes", None)
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
}
mkfifo fifo
retarget q.st qzero.st /dev/zero
retarget q.st qfifo.st "$tmp/fifo"
for f in qzero qfifo; do
    if timeout 60 "$DTRAIN" eval --model lenet5 --init $f.st --test-samples 32 >$f.out 2>&1 &&
        grep -q "not a regular file" $f.out; then
        pass
    else
        fail "eval of a quantized file naming a ${f#q} as its float weights (status $?)" "$(cat $f.out)"
    fi
done
# weights and checkpoints named on the command line: a FIFO is refused at once
expect "eval --init on a FIFO" "dtrain eval: cannot read fifo: a FIFO, not a regular file" "" \
    "$DTRAIN" eval --model lenet5 --init fifo --test-samples 32
mkdir -p fifock && mkfifo fifock/checkpoint.safetensors
expect "--resume of a FIFO checkpoint" \
    "dtrain train: cannot read fifock/checkpoint.safetensors: a FIFO, not a regular file" "" \
    "$DTRAIN" train $Q --resume fifock
cp w.st grown.st
python3 - q.st qgrown.st "$tmp/grown.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
m = h["__metadata__"]
m["float_weights"] = sys.argv[3]
m["float_weights_bytes"] = str(int(m["float_weights_bytes"]) - 1)
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
if "$DTRAIN" eval --model lenet5 --init qgrown.st --test-samples 32 >grown.out 2>&1 &&
    grep -q "have changed since" grown.out; then pass; else
    fail "a float weights file of another size than recorded was used" "$(cat grown.out)"; fi

# --- NaN weights are refused by every reader; diverged weights are never saved
nan_weights w.st nan.st
expect "eval of NaN weights" "dtrain eval: nan.st: the weights hold NaN or infinite values" \
    "nan.st" "$DTRAIN" eval --model lenet5 --init nan.st --test-samples 32
expect "quantize of NaN weights" "dtrain quantize: nan.st: the weights hold NaN or infinite values" \
    "nan.st" "$DTRAIN" quantize --model lenet5 --init nan.st --out qn.st --calib-samples 32
# lenet5 at --lr 5: the loss goes 2.3, 3.4, 4.3e3, 8.1e7, 1.3e11, 3.6e19 ... then back to chance
# with a finite epoch loss of 6.5e17; before, it exited 0 and saved the weights.
expect_match "a run that blows up and falls back to chance" \
    "^dtrain train: the weights diverged at epoch 0 step [0-9]+ on rank 0: the loss stayed above 2307[0-9.]* \(10000 times its start\) for 3 steps, now [0-9.e+]+ \(learning rate 5 too high\?\); stopping without saving$" \
    "" "$DTRAIN" train --model lenet5 --data fashion-mnist --lr 5 --lr-schedule constant --max-steps 60 --threads 1 --quiet --save d.st
[ ! -e d.st ] || fail "diverged weights were saved"

# --- scale: a folder holding another study is refused before any run, its logs intact
S="$DTRAIN scale --data synthetic:mnist --procs 1 --batch-sizes 32 --epochs 1 --max-samples 64 --test-samples 32 --threads 1 --quiet --out study"
$S --model lenet5 >/dev/null 2>&1 || fail "the first sweep"
expect "scale into another model's study" \
    "dtrain scale: --out study holds runs of other settings (run_p1_b32.jsonl: the default in the log, '--model mlp' now); give another --out, or --force to run them again" \
    "study/run_p1_b32.jsonl study/run_p1_b32.jsonl.args" $S --model mlp
expect "scale into another model's study, another batch size" \
    "dtrain scale: --out study holds another study (run_p1_b32.jsonl: the default in the log, '--model mlp' now); give another --out, or --force to run this one there" \
    "study/run_p1_b32.jsonl study/run_p1_b32.jsonl.args" $S --model mlp --batch-sizes 16
if $S --model mlp --force >/dev/null 2>&1 && grep -q '"model":"mlp"' study/run_p1_b32.jsonl; then pass; else
    fail "scale --force did not run the new study"; fi

bad_input_done
