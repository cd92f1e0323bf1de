#!/bin/sh
# dtrain quantize on imported CNNs (docs/quantization.md): squeeze_grouped_1ch (torchvision's
# Fire concats and a ceil_mode max pooling, resnext's grouped bottleneck, a depthwise pair,
# squeezenet's classifier ending in ReLU and global pooling) trained 2 epochs on
# Fashion-MNIST, quantized and evaluated on both int8 engines (the same figures), int8
# within BAR points of float32; ops with no int8 form kept float and listed (resnet20's
# option-A shortcuts). Bad quantized files: tests/test_bad_input_quant_import.sh.
set -u
DTRAIN=$1
HERE="$(cd "$(dirname "$0")" && pwd)"
FX=$HERE/fixtures/onnx
. "$HERE/checks.sh"
cd "$tmp" || exit 1
. "$HERE/quant_lib.sh"

# One thread, one seed: the same numbers every run (-0.09 points). The bar is the
# issue's: over seeds 1-5 of this recipe on 2 threads int8 - float32 was -0.12 to +0.34
# points, and -0.06 to +0.02 trained on all 60,000 images (docs/quantization.md).
BAR=1.0
cp "$FX/squeeze_grouped_1ch.onnx" sq.onnx
train_quantize sq.onnx sq
check "quantize keeps no op float in it" sh -c "! grep -q 'kept float' sq.quantize.txt"
for engine in dnnl emulate; do
    "$DTRAIN" eval --model sq.onnx --init sq.q.safetensors --threads 1 --int8-engine $engine \
        --json >"eval_$engine.json"
    check "eval --int8-engine $engine runs" test -s "eval_$engine.json"
done
/usr/bin/python3 - "$BAR" eval_dnnl.json eval_emulate.json >compare.txt 2>&1 <<'PY'
import json, sys
bar = float(sys.argv[1])
d, e = (json.load(open(p)) for p in sys.argv[2:4])
problems = []
for k in ("accuracy", "loss", "agreement", "float_accuracy", "confusion"):
    if d[k] != e[k]:
        problems.append("%s differs between engines: %r, %r" % (k, d[k], e[k]))
diff = 100 * (d["accuracy"] - d["float_accuracy"])
print("squeeze_grouped_1ch: float32 %.2f%%, int8 %.2f%% (%+.2f points)" %
      (100 * d["float_accuracy"], 100 * d["accuracy"], diff))
if abs(diff) > bar:
    problems.append("int8 %+.2f points from float32 (bar %g)" % (diff, bar))
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
check "both engines give the same figures, int8 within $BAR points of float32" [ $? -eq 0 ]
cat compare.txt

# ops with no int8 form are kept float and listed
"$DTRAIN" train --model resnet20 --width 4 --data synthetic:cifar10 --max-samples 64 \
    --test-samples 32 --epochs 1 --threads 1 --quiet --save r20.safetensors
"$DTRAIN" quantize --model resnet20 --width 4 --data synthetic:cifar10 --init r20.safetensors \
    --out r20q.safetensors --calib-samples 32 --calib-method minmax --threads 1 >r20.txt
check "quantize lists the ops it kept float" grep -qx "kept float: 2 ops (shortcut_pad x2)" r20.txt
for engine in dnnl emulate; do
    "$DTRAIN" eval --model resnet20 --width 4 --data synthetic:cifar10 --test-samples 32 \
        --init r20q.safetensors --threads 1 --int8-engine $engine --json >"r20_$engine.json"
done
check "a network with float ops: the same figures on both engines" \
    /usr/bin/python3 -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a['accuracy']!=b['accuracy'] or a['loss']!=b['loss'])" r20_dnnl.json r20_emulate.json

finish
