#!/bin/sh
# A later `dtrain scale` over the same --out measures again the configs whose finished
# run was flagged busy, and keeps the others (issue 26: `make run` could not
# re-measure). What flags a run busy is its log's load record: other processes used
# more than 0.25 cores meanwhile (DT_SCALE_BUSY_CORES, measured from /proc/stat around
# the run). So the first pass's logs are edited to say it: batch 32's busy, batch 64's
# quiet. The second pass must run exactly batch 32 again, for real (a new complete log
# with its own load record), keep batch 64's log byte for byte, and say so.
# Also: scripts/main-job.sh (make run) refuses FORCE and WAIT_IDLE values other than
# 0 and 1 before running anything.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
out="$tmp/s"
sweep="$DTRAIN scale --model logreg --data synthetic:mnist --procs 1 --batch-sizes 32,64 --epochs 1 --max-samples 256 --test-samples 32 --threads 1 --out $out"

$sweep >"$tmp/o1" 2>&1
check "the first pass exits 0" [ $? -eq 0 ]
b32="$out/run_p1_b32.jsonl"
b64="$out/run_p1_b64.jsonl"
set_other_cores() { # log, value: its load record's other_cores
    sed -i '/"event":"load"/s/"other_cores":[^,}]*/"other_cores":'"$2"'/' "$1"
}
set_other_cores "$b32" 1.2345
set_other_cores "$b64" 0
check "batch 32's log now says busy" grep -q '"event":"load".*"other_cores":1.2345,' "$b32"
cp "$b32" "$tmp/b32.before"
cp "$b64" "$tmp/b64.before"
"$DTRAIN" report "$out" >/dev/null 2>&1
check "the report flags batch 32 busy" grep -q "^| 1 | 32 | no | 1 | 1.23 | \*\*busy\*\* |" "$out/report.md"
check "and its advice names commands that re-measure" \
    grep -q "run the same \`dtrain scale\` again.*\`make run WAIT_IDLE=1\`" "$out/report.md"

$sweep >"$tmp/o2" 2>&1
check "the second pass exits 0" [ $? -eq 0 ]
check "batch 64 (quiet) is kept" grep -q "1 proc, batch 64: done before, kept" "$tmp/o2"
check "batch 64's log is untouched" cmp -s "$b64" "$tmp/b64.before"
check "batch 32 (busy) is measured again, and the line says so" \
    grep -Eq "1 proc, batch 32: epoch time [0-9.]+ s, test accuracy [0-9.]+% \((machine busy; )?busy before, measured again: other processes used 1\.23 cores then, [0-9.]+ now\)" "$tmp/o2"
check "exactly one config ran again" [ "$(grep -c 'epoch time' "$tmp/o2")" -eq 1 ]
check "batch 32's log was replaced" sh -c "! cmp -s '$b32' '$tmp/b32.before'"
check "by a complete run: its steps and its epoch" \
    [ "$(grep -c '"event":"step"' "$b32")" -eq 8 -a "$(grep -c '"event":"epoch"' "$b32")" -eq 1 ]
check "with a load record of its own" \
    sh -c "grep '\"event\":\"load\"' '$b32' | grep -qv '\"other_cores\":1.2345,'"
check "no partial log left" sh -c "! ls '$out'/*.partial 2>/dev/null"
check "the report has each config once" [ "$(tail -n +2 "$out/runs.csv" | wc -l)" -eq 2 ]

# A third pass follows the new log: kept if it is quiet, measured again if this
# shared machine made it busy too.
busy_now=$(awk -F'"other_cores":' '/"event":"load"/ { split($2, v, /[,}]/); print (v[1] > 0.25) }' "$b32")
if [ "$busy_now" = 0 ]; then
    expect_line="1 proc, batch 32: done before, kept"
else
    expect_line="1 proc, batch 32: .*busy before, measured again"
fi
$sweep >"$tmp/o3" 2>&1
check "the third pass acts on the new log's load ($expect_line)" grep -q "$expect_line" "$tmp/o3"

# make run's FORCE and WAIT_IDLE: only 0 or 1, checked before the study starts.
main_job="$(cd "$(dirname "$0")/.." && pwd)/scripts/main-job.sh"
(cd "$tmp" && FORCE=yes "$main_job" "$DTRAIN" >"$tmp/mj" 2>&1)
check "FORCE=yes is refused" [ $? -eq 2 ]
check "with one line naming it" [ "$(cat "$tmp/mj")" = "main-job.sh: FORCE must be 0 or 1 (make run FORCE=1), got 'yes'" ]
(cd "$tmp" && WAIT_IDLE=2 "$main_job" "$DTRAIN" >"$tmp/mj" 2>&1)
check "WAIT_IDLE=2 is refused" [ "$(cat "$tmp/mj")" = "main-job.sh: WAIT_IDLE must be 0 or 1 (make run WAIT_IDLE=1), got '2'" ]
check "and nothing ran" [ ! -e "$tmp/runs" ]
finish
