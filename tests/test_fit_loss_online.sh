#!/bin/sh
# fit-loss --online on crafted run logs (5 epochs of 100 steps, windows of 10):
# a target the log never reaches gives predictions and no error (there was one against
# step -1: "-43341.0%"); a target reached gives errors against the step observed;
# without a target the reference is called what it is, the full fit's prediction; a
# fit whose b1 sits on its bound 0 (l(0) infinite) is flagged, in --save too.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
runlog() { # file, then the loss as an awk expression of the step i
    awk "BEGIN {
        print \"{\\\"event\\\": \\\"run\\\", \\\"model\\\": \\\"lenet5\\\", \\\"steps_per_epoch\\\": 100, \\\"epochs\\\": 5, \\\"procs\\\": 1}\"
        for (i = 0; i < 500; i++)
            printf \"{\\\"event\\\": \\\"step\\\", \\\"rank\\\": 0, \\\"epoch\\\": %d, \\\"step\\\": %d, \\\"loss\\\": %.9f}\\n\", int(i / 100), i, $2
    }" >"$1"
}
# l = 1/(0.01 k + 1) + 0.5 exactly: reaches 0.7 at step 405 (the window ending at 409)
runlog "$tmp/hyp.jsonl" "1 / (0.01 * i + 1) + 0.5"
# an exponential fall onto a plateau at 0.301: early refits put the floor lower than
# the full fit's (0.156), so they reach 0.15 while the full fit and the log never do
runlog "$tmp/plateau.jsonl" "i < 300 ? 2 * exp(-i / 40) + 0.3 : 0.3 + 2 * exp(-300 / 40)"
# a fall steeper than 1/k (k^-1.5): NNLS clamps b1 at 0
runlog "$tmp/steep.jsonl" "0.3 + 50 / (i + 1) ^ 1.5"

"$DTRAIN" fit-loss "$tmp/plateau.jsonl" --online --target-loss 0.15 >"$tmp/o1" 2>&1
check "a target never reached: fit-loss succeeds" [ $? -eq 0 ]
check "... says the log never reaches it and gives no error" \
    grep -q "online: refit after each epoch; the smoothed loss never reaches 0.15 in this log: no step observed, no error$" "$tmp/o1"
check "... the refits still predict a step" grep -Eq "^ +1 +10 +[0-9]+$" "$tmp/o1"
check "... and no row carries a percentage" sh -c "! grep -q '%' '$tmp/o1'"

"$DTRAIN" fit-loss "$tmp/hyp.jsonl" --online --target-loss 0.7 >"$tmp/o2" 2>&1
check "a target reached: the error is against the step observed" \
    grep -q "online: refit after each epoch; error against the step observed (409)$" "$tmp/o2"
check "... (405 predicted against 409 observed: -1.0%)" grep -Eq "^ +1 +10 +405 +-1\.0%$" "$tmp/o2"
check "... an exact curve is not flagged" sh -c "! grep -q 'b1 at its bound' '$tmp/o2'"

"$DTRAIN" fit-loss "$tmp/hyp.jsonl" --online >"$tmp/o3" 2>&1
check "no target: the reference is the full fit's prediction, said so" \
    grep -q "online: refit after each epoch; nothing observed (no target): set against the full fit's predicted step [0-9]*, from all 50 points$" "$tmp/o3"
check "... its column is 'vs full fit', not an error against an observation" \
    grep -Eq "^ +epoch +points +predicted vs full fit$" "$tmp/o3"
check "... and nothing is called observed" sh -c "! grep -qi 'observed step' '$tmp/o3'"

"$DTRAIN" fit-loss "$tmp/steep.jsonl" --online --save "$tmp/steep.json" >"$tmp/o4" 2>&1
check "b1 on its bound: the fit is flagged" \
    grep -q "^  b1 at its bound: the fit has no finite start; treat with care$" "$tmp/o4"
check "... its b1 is 0" grep -q "l(k) = 1 / ([0-9.e-]* k + 0) + " "$tmp/o4"
check "... the refits on their bound are marked" grep -Eq "^ +5 +50 +[0-9]+ +[-0-9.]+%  \(b1 at its bound\)$" "$tmp/o4"
check "... and the saved fit says so" grep -Eq '"b1_at_bound":[[:space:]]*true' "$tmp/steep.json"
"$DTRAIN" fit-loss "$tmp/hyp.jsonl" --save "$tmp/hyp.json" >/dev/null 2>&1
check "a fit off its bound saves no such mark" sh -c "! grep -q b1_at_bound '$tmp/hyp.json'"
finish
