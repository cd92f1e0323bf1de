#!/bin/sh
# The transformer's ops from the command line (issue 41), on the committed
# attention_tokens_32 export (linears over the last axis, softmax, a batched MatMul of
# two activations, LayerNormalization, Split, Slice, log-softmax, Gathers; CIFAR's
# 3x32x32) and vit (torchvision's VisionTransformer, its nn.MultiheadAttention taken
# whole): each trains on 2 ranks with its loss falling, a checkpoint resumed gives the
# uninterrupted run's weights bit for bit, and --save FILE.onnx writes weights that
# import back (python3-onnx's checker passes; each initializer holds what the same run
# saves as safetensors; the re-imported graph evaluates as the original).
set -u
DTRAIN=$1
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/onnx"
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
# fixture, training samples, test samples, batch, lr, checkpoint every N steps (resumed
# at 2N): in a folder of its own
train_save_resume() {
    mkdir "$tmp/$1" && cd "$tmp/$1" || exit 1
    cp "$FX/$1.onnx" net.onnx
    T="--model net.onnx --data synthetic:cifar10 --max-samples $2 --test-samples $3
       --batch-size $4 --threads 1 --seed 3 --lr $5"
    mpirun -np 2 "$DTRAIN" train $T --epochs 2 >ranks.txt 2>&1
    check "$1: trains on 2 ranks" grep -q '^trained net.onnx' ranks.txt
    l1=$(sed -n 's/^epoch 1\/2 *train loss \([0-9.]*\).*/\1/p' ranks.txt)
    l2=$(sed -n 's/^epoch 2\/2 *train loss \([0-9.]*\).*/\1/p' ranks.txt)
    echo "$1 on 2 ranks: train loss $l1 -> $l2"
    check "$1: its loss falls over 2 epochs" awk -v a="$l1" -v b="$l2" 'BEGIN { exit !(a != "" && b < a) }'

    "$DTRAIN" train $T --epochs 2 --quiet --save full.safetensors
    "$DTRAIN" train $T --epochs 2 --quiet --checkpoint ck --checkpoint-every ${6}steps --max-steps $((2 * $6))
    "$DTRAIN" train $T --epochs 2 --quiet --resume ck --save resumed.safetensors
    check "$1: checkpoint + resume: the uninterrupted run's weights, bit for bit" \
        cmp -s full.safetensors resumed.safetensors

    "$DTRAIN" train $T --epochs 1 --quiet --save trained.onnx
    "$DTRAIN" train $T --epochs 1 --quiet --save trained.safetensors
    check "$1: --save FILE.onnx writes the graph" [ -s trained.onnx ]
    if /usr/bin/python3 -c 'import onnx, numpy' 2>/dev/null; then
        /usr/bin/python3 - <<'PY'
import json, struct, sys
import numpy as np
import onnx
from onnx import numpy_helper
m = onnx.load("trained.onnx")
onnx.checker.check_model(m)
raw = open("trained.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
for t in m.graph.initializer:
    a = numpy_helper.to_array(t)
    s, e = head[t.name]["data_offsets"]
    want = np.frombuffer(data[s:e], dtype=np.float32).reshape(a.shape)
    if not np.array_equal(a, want):
        sys.exit(f"{t.name} differs")
PY
        check "$1: the written initializers are the run's weights (python3-onnx)" [ $? -eq 0 ]
    fi
    "$DTRAIN" eval --model net.onnx --init trained.safetensors --data synthetic:cifar10 \
        --test-samples $3 --threads 1 >eval_orig.txt 2>&1
    "$DTRAIN" eval --model trained.onnx --init trained.safetensors --data synthetic:cifar10 \
        --test-samples $3 --threads 1 >eval_saved.txt 2>&1
    sed 's/^evaluated [^ ]* //' eval_orig.txt >orig.txt
    sed 's/^evaluated [^ ]* //' eval_saved.txt >saved.txt
    check "$1: the written graph re-imports and evaluates as the original" \
        sh -c '[ -s orig.txt ] && cmp -s orig.txt saved.txt'
}

train_save_resume attention_tokens_32 1024 256 32 0.05 20
# torchvision's VisionTransformer: nn.MultiheadAttention taken whole (docs/onnx.md),
# on fewer samples, to keep the suite short
train_save_resume vit 128 32 16 0.01 3
# and in bf16 on 2 ranks (test_transformer.c holds its numbers to float64), where the
# CPU has bf16 instructions (T and the folder are the vit run's, left by train_save_resume)
mpirun -np 2 "$DTRAIN" train $T --epochs 1 --precision bf16 >bf16.txt 2>&1
if grep -q 'has neither AVX512-BF16 nor AMX' bf16.txt; then
    echo "vit in bf16: skipped, $(grep -o 'this CPU ([^)]*)' bf16.txt | head -1) has no bf16"
else
    check "vit: trains in bf16 on 2 ranks" grep -q '^trained net.onnx.*final loss [0-9]' bf16.txt
    grep '^trained' bf16.txt
fi
finish
