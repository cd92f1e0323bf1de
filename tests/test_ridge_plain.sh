#!/bin/sh
# fit-jobs --no-standardize is plain ridge regression as scikit-learn's Ridge(alpha=1)
# does it: its intercepts and weights (in the features' units) equal the numbers
# numpy computed with the committed script (scripts/ridge_reference.py ->
# tests/fixtures/ridge_numpy.txt) to the 6 digits fit-jobs prints; the standardised
# default gives other weights on these features of different scales.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
fx="$(dirname "$0")/fixtures"
"$DTRAIN" fit-jobs "$fx/ridge_jobs.csv" --no-standardize --features depth,batch >"$tmp/plain" 2>&1
check "fit-jobs --no-standardize runs" [ $? -eq 0 ]
check "it says it is plain ridge" grep -q "plain ridge: features centred, not standardised" "$tmp/plain"
# "   = c0 +c1 * depth +c2 * batch", one line per b, against "b<k> c0 c1 c2"
grep '^   = ' "$tmp/plain" | awk '{ print $2, $3, $6 }' >"$tmp/got"
check "three parameters regressed" [ "$(wc -l <"$tmp/got")" -eq 3 ]
paste -d' ' "$fx/ridge_numpy.txt" "$tmp/got" | awk '
    function off(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return d > 1e-5 * m + 1e-12 }
    { for (i = 2; i <= 4; i++) if (off($i, $(i + 3))) { print "b" NR - 1 ": numpy " $i " fit-jobs " $(i + 3); bad = 1 } }
    END { exit bad }' >"$tmp/diff"
check "equal to numpy's plain ridge ($(head -n 1 "$tmp/diff"))" [ ! -s "$tmp/diff" ]
"$DTRAIN" fit-jobs "$fx/ridge_jobs.csv" --features depth,batch >"$tmp/std" 2>&1
grep '^   = ' "$tmp/std" | awk '{ print $2, $3, $6 }' >"$tmp/got_std"
check "the standardised default differs on these features" sh -c "! cmp -s '$tmp/got' '$tmp/got_std'"
# --out draws each job's own curve against its predicted one (and the unseen job's)
"$DTRAIN" fit-jobs "$fx/ridge_jobs.csv" --no-standardize --features depth,batch --hold-out f \
    --predict 40,256 --out "$tmp/p" >/dev/null 2>&1
check "fit-jobs --out draws the curves" [ -s "$tmp/p/jobs_curves.png" ]
for title in "'a'" "'a left out'" "'f held out'" "'unseen'"; do
    check "... the curve titled $title" grep -q "title $title" "$tmp/p/jobs_curves.gp"
done
finish
