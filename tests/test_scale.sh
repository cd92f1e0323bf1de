#!/bin/sh
# dtrain scale end to end on a tiny sweep: the memory stop (a batch that cannot fit
# ends the batch sizes cleanly and the report says so), resume after an interrupted
# sweep (only the unfinished config runs again), --force, the files it promises, and
# dtrain report --times on a CSV.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
sweep="$DTRAIN scale --model lenet5 --data synthetic:mnist --procs 1,2 --epochs 2 --max-samples 640 --test-samples 64 --out $tmp/s"

$sweep --batch-sizes 32,64,16000000 >"$tmp/out1" 2>&1
check "sweep exits 0 after the memory stop" [ $? -eq 0 ]
check "report notes the memory stop" grep -q "batch size 16000000 per process does not fit in memory" "$tmp/s/report.md"
check "runs.csv has the 4 configs that fit" [ "$(tail -n +2 "$tmp/s/runs.csv" | wc -l)" -eq 4 ]
for f in report.md runs.csv speedup.png speedup.svg epoch_time.png compute_comm.png loss.png plots.gp; do
    check "$f written" [ -s "$tmp/s/$f" ]
done

# Interrupt one config: its log loses its last epoch record.
log="$tmp/s/run_p2_b64.jsonl"
grep -v '"event":"epoch","epoch":1' "$log" >"$tmp/cut" && mv "$tmp/cut" "$log"
$sweep --batch-sizes 32,64 >"$tmp/out2" 2>&1
check "resume keeps the 3 finished configs" [ "$(grep -c 'done before, kept' "$tmp/out2")" -eq 3 ]
check "resume runs the interrupted one again" grep -q "2 procs, batch 64: epoch time" "$tmp/out2"
check "the rerun log is complete" [ "$(grep -c '"event":"epoch"' "$log")" -eq 2 ]
# The performance model on the sweep: speed fit from runs.csv, loss fit from a log,
# and the prediction from both fits.
"$DTRAIN" fit-speed --allreduce "$tmp/s/runs.csv" --save "$tmp/speed.json" >"$tmp/out5" 2>&1
check "fit-speed reads runs.csv (4 configs, 4 thetas)" grep -q "theta3 = " "$tmp/out5"
"$DTRAIN" fit-loss "$tmp/s/run_p1_b32.jsonl" --every 2 --save "$tmp/loss.json" >"$tmp/out6" 2>&1
check "fit-loss fits a sweep log" grep -q "l(k) = 1 / (" "$tmp/out6"
"$DTRAIN" predict --loss-fit "$tmp/loss.json" --speed-fit "$tmp/speed.json" --batch 64 \
    --procs-max 4 --out "$tmp/p" >"$tmp/out7" 2>&1
check "predict from the fits names the best process count" grep -q "^best: [0-9]* processes" "$tmp/out7"
check "predict draws its plot" [ -s "$tmp/p/predict.png" ]
check "scale's report compares model and measurement" grep -q "## 7. Model vs measurement" "$tmp/s/report.md"

$sweep --batch-sizes 32 --force >"$tmp/out3" 2>&1
check "--force runs again" [ "$(grep -c 'done before' "$tmp/out3")" -eq 0 ]

# The same sweep with parameter servers: process counts are workers.
"$DTRAIN" scale --mode ps-sync --servers 1 --model lenet5 --data synthetic:mnist --procs 1,2 \
    --batch-sizes 32 --epochs 2 --max-samples 640 --test-samples 64 --out "$tmp/ps" >"$tmp/out8" 2>&1
check "scale --mode ps-sync runs and says so" grep -q "Mode ps-sync with 1 parameter server" "$tmp/ps/report.md"

# report from a CSV of times measured elsewhere
printf 'procs,batch_size,t_train,t_epoch\n1,64,50,52\n2,64,30,31\n4,64,20,21\n' >"$tmp/times.csv"
"$DTRAIN" report --times "$tmp/times.csv" --params 61706 --dataset-size 60000 --out "$tmp/r" >"$tmp/out4" 2>&1
check "report --times prints the tables" grep -q "| 64 | 1.00 | 1.68 | 2.48 |" "$tmp/out4"
check "report --times writes report.md" [ -s "$tmp/r/report.md" ]
printf 'procs,t_train\n1,50\n' >"$tmp/bad.csv"
"$DTRAIN" report --times "$tmp/bad.csv" --out "$tmp/r2" 2>"$tmp/err5"
status=$?
check "report --times: a missing column fails" [ "$status" -ne 0 ]
check "report --times: with one line naming it" [ "$(wc -l <"$tmp/err5")" -eq 1 ]
check "dtrain report DIR rebuilds" "$DTRAIN" report "$tmp/s"

finish
