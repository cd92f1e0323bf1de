#!/bin/sh
# Noise-aware sweeps: a short sweep with --repeats 2 while a busy loop pinned to one
# core runs beside it. Every run's log gets a load record, the report gives medians
# with their spread, and the configs measured beside the busy loop are flagged busy
# in the tables and in the reading (only "re-run", never "scales well"). Also: --repeats refuses
# bad values, and `dtrain report DIR` rebuilds the same flags from the logs.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
out="$tmp/s"
# the busy loop: one core, for as long as the sweep runs
taskset -c 0 sh -c 'while :; do :; done' &
busy=$!
trap 'kill $busy 2>/dev/null; rm -rf "$tmp"' EXIT
"$DTRAIN" scale --model logreg --data synthetic:mnist --procs 1,2 --batch-sizes 64 --epochs 2 \
    --max-samples 2048 --test-samples 64 --repeats 2 --out "$out" --quiet >"$tmp/o" 2>&1
status=$?
kill $busy
wait $busy 2>/dev/null
check "sweep with repeats exits 0" [ "$status" -eq 0 ]
check "every run's log (2 configs x 2 repeats)" [ "$(ls "$out"/run_*.jsonl | wc -l)" -eq 4 ]
check "repeat 2 has its own log" [ -s "$out/run_p2_b64_r2.jsonl" ]
# repeats run seeds of their own (--seed, --seed + 1): the time to target averages
# two independent loss curves, not two copies of one
check "repeat 1 runs seed 0, repeat 2 seed 1" sh -c "head -n 1 '$out/run_p2_b64.jsonl' | grep -q '\"seed\":0,' &&
    head -n 1 '$out/run_p2_b64_r2.jsonl' | grep -q '\"seed\":1,'"
check "... so their losses differ" sh -c "! cmp -s '$out/run_p1_b64.jsonl.args' '$out/run_p1_b64_r2.jsonl.args' &&
    [ \"\$(grep -m 5 '\"event\":\"step\"' '$out/run_p1_b64.jsonl' | grep -o '\"loss\":[^,]*')\" != \
      \"\$(grep -m 5 '\"event\":\"step\"' '$out/run_p1_b64_r2.jsonl' | grep -o '\"loss\":[^,]*')\" ]"
check "the time to target averages the 2 runs of each config" \
    grep -q "averaged over its repeats (2 runs each, seeds --seed to --seed + 1)" "$out/report.md"
check "each log ends with a load record" \
    [ "$(tail -n 1 -q "$out"/run_*.jsonl | grep -c '"event":"load".*"other_cores":')" -eq 4 ]
check "the report says the figures are medians of repeats" grep -q "ran up to 2 times, interleaved" "$out/report.md"
check "the machine-load table flags a config busy" grep -q "| \*\*busy\*\* |" "$out/report.md"
check "the time table carries the spread and the flag" grep -Eq "\| [0-9.]+ \[[0-9.]+-[0-9.]+\]( busy)? \|" "$out/report.md"
check "the speed-up table flags busy" grep -A4 "^Strong scaling speed-up" "$out/report.md" | grep -q " busy |"
check "the reading says only re-run for the busy config" \
    grep -Eq "^- Batch 64 per process, 2 processes: re-run \(machine busy: other processes used [0-9.]+ cores[a-z0-9., -]*\)\.$" "$out/report.md"
check "the reading does not call it scaling well" sh -c "! grep -q 'scales well' '$out/report.md'"
# the model profiled again before the second pass: one factor per batch size, taken
# into the predictions and said in the report
check "drift.csv: pass 2's profile at batch 64" grep -Eq '^1,64,[0-9.e+-]+,[0-9.e+-]+$' "$out/drift.csv"
check "the report says the model was profiled again" \
    grep -Eq "profiled again alone .* pass 2 x[0-9]+\.[0-9]{3}; each config's predicted compute" "$out/report.md"
check "runs.csv has repeats and other_cores" grep -q "repeats,t_train_min,t_train_max,t_epoch_min,t_epoch_max,other_cores,busy" "$out/runs.csv"
cp "$out/report.md" "$tmp/first.md"
check "report DIR rebuilds" "$DTRAIN" report "$out"
check "the rebuilt report is the same" cmp -s "$out/report.md" "$tmp/first.md"
"$DTRAIN" scale --repeats 0 --out "$tmp/x" 2>"$tmp/e"
check "--repeats 0 is refused" [ $? -eq 2 ]
check "with one line" [ "$(wc -l <"$tmp/e")" -eq 1 ]
"$DTRAIN" scale --repeats 2x --out "$tmp/x" 2>"$tmp/e"
check "--repeats 2x is refused" [ $? -eq 2 ]
finish
