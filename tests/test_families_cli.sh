#!/bin/sh
# Issue 41's torchvision families from the command line: every `parity` row of
# tests/fixtures/onnx/families.txt (read from the file, so a row joins when it flips)
# trains on 2 ranks for 2 epochs of 1,024 synthetic CIFAR-10 images (no augmentation,
# batch 32 a rank, lr 0.2) with its loss falling; its --save FILE.onnx re-imports, and
# the written graph with the written initializers gives the logits, bit for bit, that
# the original graph gives with the run's final weights (its checkpoint). mobilenet_v2
# (ReLU6, depthwise convolutions): a checkpoint resumed gives the uninterrupted run's
# file bit for bit. The fixtures of another input size (inception_v3 75x75, resnext50
# 64x64) train on synthetic data of their shape (synthetic:CxHxW).
set -u
DTRAIN=$1
HERE="$(cd "$(dirname "$0")" && pwd)"
FX=$HERE/fixtures/onnx
. "$HERE/checks.sh"
cd "$tmp" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
py=""
if /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then py=/usr/bin/python3; fi

# Mean train loss of epoch 2 against epoch 1 (seeds 1-3, this recipe): a ratio of 0.03
# (densenet121) to 0.90 (mnasnet0_5, seed 2); mobilenet_v3_small 0.86-0.88. The bar,
# 0.97, sits well above every one. squeezenet1_1 is the exception: torchvision's
# SqueezeNet at this size sits at ln 10 (2.3026) from its start, in PyTorch too (the
# same recipe on Fashion-MNIST: 2.3027 -> 2.3026); for it the check is only that the
# loss does not rise. The two of another input size learn slower at lr 0.2 (inception_v3
# rose at seed 4, resnext50 fell to 0.60-0.93): at lr 0.05 (inception_v3 on 4,096
# images, 4.6 s), seeds 1-5 read 0.65-0.89 and 0.70-0.78.
BAR=0.97
# ring: the same sums in the same order every run, for the resume's bit-for-bit check
T="--no-augment --test-samples 128 --batch-size 32 --threads 1 --seed 3 --epochs 2
   --allreduce ring"
T32="$T --max-samples 1024 --lr 0.2"
E="--test-samples 128 --threads 1"
rows=$(awk '$1 !~ /^#/ && NF >= 2 && $2 == "parity" { print $1 }' "$FX/families.txt")
# Under the sanitizers (DT_SANITIZED, tests/CMakeLists.txt), a subset whose ops cover
# the rest's kinds: depthwise convolutions and ReLU6, channel shuffle's reshapes,
# transposes and slices, the ViT's attention; the release build runs every row.
if [ -n "${DT_SANITIZED:-}" ]; then
    rows=$(printf '%s\n' $rows | grep -x -e mobilenet_v2 -e shufflenet_v2_x0_5 -e vit)
fi
check "families.txt lists parity rows" [ -n "$rows" ]
for name in $rows; do
    cp "$FX/$name.onnx" "$name.onnx"
    input=$("$DTRAIN" models "$name.onnx" | sed -n '2s/.* \([0-9]*x[0-9]*x[0-9]*\) .*/\1/p')
    check "dtrain models $name.onnx names its input shape" [ -n "$input" ]
    data=synthetic:cifar10 recipe=$T32
    case $name in
    inception_v3) recipe="$T --max-samples 4096 --lr 0.05" ;;
    resnext50_32x4d) recipe="$T --max-samples 1024 --lr 0.05" ;;
    esac
    [ "$input" = 3x32x32 ] || data=synthetic:$input
    mpirun -np 2 "$DTRAIN" train --model "$name.onnx" --data $data $recipe --save "$name.trained.onnx" \
        --checkpoint "ck_$name" >"$name.txt" 2>&1
    check "$name trains on 2 ranks" grep -q "^trained $name.onnx" "$name.txt"
    l1=$(sed -n 's/^epoch 1\/2 *train loss \([0-9.]*\).*/\1/p' "$name.txt")
    l2=$(sed -n 's/^epoch 2\/2 *train loss \([0-9.]*\).*/\1/p' "$name.txt")
    echo "$name: train loss $l1 -> $l2"
    if [ "$name" = squeezenet1_1 ]; then
        check "$name: its loss does not rise" \
            awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(a != "" && b != "" && b <= a) }'
    else
        check "$name: its loss falls below $BAR of epoch 1's" \
            awk -v a="$l1" -v b="$l2" -v r="$BAR" 'BEGIN { exit !(a != "" && b != "" && b < r * a) }'
    fi
    "$DTRAIN" eval --model "$name.onnx" --init "ck_$name/checkpoint.safetensors" --data $data $E \
        --logits "$name.run_logits.safetensors" >/dev/null 2>&1
    check "$name: the run's weights evaluate" [ -s "$name.run_logits.safetensors" ]
    if [ -z "$py" ]; then
        echo "skip $name's re-import check: /usr/bin/python3 has no onnx module"
        continue
    fi
    # the saved file's own initializers, as safetensors for --init (a format change)
    $py - "$HERE/../scripts" "$name.trained.onnx" "$name.saved.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import onnx
from onnx import numpy_helper
import safetensors_io
m = onnx.load(sys.argv[2])
onnx.checker.check_model(m)
safetensors_io.write(sys.argv[3], {t.name: numpy_helper.to_array(t) for t in m.graph.initializer},
                     {})
PY
    "$DTRAIN" eval --model "$name.trained.onnx" --init "$name.saved.safetensors" --data $data $E \
        --logits "$name.saved_logits.safetensors" >/dev/null 2>&1
    check "$name: the saved .onnx re-imports and gives the run's logits, bit for bit" \
        $py - "$HERE/../scripts" "$name.run_logits.safetensors" "$name.saved_logits.safetensors" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_io
a, b = (safetensors_io.read(p)[0] for p in sys.argv[2:4])
sys.exit(0 if np.array_equal(a["logits"], b["logits"]) and a["logits"].size else 1)
PY
done

check "mobilenet_v2 was trained above" [ -s mobilenet_v2.trained.onnx ]
# checkpoint + resume on 2 ranks: mobilenet_v2 stopped after 24 of its 32 steps
# (checkpoints every 8), resumed, saves the file the uninterrupted run above saved
mpirun -np 2 "$DTRAIN" train --model mobilenet_v2.onnx --data synthetic:cifar10 $T32 --quiet --checkpoint ck_resume \
    --checkpoint-every 8steps --max-steps 24 >stop.txt 2>&1
mpirun -np 2 "$DTRAIN" train --model mobilenet_v2.onnx --data synthetic:cifar10 $T32 --quiet --resume ck_resume \
    --save resumed.onnx >resume.txt 2>&1
check "mobilenet_v2: checkpoint + resume gives the uninterrupted run's weights, bit for bit" \
    cmp -s mobilenet_v2.trained.onnx resumed.onnx
finish
