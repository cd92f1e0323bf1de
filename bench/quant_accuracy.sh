#!/bin/sh
# Accuracy of every quantization scheme x weight granularity x calibration method for
# one model and its float weights: quantize on the first CALIB training images, evaluate
# on the test split with the int8 engine; a markdown table with the float32 accuracy,
# the int8 accuracy, the difference and the top-1 agreement with float32.
#   bench/quant_accuracy.sh DTRAIN MODEL W.safetensors [DATA] [CALIB] [THREADS]
set -eu
DTRAIN=$1
MODEL=$2
W=$3
DATA=${4:-fashion-mnist}
CALIB=${5:-512}
THREADS=${6:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
METHODS=${METHODS:-"minmax percentile:99.99 percentile:99.9 3sigma entropy"}
echo "| scheme | weights | calibration | float32 | int8 | int8 - float32 (points) | top-1 agreement |"
echo "|---|---|---|---|---|---|---|"
for combo in lab:per-tensor symmetric:per-tensor symmetric:per-channel; do
    scheme=${combo%%:*}
    weights=${combo#*:}
    for method in $METHODS; do
        "$DTRAIN" quantize --model "$MODEL" --data "$DATA" --init "$W" --out "$tmp/q.safetensors" \
            --scheme "$scheme" --weights "$weights" --calib-method "$method" \
            --calib-samples "$CALIB" --threads "$THREADS" >/dev/null
        "$DTRAIN" eval --model "$MODEL" --data "$DATA" --init "$tmp/q.safetensors" \
            --threads "$THREADS" --json >"$tmp/e.json"
        /usr/bin/python3 - "$tmp/e.json" "$scheme" "$weights" "$method" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
print("| %s | %s | %s | %.2f%% | %.2f%% | %+.2f | %.2f%% |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], 100 * e["float_accuracy"], 100 * e["accuracy"],
    100 * (e["accuracy"] - e["float_accuracy"]), 100 * e["agreement"]))
PY
    done
done
