#!/bin/sh
# Exports that lose what training needs, and graphs of operators dtrain lacks (issue 41):
# each refused in one line naming the cause and, for an export, the flags that avoid it
# (docs/onnx.md). The files are real exports by Debian's python3-torch (1.13), written
# here; a hostile graph of 20,000 unknown operators checks that naming them all stays
# one bounded line.
set -u
DTRAIN=$1
PY=/usr/bin/python3
if ! $PY -c 'import torch, onnx' 2>/dev/null; then
    echo "skipped: Debian's python3-torch and python3-onnx are not installed"
    exit 77
fi
. "$(dirname "$0")/bad_input_lib.sh"

$PY - <<'PY' >/dev/null 2>&1 || { echo "FAIL: the python writer of the cases"; exit 1; }
import torch
import torch.nn as nn
import torch.nn.functional as F
import onnx
from onnx import helper, TensorProto

torch.manual_seed(1)


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def export(model, path, **kw):
    torch.onnx.export(model, torch.randn(2, 3, 32, 32), path, input_names=["input"],
                      output_names=["logits"], opset_version=17,
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, **kw)


def trained(model):  # BatchNorms whose scales, shifts and statistics differ: no two equal
    for bn in (model.bn1, model.bn2):
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 1.5)
    return model


EVAL, TRAIN = torch.onnx.TrainingMode.EVAL, torch.onnx.TrainingMode.TRAINING
# torch.onnx.export's defaults (eval mode, constant folding): the BatchNorms folded away
export(trained(ConvBN()).eval(), "eval_default.onnx")
# eval mode without folding: PyTorch 1.13 fuses BatchNorm into Conv in eval mode anyway
export(trained(ConvBN()).eval(), "eval_nofold.onnx", training=EVAL, do_constant_folding=False)
# a fresh model in eval mode: its folded zero biases are equal, one an Identity of the other
export(ConvBN().eval(), "eval_fresh.onnx")
# a model in eval mode kept as it is (PRESERVE): BatchNorms kept, equal weights shared
export(ConvBN().eval(), "preserve_eval.onnx", training=torch.onnx.TrainingMode.PRESERVE)
# training mode with constant folding: nothing lost (the recipe turns folding off anyway)
export(ConvBN(), "train_fold.onnx", training=TRAIN, do_constant_folding=True)
export(ConvBN(), "train.onnx", training=TRAIN, do_constant_folding=False)


class Lacking(nn.Module):  # a user's CNN with three operators dtrain lacks
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.elu(self.conv1(x))
        x = x * torch.sin(self.conv2(x))
        x = F.softplus(F.elu(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class OneLacking(nn.Module):  # one node of one operator dtrain lacks
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(F.elu(self.conv(x)), 1), 1))


class RandomMask(nn.Module):  # a dropout of its own: random numbers in the graph
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = x * (torch.rand_like(x) > 0.5)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


export(Lacking(), "lacking.onnx", training=TRAIN, do_constant_folding=False)
export(OneLacking(), "one_lacking.onnx", training=TRAIN, do_constant_folding=False)
export(RandomMask(), "random_mask.onnx", training=TRAIN, do_constant_folding=False)

# 20,000 nodes of as many operators nobody has (the importer's node cap), in a chain
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
nodes = [helper.make_node(f"Op{i:05d}", [f"v{i}" if i else "x"], [f"v{i + 1}" if i < 19999 else "y"],
                          name=f"n{i}") for i in range(20000)]
onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                            opset_imports=[helper.make_opsetid("", 17)]), "many_ops.onnx")
PY

FIX="export with training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False (docs/onnx.md)"
FOLDED="was computed by the exporter: an eval-mode export folds each BatchNorm into the convolution before it, and dtrain would train without them; $FIX"

# 1. eval-mode exports (imported silently without their BatchNorms before)
expect "an eval-mode export with constant folding (torch.onnx.export's defaults)" \
    "dtrain models: eval_default.onnx: node '/conv1/Conv' (Conv): its weight 'onnx::Conv_25' $FOLDED" \
    "eval_default.onnx" "$DTRAIN" models eval_default.onnx
expect "an eval-mode export without constant folding" \
    "dtrain models: eval_nofold.onnx: node '/conv1/Conv' (Conv): its weight 'onnx::Conv_25' $FOLDED" \
    "eval_nofold.onnx" "$DTRAIN" models eval_nofold.onnx
expect "an eval-mode export of a fresh model (equal folded biases through an Identity)" \
    "dtrain models: eval_fresh.onnx: node 'Identity_0' (Identity): its input 'onnx::Conv_26' is a constant where dtrain needs an activation: an eval-mode export folds each BatchNorm into the convolution before it and shares equal folded tensors through an Identity; $FIX" \
    "eval_fresh.onnx" "$DTRAIN" models eval_fresh.onnx
expect "a model in eval mode exported as it is (PRESERVE)" \
    "dtrain models: preserve_eval.onnx: node 'Identity_0' (Identity): its input 'bn1.weight' is a constant where dtrain needs an activation: an eval-mode export shares equal weights through an Identity; $FIX" \
    "preserve_eval.onnx" "$DTRAIN" models preserve_eval.onnx
expect "training with eval_default's weights: refused before any work" \
    "dtrain train: eval_default.onnx: node '/conv1/Conv' (Conv): its weight 'onnx::Conv_25' $FOLDED" \
    "eval_default.onnx" "$DTRAIN" train --model eval_default.onnx --data synthetic:cifar10 \
    --max-samples 32 --epochs 1 --batch-size 16 --threads 1 --quiet
# training-mode exports import, with constant folding or without
ok_case "a training-mode export with constant folding" "$DTRAIN" models train_fold.onnx
ok_case "a training-mode export (docs/onnx.md's recipe)" "$DTRAIN" models train.onnx

# 2. operators dtrain lacks: all of them named, with their counts
expect "three operators dtrain lacks" \
    "dtrain models: lacking.onnx: dtrain lacks 3 operators this graph needs: Elu (2 nodes, first '/Elu'), Sin (1), Softplus (1)" \
    "lacking.onnx" "$DTRAIN" models lacking.onnx
expect "one node of an operator dtrain lacks" \
    "dtrain models: one_lacking.onnx: node '/Elu' (Elu): not an operator dtrain imports (docs/onnx.md lists the ones it does)" \
    "one_lacking.onnx" "$DTRAIN" models one_lacking.onnx
expect "random numbers in the graph (a dropout of the model's own)" \
    "dtrain models: random_mask.onnx: dtrain lacks 2 operators this graph needs: RandomUniformLike (1 node, first '/RandomUniformLike'), Greater (1)" \
    "random_mask.onnx" "$DTRAIN" models random_mask.onnx
expect_match "20,000 operators nobody has: one bounded line, fast" \
    "^dtrain models: many_ops.onnx: dtrain lacks 20000 operators this graph needs: Op00000 \(1 node, first 'n0'\), Op00001 \(1\), .*, and [0-9]+ more$" \
    "many_ops.onnx" "$DTRAIN" models many_ops.onnx

bad_input_done
