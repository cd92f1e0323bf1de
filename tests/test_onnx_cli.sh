#!/bin/sh
# ONNX models on the command line (docs/onnx.md): models lists an exported file, train
# trains it and --save FILE.onnx writes the trained weights back into the graph (same
# nodes and initializer names; onnx's checker passes; the values are those the same
# run saves as safetensors), --reinit draws fresh weights, and a mismatched data set
# or a --save .onnx for a zoo model is refused in one line; quantize + eval of an
# imported LeNet-5 keep the zoo's accuracy bar. python3-onnx (Debian's) is
# the reader of what we write (/usr/bin/python3: Debian's, where it is installed).
set -u
DTRAIN=$1
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/onnx"
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
cp "$FX/resnet18_w4.onnx" net.onnx

"$DTRAIN" models net.onnx >models.txt
check "models lists the file with its parameters and input" \
    grep -q '^net.onnx *44,622 .* 3x32x32 ' models.txt

T="--model net.onnx --data synthetic:cifar10 --max-samples 96 --test-samples 32 --epochs 1
   --batch-size 32 --threads 1 --seed 3 --quiet"
"$DTRAIN" train $T --save trained.onnx
check "train --save FILE.onnx writes the graph" [ -s trained.onnx ]
"$DTRAIN" train $T --save trained.safetensors
check "the same run saves safetensors" [ -s trained.safetensors ]
"$DTRAIN" train $T --reinit --save fresh.safetensors
check "train --reinit runs" [ -s fresh.safetensors ]
cmp -s net.onnx "$FX/resnet18_w4.onnx"
check "the input graph is left as it was" [ $? -eq 0 ]

check "the written graph: onnx's checker passes, same nodes and names, trained values" \
    /usr/bin/python3 - "$(dirname "$0")" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/../scripts")
import numpy as np
import onnx
from onnx import numpy_helper
import safetensors_io
src, out = onnx.load("net.onnx"), onnx.load("trained.onnx")
onnx.checker.check_model(out)
assert src.graph.node == out.graph.node, "the nodes changed"
a = {t.name: numpy_helper.to_array(t) for t in src.graph.initializer}
b = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
assert list(a) == list(b), "the initializer names changed"
saved, _ = safetensors_io.read("trained.safetensors")
fresh, _ = safetensors_io.read("fresh.safetensors")
for k in b:
    assert b[k].shape == a[k].shape, k
    assert np.array_equal(b[k].reshape(-1), saved[k].reshape(-1)), k + ": not the trained values"
assert not np.array_equal(a["conv1.weight"], b["conv1.weight"]), "conv1.weight did not train"
assert not np.allclose(fresh["conv1.weight"].reshape(-1), b["conv1.weight"].reshape(-1)), \
    "--reinit started from the file's weights"
PY

# quantize + eval an imported LeNet-5 trained briefly (one thread, one seed: the same
# numbers every run): int8 within 0.5 points of float32, as for the zoo's
cp "$FX/lenet5.onnx" lenet.onnx
"$DTRAIN" train --model lenet.onnx --data fashion-mnist --max-samples 6000 --epochs 1 --lr 0.05 \
    --threads 1 --seed 1 --quiet --save lenet.safetensors
"$DTRAIN" quantize --model lenet.onnx --init lenet.safetensors --out lenet_int8.safetensors \
    --threads 1 >/dev/null
"$DTRAIN" eval --model lenet.onnx --init lenet_int8.safetensors --threads 1 >eval.txt 2>&1
diff=$(sed -n 's/.*int8 - float32 \([-+0-9.]*\) points.*/\1/p' eval.txt)
echo "imported lenet5: $(grep -o 'accuracy [0-9.]*%; int8 - float32 [-+0-9.]* points' eval.txt)"
check "quantize + eval of an imported model: int8 within 0.5 points of float32 ($diff)" \
    awk -v d="${diff:-99}" 'BEGIN { exit !(d <= 0.5 && d >= -0.5) }'

msg=$("$DTRAIN" train --model net.onnx --data synthetic:mnist --max-samples 32 --quiet 2>&1)
check "data of another shape is refused in one line" [ "$msg" = "dtrain train: model net.onnx \
takes 3x32x32 inputs but synthetic:mnist has 1x28x28 images (an ONNX graph's shapes are fixed \
when it is exported)" ]
msg=$("$DTRAIN" train --model lenet5 --max-samples 32 --quiet --save x.onnx 2>&1)
check "--save FILE.onnx for a zoo model is refused in one line" \
    sh -c "[ \"\$(echo '$msg' | wc -l)\" -eq 1 ] && echo '$msg' | grep -q 'imported graph'"
check "...and writes nothing" [ ! -e x.onnx ]
finish
