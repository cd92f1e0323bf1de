#!/bin/sh
# The short soak (scripts/soak.sh, ~40 s): a 2-rank lenet5 job under `dtrain launch`
# with a rank killed every 3-6 s finishes, within 0.3 points of the uninterrupted
# job's test accuracy, losing at most one checkpoint interval per kill; and, since a
# resume is bit-identical, with the very same final weights.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
. "$(dirname "$0")/wait_lib.sh"
SECONDS_KILLING=20 KILL_MIN=3 KILL_MAX=6 EPOCHS=4 MAX_SAMPLES=8192 TEST_SAMPLES=1000 \
    EVERY=10 EXTRA="--test-delay 0:50" RESTART_DELAY=0.2 \
    "$(dirname "$0")/../scripts/soak.sh" "$DTRAIN" "$tmp" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "the soak's checks pass" [ "$rc" -eq 0 ]
check "ranks were killed" grep -q "killed rank" "$tmp/out"
check "the killed job's weights are the uninterrupted job's" \
    grep -q "bit-identical to the uninterrupted job's: yes" "$tmp/out"

# the supervisor itself: SIGTERM reaches the job's process group and ends the
# supervision (no restart, nothing left running); bad use is one line
"$DTRAIN" launch --restarts 3 -- mpirun -np 2 "$DTRAIN" train --model lenet5 \
    --data fashion-mnist --max-samples 4096 --epochs 20 --test-delay 0:50 --threads 1 --quiet \
    --checkpoint "$tmp/sig" --log "$tmp/sig.jsonl" 2>"$tmp/sig.err" &
job=$!
# the signal goes once the job trains (its first step record), not after a fixed time
wait_line "$tmp/sig.jsonl" '"event":"step"' 120 "$job"
kill -TERM "$job"
wait "$job"
rc=$?
check "SIGTERM: launch exits 143 (got $rc)" [ "$rc" -eq 143 ]
check "SIGTERM: no restart" sh -c "! grep -q 'restart 1 of' '$tmp/sig.err'"
for _ in $(seq 100); do pgrep -f "^$DTRAIN train .*--checkpoint $tmp/sig" >/dev/null || break; sleep 0.1; done
left=$(pgrep -f "^$DTRAIN train .*--checkpoint $tmp/sig")
check "SIGTERM: no rank left" [ -z "$left" ]
msg=$("$DTRAIN" launch --restarts x -- true 2>&1)
check "bad --restarts: one line" [ "$msg" = "dtrain launch: --restarts expects an integer, got 'x'" ]
msg=$("$DTRAIN" launch --restarts 1 -- "$tmp/missing" 2>&1)
check "a missing program: one line" [ "$msg" = "dtrain launch: cannot run $tmp/missing: No such \
file or directory" ]
finish
