#!/bin/sh
# nn.MultiheadAttention's export (issue 41), which dtrain takes whole at its first
# Transpose (docs/onnx.md), altered one node at a time in the committed vit fixture: each
# graph that differs is refused in one line naming the node where it differs and how,
# never imported as something else. The files are written here by Debian's python3-onnx.
set -u
DTRAIN=$1
FX="$(cd "$(dirname "$0")" && pwd)/fixtures/onnx"
. "$(dirname "$0")/bad_input_lib.sh"
need_python_onnx

$PY - "$FX/vit.onnx" <<'PY' || { echo "FAIL: the python writer of the cases"; exit 1; }
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

A = "/encoder/layers/encoder_layer_0/self_attention/"


def node(m, name):
    return next(n for n in m.graph.node if n.name == A + name)


def set_const(m, name, value):
    t = node(m, name).attribute[0].t
    a = numpy_helper.to_array(t)
    t.CopyFrom(numpy_helper.from_array(np.array(value, dtype=a.dtype), t.name))


def set_attr(m, name, attr, value):
    n = node(m, name)
    for a in n.attribute:
        if a.name == attr:
            n.attribute.remove(a)
            break
    n.attribute.append(helper.make_attribute(attr, value))


def case(name, change):
    m = onnx.load(sys.argv[1])
    change(m)
    onnx.save(m, name + ".onnx")


case("scale", lambda m: set_const(m, "Constant_14", 5.0))  # 1/5: no head size divides 96
case("softmax_axis", lambda m: set_attr(m, "Softmax", "axis", 1))
case("last_perm", lambda m: set_attr(m, "Transpose_6", "perm", [1, 2, 0]))
case("gemm_transb", lambda m: set_attr(m, "Gemm", "transB", 0))
case("heads", lambda m: set_const(m, "Constant_11", 2))  # N * 2 heads where the scale says 4
case("slice_bounds", lambda m: set_const(m, "Constant_9", 1))  # k's end: E, not 2E


def probe(m):  # a second reader of the attention's probabilities
    sm = node(m, "Softmax")
    m.graph.node.insert(list(m.graph.node).index(sm) + 1,
                        helper.make_node("Identity", [sm.output[0]], ["probe"], name="probe"))


case("second_reader", probe)
case("matmul_arity", lambda m: node(m, "MatMul_1").input.append(node(m, "MatMul_1").input[1]))

# a Transpose of the batch axis that starts no attention: [N, 3, 64] -> [3, N, 64] -> Relu
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
g = helper.make_graph(
    [helper.make_node("Reshape", ["x", "shape"], ["r"], name="tokens"),
     helper.make_node("Transpose", ["r"], ["t"], name="swap", perm=[1, 0, 2]),
     helper.make_node("Relu", ["t"], ["y"], name="relu")],
    "g", [x], [y], [numpy_helper.from_array(np.array([0, 3, 64], dtype=np.int64), "shape")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "lone.onnx")
PY

L=/encoder/layers/encoder_layer_0/self_attention
MHA="where nn.MultiheadAttention's export (the only Transpose of the batch axis dtrain imports, from node '$L/Transpose') differs"
expect "a scale that is not 1/sqrt(d) of a head size dividing E" \
    "dtrain models: scale.onnx: node '$L/Div_2' (Div): q is not scaled by 1 / sqrt(d) of a head size d dividing E = 96, $MHA" \
    "scale.onnx" "$DTRAIN" models scale.onnx
expect "a softmax over another axis than the last" \
    "dtrain models: softmax_axis.onnx: node '$L/Softmax' (Softmax): its axis is 1, not the last (-1), $MHA" \
    "" "$DTRAIN" models softmax_axis.onnx
expect "a last Transpose that does not restore [N, T, E]" \
    "dtrain models: last_perm.onnx: node '$L/Transpose_6' (Transpose): its perm is not [1, 0, 2], $MHA" \
    "" "$DTRAIN" models last_perm.onnx
expect "an out-projection Gemm of transB 0" \
    "dtrain models: gemm_transb.onnx: node '$L/Gemm' (Gemm): it is not x W^T + b (transB 1, alpha and beta 1) by initializers [96, 96] and [96] (out_proj), $MHA" \
    "" "$DTRAIN" models gemm_transb.onnx
expect "a reshape to another number of heads than the scale's" \
    "dtrain models: heads.onnx: node '$L/Reshape' (Reshape): its input '$L/Concat_output_0' is [65, 2*N, 24], not [65, 4*N, 24], in the multi-head attention dtrain imports whole" \
    "" "$DTRAIN" models heads.onnx
expect "q, k, v slices of other bounds" \
    "dtrain models: slice_bounds.onnx: node '$L/Slice_1' (Slice): its input '$L/Mul_1_output_0' is [96], not [192], in the multi-head attention dtrain imports whole" \
    "" "$DTRAIN" models slice_bounds.onnx
expect "an intermediate read outside the attention" \
    "dtrain models: second_reader.onnx: node '$L/Softmax' (Softmax): its output is read by 2 nodes besides Shape, not by one MatMul, $MHA" \
    "" "$DTRAIN" models second_reader.onnx
expect "a node taken in with more inputs than its operator has" \
    "dtrain models: matmul_arity.onnx: node '$L/MatMul_1' (MatMul): 3 inputs (a MatMul takes 2), $MHA" \
    "" "$DTRAIN" models matmul_arity.onnx
expect "a Transpose of the batch axis that starts no attention" \
    "dtrain models: lone.onnx: node 'swap' (Transpose): it moves the batch axis (perm [1, 0, 2]): dtrain keeps the batch axis first, and takes such a Transpose only as the start of nn.MultiheadAttention's export, read by its in-projection MatMul alone (here by 1 node besides Shape, a Relu)" \
    "" "$DTRAIN" models lone.onnx
expect "training on an altered attention is refused before any work" \
    "dtrain train: scale.onnx: node '$L/Div_2' (Div): q is not scaled by 1 / sqrt(d) of a head size d dividing E = 96, $MHA" \
    "scale.onnx" "$DTRAIN" train --model scale.onnx --data synthetic:cifar10 --max-samples 64 --epochs 1

bad_input_done
