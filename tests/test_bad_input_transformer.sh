#!/bin/sh
# The transformer's ops (issue 41) given files they cannot compute: each refused in one
# line naming the node and why, never a crash or a silent wrong result. The files are
# written here by Debian's python3-onnx; test_onnx.c holds the importer's unit cases.
set -u
DTRAIN=$1
. "$(dirname "$0")/bad_input_lib.sh"
need_python_onnx

$PY - <<'PY' || { echo "FAIL: the python writer of the cases"; exit 1; }
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(1)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])


def arr(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def ints(name, values, scalar=False):
    a = np.array(values[0] if scalar else values, dtype=np.int64)
    return numpy_helper.from_array(a, name)


def save(name, nodes, inits, opset=17):
    g = helper.make_graph(nodes, "g", [x], [y], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), name)


# x[:, 0][:, 0]: [N, 8], the class-token pattern, as the tail of every case
tail = [helper.make_node("Gather", ["t", "i0"], ["u"], name="g1", axis=1),
        helper.make_node("Gather", ["u", "i0"], ["y"], name="g2", axis=1)]
i0 = ints("i0", [0], scalar=True)

save("softmax_batch.onnx",
     [helper.make_node("Softmax", ["x"], ["t"], name="sm", axis=0)] + tail, [i0])
save("layernorm_scale.onnx",
     [helper.make_node("LayerNormalization", ["x", "ln.weight", "ln.bias"], ["t"], name="ln",
                       axis=-1)] + tail, [arr("ln.weight", 7), arr("ln.bias", 8), i0])
save("layernorm_batch.onnx",
     [helper.make_node("LayerNormalization", ["x", "ln.weight"], ["t"], name="ln",
                       axis=0)] + tail, [arr("ln.weight", 3, 8, 8), i0])
save("gather_computed.onnx",
     [helper.make_node("Shape", ["x"], ["s"], name="shape"),
      helper.make_node("Gather", ["x", "s"], ["t"], name="gx", axis=1)] + tail, [i0])
save("gather_scattered.onnx",
     [helper.make_node("Gather", ["x", "idx"], ["t"], name="gs", axis=1)] + tail,
     [ints("idx", [2, 0]), i0])
save("slice_negative_step.onnx",
     [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["t"], name="sl")] + tail,
     [ints("st", [7]), ints("en", [0]), ints("ax", [3]), ints("sp", [-1]), i0])
save("expand_activation.onnx",
     [helper.make_node("Expand", ["x", "shape"], ["t"], name="ex")] + tail,
     [ints("shape", [2, 3, 8, 8]), i0])
save("expand_inside.onnx",
     [helper.make_node("Expand", ["tok", "shape"], ["e"], name="ex"),
      helper.make_node("Concat", ["e", "x"], ["t"], name="cat", axis=2)] + tail,
     [arr("tok", 1, 1, 1, 8), ints("shape", [2, 3, 1, 8]), i0])
save("matmul_ranks.onnx",
     [helper.make_node("Gather", ["x", "i0"], ["a"], name="ga", axis=1),
      helper.make_node("MatMul", ["x", "a"], ["t"], name="mm")] + tail, [i0])
save("split_batch.onnx",
     [helper.make_node("Split", ["x"], ["t", "t2"], name="sp", axis=0)] + tail, [i0])
PY

M="$DTRAIN models"
expect "a softmax along the batch axis" \
    "dtrain models: softmax_batch.onnx: node 'sm' (Softmax): axis 0 is the batch axis: dtrain's samples are independent, an op along the batch is not supported" \
    "softmax_batch.onnx" $M softmax_batch.onnx
expect "a LayerNorm whose scale is not its axes' shape" \
    "dtrain models: layernorm_scale.onnx: node 'ln' (LayerNormalization): its scale is not of the normalised axes' shape (no broadcasting)" \
    "layernorm_scale.onnx" $M layernorm_scale.onnx
expect "a LayerNorm over the batch axis" \
    "dtrain models: layernorm_batch.onnx: node 'ln' (LayerNormalization): axis 0 is the batch axis: dtrain's samples are independent, an op along the batch is not supported" \
    "" $M layernorm_batch.onnx
expect "a Gather of computed indices" \
    "dtrain models: gather_computed.onnx: node 'gx' (Gather): its input 's' depends on the batch size N, where dtrain needs a constant" \
    "" $M gather_computed.onnx
expect "a Gather of indices that are not a slice" \
    "dtrain models: gather_scattered.onnx: node 'gs' (Gather): only indices evenly spaced and rising (a slice) are supported" \
    "" $M gather_scattered.onnx
expect "a Slice with a negative step" \
    "dtrain models: slice_negative_step.onnx: node 'sl' (Slice): only positive steps are supported" \
    "" $M slice_negative_step.onnx
expect "an Expand of an activation" \
    "dtrain models: expand_activation.onnx: node 'ex' (Expand): only an Expand of a parameter (an initializer) over the batch is supported" \
    "" $M expand_activation.onnx
expect "an Expand inside a sample" \
    "dtrain models: expand_inside.onnx: node 'ex' (Expand): only an Expand of a [1, ..] parameter along the batch axis is supported (the other axes as the parameter's)" \
    "" $M expand_inside.onnx
expect "a MatMul of activations of different ranks" \
    "dtrain models: matmul_ranks.onnx: node 'mm' (MatMul): a MatMul of two activations needs both of at least 3 dimensions and of one rank ([batch, .., M, K] x [batch, .., K, N]), not 4 and 3" \
    "" $M matmul_ranks.onnx
expect "a Split along the batch axis" \
    "dtrain models: split_batch.onnx: node 'sp' (Split): axis 0 is the batch axis: dtrain's samples are independent, an op along the batch is not supported" \
    "" $M split_batch.onnx

bad_input_done
