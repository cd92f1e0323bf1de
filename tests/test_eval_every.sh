#!/bin/sh
# Accuracy during training: --eval-every N logs an eval record after every N-th step
# (elapsed time, time without evaluation, step, test loss and accuracy, samples),
# --eval-samples bounds the test samples, bad values are refused with one line, and a
# sweep's report draws accuracy against time and steps.
set -u
DTRAIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
# 2 ranks, 1536 samples, batch 32 per rank: 24 steps per epoch, 48 in all
mpirun -np 2 "$DTRAIN" train --model logreg --data synthetic:mnist --epochs 2 --batch-size 32 \
    --max-samples 1536 --threads 1 --eval-every 5 --eval-samples 200 --log run.jsonl --quiet
check "the run exits 0" [ $? -eq 0 ]
/usr/bin/python3 - run.jsonl >py.out 2>&1 <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in recs if r["event"] == "eval"]
problems = []
if [r["step"] for r in ev] != list(range(5, 49, 5)): problems.append("steps %s" % [r["step"] for r in ev])
for a, b in zip(ev, ev[1:]):
    if not (b["t"] > a["t"] and b["t_train"] > a["t_train"]): problems.append("time not increasing")
for r in ev:
    if not 0 <= r["test_acc"] <= 1 or not r["test_loss"] >= 0: problems.append("figures %s" % r)
    if not 0 < r["t_train"] <= r["t"]: problems.append("t_train %s" % r)
    if r["samples"] != 200: problems.append("samples %s" % r)
    if r["epoch"] != (r["step"] - 1) // 24: problems.append("epoch %s" % r)
# an eval record follows its step's record, before the next step's
order = [(r["event"], r.get("step")) for r in recs if r["event"] in ("eval", "step")]
for i, (e, k) in enumerate(order):
    if e == "eval" and order[i - 1] != ("step", k - 1): problems.append("eval after %s" % (order[i - 1],))
print("\n".join(problems) if problems else "ok: %d eval records" % len(ev))
sys.exit(1 if problems else 0)
PY
check "eval records: steps, times, ranges ($(tail -n 1 py.out))" [ $? -eq 0 ]
"$DTRAIN" train --model logreg --data synthetic:mnist --eval-every 0 2>err
check "--eval-every 0 is refused" [ $? -eq 2 ]
check "... with one line" [ "$(wc -l <err)" -eq 1 ]
"$DTRAIN" train --model logreg --data synthetic:mnist --eval-samples x 2>err
check "--eval-samples x is refused" [ $? -eq 2 ]
"$DTRAIN" scale --model logreg --data synthetic:mnist --procs 1,2 --batch-sizes 32 --epochs 2 \
    --max-samples 1536 --test-samples 64 --eval-every 8 --out s --quiet 2>/dev/null
check "a sweep with --eval-every exits 0" [ $? -eq 0 ]
check "its report draws accuracy vs time and steps" grep -q "accuracy.png" s/report.md
for f in accuracy_p1_b32.dat accuracy_p2_b32.dat accuracy.png; do check "accuracy file $f" [ -s "s/$f" ]; done
finish
