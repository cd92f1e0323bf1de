#!/bin/sh
# Optimus over depth, on real curves (issue 12; docs/perfmodel.md, "Optimus over depth,
# on real curves"). Trains resnet20, resnet32, resnet44 and resnet56 on Fashion-MNIST
# with the same seed and settings, fits l(k) = 1/(b0 k + b1) + b2 to each training
# curve (dtrain fit-loss), writes the CSV name,depth,b0,b1,b2,steps_to_target, then
# regresses b0, b1, b2 on depth (dtrain fit-jobs, least squares: --lambda 0):
# resnet20/32/44 -> resnet56 held out, and leave-one-out over all four. A job's
# predicted steps to the target loss come from its regressed b's,
# k = (1/(target - b2) - b1) / b0; the observed step is the first where the smoothed
# loss (fit-loss' windows of a tenth of an epoch) is <= target.
#
#   scripts/optimus-depth.sh [DTRAIN] [OUT_DIR]      (defaults build/dtrain, runs/optimus-depth)
#
# Settings (environment, defaults in brackets): MODELS [20 32 44 56] (depths),
# WIDTH [16] (the models' own width), SAMPLES [16000] first training samples,
# EPOCHS [4], BATCH [64], LR [0.02] (constant; 0.1 and 0.05 make resnet56 diverge or
# jump in its first steps), momentum 0.9 and weight decay 5e-4 (train's defaults),
# SEED [0], THREADS [1] (one compute thread: a shared 2-core machine; two threads spin
# against other work), TEST [1000] test samples per epoch, TARGET [0.35] the target
# loss (every run must reach it; the script stops if one does not), HOLDOUT [56],
# ALSO ["0.40 0.30"] other targets whose steps-to-target table is printed too (a
# target near the curves' floors b2 ~ 0.25-0.28 makes the step ill-conditioned).
# 16000 samples / batch 64 = 250 steps per epoch, 1000 steps per run.
# REUSE=1 keeps the run logs already in OUT_DIR (a run's log is moved in place only
# when its training ends) and only refits.
# Writes OUT_DIR/resnetD.jsonl, resnetD.fit.json, optimus_depth.csv, report.txt.
set -eu
DTRAIN=${1:-build/dtrain}
OUT=${2:-runs/optimus-depth}
MODELS=${MODELS:-20 32 44 56}
WIDTH=${WIDTH:-16}
SAMPLES=${SAMPLES:-16000}
EPOCHS=${EPOCHS:-4}
BATCH=${BATCH:-64}
LR=${LR:-0.02}
SEED=${SEED:-0}
THREADS=${THREADS:-1}
TEST=${TEST:-1000}
TARGET=${TARGET:-0.35}
HOLDOUT=${HOLDOUT:-56}
ALSO=${ALSO:-0.40 0.30}
REUSE=${REUSE:-0}

mkdir -p "$OUT"
report="$OUT/report.txt"
now() { date +%s; }
say() { echo "$*" | tee -a "$report"; }
: >"$report"
start=$(now)
say "optimus-depth: $(date -u '+%Y-%m-%d %H:%M UTC'), dtrain $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
say "settings: width $WIDTH, $SAMPLES samples, $EPOCHS epochs, batch $BATCH, lr $LR constant," \
    "momentum 0.9, weight decay 5e-4, seed $SEED, $THREADS thread(s), target loss $TARGET"

# 1. Training, one run after the other.
for d in $MODELS; do
    log="$OUT/resnet$d.jsonl"
    if [ "$REUSE" = 1 ] && [ -s "$log" ]; then
        say "resnet$d: reusing $log"
        continue
    fi
    t0=$(now)
    "$DTRAIN" train --model "resnet$d" --width "$WIDTH" --data fashion-mnist \
        --max-samples "$SAMPLES" --test-samples "$TEST" --epochs "$EPOCHS" \
        --batch-size "$BATCH" --lr "$LR" --lr-schedule constant --seed "$SEED" \
        --threads "$THREADS" --log "$log.part" --quiet
    mv "$log.part" "$log"
    say "resnet$d: trained in $(($(now) - t0)) s"
done

# 2. One loss-curve fit per run; the CSV of fitted parameters.
field() { # FIT.json KEY: the number cJSON wrote on the line "KEY": value
    v=$(sed -n "s/^[[:space:]]*\"$2\":[[:space:]]*\([-+0-9.eE]*\),\{0,1\}[[:space:]]*\$/\1/p" "$1")
    if [ -z "$v" ]; then
        echo "optimus-depth: no number '$2' in $1" >&2
        exit 1
    fi
    echo "$v"
}
csv="$OUT/optimus_depth.csv"
{
    echo "# dtrain optimus-depth: fitted Optimus loss curves of CIFAR ResNets on Fashion-MNIST"
    echo "# made by scripts/optimus-depth.sh at dtrain $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u '+%Y-%m-%d')"
    echo "# train --width $WIDTH --data fashion-mnist --max-samples $SAMPLES --epochs $EPOCHS --batch-size $BATCH --lr $LR --lr-schedule constant --seed $SEED --threads $THREADS"
    echo "# fit-loss RUN --target-loss $TARGET --save FIT: b0,b1,b2 and steps_to_target (observed_step:"
    echo "# the first step whose loss averaged over windows of a tenth of an epoch is <= the target)"
    echo "# target loss: $TARGET"
    echo "name,depth,b0,b1,b2,steps_to_target"
} >"$csv"
say ""
say "fitted loss curves (l(k) = 1/(b0 k + b1) + b2):"
for d in $MODELS; do
    "$DTRAIN" fit-loss "$OUT/resnet$d.jsonl" --target-loss "$TARGET" \
        --save "$OUT/resnet$d.fit.json" >"$OUT/resnet$d.fit.txt" 2>/dev/null
    sed -n 's/^  //p' "$OUT/resnet$d.fit.txt" | sed "s/^/  resnet$d: /" | tee -a "$report"
    f="$OUT/resnet$d.fit.json"
    observed=$(field "$f" observed_step)
    if awk -v o="$observed" 'BEGIN { exit !(o < 0) }'; then
        echo "optimus-depth: resnet$d's smoothed loss never reaches $TARGET; choose a larger TARGET" >&2
        exit 1
    fi
    echo "resnet$d,$d,$(field "$f" b0),$(field "$f" b1),$(field "$f" b2),$observed" >>"$csv"
done

# 3. Regression on depth: the held-out model from the others, then leave-one-out.
say ""
say "\$ dtrain fit-jobs $csv --features depth --lambda 0 --target-loss $TARGET --hold-out resnet$HOLDOUT"
"$DTRAIN" fit-jobs "$csv" --features depth --lambda 0 --target-loss "$TARGET" \
    --hold-out "resnet$HOLDOUT" | tee -a "$report"
say ""
say "\$ dtrain fit-jobs $csv --features depth --lambda 0 --target-loss $TARGET"
"$DTRAIN" fit-jobs "$csv" --features depth --lambda 0 --target-loss "$TARGET" | tee -a "$report"

# 4. The same prediction for other targets (ALSO): observed steps from the same fits.
for t in $ALSO; do
    other="$OUT/optimus_depth_$t.csv"
    sed -e '/^resnet/d' -e "s/target loss: $TARGET\$/target loss: $t/" \
        -e "s/--target-loss $TARGET /--target-loss $t /" "$csv" >"$other"
    for d in $MODELS; do
        "$DTRAIN" fit-loss "$OUT/resnet$d.jsonl" --target-loss "$t" \
            --save "$OUT/resnet$d.fit_$t.json" >/dev/null 2>&1
        f="$OUT/resnet$d.fit_$t.json"
        echo "resnet$d,$d,$(field "$f" b0),$(field "$f" b1),$(field "$f" b2),$(field "$f" observed_step)" >>"$other"
    done
    say ""
    say "\$ dtrain fit-jobs $other --features depth --lambda 0 --target-loss $t  (steps table)"
    "$DTRAIN" fit-jobs "$other" --features depth --lambda 0 --target-loss "$t" |
        sed -n '/^steps to loss/,$p' | tee -a "$report"
done
say ""
say "wall time: $(($(now) - start)) s; CSV: $csv; report: $report"
