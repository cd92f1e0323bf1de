#!/bin/sh
# dtrain models lists every model of the zoo, as a table and as JSON lines that agree
# with each other and with the parameter counts test_zoo checks, each with its default
# recipe (lr, momentum, weight decay, schedule, where it comes from); it builds graphs
# only, so it stays small in memory whatever models the zoo holds.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"

"$DTRAIN" models >"$tmp/table" 2>"$tmp/err"
check "models exits 0 without stderr" test "$?" -eq 0 -a ! -s "$tmp/err"
"$DTRAIN" models --json >"$tmp/json"
check "models --json exits 0" test "$?" -eq 0
check "one table row per JSON line (plus the heading)" \
    test "$(wc -l <"$tmp/table")" -eq "$(($(wc -l <"$tmp/json") + 1))"

/usr/bin/python3 - "$DTRAIN" "$tmp/table" "$tmp/json" >"$tmp/compare" 2>&1 <<'PY'
import json, resource, subprocess, sys
dtrain, table, lines = sys.argv[1], open(sys.argv[2]).read().splitlines(), open(sys.argv[3])
rows = [json.loads(line) for line in lines]
problems = []
names = [r["model"] for r in rows]
if names[:9] != ["logreg", "mlp", "lenet5", "resnet18", "lenet_cifar", "resnet20", "resnet32",
                 "resnet44", "resnet56"]:
    problems.append("models out of zoo order: %s" % names)
want = {"lenet5": (61706, [1, 28, 28], False), "resnet18": (11173962, [3, 32, 32], False),
        "lenet_cifar": (62006, [3, 32, 32], False), "resnet20": (269722, [3, 32, 32], True),
        "resnet56": (853018, [3, 32, 32], True),
        "alexnet": (61100840, [3, 224, 224], True), "vgg16": (138357544, [3, 224, 224], True),
        "vgg16_bn": (138365992, [3, 224, 224], True),
        "resnet50": (25557032, [3, 224, 224], True), "googlenet": (6624904, [3, 224, 224], True)}
for r in rows:
    if r["model"] in want and r["classes"] != (1000 if r["input"][1] == 224 else 10):
        problems.append("%s: %s classes" % (r["model"], r["classes"]))
    if r["model"] in want and (r["params"], r["input"], r["any_input"]) != want[r["model"]]:
        problems.append("%s: %s" % (r["model"], r))
    if not r["flops"] > 0:
        problems.append("%s: flops %s" % (r["model"], r["flops"]))
    row = [t for t in table if t.split()[0] == r["model"]]
    if len(row) != 1 or row[0].split()[1] != format(r["params"], ","):
        problems.append("table row of %s: %s" % (r["model"], row))
    # each model's recipe (the defaults of --lr, --momentum, --weight-decay, --lr-schedule)
    rc = r.get("recipe", {})
    if not (0 < rc.get("lr", 0) <= 1 and 0 <= rc.get("momentum", -1) < 1
            and 0 <= rc.get("weight_decay", -1) < 0.01
            and rc.get("lr_schedule") in ("constant", "cosine", "step") and rc.get("source")):
        problems.append("recipe of %s: %s" % (r["model"], rc))
    elif len(row) == 1 and row[0].split()[-4:] != [format(rc["lr"], "g"),
                                                  format(rc["momentum"], "g"),
                                                  format(rc["weight_decay"], "g"),
                                                  rc["lr_schedule"]]:
        problems.append("table recipe of %s: %s" % (r["model"], row))
# He et al.'s CIFAR ResNet recipe; lenet5's, the default model's, as its --help says
recipes = {r["model"]: r.get("recipe", {}) for r in rows}
for model, want_recipe in (("resnet20", (0.1, 0.9, 0.0001, "step")),
                           ("lenet5", (0.05, 0.9, 0.0005, "cosine"))):
    got = recipes.get(model, {})
    if tuple(got.get(k) for k in ("lr", "momentum", "weight_decay", "lr_schedule")) != want_recipe:
        problems.append("recipe of %s: %s" % (model, got))
# conv and linear multiply-adds x2 at batch 1: resnet20 is 40.55 M MACs (He et al.: ~41 M)
flops = {r["model"]: r["flops"] for r in rows}
if flops.get("resnet20") != 81102080 or flops.get("logreg") != 2 * 784 * 10:
    problems.append("flops %s" % flops)
# Built, never allocated: the whole zoo lists in little memory.
subprocess.run([dtrain, "models"], stdout=subprocess.DEVNULL, check=True)
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
if rss_mb > 300:
    problems.append("dtrain models peaked at %.0f MB" % rss_mb)
print("\n".join(problems))
sys.exit(1 if problems else 0)
PY
status=$?
check "table and JSON agree with the zoo: $(cat "$tmp/compare")" test "$status" -eq 0

# bench's help names one default model, the one it times without --model
"$DTRAIN" bench --help >"$tmp/bench_help"
check "bench --help: resnet18 is its default, lenet5 is not" \
    sh -c "grep -q 'resnet18 (default)' '$tmp/bench_help' && ! grep -q 'lenet5 (default)\|differ.*--model' '$tmp/bench_help'"
"$DTRAIN" bench --steps 1 --width 4 --batch-size 2 --threads 1 >"$tmp/bench.json"
check "bench without --model times resnet18" grep -q '"model":"resnet18"' "$tmp/bench.json"

"$DTRAIN" models --help >"$tmp/help"
check "models --help" grep -q "usage: dtrain models" "$tmp/help"
"$DTRAIN" models extra >/dev/null 2>"$tmp/err"
check "a MODEL that is none is an error, in one line" test "$?" -eq 2 -a "$(wc -l <"$tmp/err")" -eq 1
finish
