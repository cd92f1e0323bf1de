#!/bin/sh
# fit-loss on loss curves as users have them: a CSV (step,loss or epoch,loss; header
# required) made exactly by l(k) = 1/(0.01 k + 1.5) + 0.3 gives those parameters back;
# --drop-last and --tail choose the points fitted; --out draws the fit; bad files
# and options fail with one line.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
{
    echo "step,loss,lr"
    k=10
    while [ $k -le 600 ]; do
        awk -v k=$k 'BEGIN { printf "%d,%.9f,0.1\n", k, 1 / (0.01 * k + 1.5) + 0.3 }'
        k=$((k + 10))
    done
} >"$tmp/l.csv"
"$DTRAIN" fit-loss "$tmp/l.csv" --target-loss 0.35 >"$tmp/o1" 2>&1
check "a step,loss CSV fits" [ $? -eq 0 ]
check "its parameters come back" grep -Eq "l\(k\) = 1 / \(0\.010* k \+ 1\.50*\) \+ 0\.30* " "$tmp/o1"
check "and the target's step (1850 exactly)" grep -q "reaches loss 0.35 at step 1850$" "$tmp/o1"
# the last 5 points spoiled (a learning-rate drop): --drop-last 5 leaves them out
head -n 56 "$tmp/l.csv" >"$tmp/d.csv"
for k in 560 570 580 590 600; do echo "$k,0.05,0.01" >>"$tmp/d.csv"; done
"$DTRAIN" fit-loss "$tmp/d.csv" --target-loss 0.35 --drop-last 5 --tail 30 --out "$tmp/p" >"$tmp/o2" 2>&1
check "--drop-last 5 --tail 30 fits 30 of 60 points" grep -q "(30 points of 60, step,loss; the last 5 left out; the last 30 before them fitted)" "$tmp/o2"
check "... and still finds step 1850" grep -q "reaches loss 0.35 at step 1850$" "$tmp/o2"
check "--out draws the fit" [ -s "$tmp/p/loss_fit.png" ]
check "the plot's data marks the left-out points" [ "$(awk '$3 == 0' "$tmp/p/loss_fit.dat" | wc -l)" -eq 30 ]
"$DTRAIN" fit-loss "$tmp/d.csv" --target-loss 0.35 >"$tmp/o3" 2>&1
check "without --drop-last the spoiled tail moves the fit" sh -c "! grep -q 'at step 1850$' '$tmp/o3'"
printf 'epoch,loss\n1,2.0\n2,1.2\n3,0.9\n4,0.8\n5,0.75\n' >"$tmp/e.csv"
"$DTRAIN" fit-loss "$tmp/e.csv" --target-loss 0.72 >"$tmp/o4" 2>&1
check "an epoch,loss CSV predicts in epochs" grep -q "reaches loss 0.72 at epoch [0-9]*$" "$tmp/o4"
printf '1,2\n3,4\n' >"$tmp/n.csv"
for bad in "$tmp/n.csv" "$tmp/l.csv --drop-last 58" "$tmp/l.csv --tail 2" "$tmp/e.csv --online"; do
    # shellcheck disable=SC2086
    "$DTRAIN" fit-loss $bad >/dev/null 2>"$tmp/e"
    status=$?
    check "refused: fit-loss $bad" [ "$status" -ne 0 ]
    check "... with one line" [ "$(wc -l <"$tmp/e")" -eq 1 ]
done
printf 'step,loss\n1,2\n1,1\n2,0.5\n' >"$tmp/dec.csv"
"$DTRAIN" fit-loss "$tmp/dec.csv" 2>"$tmp/e"
check "a step that does not increase is named" grep -q "dec.csv line 3: the step does not increase" "$tmp/e"
finish
