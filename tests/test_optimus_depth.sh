#!/bin/sh
# Optimus over depth without retraining: the fitted curves of resnet20/32/44/56 that
# scripts/optimus-depth.sh wrote (tests/fixtures/optimus_depth.csv), regressed on
# depth by dtrain fit-jobs. Recomputes the least-squares lines through resnet20/32/44
# here (awk), checks fit-jobs' predicted b's and steps to the target for the held-out
# resnet56 against them, the leave-one-out run against the held-out one, and that the
# prediction lies within the error docs/perfmodel.md states of the step observed.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
csv="$(dirname "$0")/fixtures/optimus_depth.csv"
# The error docs/perfmodel.md states for resnet56's predicted steps to the target
# (percent, rounded there to one decimal).
STATED_PCT=23.7

target=$(sed -n 's/^# target loss: \([0-9.]*\)$/\1/p' "$csv")
check "the fixture names its target loss" test -n "$target"

"$DTRAIN" fit-jobs "$csv" --features depth --lambda 0 --target-loss "$target" \
    --hold-out resnet56 >"$tmp/held" 2>&1
check "fit-jobs --hold-out runs" test $? -eq 0
"$DTRAIN" fit-jobs "$csv" --features depth --lambda 0 --target-loss "$target" >"$tmp/loo" 2>&1
check "fit-jobs leave-one-out runs" test $? -eq 0

# The same regression by hand: least squares of each b on depth over the rows other
# than resnet56, evaluated at depth 56; then k = (1/(target - b2) - b1) / b0.
awk -F, -v t="$target" '
    /^#/ || $1 == "name" { next }
    $1 == "resnet56" { d56 = $2; for (k = 0; k < 3; k++) y56[k] = $(3 + k); obs = $6; next }
    { n++; x[n] = $2; for (k = 0; k < 3; k++) y[n, k] = $(3 + k) }
    END {
        for (i = 1; i <= n; i++) mx += x[i] / n
        for (k = 0; k < 3; k++) {
            my = 0; sxy = 0; sxx = 0
            for (i = 1; i <= n; i++) my += y[i, k] / n
            for (i = 1; i <= n; i++) { sxy += (x[i] - mx) * (y[i, k] - my); sxx += (x[i] - mx) ^ 2 }
            b[k] = my + sxy / sxx * (d56 - mx)
        }
        steps = (1 / (t - b[2]) - b[1]) / b[0]
        printf "%.17g %.17g %.17g %.17g %.17g\n", b[0], b[1], b[2], steps, obs
    }' "$csv" >"$tmp/want"
read -r w0 w1 w2 wsteps observed <"$tmp/want"

near() { # a b rel: |a - b| <= rel * |b|
    awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= r * m) }'
}
for k in 0 1 2; do
    got=$(sed -n "s/^    held out  resnet56 *b$k [^ ]* predicted \([^ ]*\) .*/\1/p" "$tmp/held")
    case $k in 0) want=$w0 ;; 1) want=$w1 ;; *) want=$w2 ;; esac
    check "held-out resnet56 b$k: fit-jobs $got, by hand $want" near "${got:-nan}" "$want" 1e-5
done
row=$(grep '^  resnet56 *held out' "$tmp/held")
got_steps=$(echo "$row" | awk '{ print $5 }')
got_obs=$(echo "$row" | awk '{ print $4 }')
check "resnet56's steps to $target: fit-jobs $got_steps, by hand $wsteps" near "${got_steps:-nan}" "$wsteps" 1e-4
check "fit-jobs shows the observed step of the CSV ($observed)" test "$got_obs" = "$observed"
loo_steps=$(grep '^  resnet56 *leave-one-out' "$tmp/loo" | awk '{ print $4 }')
check "leave-one-out of resnet56 is the held-out prediction" test "$loo_steps" = "$got_steps"
check "every depth has a leave-one-out prediction" test "$(grep -c '^  resnet[0-9]* *leave-one-out' "$tmp/loo")" -eq 4
err_pct=$(awk -v p="$wsteps" -v o="$observed" 'BEGIN { e = 100 * (p - o) / o; printf "%.1f", e < 0 ? -e : e }')
check "resnet56: predicted $wsteps vs observed $observed steps, |error| $err_pct% <= stated $STATED_PCT%" \
    awk -v e="$err_pct" -v s="$STATED_PCT" 'BEGIN { exit !(e <= s) }'

finish
