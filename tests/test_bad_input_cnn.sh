#!/bin/sh
# Issue 41's CNN generalisations as inputs (any kernel shape, pads per side, constant
# Pad, Concat of any count, BatchNorm of any momentum): what stays outside them is
# refused in one line naming the node, and a 49-input Concat (DenseNet201's widest)
# imports. The files are written here by Debian's python3-onnx.
set -u
DTRAIN=$1
. "$(dirname "$0")/bad_input_lib.sh"
need_python_onnx

$PY - <<'PY' || { echo "FAIL: the python writer of the cases"; exit 1; }
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(1)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 8, 8])
logits = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])


def arr(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(name, nodes, inits, features):
    """nodes end in 'h'; a flatten and a Gemm to 3 classes follow"""
    nodes = nodes + [helper.make_node("Flatten", ["h"], ["f"], name="flat"),
                     helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="fc",
                                      transB=1)]
    inits = inits + [arr("fc.weight", 3, features), arr("fc.bias", 3)]
    g = helper.make_graph(nodes, "g", [x], [logits], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), name)


save("concat_batch.onnx",
     [helper.make_node("Concat", ["x", "x"], ["h"], name="join", axis=0)], [], 128)
save("concat49.onnx",
     [helper.make_node("Concat", ["x"] * 49, ["h"], name="join", axis=1)], [], 49 * 128)
save("pad_reflect.onnx",
     [helper.make_node("Pad", ["x", "pads"], ["h"], name="pad", mode="reflect")],
     [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1])], 200)
save("pad_nan.onnx",
     [helper.make_node("Pad", ["x", "pads", "value"], ["h"], name="pad")],
     [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
      numpy_helper.from_array(np.array(np.nan, dtype=np.float32), "value")], 200)
save("pool_pads.onnx",
     [helper.make_node("AveragePool", ["x"], ["h"], name="pool", kernel_shape=[3, 3],
                       pads=[3, 0, 0, 0])], [], 2 * 9 * 6)
save("bn_momentum.onnx",
     [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["h"], name="bn",
                       momentum=1.5)],
     [arr("s", 2), arr("b", 2), arr("m", 2), numpy_helper.from_array(np.ones(2, np.float32), "v")],
     128)
save("conv_kernel.onnx",
     [helper.make_node("Conv", ["x", "w"], ["h"], name="conv", kernel_shape=[3, 3])],
     [arr("w", 2, 2, 1, 7)], 2 * 8 * 2)
PY

expect "a Concat along the batch axis" \
    "dtrain models: concat_batch.onnx: node 'join' (Concat): a Concat along the batch axis (axis 0) is not supported" \
    "" "$DTRAIN" models concat_batch.onnx
expect "a Pad in reflect mode" \
    "dtrain models: pad_reflect.onnx: node 'pad' (Pad): only constant padding is supported (its mode is 'reflect')" \
    "" "$DTRAIN" models pad_reflect.onnx
expect "a Pad of NaN" \
    "dtrain models: pad_nan.onnx: node 'pad' (Pad): its value nan is not finite" \
    "" "$DTRAIN" models pad_nan.onnx
expect "an AveragePool whose pad is a whole window" \
    "dtrain models: pool_pads.onnx: node 'pool' (AveragePool): its pads 3,0,0,0 reach past its 3x3 window: a window of padding alone" \
    "" "$DTRAIN" models pool_pads.onnx
expect "a BatchNormalization momentum of 1.5" \
    "dtrain models: bn_momentum.onnx: node 'bn' (BatchNormalization): its momentum 1.5 is not in [0, 1]" \
    "" "$DTRAIN" models bn_momentum.onnx
expect "a kernel_shape that is not the weight's" \
    "dtrain models: conv_kernel.onnx: node 'conv' (Conv): its kernel_shape is not its weight's [kh, kw]" \
    "" "$DTRAIN" models conv_kernel.onnx
# not bad input: DenseNet201's widest join, 49 inputs, imports (before: 1 to 8)
if "$DTRAIN" models concat49.onnx > concat49.out 2>&1; then
    pass "a 49-input Concat imports"
else
    fail "a 49-input Concat imports: $(head -c 300 concat49.out)"
fi

bad_input_done
