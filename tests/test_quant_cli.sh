#!/bin/sh
# dtrain quantize and eval of quantized files from the command line: a quantized lenet5
# with its report, evaluated on both int8 engines (same figures) against its float
# weights; and bad input - each one stderr line, a non-zero exit, no file left behind.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"

# expect "description" "expected fragment" command...: one line naming the problem
expect() {
    what=$1 fragment=$2
    shift 2
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$status" -ne 0 ] && [ "$status" -lt 124 ] && [ "$lines" -eq 1 ] &&
        grep -qF -- "$fragment" "$tmp/err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what (status $status, $lines stderr lines):"
        cat "$tmp/err"
    fi
}
# no_file "description" path: nothing at path, nor a temporary file beside it
no_file() {
    check "$1" sh -c "! ls '$2' '$2'.tmp.* >/dev/null 2>&1"
}

"$DTRAIN" train --model lenet5 --max-samples 2000 --test-samples 500 --epochs 1 --threads 2 \
    --save "$tmp/w.safetensors" --quiet
check "train saves weights" test -s "$tmp/w.safetensors"

"$DTRAIN" quantize --model lenet5 --init "$tmp/w.safetensors" --out "$tmp/q.safetensors" \
    --calib-samples 128 --calib-method percentile:99.99 --threads 2 --report "$tmp/reports/lenet5" \
    >"$tmp/quantize.txt"
check "quantize writes the file" test -s "$tmp/q.safetensors"
check "quantize says what it did" grep -q "symmetric scheme, per-channel weights, percentile:99.99 calibration on 128 images" "$tmp/quantize.txt"
for f in report.md layers.csv weights.png weights.svg activations.png activations.svg histograms.gp; do
    check "report has $f" test -s "$tmp/reports/lenet5/$f"
done
# the histograms' axes say what they plot: the float value binned, the count per bin
for label in "xlabel 'weight value (float, BatchNorm folded in)'" "ylabel 'weights per bin'" \
    "xlabel 'activation value (float)'" "ylabel 'values per bin'"; do
    check "histograms.gp labels an axis: $label" grep -qx "set $label" "$tmp/reports/lenet5/histograms.gp"
done
check "gnuplot's empty error file is not left behind" test ! -e "$tmp/reports/lenet5/gnuplot.err"
check "report table has every layer" sh -c "grep -c '^| \(input\|conv1\|conv2\|fc1\|fc2\|fc3\) |' '$tmp/reports/lenet5/report.md' | grep -qx 6"

# The default --calib-method auto: every candidate scored on the held-out half, the
# winner named, written into the file and calibrated on all the images.
"$DTRAIN" quantize --model lenet5 --init "$tmp/w.safetensors" --out "$tmp/qa.safetensors" \
    --calib-samples 128 --threads 2 >"$tmp/auto.txt"
check "auto scores each candidate on the held-out half" grep -q "^calibration auto (64 images, 64 held out, top-1 agreement with float32): entropy [0-9.]*%, percentile:99.99 [0-9.]*%, minmax [0-9.]*%, 3sigma [0-9.]*% -> " "$tmp/auto.txt"
chosen=$(sed -n 's/^calibration auto .* -> //p' "$tmp/auto.txt")
check "auto calibrates with its choice ($chosen) on all 128 images" \
    grep -q "per-channel weights, $chosen calibration on 128 images" "$tmp/auto.txt"

for engine in dnnl emulate; do
    "$DTRAIN" eval --model lenet5 --init "$tmp/q.safetensors" --test-samples 500 --threads 2 \
        --int8-engine "$engine" --json >"$tmp/eval_$engine.json"
    check "eval --int8-engine $engine exits 0" test -s "$tmp/eval_$engine.json"
done
/usr/bin/python3 - "$tmp/eval_dnnl.json" "$tmp/eval_emulate.json" >"$tmp/compare" 2>&1 <<'PY'
import json, sys
d, e = (json.load(open(p)) for p in sys.argv[1:3])
problems = []
if not (d["int8"] and d["engine"] == "dnnl" and e["engine"] == "emulate"):
    problems.append("not int8 runs: %r" % d)
for k in ("accuracy", "loss", "agreement", "float_accuracy", "confusion"):
    if d[k] != e[k]:
        problems.append("%s differs between engines: %r, %r" % (k, d[k], e[k]))
if not d["agreement"] >= 0.95:
    problems.append("top-1 agreement with float32 only %r" % d["agreement"])
if abs(d["accuracy"] - d["float_accuracy"]) > 0.03:
    problems.append("int8 accuracy %r far from float32's %r" % (d["accuracy"], d["float_accuracy"]))
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
check "both engines give the same figures, close to float32" [ $? -eq 0 ]
[ -s "$tmp/compare" ] && cat "$tmp/compare"

# the lab scheme: int8 logits, per-tensor weights only
"$DTRAIN" quantize --model lenet5 --init "$tmp/w.safetensors" --out "$tmp/lab.safetensors" \
    --scheme lab --calib-samples 64 --threads 2 >/dev/null
check "lab scheme quantizes" test -s "$tmp/lab.safetensors"
"$DTRAIN" eval --model lenet5 --init "$tmp/lab.safetensors" --test-samples 200 --threads 2 \
    >"$tmp/lab.txt"
check "lab file evaluates" grep -q "int8 (lab scheme, per-tensor weights, minmax calibration" "$tmp/lab.txt"

# Bad input.
out="$tmp/bad.safetensors"
expect "float weights of another model" "tensor conv1.weight has shape [6, 1, 5, 5], expected [64, 3, 3, 3]" \
    "$DTRAIN" quantize --model resnet18 --width 64 --init "$tmp/w.safetensors" --out "$out"
no_file "no file after the wrong model" "$out"
expect "zero calibration images" "--calib-samples must be between 1 and" \
    "$DTRAIN" quantize --init "$tmp/w.safetensors" --out "$out" --calib-samples 0
no_file "no file after zero calibration images" "$out"
expect "--calib is ambiguous" "unknown or incomplete option '--calib'" \
    "$DTRAIN" quantize --init "$tmp/w.safetensors" --out "$out" --calib 10
expect "lab with per-channel weights" "--scheme lab quantizes weights per layer" \
    "$DTRAIN" quantize --init "$tmp/w.safetensors" --out "$out" --scheme lab --weights per-channel
expect "bad calibration method" "--calib-method must be auto, minmax, percentile:P, 3sigma or entropy, got 'kl'" \
    "$DTRAIN" quantize --init "$tmp/w.safetensors" --out "$out" --calib-method kl
expect "quantize without --out" "--out FILE is required" \
    "$DTRAIN" quantize --init "$tmp/w.safetensors"

# rewrite.py IN OUT ACTION: a copy of a safetensors file with one thing changed
cat >"$tmp/rewrite.py" <<'PY'
import json, struct, sys
src, dst, action = sys.argv[1:4]
raw = open(src, "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
data = bytearray(raw[8 + n:])
if action == "zero-conv1":       # conv1 computes 0 everywhere
    for name in ("conv1.weight", "conv1.bias"):
        b, e = header[name]["data_offsets"]
        data[b:e] = bytes(e - b)
    # weights a writer saved so, not a damaged file: dtrain's crc32s recomputed
    meta = header.get("__metadata__", {})
    if "tensor_crc32.0" in meta:
        import zlib
        names = sorted(k for k in header if k != "__metadata__")
        crcs = ["%08x" % zlib.crc32(bytes(data[header[k]["data_offsets"][0]:header[k]["data_offsets"][1]])) for k in names]
        for i in range(0, len(crcs), 400):
            meta["tensor_crc32.%d" % (i // 400)] = ",".join(crcs[i:i + 400])
elif action == "drop-scale":     # a quantized file without conv1's weight scale
    del header["conv1.weight_scale"]
elif action == "reshape-i8":     # conv2's int8 weights, same bytes, wrong shape
    header["conv2.weight"]["shape"] = [16, 6, 25, 1]
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))
PY
/usr/bin/python3 "$tmp/rewrite.py" "$tmp/w.safetensors" "$tmp/zero.safetensors" zero-conv1
# the default --calib-method auto meets it first calibrating on the first half
expect "all-zero activations" "activations of conv1 are all 0 over the 32 calibration images: its scale would be infinite" \
    "$DTRAIN" quantize --init "$tmp/zero.safetensors" --out "$out" --calib-samples 64 --threads 2
no_file "no file after all-zero activations" "$out"
/usr/bin/python3 "$tmp/rewrite.py" "$tmp/q.safetensors" "$tmp/noscale.safetensors" drop-scale
expect "quantized file missing a scale" "tensor conv1.weight_scale is missing" \
    "$DTRAIN" eval --init "$tmp/noscale.safetensors" --test-samples 10 --logits "$tmp/l.safetensors"
no_file "no logits after a missing scale" "$tmp/l.safetensors"
/usr/bin/python3 "$tmp/rewrite.py" "$tmp/q.safetensors" "$tmp/shape.safetensors" reshape-i8
expect "int8 weights of the wrong shape" "tensor conv2.weight has shape [16, 6, 25, 1], expected [16, 6, 5, 5]" \
    "$DTRAIN" eval --init "$tmp/shape.safetensors" --test-samples 10 --logits "$tmp/l.safetensors"
no_file "no logits after a wrong shape" "$tmp/l.safetensors"
expect "quantized file of another model" "holds a quantized lenet5, not mlp" \
    "$DTRAIN" eval --model mlp --init "$tmp/q.safetensors" --test-samples 10
expect "bench --int8 without --infer" "--int8 times inference: add --infer" \
    "$DTRAIN" bench --int8

finish
