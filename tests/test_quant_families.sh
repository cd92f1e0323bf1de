#!/bin/sh
# int8 for issue 41's torchvision families (docs/quantization.md): 1-channel copies of
# resnext50_32x4d (grouped bottlenecks) and mobilenet_v2 (depthwise convolutions, ReLU6)
# made by scripts/make_quant_fixtures.py, each trained 2 epochs on 6,000 Fashion-MNIST
# images, quantized and evaluated on the test set: int8 within BAR points of float32.
# mobilenet_v2's 35 ReLU6 (Clip) have no int8 form: quantize keeps them float and lists
# them. squeezenet1_1 has no copy here (make_quant_fixtures.py says why); its Fire
# modules quantize in test_quant_import.sh.
set -u
DTRAIN=$1
HERE="$(cd "$(dirname "$0")" && pwd)"
FX=$HERE/fixtures/onnx
. "$HERE/checks.sh"
cd "$tmp" || exit 1
. "$HERE/quant_lib.sh"

# One thread, one seed: the same numbers every run (+0.35 and -0.10 points). Over seeds
# 1-5 of this recipe int8 - float32 on these 2,000 test images was -0.15 to +0.45 points
# for resnext50 (float32 68.5-71.4%) and -0.20 to +0.15 for mobilenet_v2 (66.6-73.0%);
# on all 10,000, -0.04 to +0.11 and -0.32 to +0.01. The bar is the issue's, twice the
# largest measured.
BAR=1.0
# Under the sanitizers (DT_SANITIZED, tests/CMakeLists.txt) mobilenet_v2 alone: its
# kept-float ReLU6 is the path resnext's int8 layers (quant_import's too) do not take.
models="resnext50_32x4d_1ch mobilenet_v2_1ch"
[ -n "${DT_SANITIZED:-}" ] && models=mobilenet_v2_1ch
for name in $models; do
    cp "$FX/$name.onnx" "$name.onnx"
    train_quantize "$name.onnx" "$name"
    check "$name quantizes" test -s "$name.q.safetensors"
    "$DTRAIN" eval --model "$name.onnx" --init "$name.q.safetensors" --test-samples 2000 \
        --threads 1 --json >"$name.json"
    check "$name: int8 within $BAR points of float32" \
        /usr/bin/python3 - "$BAR" "$name" "$name.json" <<'PY'
import json, sys
bar, name = float(sys.argv[1]), sys.argv[2]
d = json.load(open(sys.argv[3]))
diff = 100 * (d["accuracy"] - d["float_accuracy"])
print("%s: float32 %.2f%%, int8 %.2f%% (%+.2f points)" %
      (name, 100 * d["float_accuracy"], 100 * d["accuracy"], diff))
sys.exit(0 if d["float_accuracy"] > 0.5 and abs(diff) <= bar else 1)
PY
done
[ -n "${DT_SANITIZED:-}" ] || check "resnext50_32x4d_1ch: nothing kept float" \
    sh -c "! grep -q 'kept float' resnext50_32x4d_1ch.quantize.txt"
check "mobilenet_v2_1ch: its 35 ReLU6 kept float and listed" \
    grep -qx "kept float: 35 ops (activation x35)" mobilenet_v2_1ch.quantize.txt
finish
