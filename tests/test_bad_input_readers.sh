#!/bin/bash
# The bad-input catalogue, readers (issue 25 items 6, 9, 10, 14): every text and CSV
# reader refuses a device, a FIFO (at once, never waiting for a writer) and a file
# past its bounds; report --times checks every file it writes before writing any;
# the loss plot keeps every curve; out-of-range numbers are called so; an invalid
# DTRAIN_PEER_TIMEOUT is refused; the run log stays valid UTF-8 JSON.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"

# Under a 2 GB address-space limit: a reader without bounds fails fast (out of memory)
# instead of filling the machine, and the case still fails on its message.
# AddressSanitizer reserves terabytes of address space for its shadow: no limit there
# (an unbounded reader is then stopped by the 60 s timeout instead).
bounded=(sh -c 'ulimit -v 2000000 && exec "$@"' bounded)
if ldd "$DTRAIN" | grep -q libasan; then bounded=(env); fi

# --- item 10: /dev/zero is a device: refused before any read
for c in fit-speed fit-jobs; do
    expect "$c on /dev/zero" "dtrain $c: cannot read /dev/zero: a device, not a regular file" "" \
        "${bounded[@]}" "$DTRAIN" $c /dev/zero
done
expect "allocate on /dev/zero" "dtrain allocate: cannot read /dev/zero: a device, not a regular file" \
    "" "${bounded[@]}" "$DTRAIN" allocate /dev/zero --budget 4
expect "report --times on /dev/zero" \
    "dtrain report: cannot read /dev/zero: a device, not a regular file" "" \
    "${bounded[@]}" "$DTRAIN" report --times /dev/zero --out rep
expect "fit-loss on /dev/zero" \
    "dtrain fit-loss: cannot read run log /dev/zero: a device, not a regular file" "" \
    "${bounded[@]}" "$DTRAIN" fit-loss /dev/zero

# --- a FIFO without a writer: refused at once (timeout 10: the old readers blocked)
mkfifo fifo.csv fifo.jsonl fifo.json
expect "fit-loss on a FIFO run log" \
    "dtrain fit-loss: cannot read run log fifo.jsonl: a FIFO, not a regular file" "" \
    timeout 10 "$DTRAIN" fit-loss fifo.jsonl
expect "fit-loss on a FIFO CSV" "dtrain fit-loss: cannot read fifo.csv: a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" fit-loss fifo.csv
expect "fit-speed on a FIFO" "dtrain fit-speed: cannot read fifo.csv: a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" fit-speed fifo.csv
expect "fit-jobs on a FIFO" "dtrain fit-jobs: cannot read fifo.csv: a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" fit-jobs fifo.csv
expect "report --times on a FIFO" "dtrain report: cannot read fifo.csv: a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" report --times fifo.csv --out rep
expect "simulate --validate on a FIFO" \
    "dtrain simulate: cannot read fifo.csv: a FIFO, not a regular file" "" \
    timeout 10 "$DTRAIN" simulate --validate fifo.csv
expect "predict with a FIFO as the loss fit" \
    "dtrain predict: cannot read fifo.json: a FIFO, not a regular file" "" \
    timeout 10 "$DTRAIN" predict --loss-fit fifo.json --speed-fit fifo.json --batch 32 \
    --procs-max 4 --out pred
mkdir fifostudy && mkfifo fifostudy/run_p1_b32.jsonl
expect "report of a study whose run log is a FIFO" \
    "dtrain report: cannot read run log fifostudy/run_p1_b32.jsonl: a FIFO, not a regular file" \
    "" timeout 10 "$DTRAIN" report fifostudy

# --- files past the bounds: a line of 2 MB without a newline, sparse files past the size
head -c 2000000 /dev/zero | tr '\0' 'a' >long.csv
cp long.csv long.jsonl
expect "fit-jobs on a 2 MB line" "dtrain fit-jobs: long.csv line 1: longer than 1048576 bytes" \
    "long.csv" "${bounded[@]}" "$DTRAIN" fit-jobs long.csv
expect "fit-loss on a run log line of 2 MB" \
    "dtrain fit-loss: long.jsonl line 1: longer than 1048576 bytes" "long.jsonl" \
    "${bounded[@]}" "$DTRAIN" fit-loss long.jsonl
truncate -s 100M sparse.csv
expect "fit-speed on a 100 MB CSV" "dtrain fit-speed: cannot read sparse.csv: larger than 64 MiB" \
    "" "${bounded[@]}" "$DTRAIN" fit-speed sparse.csv
truncate -s 3G sparse.jsonl
expect "fit-loss on a 3 GB run log" \
    "dtrain fit-loss: cannot read run log sparse.jsonl: larger than 1024 MiB" "" \
    "${bounded[@]}" "$DTRAIN" fit-loss sparse.jsonl
rm -f sparse.csv sparse.jsonl
printf 'procs,batch_size,t_train\n1,32,1\0junk\n2,32,0.6\n' >nul.csv
expect "a CSV with a NUL byte" "dtrain report: nul.csv line 2: a NUL byte (not a text file)" \
    "nul.csv" "$DTRAIN" report --times nul.csv --out rep

# --- item 14: out-of-range numbers are called out of range, not "not a number"
expect "a flag's integer beyond a long" \
    "dtrain train: --max-steps is out of range: '99999999999999999999' (from 1 to 9223372036854775807)" \
    "" "$DTRAIN" train --model logreg --max-steps 99999999999999999999
expect "a flag's number beyond a double" \
    "dtrain train: --lr is out of range: '1e999' (from 1e-12 to 1e+06)" "" \
    "$DTRAIN" train --model logreg --lr 1e999
printf 'procs,batch_size,t_train\n1,32,1e999\n' >range.csv
expect "a CSV time beyond a double" \
    "dtrain report: range.csv line 2: t_train is out of range: '1e999' (from -1.79769e+308 to 1.79769e+308)" \
    "range.csv" "$DTRAIN" report --times range.csv --out rep
printf 'name,depth,b0,b1,b2\na,1e999,1,1,1\n' >jobs.csv
expect "a jobs table's number beyond a double" \
    "dtrain fit-jobs: jobs.csv line 2: depth is out of range: '1e999' (from -1.79769e+308 to 1.79769e+308)" \
    "jobs.csv" "$DTRAIN" fit-jobs jobs.csv
expect "an invalid DTRAIN_PEER_TIMEOUT" \
    "dtrain train: DTRAIN_PEER_TIMEOUT must be a number of seconds from 0 (excluded) to 1e9, got '25s' (unset it for the default 25)" \
    "" env DTRAIN_PEER_TIMEOUT=25s mpirun -np 1 "$DTRAIN" train --model logreg --max-steps 2 \
    --quiet

# --- item 6: report --times checks every file it writes before writing any
for name in split.dat epoch_p1.dat speedup_b32.dat epoch_time.png gnuplot.err; do
    printf 'procs,batch_size,t_train\n1,32,10\n2,32,6\n' >"$name"
    expect "report --times over its input named $name" \
        "dtrain report: $name would be overwritten by the report's $name (give --out DIR)" \
        "$name" "$DTRAIN" report --times "$name"
done
printf 'procs,batch_size,t_train\n1,32,10\n2,32,6\n' >times.csv
mkdir -p linked && ln times.csv linked/loss_p2_b32.dat
expect "report --times into a folder where an output is a hard link of the input" \
    "dtrain report: times.csv would be overwritten by the report's linked/loss_p2_b32.dat (give --out DIR)" \
    "times.csv" "$DTRAIN" report --times times.csv --out linked
echo "keep me" >victim.txt
mkdir -p symrep && ln -s ../victim.txt symrep/speedup.png
expect "report --times into a folder where a picture is a symlink" \
    "dtrain report: cannot write symrep/speedup.png: a symbolic link (not replaced)" \
    "times.csv victim.txt" "$DTRAIN" report --times times.csv --out symrep
if [ ! -e symrep/runs.csv ] && [ ! -e symrep/plots.gp ]; then pass "nothing written"; else
    fail "report --times wrote files before refusing a symlinked output"; fi

# --- item 9: a 144-config study's loss plot draws 144 curves (the command was cut)
"$DTRAIN" train --model logreg --max-samples 512 --test-samples 64 --batch-size 32 \
    --max-steps 12 --threads 1 --quiet --log one.jsonl >/dev/null 2>&1
mkdir -p s144
python3 -c "
print('procs,batch_size,t_train')
for p in range(1, 13):
    for b in range(1, 13): print('%d,%d,%g' % (p, 16 * b, 10.0 / p + b))" >s144.csv
for p in 1 2 3 4 5 6 7 8 9 10 11 12; do
    for b in 1 2 3 4 5 6 7 8 9 10 11 12; do cp one.jsonl "s144/run_p${p}_b$((16 * b)).jsonl"; done
done
"$DTRAIN" report --times s144.csv --out s144 >/dev/null 2>&1
curves=$(grep "^plot.*loss_p" s144/plots.gp | head -n 1 | grep -o "'loss_p[0-9]*_b[0-9]*\.dat'" |
    sort -u | wc -l)
if [ "$curves" -eq 144 ]; then pass "144 loss curves"; else
    fail "the 144-config loss plot" "the plot command names $curves of 144 curves"; fi

# --- item 14: a --data path that is not UTF-8 leaves a log of valid UTF-8 JSON, which
# Python's json and dtrain's own reader (report) both read
ln -s /usr/share/datasets/fashion-mnist $'fm\xe9\xff'
"$DTRAIN" train --model logreg --data $'fashion-mnist:fm\xe9\xff' --max-samples 512 \
    --test-samples 64 --max-steps 3 --threads 1 --quiet --log latin.jsonl >/dev/null 2>&1
if /usr/bin/python3 -c "
import json, sys
runs = [json.loads(l) for l in open('latin.jsonl', 'rb') if json.loads(l)['event'] == 'run']
sys.exit(runs[0]['data'] != 'fashion-mnist:fm\u00e9\u00ff')" 2>/dev/null; then
    pass "the log is UTF-8 JSON"
else
    fail "a non-UTF-8 --data path" "$(head -c 300 latin.jsonl | od -c | head -5)"
fi
mkdir -p latin && cp latin.jsonl latin/run_p1_b64.jsonl
if "$DTRAIN" report latin >/dev/null 2>&1 && grep -q "fmé" latin/report.md; then
    pass "dtrain reads what it wrote"
else
    fail "dtrain report of the non-UTF-8 run's log"
fi

# --- a run log whose tail a crash left as NUL bytes (the size grew, the data never
# came) reads as a last line cut short; NUL bytes before a line end are not text
head -n 4 latin.jsonl >nultail.jsonl
head -c 20 latin.jsonl | tail -c 20 >>nultail.jsonl
head -c 4096 /dev/zero >>nultail.jsonl
mkdir -p nulstudy && cp nultail.jsonl nulstudy/run_p1_b64.jsonl
"$DTRAIN" report nulstudy >nul.out 2>&1
if grep -q "holds no complete run logs" nul.out && ! grep -q NUL nul.out; then pass; else
    fail "report of a log with a NUL-filled tail (an incomplete run)" "$(cat nul.out)"; fi
{ head -n 2 latin.jsonl; head -c 10 /dev/zero; echo; tail -n +3 latin.jsonl; } >nulmid.jsonl
expect "a run log with NUL bytes before a line end" \
    "dtrain fit-loss: nulmid.jsonl line 3: a NUL byte (not a text file)" "nulmid.jsonl" \
    "$DTRAIN" fit-loss nulmid.jsonl

bad_input_done
