#!/bin/sh
# Values of any rank and the shape arithmetic folded at import (issue 41): graphs that
# would move the batch axis, merge it into another, or compute shapes not linear in
# the batch size N are refused in one line naming the node and why. The files are
# written here by Debian's python3-onnx; test_onnx_fold.c and test_onnx_node.c hold
# what imports.
set -u
DTRAIN=$1
. "$(dirname "$0")/bad_input_lib.sh"
need_python_onnx

$PY - <<'PY' || { echo "FAIL: the python writer of the cases"; exit 1; }
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])


def ints(name, *values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def save(name, nodes, inits=(), inp=x):
    g = helper.make_graph(nodes, "g", [inp], [y], list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), name)


# the batch size as a dynamic-batch export computes it: Shape -> Gather(0)
batch = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
         helper.make_node("Gather", ["s", "zero"], ["n"], name="batch", axis=0)]
zero = ints("zero", 0)
zero.dims[:] = []  # a scalar index
two = ints("two", 2)
two.dims[:] = []

# Reshape to [N*2, 8, 8, 8]: N merged into another axis (N*heads)
save("merge.onnx", batch + [
    helper.make_node("Mul", ["n", "two"], ["n2"], name="n_times_2"),
    helper.make_node("Unsqueeze", ["n2", "axis0"], ["n2u"], name="unsq"),
    helper.make_node("Concat", ["n2u", "rest"], ["shape2"], name="cat", axis=0),
    helper.make_node("Reshape", ["x", "shape2"], ["y"], name="heads")],
    [zero, two, ints("axis0", 0), ints("rest", 8, 8, 8)])
# Reshape to [N, N, ...]: N in a later axis
save("later.onnx", batch + [
    helper.make_node("Unsqueeze", ["n", "axis0"], ["nu"], name="unsq"),
    helper.make_node("Concat", ["zero1", "nu", "rest"], ["shape2"], name="cat", axis=0),
    helper.make_node("Reshape", ["x", "shape2"], ["y"], name="later")],
    [zero, ints("zero1", 0), ints("axis0", 0), ints("rest", 8, 8, 8)])
# a fixed batch
save("fixed.onnx", [helper.make_node("Reshape", ["x", "shape"], ["y"], name="fixed")],
     [ints("shape", 2, 1024)])
save("flatten0.onnx", [helper.make_node("Flatten", ["x"], ["y"], name="flat0", axis=0)])
save("flatten2.onnx", [helper.make_node("Flatten", ["x"], ["y"], name="flat2", axis=2)])
save("transpose.onnx",
     [helper.make_node("Transpose", ["x"], ["y"], name="swap", perm=[1, 0, 2, 3])])
save("notperm.onnx",
     [helper.make_node("Transpose", ["x"], ["y"], name="twice", perm=[0, 1, 1, 2])])
save("squeeze0.onnx", [helper.make_node("Squeeze", ["x", "axis0"], ["y"], name="sq")],
     [ints("axis0", 0)])
save("unsqueeze0.onnx", [helper.make_node("Unsqueeze", ["x", "axis0"], ["y"], name="usq")],
     [ints("axis0", 0)])
# N*N and (2N + 1) / 2: not linear in N, exact only for some N
save("nn.onnx", batch + [helper.make_node("Mul", ["n", "n"], ["nn"], name="n_squared"),
                         helper.make_node("Reshape", ["x", "nn"], ["y"], name="r")], [zero])
save("div.onnx", batch + [
    helper.make_node("Mul", ["n", "two"], ["n2"], name="twice"),
    helper.make_node("Add", ["n2", "one"], ["n21"], name="plus_one"),
    helper.make_node("Div", ["n21", "two"], ["half"], name="halve"),
    helper.make_node("Reshape", ["x", "half"], ["y"], name="r")],
    [zero, two, ints("one", 1)])
# a constant whose size is the batch's
save("ofshape.onnx", [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                      helper.make_node("ConstantOfShape", ["s"], ["z"], name="zeros"),
                      helper.make_node("Add", ["x", "z"], ["y"], name="add")])
# a convolution of a value that is no image
w = numpy_helper.from_array(np.zeros((4, 2, 3, 3), np.float32), "conv.weight")
save("rank4conv.onnx", [
    helper.make_node("Reshape", ["x", "shape"], ["r"], name="split"),
    helper.make_node("Conv", ["r", "conv.weight"], ["y"], name="conv")],
    [ints("shape", 0, 2, 8, 8, 8), w])
# the Shape of a value no node defines
save("undefined.onnx", [helper.make_node("Shape", ["nothing"], ["s"], name="shape"),
                        helper.make_node("Reshape", ["x", "s"], ["y"], name="r")])
# an input that is no image, to a command that trains from a data set
v = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10])
save("vector.onnx", [helper.make_node("Relu", ["x"], ["y"], name="relu")], inp=v)
PY

expect "a reshape merging the batch axis into another (N*2)" \
    "dtrain models: merge.onnx: node 'heads' (Reshape): its shape's first axis is 2*N, not the batch N: dtrain keeps the batch axis first and whole" \
    "merge.onnx" "$DTRAIN" models merge.onnx
expect "a reshape with N in a later axis" \
    "dtrain models: later.onnx: node 'later' (Reshape): its shape's axis 1 is N: it merges the batch axis into another (as N*heads), which dtrain does not do (it keeps N first and whole)" \
    "" "$DTRAIN" models later.onnx
expect "a reshape to a fixed batch" \
    "dtrain models: fixed.onnx: node 'fixed' (Reshape): a reshape to a fixed batch of 2 (export with a dynamic batch axis, as docs/onnx.md shows)" \
    "fixed.onnx" "$DTRAIN" models fixed.onnx
expect "Flatten at axis 0" \
    "dtrain models: flatten0.onnx: node 'flat0' (Flatten): Flatten at axis 0 makes [1, N*...], folding the batch axis into the features: dtrain keeps the batch axis first" \
    "" "$DTRAIN" models flatten0.onnx
expect "Flatten at axis 2 of [N, 16, 8, 8]" \
    "dtrain models: flatten2.onnx: node 'flat2' (Flatten): Flatten at axis 2 merges the batch axis with the 16 after it: dtrain keeps the batch axis first and whole" \
    "" "$DTRAIN" models flatten2.onnx
expect "a Transpose moving the batch axis" \
    "dtrain models: transpose.onnx: node 'swap' (Transpose): it moves the batch axis (perm[0] = 1): dtrain keeps the batch axis first (and imports such a Transpose only as the start of nn.MultiheadAttention's export)" \
    "" "$DTRAIN" models transpose.onnx
expect "a Transpose whose perm is no permutation" \
    "dtrain models: notperm.onnx: node 'twice' (Transpose): its perm is not a permutation of its 4 axes" \
    "" "$DTRAIN" models notperm.onnx
expect "a Squeeze of the batch axis" \
    "dtrain models: squeeze0.onnx: node 'sq' (Squeeze): it squeezes the batch axis (axis 0): dtrain keeps it first" \
    "" "$DTRAIN" models squeeze0.onnx
expect "an Unsqueeze before the batch axis" \
    "dtrain models: unsqueeze0.onnx: node 'usq' (Unsqueeze): it puts a new axis before the batch axis (axis 0): dtrain keeps it first" \
    "" "$DTRAIN" models unsqueeze0.onnx
expect "N*N" \
    "dtrain models: nn.onnx: node 'n_squared' (Mul): it multiplies N by N (not linear in the batch size)" \
    "" "$DTRAIN" models nn.onnx
expect "(2N + 1) / 2" \
    "dtrain models: div.onnx: node 'halve' (Div): it divides 2*N + 1 by 2, which is exact only for some N" \
    "" "$DTRAIN" models div.onnx
expect "a ConstantOfShape the batch's size" \
    "dtrain models: ofshape.onnx: node 'zeros' (ConstantOfShape): its output's shape depends on the batch size N (only linear shape arithmetic of N is folded)" \
    "" "$DTRAIN" models ofshape.onnx
expect "a Conv of a rank-4 value" \
    "dtrain models: rank4conv.onnx: node 'conv' (Conv): its input has 4 axes a sample; Conv takes images [batch, C, H, W]" \
    "" "$DTRAIN" models rank4conv.onnx
expect "the Shape of an undefined value" \
    "dtrain models: undefined.onnx: node 'shape' (Shape): its input 'nothing' is not defined before it (undefined, or the graph is not in topological order: a cycle)" \
    "" "$DTRAIN" models undefined.onnx
expect "a vector input to a command that trains from images" \
    "dtrain models: vector.onnx: the input 'x' has 1 axes a sample; dtrain's data sets feed images [batch, C, H, W]" \
    "" "$DTRAIN" models vector.onnx

bad_input_done
