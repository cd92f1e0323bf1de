#!/bin/sh
# Side by side: scale --modes sweeps two modes on one grid into DIR/<mode> and
# compares them (compare.md with time to a target accuracy, final accuracy, epoch
# time, bytes per role, CPU; accuracy_time.png); dtrain compare DIR... does the same
# on given folders; its figures are the studies' own; bad input gets one line.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
"$DTRAIN" scale --modes allreduce,ps-async --servers 1 --model logreg --data synthetic:mnist \
    --procs 2 --batch-sizes 32 --epochs 2 --max-samples 1024 --test-samples 128 --eval-every 4 \
    --target 0.5 --out "$tmp/m" --quiet >"$tmp/o" 2>&1
check "scale --modes exits 0" [ $? -eq 0 ]
for f in allreduce/report.md ps-async/report.md compare.md compare.csv accuracy_time.png; do
    check "$f written" [ -s "$tmp/m/$f" ]
done
check "one compare row per mode" [ "$(grep -Ec '^\| (allreduce|ps-async) \| 2 \| [01] \| 32 \|' "$tmp/m/compare.md")" -eq 2 ]
check "the ps-async row has a server and server bytes" grep -Eq '^\| ps-async \| 2 \| 1 \| 32 \| .* \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9]+|n/a) \|$' "$tmp/m/compare.md"
# the plot's legend names each run's processes, the servers of a ps mode too
check "the ps-async curve's title counts its server" \
    grep -q "title 'ps-async, 2 workers + 1 server, batch 32'" "$tmp/m/accuracy_time.gp"
check "the allreduce curve's title has no server" \
    grep -q "title 'allreduce, 2 workers, batch 32'" "$tmp/m/accuracy_time.gp"
check "time to 50% is measured from eval records" grep -Eq '^\| allreduce \| 2 \| 0 \| 32 \| [0-9.]+ \| [0-9]+ \| eval records \(128 test samples\) \|' "$tmp/m/compare.md"
# the comparison's final accuracy is the study's own
acc=$(grep -E '^\| 2 \| 32 \| 64 \| no \|' "$tmp/m/allreduce/report.md" | awk -F'|' '{gsub(/ /,"",$7); print $7}')
check "the study's report has the final accuracy" [ -n "$acc" ]
check "final accuracy as in the study's report ($acc)" grep -Eq "^\| allreduce \| 2 \| 0 \| 32 \| .* \| $acc \|" "$tmp/m/compare.md"
"$DTRAIN" compare "$tmp/m/allreduce" "$tmp/m/ps-async" --target 0.5 --out "$tmp/c" >"$tmp/o2" 2>&1
check "dtrain compare DIR DIR exits 0" [ $? -eq 0 ]
printed=$(grep '^| allreduce' "$tmp/o2")
check "and prints the table it writes" [ -n "$printed" ]
check "... the same rows" [ "$printed" = "$(grep '^| allreduce' "$tmp/c/compare.md")" ]
"$DTRAIN" compare "$tmp/nothing" 2>"$tmp/e"
check "a missing folder fails" [ $? -eq 1 ]
check "with one line naming it" sh -c "[ \$(wc -l <'$tmp/e') -eq 1 ] && grep -q nothing '$tmp/e'"
"$DTRAIN" compare "$tmp/m/allreduce" --target 85 2>"$tmp/e"
check "--target 85 (not a fraction) is refused" [ $? -eq 2 ]
"$DTRAIN" scale --modes allreduce,bogus --out "$tmp/x" 2>"$tmp/e"
check "an unknown mode is refused" [ $? -eq 2 ]
check "with one line" [ "$(wc -l <"$tmp/e")" -eq 1 ]
finish
