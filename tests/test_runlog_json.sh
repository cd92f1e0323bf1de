#!/bin/sh
# Run logs re-written by another JSON tool read the same: a real small study, its logs
# re-serialised by Python's json (a) with default separators (a space after ':' and
# ',') and sorted keys, (b) compact; for the original and both copies, dtrain report
# (output, report.md, runs.csv, plot data), fit-loss and a resumed dtrain scale (which
# must keep every config as complete, not run it again) give identical results.
set -u
DTRAIN=$1
PYTHON=/usr/bin/python3
. "$(dirname "$0")/checks.sh"
# Every copy lives in $tmp/<copy>/s and commands run from $tmp/<copy> with the same
# relative paths, so their output text can be compared byte for byte.
scale="$DTRAIN scale --model lenet5 --data synthetic:mnist --procs 1,2 --batch-sizes 32 --epochs 2 --max-samples 320 --test-samples 64 --out s"

mkdir "$tmp/orig"
(cd "$tmp/orig" && $scale --quiet >/dev/null 2>&1)
check "the study ran" [ -s "$tmp/orig/s/run_p2_b32.jsonl" ]
# The resumed scale below must keep every config; one flagged busy (other processes on
# this shared machine) would be measured again, so the load records are set quiet.
sed -i '/"event":"load"/s/"other_cores":[^,}]*/"other_cores":0/' "$tmp/orig/s"/run_*.jsonl
# --overlap auto: the run record says what it chose and why, consistently (which one
# depends on the cores and on mpirun's binding of the ranks).
run=$(head -1 "$tmp/orig/s/run_p2_b32.jsonl")
check "--overlap auto's choice and reason in the run record" \
    sh -c 'echo "$1" | grep -qE "\"overlap\":(true,\"overlap_why\":\"on: |false,\"overlap_why\":\"off: )"' - "$run"

rewrite() { # style, folder: re-serialises every run log of the folder in place
    "$PYTHON" - "$@" <<'EOF'
import glob, json, sys
style, folder = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(folder + "/run_*.jsonl")):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(path, "w") as f:
        for r in records:
            if style == "spaced":
                f.write(json.dumps(r, sort_keys=True) + "\n")
            else:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
EOF
}
for copy in spaced compact; do
    mkdir "$tmp/$copy"
    cp -r "$tmp/orig/s" "$tmp/$copy/s"
    # the outputs go; the logs and the predictions made before the runs are inputs
    rm -f "$tmp/$copy/s"/*.dat "$tmp/$copy/s"/*.md "$tmp/$copy/s"/runs.csv "$tmp/$copy/s"/*.gp
    check "python re-writes the $copy copy" rewrite "$copy" "$tmp/$copy/s"
done
check "the spaced copy has spaces and sorted keys" grep -q '^{"allreduce": "auto", "allreduce_used": "[^"]*", "batch_size": 32, ' "$tmp/spaced/s/run_p1_b32.jsonl"
check "the compact copy is compact" grep -q '^{"event":"run","model":"lenet5",' "$tmp/compact/s/run_p1_b32.jsonl"

for copy in orig spaced compact; do
    (
        cd "$tmp/$copy" || exit 1
        "$DTRAIN" report s >report.out 2>&1
        echo "status $?" >>report.out
        for f in s/report.md s/runs.csv s/*.dat; do cp "$f" "report.$(basename "$f")"; done
        "$DTRAIN" fit-loss s/run_p1_b32.jsonl --every 2 --online >fit_loss.out 2>&1
        echo "status $?" >>fit_loss.out
        "$DTRAIN" fit-loss s/run_p2_b32.jsonl --target-loss 2.2 >fit_loss2.out 2>&1
        echo "status $?" >>fit_loss2.out
        cat s/run_*.jsonl | cksum >logs.before
        $scale >resume.out 2>&1
        echo "status $?" >>resume.out
        cat s/run_*.jsonl | cksum >logs.after
        for f in s/report.md s/runs.csv s/*.dat; do cp "$f" "resume.$(basename "$f")"; done
    )
done

check "report succeeds" grep -q "^status 0" "$tmp/orig/report.out"
check "fit-loss fits" grep -q "l(k) = 1 / (" "$tmp/orig/fit_loss.out"
check "resume keeps both configs" [ "$(grep -c 'done before, kept' "$tmp/orig/resume.out")" -eq 2 ]
for copy in orig spaced compact; do
    check "$copy: resume does not run a config again" cmp -s "$tmp/$copy/logs.before" "$tmp/$copy/logs.after"
done
for copy in spaced compact; do
    for f in "$tmp/orig"/report.* "$tmp/orig"/resume.* "$tmp/orig"/fit_loss.out "$tmp/orig"/fit_loss2.out; do
        name=$(basename "$f")
        if ! cmp -s "$f" "$tmp/$copy/$name"; then
            failed=$((failed + 1))
            echo "FAIL: $copy: $name differs from the original's"
            diff "$f" "$tmp/$copy/$name" | head -5
        else
            passed=$((passed + 1))
        fi
    done
done
check "plot data files were compared" [ "$(ls "$tmp/orig"/report.loss_p*.dat | wc -l)" -eq 2 ]

finish
