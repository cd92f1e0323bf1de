#!/bin/bash
# The bad-input catalogue, the files a command reads (issue 40): the --model file, its
# external-data files, the data's files and the float weights a quantized file names
# are inputs no output may replace; a FIFO in place of a data file is refused at once;
# those float weights are bounded by the network's size (a file past it is a note,
# never read), not by the file naming them; control characters in a file's metadata
# are refused in one line; a 0-class head is refused; scale keeps no foreign log under
# a config's name (a 4701151 record's 63-byte model prefix is not foreign); simulate
# --out never replaces a study's plots; a log without valid times gives n/a, not a
# speed-up; the plots circle busy configs (no stale busy points); a long ONNX or data
# path is named whole (profile, run log, quantized file, study report).
set -u
DTRAIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"

Q="--max-samples 64 --test-samples 32 --threads 1 --quiet"
cp "$SRC/tests/fixtures/onnx/lenet5.onnx" m.onnx
mkdir -p fm cf
cp /usr/share/datasets/fashion-mnist/*.gz fm/ 2>/dev/null || {
    echo "skip: Debian's dataset-fashion-mnist is not installed"
    exit 77
}
# a CIFAR-10 folder in the official format (labels 0..9, random pixels)
python3 - <<'PY'
import os
rec = 3073
for name, n in [("data_batch_%d.bin" % i, 20) for i in range(1, 6)] + [("test_batch.bin", 20)]:
    with open(os.path.join("cf", name), "wb") as f:
        for k in range(n):
            f.write(bytes([k % 10]) + os.urandom(rec - 1))
PY
"$DTRAIN" train $Q --max-steps 1 --save w.st || fail "cannot save weights"
cp w.st w.orig

# --- 1. the model file and the data's files are inputs: no output replaces them
expect "--log onto the ONNX model" "dtrain train: --log m.onnx would overwrite --model m.onnx (the same file)" \
    "m.onnx" "$DTRAIN" train --model m.onnx $Q --max-steps 1 --log m.onnx
expect "--save onto the ONNX model" "dtrain train: --save m.onnx would overwrite --model m.onnx (the same file)" \
    "m.onnx" "$DTRAIN" train --model m.onnx $Q --max-steps 1 --save m.onnx
expect "--log onto a Fashion-MNIST file" \
    "dtrain train: --log fm/train-labels-idx1-ubyte.gz would overwrite --data fm/train-labels-idx1-ubyte.gz (the same file)" \
    "fm/train-labels-idx1-ubyte.gz" "$DTRAIN" train --data fashion-mnist:fm $Q --max-steps 1 --log fm/train-labels-idx1-ubyte.gz
expect "--save onto a Fashion-MNIST file" \
    "dtrain train: --save fm/t10k-images-idx3-ubyte.gz would overwrite --data fm/t10k-images-idx3-ubyte.gz (the same file)" \
    "fm/t10k-images-idx3-ubyte.gz" "$DTRAIN" train --data fashion-mnist:fm $Q --max-steps 1 --save fm/t10k-images-idx3-ubyte.gz
expect "--save onto the raw name a .gz data file would be shadowed by" \
    "dtrain train: --save fm/train-images-idx3-ubyte would overwrite --data fm/train-images-idx3-ubyte (the same file)" \
    "fm/train-images-idx3-ubyte.gz" "$DTRAIN" train --data fashion-mnist:fm $Q --max-steps 1 --save fm/train-images-idx3-ubyte
if [ ! -e fm/train-images-idx3-ubyte ]; then pass "no raw file shadows the .gz data file"; else fail "a raw file now shadows the .gz data file"; fi
expect "--save onto a CIFAR-10 batch" \
    "dtrain train: --save cf/data_batch_3.bin would overwrite --data cf/data_batch_3.bin (the same file)" \
    "cf/data_batch_3.bin" "$DTRAIN" train --model lenet_cifar --data cifar10:cf $Q --max-steps 1 --save cf/data_batch_3.bin
ln -s cf cflink
expect "--log onto the CIFAR-10 test batch through a symlinked folder" \
    "dtrain train: --log cflink/test_batch.bin would overwrite --data cf/test_batch.bin (the same file)" \
    "cf/test_batch.bin" "$DTRAIN" train --model lenet_cifar --data cifar10:cf $Q --max-steps 1 --log cflink/test_batch.bin
expect "eval --logits onto the ONNX model" "dtrain eval: --logits m.onnx would overwrite --model m.onnx (the same file)" \
    "m.onnx" "$DTRAIN" eval --model m.onnx --init w.st --logits m.onnx --test-samples 32
expect "eval --logits onto a data file" \
    "dtrain eval: --logits fm/t10k-labels-idx1-ubyte.gz would overwrite --data fm/t10k-labels-idx1-ubyte.gz (the same file)" \
    "fm/t10k-labels-idx1-ubyte.gz" "$DTRAIN" eval --model lenet5 --data fashion-mnist:fm --init w.st --logits fm/t10k-labels-idx1-ubyte.gz --test-samples 32
"$DTRAIN" quantize --model lenet5 --init w.st --out wq.st --calib-samples 32 >/dev/null ||
    fail "cannot quantize w.st"
expect_match "eval --logits onto the float weights a quantized file names (and eval reads)" \
    "^dtrain eval: --logits w.st would overwrite --init's float weights /.*/w.st \(the same file\)$" \
    "w.st" "$DTRAIN" eval --model lenet5 --init wq.st --logits w.st --test-samples 32
expect "quantize --out onto the ONNX model" "dtrain quantize: --out m.onnx would overwrite --model m.onnx (the same file)" \
    "m.onnx" "$DTRAIN" quantize --model m.onnx --init w.st --out m.onnx --calib-samples 32
expect "quantize --out onto a data file" \
    "dtrain quantize: --out fm/train-images-idx3-ubyte.gz would overwrite --data fm/train-images-idx3-ubyte.gz (the same file)" \
    "fm/train-images-idx3-ubyte.gz" "$DTRAIN" quantize --model lenet5 --data fashion-mnist:fm --init w.st --out fm/train-images-idx3-ubyte.gz --calib-samples 32
expect "bench --profile-out onto the ONNX model" \
    "dtrain bench: --profile-out m.onnx would overwrite --model m.onnx (the same file)" \
    "m.onnx" "$DTRAIN" bench --model m.onnx --profile-out m.onnx --steps 2 --threads 1
expect "bench --profile-out onto a data file" \
    "dtrain bench: --profile-out cf/data_batch_1.bin would overwrite --data cf/data_batch_1.bin (the same file)" \
    "cf/data_batch_1.bin" "$DTRAIN" bench --model lenet_cifar --data cifar10:cf --profile-out cf/data_batch_1.bin --steps 2 --threads 1
if cmp -s m.onnx "$SRC/tests/fixtures/onnx/lenet5.onnx"; then pass "the model file is unchanged after every refused output"; else fail "the model file changed"; fi
# the cases below start from the model and the weights whole
cp "$SRC/tests/fixtures/onnx/lenet5.onnx" m.onnx && cp w.orig w.st

# --- 1b. the external-data files an ONNX model names are inputs too (a Flatten + Gemm
# on CIFAR-10's shape whose fc.weight lives in good.bin)
mkdir -p ext
/usr/bin/python3 - <<'PY' || fail "cannot write an ONNX file with external data"
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
W = numpy_helper.from_array(np.zeros((10, 3072), np.float32), "fc.weight")
open("ext/good.bin", "wb").write(W.raw_data)
W.ClearField("raw_data")
W.data_location = TensorProto.EXTERNAL
e = W.external_data.add()
e.key, e.value = "location", "good.bin"
B = numpy_helper.from_array(np.zeros((10,), np.float32), "fc.bias")
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"], axis=1),
                       helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], transB=1)],
                      "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], [W, B])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "ext/ext.onnx")
PY
"$DTRAIN" train --model ext/ext.onnx --data synthetic:cifar10 $Q --max-steps 1 --save ext.st ||
    fail "cannot train the external-data model"
expect "--log onto the model's external data" \
    "dtrain train: --log ext/good.bin would overwrite --model's external data ext/good.bin (the same file)" \
    "ext/good.bin" "$DTRAIN" train --model ext/ext.onnx --data synthetic:cifar10 $Q --max-steps 1 --log ext/good.bin
expect "--save onto the model's external data" \
    "dtrain train: --save ext/good.bin would overwrite --model's external data ext/good.bin (the same file)" \
    "ext/good.bin" "$DTRAIN" train --model ext/ext.onnx --data synthetic:cifar10 $Q --max-steps 1 --save ext/good.bin
expect "eval --logits onto the model's external data" \
    "dtrain eval: --logits ext/good.bin would overwrite --model's external data ext/good.bin (the same file)" \
    "ext/good.bin" "$DTRAIN" eval --model ext/ext.onnx --data synthetic:cifar10 --init ext.st --logits ext/good.bin --test-samples 32
expect "quantize --out onto the model's external data" \
    "dtrain quantize: --out ext/good.bin would overwrite --model's external data ext/good.bin (the same file)" \
    "ext/good.bin" "$DTRAIN" quantize --model ext/ext.onnx --data synthetic:cifar10 --init ext.st --out ext/good.bin --calib-samples 32
expect "bench --profile-out onto the model's external data" \
    "dtrain bench: --profile-out ext/good.bin would overwrite --model's external data ext/good.bin (the same file)" \
    "ext/good.bin" "$DTRAIN" bench --model ext/ext.onnx --data synthetic:cifar10 --profile-out ext/good.bin --steps 2 --threads 1

# --- 2. a FIFO in place of a data file is refused at once, never waited on
mkdir -p ff fc
cp fm/* ff/ && rm ff/train-images-idx3-ubyte.gz && mkfifo ff/train-images-idx3-ubyte.gz
expect "a FIFO as Fashion-MNIST's training images" \
    "dtrain train: cannot read ff/train-images-idx3-ubyte.gz: a FIFO, not a regular file" "" \
    "$DTRAIN" train --data fashion-mnist:ff $Q --max-steps 1
cp cf/* fc/ && rm fc/test_batch.bin && mkfifo fc/test_batch.bin
expect "a FIFO as CIFAR-10's test batch" \
    "dtrain train: cannot read fc/test_batch.bin: a FIFO, not a regular file" "" \
    "$DTRAIN" train --model lenet_cifar --data cifar10:fc $Q --max-steps 1
expect "eval on a FIFO data file" \
    "dtrain eval: cannot read fc/test_batch.bin: a FIFO, not a regular file" "" \
    "$DTRAIN" eval --model lenet_cifar --data cifar10:fc --init w.st --test-samples 32

# --- 3. the float weights a quantized file names: bounded by the network's size
"$DTRAIN" quantize --model lenet5 --init w.st --out q.st --calib-samples 32 >/dev/null ||
    fail "cannot quantize"
truncate -s 20G big.st # sparse: hashing it all took 83 s
python3 - q.st qbig.st "$tmp/big.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["float_weights"] = sys.argv[3]
h["__metadata__"]["float_weights_bytes"] = str(20 << 30)
j = json.dumps(h).encode()
j += b" " * (-len(j) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
# the int8 eval runs with a note; the 20 GB are never read (30 s: far under the hash's
# time, far over an eval's even beside a busy loop)
if timeout 30 "$DTRAIN" eval --model lenet5 --init qbig.st --test-samples 32 >big.out 2>big.err &&
    grep -qE "^no comparison with float32: its float weights $tmp/big.st are not lenet5's size: 21474836480 bytes, not [0-9]+ to [0-9]+; not read \(give --compare FILE\)$" big.out &&
    grep -q "^evaluated lenet5 int8" big.out; then
    pass "eval of a quantized file naming a 20 GB file as its float weights"; else
    fail "eval of a quantized file naming a 20 GB file as its float weights" "$(cat big.out big.err)"; fi
rm -f big.st

# control characters in a file's metadata are refused in one line (a newline in
# int8_range split the message that names it)
python3 - q.st qnl.st qkey.st <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
for out, edit in ((sys.argv[2], lambda m: m.update(int8_range="full\nreduced")),
                  (sys.argv[3], lambda m: m.update({"x\ny": "1"}))):
    h = json.loads(b[8:8 + n])
    edit(h["__metadata__"])
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    open(out, "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
expect "a newline in a quantized file's int8_range" \
    "dtrain eval: qnl.st: metadata entry int8_range holds a control character (byte 0x0a)" \
    "" "$DTRAIN" eval --model lenet5 --init qnl.st --test-samples 32
expect "a newline in a metadata key" \
    "dtrain eval: qkey.st: metadata entry x?y holds a control character (byte 0x0a)" \
    "" "$DTRAIN" eval --model lenet5 --init qkey.st --test-samples 32
mkdir -p "dnl
x" && cp -r fm/* "dnl
x/"
expect "a newline in a --data path a checkpoint would record" \
    "dtrain train: the checkpoint: metadata entry flag.data holds a control character (byte 0x0a)" \
    "" "$DTRAIN" train --data "fashion-mnist:dnl
x" $Q --max-steps 1 --checkpoint ck7

cp m.onnx "m
nl.onnx"
expect "a newline in the --model path --save would record" \
    "dtrain train: nl.st: metadata entry model holds a control character (byte 0x0a)" \
    "" "$DTRAIN" train --model "m
nl.onnx" $Q --max-steps 1 --save nl.st
if [ ! -e nl.st ]; then pass "no weights file written for the path with a newline"; else
    fail "the weights were written with a newline in their metadata"; fi

# --- 8. a head of 0 classes is refused where the model is made
/usr/bin/python3 - <<'PY' || fail "cannot write a 0-class ONNX file"
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
W = numpy_helper.from_array(np.zeros((0, 784), np.float32), "fc.weight")
B = numpy_helper.from_array(np.zeros((0,), np.float32), "fc.bias")
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"], axis=1),
                       helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], transB=1)],
                      "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 0])], [W, B])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "zero.onnx")
PY
expect "bench of a 0-class ONNX head" "dtrain bench: model zero.onnx outputs 0 classes (a classifier needs at least 1)" \
    "" "$DTRAIN" bench --model zero.onnx --steps 3 --threads 1
expect "models of a 0-class ONNX head" "dtrain models: model zero.onnx outputs 0 classes (a classifier needs at least 1)" \
    "" "$DTRAIN" models zero.onnx
expect "bench --infer of a 0-class ONNX head" "dtrain bench: model zero.onnx outputs 0 classes (a classifier needs at least 1)" \
    "" "$DTRAIN" bench --model zero.onnx --infer --steps 3 --threads 1

# --- 5. simulate --out never writes into a scaling study's folder (its plots have the
# names of the simulated ones), nor over the profile it reads
printf 'procs,batch_size,t_train\n1,32,10\n2,32,6\n' >times.csv
"$DTRAIN" report --times times.csv --out study >/dev/null 2>&1 || fail "report --times"
"$DTRAIN" bench --model lenet5 --steps 3 --threads 1 --profile-out prof.json >/dev/null ||
    fail "bench --profile-out"
files=$(cd study && ls | sed 's|^|study/|' | tr '\n' ' ')
expect "simulate --out into a study's folder" \
    "dtrain simulate: --out study holds a scaling study (runs.csv): the simulated plots would replace its own; give another --out" \
    "$files" "$DTRAIN" simulate --profile prof.json --link 10gbit --workers 1,2 --out study
if [ ! -e study/simulate.csv ]; then pass "simulate wrote nothing into the study's folder"; else fail "simulate wrote into the study's folder"; fi
mkdir -p lonely && cp study/*.png lonely/ 2>/dev/null; cp times.csv lonely/report.md
expect "simulate --out into a folder with a study's report" \
    "dtrain simulate: --out lonely holds a scaling study (report.md): the simulated plots would replace its own; give another --out" \
    "lonely/report.md" "$DTRAIN" simulate --profile prof.json --link 10gbit --workers 1,2 --out lonely
"$DTRAIN" simulate --profile prof.json --link 10gbit --workers 1,2 --out sim >/dev/null 2>&1 ||
    fail "simulate --out a new folder"
ok_case "simulate --out its own folder again" \
    "$DTRAIN" simulate --profile prof.json --link 10gbit --workers 1,2 --out sim
cp prof.json sim/split.dat
expect "simulate --out over the --profile read" \
    "dtrain simulate: sim/split.dat would be overwritten by the report's sim/split.dat (give --out DIR)" \
    "sim/split.dat" "$DTRAIN" simulate --profile sim/split.dat --link 10gbit --workers 1,2 --out sim

# --- 4. scale keeps a config's log only if its run record is that config's: a log of
# another run copied over the name (its .args left as they were) is not reported
S="$DTRAIN scale --data synthetic:mnist --procs 1 --batch-sizes 32 --epochs 1 --max-samples 64 --test-samples 32 --threads 1 --quiet --out st4"
$S --model logreg >/dev/null 2>&1 || fail "the first sweep"
"$DTRAIN" train --model mlp --data synthetic:mnist --batch-size 32 --epochs 1 $Q --log mlp.jsonl ||
    fail "a run of mlp"
cp mlp.jsonl st4/run_p1_b32.jsonl
expect "scale over a foreign log under a config's name" \
    "dtrain scale: --out st4 holds runs of other settings (run_p1_b32.jsonl: its run record says model mlp, this config logreg); give another --out, or --force to run them again" \
    "st4/run_p1_b32.jsonl st4/report.md" $S --model logreg
"$DTRAIN" train --model logreg --data synthetic:mnist --batch-size 16 --epochs 1 $Q --log b16.jsonl ||
    fail "a run at batch 16"
cp b16.jsonl st4/run_p1_b32.jsonl
expect "scale over a log of another batch size under a config's name" \
    "dtrain scale: --out st4 holds runs of other settings (run_p1_b32.jsonl: its run record says batch size 16, this config 32); give another --out, or --force to run them again" \
    "st4/run_p1_b32.jsonl st4/report.md" $S --model logreg
if $S --model logreg --force >/dev/null 2>&1 && grep -q '"model":"logreg","params":7850,"procs":1,"mode":"single","batch_size":32' st4/run_p1_b32.jsonl; then
    pass "scale --force measures the config again"; else fail "scale --force did not measure the config again"; fi

# Studies made of one real run's log, rewritten as the log of 1 or 2 processes with the
# times and load under test (the report reads these, not how the log came about)
twoproc() { # in, out, procs, t_train and t_epoch ("" drops them), other processes' cores
    python3 - "$@" <<'PY'
import json, sys
src, out, procs, t_train, t_epoch, other = sys.argv[1:7]
lines = []
for line in open(src):
    d = json.loads(line)
    if d["event"] == "run":
        d["procs"] = d["workers"] = int(procs)
    if d["event"] == "epoch":
        for k, v in (("t_train", t_train), ("t_epoch", t_epoch)):
            if v == "":
                d.pop(k, None)
            else:
                d[k] = float(v)
    lines.append(json.dumps(d, separators=(",", ":")))
lines.append(json.dumps({"event": "load", "wall_s": 1, "machine_cores": 1, "run_cores": 1,
                         "other_cores": float(other), "cores": 2}, separators=(",", ":")))
open(out, "w").write("\n".join(lines) + "\n")
PY
}
"$DTRAIN" train --model logreg --data synthetic:mnist --batch-size 32 --epochs 1 $Q --log one.jsonl ||
    fail "a run for the studies"

# --- 6. a log without valid times: speed-ups n/a and a note naming it, never 0.00
mkdir -p st6
twoproc one.jsonl st6/run_p1_b32.jsonl 1 "" "" 0
twoproc one.jsonl st6/run_p2_b32.jsonl 2 0.6 0.7 0
"$DTRAIN" report st6 --out rep6 >/dev/null 2>&1 || fail "report of a log without times"
if grep -A4 'Strong scaling speed-up T(1)/T(N) of the training time' rep6/report.md | grep -q '^| 32 | n/a | n/a |$' &&
    grep -A4 '^Strong scaling efficiency' rep6/report.md | grep -q '^| 32 | n/a | n/a |$' &&
    grep -q 'st6/run_p1_b32.jsonl: its epoch record has no valid t_train and t_epoch (missing or not positive): its speed-ups are n/a' rep6/report.md
then pass "a log without times gives n/a speed-ups with a note"; else fail "a log without times gave speed-ups" "$(grep -A4 'Strong scaling' rep6/report.md)"; fi
mkdir -p st6n
twoproc one.jsonl st6n/run_p1_b32.jsonl 1 1.2 1.3 0
twoproc one.jsonl st6n/run_p2_b32.jsonl 2 -0.5 -0.5 0
"$DTRAIN" report st6n --out rep6n >/dev/null 2>&1 || fail "report of a log with negative times"
if grep -A4 'Strong scaling speed-up T(1)/T(N) of the training time' rep6n/report.md | grep -q '^| 32 | 1.00 | n/a |$' &&
    grep -q 'st6n/run_p2_b32.jsonl: its epoch record has no valid t_train' rep6n/report.md
then pass "a log with negative times gives n/a with a note"; else fail "a log with negative times gave speed-ups" "$(grep -A4 'Strong scaling' rep6n/report.md)"; fi

# --- 9. the plots mark busy configs as the tables do: circled, "busy (re-run)"
mkdir -p st9 st9q
twoproc one.jsonl st9/run_p1_b32.jsonl 1 1.2 1.3 0
twoproc one.jsonl st9/run_p2_b32.jsonl 2 0.8 0.9 1.5
cp st9/run_p1_b32.jsonl st9q/
twoproc one.jsonl st9q/run_p2_b32.jsonl 2 0.8 0.9 0
"$DTRAIN" report st9 --out rep9 >/dev/null 2>&1 || fail "report of a busy study"
"$DTRAIN" report st9q --out rep9q >/dev/null 2>&1 || fail "report of a quiet study"
if [ "$(cat rep9/speedup_busy.dat 2>/dev/null)" = "2 1.5" ] &&
    [ "$(cat rep9/epoch_busy.dat 2>/dev/null)" = "32 0.9" ] &&
    [ "$(grep -c "'speedup_busy.dat' using 1:2 with points pt 6 .* title 'busy (re-run)'" rep9/plots.gp)" = 2 ] &&
    [ "$(grep -c "'epoch_busy.dat' using 1:2 with points pt 6 .* title 'busy (re-run)'" rep9/plots.gp)" = 2 ] &&
    [ ! -e rep9q/speedup_busy.dat ] && ! grep -q busy rep9q/plots.gp; then pass "the plots circle the busy config, and only it"; else
    fail "the plots do not mark the busy config" "$(grep -n busy rep9/plots.gp rep9q/plots.gp)"; fi

# a report of one process count into that folder leaves no busy points of the last one
mkdir -p st9one && cp st9/run_p1_b32.jsonl st9one/
"$DTRAIN" report st9one --out rep9 >/dev/null 2>&1 || fail "report of one process count"
if [ ! -e rep9/speedup_busy.dat ]; then pass "no stale speedup_busy.dat after a one-count report"; else
    fail "a stale speedup_busy.dat stayed after a report of one process count"; fi

# --- 7. a long ONNX path is named whole: profiles, run logs, quantized files
mkdir -p models_exported_by_a_colleague
L=models_exported_by_a_colleague/lenet5_fashion_mnist_export_2026_11_27_v2.onnx
L3=models_exported_by_a_colleague/lenet5_fashion_mnist_export_2026_11_27_v3.onnx
cp m.onnx $L && cp m.onnx $L3
"$DTRAIN" bench --model $L --steps 3 --threads 1 --profile-out long.json >/dev/null || fail "bench of $L"
if python3 -c 'import json, sys; sys.exit(json.load(open("long.json"))["model"] != sys.argv[1])' $L; then
    pass "the profile names the long model path whole"; else fail "the profile cut the model's path" "$(head -c 200 long.json)"; fi
ok_case "simulate --model of a long path with its profile" \
    "$DTRAIN" simulate --profile long.json --model $L --link 10gbit --workers 1,2
expect "simulate --model of another file sharing the first 60 characters" \
    "dtrain simulate: --model $L3, but long.json is a profile of $L" \
    "" "$DTRAIN" simulate --profile long.json --model $L3 --link 10gbit --workers 1,2
# a study that 4701151 began on a long path resumes: its run records kept the model's
# first 63 bytes (char[64]); such a prefix of the config's model is that config's
S7="$DTRAIN scale --model $L --data synthetic:mnist --procs 1 --batch-sizes 32 --epochs 1 --max-samples 64 --test-samples 32 --threads 1 --quiet --out st7"
$S7 >/dev/null 2>&1 || fail "the sweep of a long path"
python3 - st7/run_p1_b32.jsonl <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for d in lines:
    if d["event"] == "run":
        d["model"] = d["model"][:63]
    if d["event"] == "load":  # quiet: a busy run would be measured again
        d["other_cores"] = 0
open(sys.argv[1], "w").write("".join(json.dumps(d, separators=(",", ":")) + "\n" for d in lines))
PY
cp st7/run_p1_b32.jsonl st7.kept
if $S7 >st7.out 2>&1 && cmp -s st7/run_p1_b32.jsonl st7.kept; then
    pass "scale resumes a study whose run record cut the long model path to 63 bytes"; else
    fail "scale refused (or re-ran) a study whose run record cut the model path to 63 bytes" "$(cat st7.out)"; fi
# a long --data path is named whole in the study's report (it was cut to 127 bytes)
D7=fashion_mnist_as_downloaded_by_a_colleague_from_the_shared_drive_on_2026_11_27/unpacked_into_this_folder_by_the_extractor_tool_v2
mkdir -p $D7 && cp fm/* $D7/
"$DTRAIN" scale --model logreg --data fashion-mnist:$D7 --procs 1 --batch-sizes 32 --epochs 1 \
    --max-samples 64 --test-samples 32 --threads 1 --quiet --out st7d >/dev/null 2>&1 ||
    fail "the sweep of a long --data path"
if grep -qx "# Scaling study: logreg on fashion-mnist:$D7" st7d/report.md; then
    pass "a long --data path is named whole in the study's report"; else
    fail "the study's report cut the --data path" "$(head -1 st7d/report.md)"; fi
mkdir -p 'a "quoted" folder' && cp m.onnx 'a "quoted" folder/m.onnx'
"$DTRAIN" bench --model 'a "quoted" folder/m.onnx' --steps 3 --threads 1 --profile-out quoted.json >/dev/null ||
    fail "bench of a path with quotes"
ok_case "a profile of a path with quotes reads back" \
    "$DTRAIN" simulate --profile quoted.json --model 'a "quoted" folder/m.onnx' --link 10gbit --workers 1,2
"$DTRAIN" train --model $L $Q --max-steps 2 --log long.jsonl --save long.st >/dev/null || fail "train of $L"
if grep -q "\"event\":\"run\",\"model\":\"$L\"" long.jsonl; then pass "the run log names the long model path whole"; else
    fail "the run log cut the model's path" "$(grep -o '"model":"[^"]*"' long.jsonl)"; fi
"$DTRAIN" quantize --model $L --init long.st --out longq.st --calib-samples 32 >/dev/null ||
    fail "quantize of $L"
ok_case "eval of a quantized long path" "$DTRAIN" eval --model $L --init longq.st --test-samples 32

bad_input_done
