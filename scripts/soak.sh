#!/bin/sh
# Soak test of resumable training (docs/checkpoints.md): lenet5 on Fashion-MNIST under
# `dtrain launch --restarts`, one random rank killed (SIGKILL) every KILL_MIN..KILL_MAX
# seconds for SECONDS seconds; then the same job once without kills. Reports and checks:
#   the killed job finishes;
#   its final test accuracy is within 0.3 points of the uninterrupted job's;
#   the work lost per kill (the resume records' lost_steps) is at most one checkpoint
#   interval (EVERY steps);
#   whether the final weights are bit-identical (cmp) to the uninterrupted job's.
#
# usage: scripts/soak.sh DTRAIN [OUT_DIR]     (OUT_DIR default: a temporary folder)
# environment (defaults = the 10-minute soak):
#   SECONDS_KILLING=600 KILL_MIN=20 KILL_MAX=40 NP=2 EPOCHS=150 BATCH=64 EVERY=200
#   MAX_SAMPLES= (all 60000) TEST_SAMPLES= (all 10000) LR=0.05 THREADS=1
#   EXTRA= (more train flags, e.g. "--test-delay 0:50" to stretch a short soak)
#   RESTART_DELAY=1 (launch's first wait before a restart, doubling up to 30 s)
set -u
DTRAIN=$(realpath "$1")
OUT=${2:-$(mktemp -d)}
mkdir -p "$OUT"
: "${SECONDS_KILLING:=600}" "${KILL_MIN:=20}" "${KILL_MAX:=40}" "${NP:=2}" "${EPOCHS:=150}"
: "${BATCH:=64}" "${EVERY:=200}" "${MAX_SAMPLES:=}" "${TEST_SAMPLES:=}" "${LR:=0.05}"
: "${THREADS:=1}" "${EXTRA:=}" "${RESTART_DELAY:=1}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1

set -- --model lenet5 --data fashion-mnist --epochs "$EPOCHS" --batch-size "$BATCH" \
    --lr "$LR" --lr-schedule cosine --threads "$THREADS" --quiet
[ -n "$MAX_SAMPLES" ] && set -- "$@" --max-samples "$MAX_SAMPLES"
[ -n "$TEST_SAMPLES" ] && set -- "$@" --test-samples "$TEST_SAMPLES"
# shellcheck disable=SC2086 # EXTRA is a list of flags
[ -n "$EXTRA" ] && set -- "$@" $EXTRA
acc() { grep '"event":"epoch"' "$1" | tail -1 | sed 's/.*"test_acc":\([0-9.e-]*\).*/\1/'; }
rm -rf "$OUT/ck" "$OUT/soak.jsonl" "$OUT/soak.st" "$OUT/ref.jsonl" "$OUT/ref.st"

# the killed job, under the supervisor
start=$(date +%s)
"$DTRAIN" launch --restarts 1000 --restart-delay "$RESTART_DELAY" -- mpirun -np "$NP" "$DTRAIN" train "$@" \
    --log "$OUT/soak.jsonl" --save "$OUT/soak.st" --checkpoint "$OUT/ck" \
    --checkpoint-every "${EVERY}steps" 2>"$OUT/launch.err" &
job=$!
kills=0
while kill -0 "$job" 2>/dev/null; do
    now=$(date +%s)
    [ $((now - start)) -ge "$SECONDS_KILLING" ] && break
    pause=$(shuf -i "$KILL_MIN-$KILL_MAX" -n 1)
    i=0
    while [ $i -lt "$pause" ] && kill -0 "$job" 2>/dev/null; do sleep 1; i=$((i + 1)); done
    [ $(($(date +%s) - start)) -ge "$SECONDS_KILLING" ] && break
    # a rank of this job: its command line starts with the binary and names our ck
    victim=$(pgrep -f "^$DTRAIN train .*--checkpoint $OUT/ck" | shuf -n 1)
    [ -n "$victim" ] || continue
    kill -KILL "$victim" 2>/dev/null && kills=$((kills + 1)) &&
        echo "soak: $(($(date +%s) - start)) s: killed rank pid $victim (kill $kills)"
done
wait "$job"
rc=$?
soak_s=$(($(date +%s) - start))

# the same job, never killed
start=$(date +%s)
mpirun -np "$NP" "$DTRAIN" train "$@" --log "$OUT/ref.jsonl" --save "$OUT/ref.st"
ref_rc=$?
ref_s=$(($(date +%s) - start))

restarts=$(grep -c 'restart [0-9]* of' "$OUT/launch.err")
lost=$(grep '"event":"resume"' "$OUT/soak.jsonl" | sed 's/.*"lost_steps":\([0-9]*\).*/\1/')
max_lost=$(echo "$lost" | sort -n | tail -1)
mean_lost=$(echo "$lost" | awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else print 0 }')
a_soak=$(acc "$OUT/soak.jsonl")
a_ref=$(acc "$OUT/ref.jsonl")
same=no
cmp -s "$OUT/soak.st" "$OUT/ref.st" && same=yes
echo "soak: $NP ranks, lenet5, $EPOCHS epochs, checkpoint every $EVERY steps"
echo "soak: killed job: exit $rc after $soak_s s, $kills kills, $restarts restarts"
echo "soak: uninterrupted job: exit $ref_rc after $ref_s s"
echo "soak: final test accuracy: killed ${a_soak:-none}, uninterrupted ${a_ref:-none}"
echo "soak: steps lost per kill: mean ${mean_lost:-0}, max ${max_lost:-0} (interval $EVERY)"
echo "soak: final weights bit-identical to the uninterrupted job's: $same"
ok=0
[ "$rc" -eq 0 ] && [ "$ref_rc" -eq 0 ] || { echo "soak: FAIL: a job failed"; ok=1; }
# a kill as a job ends (after its last checkpoint) may not fail it: a note, not a failure
[ "$kills" -eq "$restarts" ] || echo "soak: note: $kills kills, $restarts restarts"
awk -v a="${a_soak:-0}" -v b="${a_ref:-9}" 'BEGIN { d = (a - b) * 100; exit !(d <= 0.3 && d >= -0.3) }' ||
    { echo "soak: FAIL: accuracy differs by more than 0.3 points"; ok=1; }
[ "${max_lost:-0}" -le "$EVERY" ] || { echo "soak: FAIL: a kill lost more than $EVERY steps"; ok=1; }
exit $ok
