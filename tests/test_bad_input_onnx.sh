#!/bin/sh
# The model file as an input (issue 40): ONNX files a careless or hostile sender could
# hand over, each refused in one line or imported right, never a crash, a hang, a
# super-linear import or a silent wrong result. The files are written here by Debian's
# python3-onnx (its helper, or the protobuf wire format by hand where the helper would
# recurse); test_onnx.c holds the importer's own unit cases.
set -u
DTRAIN=$1
. "$(dirname "$0")/bad_input_lib.sh"
need_python_onnx

$PY - <<'PY' || { echo "FAIL: the python writer of the cases"; exit 1; }
import os
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

rng = np.random.default_rng(1)
x32 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])
logits = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])


def arr(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def save(name, nodes, inits, inp=x32, out=logits, opset=14):
    g = helper.make_graph(nodes, "g", [inp], [out], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] if opset else [])
    if not opset:
        del m.opset_import[:]
    onnx.save(m, name)


flat = helper.make_node("Flatten", ["x"], ["f"], name="flat")


def gemm(name, w, b, inp="f", out="y", trans_b=0):
    return helper.make_node("Gemm", [inp, w, b], [out], name=name, transB=trans_b)


# an MLP of Gemm(transB=0), MatMul + Add and Gemm(transB=1): the three weight layouts
save("mlp.onnx",
     [flat, gemm("fc1", "fc1.weight", "fc1.bias", out="h1"),
      helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
      helper.make_node("MatMul", ["r1", "fc2.weight"], ["m2"], name="fc2"),
      helper.make_node("Add", ["m2", "fc2.bias"], ["h2"], name="fc2_bias"),
      helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
      gemm("fc3", "fc3.weight", "fc3.bias", inp="r2", trans_b=1)],
     [arr("fc1.weight", 3072, 12), arr("fc1.bias", 12), arr("fc2.weight", 12, 8),
      arr("fc2.bias", 8), arr("fc3.weight", 10, 8), arr("fc3.bias", 10)])

# nested subgraphs, 3,000 deep, by hand: ModelProto.graph (7) > GraphProto.node (1) >
# NodeProto.attribute (5) > AttributeProto.g (6) > GraphProto ...
def field(num, payload):
    key, size, out = (num << 3) | 2, len(payload), bytearray()
    for v in (key, size):
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                break
    return bytes(out) + payload

graph = b""
for _ in range(3000):
    attr = field(1, b"g") + bytes([0xA0, 0x01, 5]) + field(6, graph)  # name, type GRAPH, g
    graph = field(1, field(4, b"If") + field(5, attr))
open("deep.onnx", "wb").write(field(7, graph))

# external data: a FIFO, a folder, and a regular file, inside the model's folder
def external(name, location):
    w = arr("fc.weight", 3072, 10)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    e = w.external_data.add()
    e.key, e.value = "location", location
    save(name, [flat, gemm("fc", "fc.weight", "fc.bias")], [w, arr("fc.bias", 10)])

os.mkfifo("fifo.bin")
external("fifo.onnx", "fifo.bin")
os.mkdir("folder.bin")
external("folder.onnx", "folder.bin")
os.symlink("/etc/passwd", "link.bin")
external("link.onnx", "link.bin")
open("good.bin", "wb").write(arr("w", 3072, 10).raw_data)
external("ext_good.onnx", "good.bin")

# ReLU chains: 100,000 nodes (past the cap) and 10,000 (under it); input [N, 4, 1, 1]
x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 1, 1])
y4 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 1, 1])
for count, name in ((100000, "chain100k.onnx"), (10000, "chain10k.onnx")):
    nodes = [helper.make_node("Relu", ["x" if i == 0 else "v%d" % (i - 1)],
                              ["y" if i == count - 1 else "v%d" % i]) for i in range(count)]
    save(name, nodes, [], inp=x4, out=y4)

# in-place ReLU through an alias: y = a + relu(alias(a)), alias Identity, Flatten,
# Reshape or a zero Pad
x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 1, 1])
y2 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 1, 1])
shape = numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "shape")
pads = numpy_helper.from_array(np.zeros(8, dtype=np.int64), "pads")
for kind, node, inits in (
        ("identity", helper.make_node("Identity", ["x"], ["a"], name="alias"), []),
        ("pad", helper.make_node("Pad", ["x", "pads"], ["a"], name="alias"), [pads])):
    save("alias_%s.onnx" % kind,
         [node, helper.make_node("Relu", ["a"], ["r"], name="relu"),
          helper.make_node("Add", ["x", "r"], ["y"], name="add")], inits, inp=x2, out=y2)
y2f = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])
for kind, node, inits in (
        ("flatten", helper.make_node("Flatten", ["x"], ["a"], name="alias"), []),
        ("reshape", helper.make_node("Reshape", ["x", "shape"], ["a"], name="alias"), [shape])):
    save("alias_%s.onnx" % kind,
         [node, helper.make_node("Relu", ["a"], ["r"], name="relu"),
          helper.make_node("Flatten", ["x"], ["xf"], name="xflat"),
          helper.make_node("Add", ["xf", "r"], ["y"], name="add")], inits, inp=x2, out=y2f)

# Flatten's feature count past int: 65536 x 65536 (x 1 channel, x 2 channels)
for c, name in ((1, "wide1.onnx"), (2, "wide2.onnx")):
    xw = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, 65536, 65536])
    yw = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "F"])
    save(name, [flat, helper.make_node("Dropout", ["f"], ["y"], name="drop")], [], inp=xw,
         out=yw)

# a weight from a Constant node; tied weights; names the checkpoint reserves
const = helper.make_node("Constant", [], ["fc.weight"], name="const",
                         value=arr("fc.weight", 3072, 10))
save("constant.onnx", [const, flat, gemm("fc", "fc.weight", "fc.bias")], [arr("fc.bias", 10)])
save("tied.onnx",
     [flat, gemm("fc1", "fc.weight", "fc1.bias", out="h", trans_b=1),
      gemm("fc2", "sq.weight", "fc2.bias", inp="h", out="h2", trans_b=1),
      gemm("fc3", "sq.weight", "fc3.bias", inp="h2", trans_b=1)],
     [arr("fc.weight", 10, 3072), arr("fc1.bias", 10), arr("sq.weight", 10, 10),
      arr("fc2.bias", 10), arr("fc3.bias", 10)])
for name, wname in (("metadata.onnx", "__metadata__"),
                    ("momentum.onnx", "optimizer.momentum.fc.weight")):
    save(name, [flat, helper.make_node("Gemm", ["f", wname, "fc.bias"], ["y"], name="fc"),],
         [arr(wname, 3072, 10), arr("fc.bias", 10)])

# opsets: 9999, 7 with a BatchNormalization (spatial), none at all
bn_inits = [arr("bn.weight", 3), arr("bn.bias", 3), arr("bn.running_mean", 3),
            numpy_helper.from_array(np.ones(3, dtype=np.float32), "bn.running_var"),
            arr("fc.weight", 3072, 10), arr("fc.bias", 10)]


def bn_net(name, opset=14, eps=1e-5, **attrs):
    bn = helper.make_node("BatchNormalization", ["x", "bn.weight", "bn.bias",
                                                 "bn.running_mean", "bn.running_var"],
                          ["b"], name="bn", epsilon=eps, **attrs)
    save(name, [bn, helper.make_node("Flatten", ["b"], ["f"], name="flat"),
                gemm("fc", "fc.weight", "fc.bias")], bn_inits, opset=opset)


bn_net("opset9999.onnx", opset=9999)
bn_net("opset7.onnx", opset=7, spatial=0)
bn_net("noopset.onnx", opset=0)
bn_net("bn_ok.onnx")

# values the training would fail on late: NaN, a negative variance, epsilon inf / < 0
w = rng.standard_normal((3072, 10)).astype(np.float32)
w[5, 3] = np.nan
save("nan.onnx", [flat, gemm("fc", "fc.weight", "fc.bias")],
     [numpy_helper.from_array(w, "fc.weight"), arr("fc.bias", 10)])
bn_inits[3] = numpy_helper.from_array(np.array([1, -0.5, 1], dtype=np.float32),
                                      "bn.running_var")
bn_net("negvar.onnx")
bn_inits[3] = numpy_helper.from_array(np.ones(3, dtype=np.float32), "bn.running_var")
bn_net("infeps.onnx", eps=float("inf"))
bn_net("negeps.onnx", eps=-1e-5)
PY

# Round 2 (review of the hardening): files written by hand where the helper would be slow
# or would refuse them
$PY - <<'PY' || { echo "FAIL: the python writer of the review's cases"; exit 1; }
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto


def varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def field(num, payload):
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def model(nodes, inits, inp, out, extra_graph=b"", opset=14):
    """ModelProto bytes; extra_graph: GraphProto fields appended by hand"""
    m = helper.make_model(helper.make_graph(nodes, "g", [inp], [out], inits),
                          opset_imports=[helper.make_opsetid("", opset)])
    g = m.graph.SerializeToString() + extra_graph
    m.ClearField("graph")
    return m.SerializeToString() + field(7, g)


x4 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 2, 2])
y10 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
small = [helper.make_node("Flatten", ["x"], ["f"], name="flat"),
         helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)]
small_inits = [numpy_helper.from_array(np.ones((10, 4), np.float32), "fc.weight"),
               numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias")]

# 65,536 names brute-forced into the first 8,192 of the 262,144 slots of a282373's
# unkeyed FNV-1a table (linear probing: 32.8 s), as unused scalar initializers
count = np.arange(1 << 22, dtype=np.uint64)
digits = np.stack([(count >> np.uint64(4 * (6 - i))) & np.uint64(15) for i in range(7)], 1)
chars = np.where(digits < 10, digits + 48, digits + 87).astype(np.uint64)
h = np.full(len(count), 1469598103934665603, dtype=np.uint64)
with np.errstate(over="ignore"):
    for col in [np.full(len(count), ord("c"), np.uint64)] + [chars[:, i] for i in range(7)]:
        h = (h ^ col) * np.uint64(1099511628211)
hit = np.nonzero((h & np.uint64(262143)) < 8192)[0][:65536]
assert len(hit) == 65536
names = [b"c" + bytes(chars[i].astype(np.uint8)) for i in hit]
scalar = varint((2 << 3) | 0) + varint(1) + field(9, b"\0\0\0\0")  # float, 4 bytes
extra = b"".join(field(5, field(8, n) + scalar) for n in names)
open("collide.onnx", "wb").write(model(small, small_inits, x4, y10, extra))
# the same names as one Relu's inputs (a Relu of 65,537 inputs imported)
relu = helper.make_node("Relu", ["x"] + [n.decode() for n in names], ["r"], name="relu")
open("relu65k.onnx", "wb").write(
    model([relu, helper.make_node("Flatten", ["r"], ["f"], name="flat"), small[1]],
          small_inits, x4, y10))

# a Conv whose output's 16384 x 2^25 x 2^25 values wrap 64 bits to 0 (pads 2^24 - 1)
big_pad = (1 << 24) - 1
conv = helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv", kernel_shape=[1, 1],
                        pads=[big_pad] * 4)
gap = helper.make_node("GlobalAveragePool", ["c"], ["p"], name="gap")
head = [helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["y"], name="fc", transB=1)]
open("convwrap.onnx", "wb").write(model(
    [conv, gap] + head,
    [numpy_helper.from_array(np.ones((16384, 1, 1, 1), np.float32), "conv.weight"),
     numpy_helper.from_array(np.ones((10, 16384), np.float32), "fc.weight"),
     numpy_helper.from_array(np.zeros(10, np.float32), "fc.bias")], x4, y10))
# within its kernel's extent (a dilation of 2^24 - 1), 65536 x (2^24 + 1)^2 values:
# only the weights' shapes, no data (refused before any is read)
dil = helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="conv", kernel_shape=[2, 2],
                       pads=[big_pad] * 4, dilations=[big_pad, big_pad])


def shape_only(name, *dims):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT)
    t.dims.extend(dims)
    return t


open("convbig.onnx", "wb").write(model(
    [dil, gap] + head,
    [shape_only("conv.weight", 65536, 1, 2, 2), shape_only("fc.weight", 10, 65536),
     shape_only("fc.bias", 10)], x4, y10))

# 2^21 + 1 small fields: dims varints of 2 bytes each, and packed in one field
dims = bytes([0x08, 0x01]) * ((1 << 21) + 1)
open("dims.onnx", "wb").write(model(small, small_inits, x4, y10, field(5, dims)))
packed = field(1, b"\x01" * ((1 << 21) + 1))
open("packed.onnx", "wb").write(model(small, small_inits, x4, y10, field(5, packed)))

# a node's name that would make the message two lines and erase one
odd = helper.make_node("Erf", ["x"], ["e"], name="relu\ndtrain: all good, exit 0\x1b[2K")
open("newline.onnx", "wb").write(
    model([odd, helper.make_node("Flatten", ["e"], ["f"], name="flat"), small[1]],
          small_inits, x4, y10))

# external data at an offset near 2^63 (offset + length overflowed)
w = numpy_helper.from_array(np.ones((10, 4), np.float32), "fc.weight")
open("ones.bin", "wb").write(w.raw_data)
w.ClearField("raw_data")
w.data_location = TensorProto.EXTERNAL
for key, value in (("location", "ones.bin"), ("offset", "9223372036854775000")):
    e = w.external_data.add()
    e.key, e.value = key, value
open("offset.onnx", "wb").write(model(small, [w, small_inits[1]], x4, y10))

# 2^30 + 81,921 parameters: a [65537, 16384] weight, declared only (no data)
x16k = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 128, 128])
y65k = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 65537])
open("params.onnx", "wb").write(model(
    small, [shape_only("fc.weight", 65537, 16384), shape_only("fc.bias", 65537)], x16k, y65k))

# an eval-mode export's shared weight: an Identity of an initializer
xc = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 2, 2])
ident = helper.make_node("Identity", ["onnx::Conv_25"], ["w2"], name="ident")
conv = helper.make_node("Conv", ["x", "w2"], ["c"], name="conv", kernel_shape=[1, 1])
open("evalmode.onnx", "wb").write(model(
    [ident, conv, helper.make_node("Flatten", ["c"], ["f"], name="flat"), small[1]],
    [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "onnx::Conv_25")] + small_inits,
    xc, y10))
PY

T="--data synthetic:cifar10 --max-samples 64 --test-samples 32 --epochs 1 --batch-size 32
   --threads 1 --quiet"

# 1. nesting (a SIGSEGV in protobuf-c's recursive unpack before)
expect "3,000 nested subgraphs" \
    "dtrain models: deep.onnx: messages nested more than 32 deep (subgraphs, which dtrain does not import)" \
    "deep.onnx" "$DTRAIN" models deep.onnx

# 2. external data that is not a regular file (the FIFO hung open() before)
expect "external data naming a FIFO" \
    "dtrain models: fifo.onnx: initializer 'fc.weight': its external data ./fifo.bin is a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" models fifo.onnx
expect "external data naming a folder" \
    "dtrain models: folder.onnx: initializer 'fc.weight': its external data ./folder.bin is a directory, not a regular file" \
    "" "$DTRAIN" models folder.onnx
expect "external data through a link leading out of the folder" \
    "dtrain models: link.onnx: initializer 'fc.weight': external data 'link.bin' leads outside the model's folder" \
    "" "$DTRAIN" models link.onnx
ok_case "external data in a regular file beside the model imports" \
    "$DTRAIN" train --model ext_good.onnx $T

# 3. node count: refused in one line past the cap, linear below it (timeout 10: the old
# quadratic import took 113 s for 40,000 nodes)
expect "a chain of 100,000 ReLUs" \
    "dtrain models: chain100k.onnx: more than the 20000 nodes that dtrain imports" \
    "" timeout 10 "$DTRAIN" models chain100k.onnx
ok_case "a chain of 10,000 ReLUs imports in 10 s" timeout 10 "$DTRAIN" models chain10k.onnx

# 4. an in-place ReLU whose input is read under another name
for kind in identity flatten reshape pad; do
    expect "relu(alias(a)) + a ($kind)" \
        "dtrain models: alias_$kind.onnx: node 'relu' (Relu): its input is also read by another node (under this name or one of its aliases: Identity, Flatten, Reshape, Pad), and dtrain's ReLU works in place" \
        "" "$DTRAIN" models alias_$kind.onnx
done

# 5. --save FILE.onnx writes each weight as the file holds it ([in, out] for Gemm
# transB=0 and MatMul, [out, in] for transB=1); a step at lr 1e-12 leaves them equal
"$DTRAIN" train --model mlp.onnx $T --lr 1e-12 --momentum 0 --weight-decay 0 \
    --save mlp_saved.onnx 2>"$tmp/err"
if $PY - 2>>"$tmp/err" <<'PY'; then pass; else fail "--save FILE.onnx keeps the weight layouts" "$(cat "$tmp/err")"; fi
import numpy as np
import onnx
from onnx import numpy_helper
a = {t.name: numpy_helper.to_array(t) for t in onnx.load("mlp.onnx").graph.initializer}
b = {t.name: numpy_helper.to_array(t) for t in onnx.load("mlp_saved.onnx").graph.initializer}
assert list(a) == list(b)
for k in a:
    assert a[k].shape == b[k].shape, k
    err = float(np.max(np.abs(a[k] - b[k])))
    assert err < 1e-5, "%s: %g from the file's values" % (k, err)
PY
"$DTRAIN" train --model mlp_saved.onnx $T --lr 1e-12 --momentum 0 --weight-decay 0 \
    --save mlp_again.onnx 2>"$tmp/err"
if $PY - 2>>"$tmp/err" <<'PY'; then pass; else fail "a saved file re-imports and saves the same" "$(cat "$tmp/err")"; fi
import numpy as np
import onnx
from onnx import numpy_helper
a = {t.name: numpy_helper.to_array(t) for t in onnx.load("mlp.onnx").graph.initializer}
b = {t.name: numpy_helper.to_array(t) for t in onnx.load("mlp_again.onnx").graph.initializer}
for k in a:
    assert float(np.max(np.abs(a[k] - b[k]))) < 1e-5, k
PY

# 6. feature counts past int
expect "Flatten of 1x65536x65536" \
    "dtrain models: wide1.onnx: the input 'x' has 1x65536x65536 = 4294967296 values a sample, past the 268435456 dtrain takes" \
    "" "$DTRAIN" models wide1.onnx
expect "Flatten of 2x65536x65536" \
    "dtrain models: wide2.onnx: the input 'x' has 2x65536x65536 = 8589934592 values a sample, past the 268435456 dtrain takes" \
    "" "$DTRAIN" models wide2.onnx

# 7. weights --save and checkpoints could not write back
expect "a weight in a Constant node" \
    "dtrain models: constant.onnx: node 'fc' (Gemm): its weight 'fc.weight' is a Constant node's value: dtrain trains initializers only (--save writes those back)" \
    "" "$DTRAIN" models constant.onnx
expect "tied weights" \
    "dtrain models: tied.onnx: node 'fc3' (Gemm): initializer 'sq.weight' is also node 'fc2''s: tied weights are not supported (each layer trains its own)" \
    "" "$DTRAIN" models tied.onnx
expect "an initializer named __metadata__" \
    "dtrain models: metadata.onnx: initializer '__metadata__': a name safetensors and checkpoints reserve" \
    "" "$DTRAIN" models metadata.onnx
expect "an initializer named like the checkpoint's momentum" \
    "dtrain models: momentum.onnx: initializer 'optimizer.momentum.fc.weight': a name safetensors and checkpoints reserve" \
    "" "$DTRAIN" models momentum.onnx

# 8. opsets
expect "opset 9999" \
    "dtrain models: opset9999.onnx: opset 9999 of ONNX's default domain is past 17, the newest dtrain imports (ONNX 1.12)" \
    "" "$DTRAIN" models opset9999.onnx
expect "opset 7 with a BatchNormalization (spatial)" \
    "dtrain models: opset7.onnx: node 'bn' (BatchNormalization): opset 7's BatchNormalization is not the one dtrain imports (opset 9 or later)" \
    "" "$DTRAIN" models opset7.onnx
expect "no opset" \
    "dtrain models: noopset.onnx: the model declares no opset of ONNX's default domain" \
    "" "$DTRAIN" models noopset.onnx
ok_case "opset 14 with a BatchNormalization imports" "$DTRAIN" train --model bn_ok.onnx $T

# 9. values refused at import, naming the tensor
expect "a NaN initializer" \
    "dtrain train: nan.onnx: initializer 'fc.weight' holds NaN or infinite values" \
    "" "$DTRAIN" train --model nan.onnx $T
expect "a negative running variance" \
    "dtrain train: negvar.onnx: initializer 'bn.running_var' holds a negative variance" \
    "" "$DTRAIN" train --model negvar.onnx $T
expect "an infinite epsilon" \
    "dtrain models: infeps.onnx: node 'bn' (BatchNormalization): its epsilon inf is not a positive finite number" \
    "" "$DTRAIN" models infeps.onnx
expect "a negative epsilon" \
    "dtrain models: negeps.onnx: node 'bn' (BatchNormalization): its epsilon -1e-05 is not a positive finite number" \
    "" "$DTRAIN" models negeps.onnx


# 10. the review of the hardening (a282373)
ok_case "65,536 names crafted to collide in an unkeyed hash import in 10 s" \
    timeout 10 "$DTRAIN" models collide.onnx
expect "a Relu of 65,537 inputs" \
    "dtrain models: relu65k.onnx: node 'relu' (Relu): 65537 inputs, where Relu takes 1" \
    "" timeout 10 "$DTRAIN" models relu65k.onnx
expect "a Conv's output of 2^64 values a sample (pads 2^24 - 1)" \
    "dtrain models: convwrap.onnx: node 'conv' (Conv): its output of 16384x33554432x33554432 is past the 268435456 values a sample dtrain takes" \
    "" "$DTRAIN" models convwrap.onnx
expect "a Conv's output of 65536 x (2^24 + 1)^2 values a sample (dilations 2^24 - 1)" \
    "dtrain models: convbig.onnx: node 'conv' (Conv): its output of 65536x16777217x16777217 is past the 268435456 values a sample dtrain takes" \
    "" "$DTRAIN" models convbig.onnx
expect "2^21 + 1 two-byte dims" \
    "dtrain models: dims.onnx: more than 2097152 protobuf fields (not a CNN's graph)" \
    "" "$DTRAIN" models dims.onnx
expect "2^21 + 1 packed one-byte dims" \
    "dtrain models: packed.onnx: more than 2097152 protobuf fields (not a CNN's graph)" \
    "" "$DTRAIN" models packed.onnx
expect "a node's name with a newline and an escape" \
    "dtrain models: newline.onnx: node 'relu?dtrain: all good, exit 0?[2K' (Erf): Erf is imported only inside GELU's decomposition (x / sqrt(2), Erf, + 1, * x, * 0.5: torch.onnx's nn.GELU), and no such pattern leads to it" \
    "" "$DTRAIN" models newline.onnx
expect "external data at an offset near 2^63" \
    "dtrain models: offset.onnx: initializer 'fc.weight': its external data ./ones.bin holds 160 bytes, not 9223372036854775000 + 160" \
    "" "$DTRAIN" models offset.onnx
expect "2^30 + 81,921 parameters" \
    "dtrain models: params.onnx: 1073823745 parameters and buffers, past the 1073741824 dtrain takes" \
    "" "$DTRAIN" models params.onnx
expect "an eval-mode export's weight shared through an Identity" \
    "dtrain models: evalmode.onnx: node 'ident' (Identity): its input 'onnx::Conv_25' is a constant where dtrain needs an activation: an eval-mode export folds each BatchNorm into the convolution before it and shares equal folded tensors through an Identity; export with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False (docs/onnx.md)" \
    "" "$DTRAIN" models evalmode.onnx

bad_input_done
