#!/bin/sh
# dtrain eval on weights dtrain train saved: the same test accuracy the run log's last
# epoch record holds (same data, batch size and thread count: deterministic), a
# confusion matrix over every test sample, the dataset's class names, and the text output.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"

"$DTRAIN" train --model lenet5 --data fashion-mnist --max-samples 2000 --test-samples 500 \
    --epochs 1 --threads 2 --save "$tmp/w.safetensors" --log "$tmp/run.jsonl" --quiet
check "train saves weights and a log" test -s "$tmp/w.safetensors" -a -s "$tmp/run.jsonl"

"$DTRAIN" eval --model lenet5 --init "$tmp/w.safetensors" --test-samples 500 --threads 2 \
    --json >"$tmp/eval.json" 2>"$tmp/eval.err"
status=$?
check "eval --json exits 0 and prints one line" test "$status" -eq 0 -a "$(wc -l <"$tmp/eval.json")" -eq 1

# The log writes test_acc with %.9g: compare both at that precision, as numbers.
/usr/bin/python3 - "$tmp/run.jsonl" "$tmp/eval.json" >"$tmp/compare" 2>&1 <<'EOF'
import json, sys
epochs = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "epoch"]
ev = json.loads(open(sys.argv[2]).read())
logged, measured = epochs[-1]["test_acc"], ev["accuracy"]
cells = sum(sum(row) for row in ev["confusion"])
diagonal = sum(ev["confusion"][i][i] for i in range(len(ev["confusion"])))
problems = []
if "%.9g" % logged != "%.9g" % measured:
    problems.append("accuracy %.9g, log's test_acc %.9g" % (measured, logged))
if abs(ev["loss"] - epochs[-1]["test_loss"]) > 1e-6 * abs(epochs[-1]["test_loss"]):
    problems.append("loss %.9g, log's test_loss %.9g" % (ev["loss"], epochs[-1]["test_loss"]))
if ev["event"] != "eval" or ev["model"] != "lenet5" or ev["data"] != "fashion-mnist":
    problems.append("wrong event/model/data: %r" % ev)
if ev["samples"] != 500 or cells != 500:
    problems.append("samples %s, confusion sums to %d, want 500" % (ev["samples"], cells))
if len(ev["class_accuracy"]) != 10 or len(ev["confusion"]) != 10:
    problems.append("want 10 classes")
if ev.get("class_names") != ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                             "Shirt", "Sneaker", "Bag", "Ankle boot"]:
    problems.append("class_names %r, want Fashion-MNIST's" % ev.get("class_names"))
if "%.9g" % (diagonal / 500) != "%.9g" % measured:
    problems.append("the confusion diagonal %d / 500 is not the accuracy" % diagonal)
print("; ".join(problems))
sys.exit(1 if problems else 0)
EOF
check "eval matches the log's last test accuracy, confusion sums to 500" [ $? -eq 0 ]
[ -s "$tmp/compare" ] && cat "$tmp/compare"

"$DTRAIN" eval --model lenet5 --init "$tmp/w.safetensors" --test-samples 500 --threads 2 \
    >"$tmp/eval.txt" 2>&1
check "eval prints the accuracy as text" grep -q "500 samples, loss [0-9.]*, accuracy [0-9.]*%" "$tmp/eval.txt"
check "eval prints the confusion matrix" grep -q "^confusion matrix (rows: true class" "$tmp/eval.txt"
check "eval names the classes (Fashion-MNIST's)" \
    grep -q "^    9  Ankle boot  *[0-9]*  *[0-9.]*%$" "$tmp/eval.txt"
check "the confusion matrix's rows are named too" grep -q "^    0  T-shirt/top  *[0-9]" "$tmp/eval.txt"

# Synthetic data has no class names: numbers in the text, null in the JSON.
"$DTRAIN" train --model lenet_cifar --max-samples 256 --test-samples 64 --threads 2 \
    --save "$tmp/c.safetensors" --quiet
"$DTRAIN" eval --model lenet_cifar --init "$tmp/c.safetensors" --test-samples 64 --threads 2 \
    --json >"$tmp/c.json"
check "synthetic data: class_names null" grep -q '"class_names":null' "$tmp/c.json"

finish
