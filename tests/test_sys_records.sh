#!/bin/sh
# Resource monitoring in every run: a 2-rank training run logs sys records of both
# ranks (and a parameter-server run its server's) with every field present and in a sane range, MPI bytes that agree with the
# step records, and a sweep's report gets the utilisation table and a plot per config.
set -u
DTRAIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
# Runs long enough for several samples each: on an AMD EPYC 3000 samples took 0.08 s
# an epoch and rank 1 got a single sys record at 0.1 s intervals.
mpirun -np 2 "$DTRAIN" train --model lenet5 --data synthetic:mnist --epochs 2 --batch-size 32 \
    --max-samples 20000 --test-samples 64 --threads 1 --sys-interval 0.05 --log run.jsonl --quiet
check "the run exits 0" [ $? -eq 0 ]
/usr/bin/python3 - run.jsonl >py.out 2>&1 <<'PY'
import json, math, os, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
sysr = [r for r in recs if r["event"] == "sys"]
steps = [r for r in recs if r["event"] == "step"]
cores = os.cpu_count()
problems = []
fields = ["rank", "t", "cpu_user", "cpu_sys", "machine_cpu", "cores", "other_cores", "rss_bytes",
          "net_rx", "net_tx", "mpi_sent", "disk_read", "disk_write"]
# -1 would be "unknown" (runlog.h): /proc is readable here, so every figure is known
for r in sysr:
    missing = [f for f in fields if f not in r]
    if missing: problems.append("missing %s" % missing)
    if not 0 <= r["cpu_user"] + r["cpu_sys"] <= 100 * cores + 30: problems.append("cpu %s" % r)
    if not 0 <= r["machine_cpu"] <= 100: problems.append("machine_cpu %s" % r)
    if not 0 <= r["other_cores"] <= cores: problems.append("other_cores %s" % r)
    if r["cores"] != cores: problems.append("cores %s" % r)
    if not 2**20 < r["rss_bytes"] < 2**34: problems.append("rss %s" % r)
    if min(r["net_rx"], r["net_tx"], r["disk_read"], r["disk_write"]) < 0: problems.append("bytes %s" % r)
for rank in (0, 1):
    mine = [r for r in sysr if r["rank"] == rank]
    if len(mine) < 2: problems.append("rank %d: %d sys records" % (rank, len(mine)))
    if any(b["t"] <= a["t"] or b["mpi_sent"] < a["mpi_sent"] for a, b in zip(mine, mine[1:])):
        problems.append("rank %d: t or mpi_sent not increasing" % rank)
    # every record covers a full --sys-interval, however late its thread woke (a record
    # 1.7 ms after the last read a tick of CPU as 574%); t has 4 significant digits
    short = [b for a, b in zip([{"t": 0}] + mine, mine)
             if b["t"] - a["t"] < 0.05 - 10 ** (math.floor(math.log10(max(b["t"], 1e-3))) - 3) - 1e-9]
    if short: problems.append("rank %d: %d records less than an interval apart: %s" % (rank, len(short), short[0]))
# rank 0's MPI count can only be what its steps sent so far, and something was sent
sent = sum(s["bytes_sent"] for s in steps if s["rank"] == 0)
last = max(r["mpi_sent"] for r in sysr if r["rank"] == 0)
if not 0 < last <= sent: problems.append("mpi_sent %d vs steps' %d" % (last, sent))
print("\n".join(problems) if problems else "ok: %d sys records" % len(sysr))
sys.exit(1 if problems else 0)
PY
check "sys records: fields present, sane ranges ($(tail -n 1 py.out))" [ $? -eq 0 ]
"$DTRAIN" scale --model lenet5 --data synthetic:mnist --procs 1,2 --batch-sizes 32 --epochs 2 \
    --max-samples 20000 --test-samples 64 --sys-interval 0.05 --out s --quiet 2>/dev/null
check "the sweep exits 0" [ $? -eq 0 ]
check "the report has the utilisation table" grep -q "^## 8. Utilisation" s/report.md
check "with a row per config with samples" [ "$(sed -n '/^## 8. Utilisation/,/^## Plots/p' s/report.md | grep -Ec '^\| [12] \| 32 \| [1-9][0-9]* \| [0-9]+ \|')" -eq 2 ]
for f in util_p1_b32.png util_p2_b32.png util_p2_b32_r0.dat util_p2_b32_r1.dat; do
    check "utilisation plot file $f" [ -s "s/$f" ]
done
# disk bytes too (the dstat study plotted them): a table column each way, a number in
# every row with samples, and two columns of the plot's data (NaN on the first sample)
check "the utilisation table has disk read and written columns" \
    grep -q "| disk read (MB/s per rank) | disk written (MB/s per rank) |$" s/report.md
check "... with a figure in each row" \
    [ "$(sed -n '/^## 8. Utilisation/,/^## Plots/p' s/report.md | grep -Ec '^\| [12] \| 32 \| [1-9][0-9]* \|( [^|]* \|){5} [0-9.]+ \| [0-9.]+ \|$')" -eq 2 ]
check "the utilisation data has disk rates (columns 5 and 6)" \
    awk 'NR > 1 && NF == 6 && $5 >= 0 && $6 >= 0 { ok = 1 } END { exit !ok }' s/util_p2_b32_r0.dat
check "the utilisation plot draws them" grep -q "disk read', '' using 1:6 title 'rank 0 disk written'" s/plots.gp
# parameter servers sample too: their records (role server) follow their statistics
mpirun -np 3 "$DTRAIN" train --mode ps-sync --servers 1 --model lenet5 --data synthetic:mnist \
    --epochs 2 --batch-size 32 --max-samples 12000 --test-samples 64 --threads 1 \
    --sys-interval 0.05 --log ps.jsonl --quiet
check "the ps-sync run exits 0" [ $? -eq 0 ]
check "the server's sys records are in the log" [ "$(grep -c '"event":"sys","rank":0,"role":"server"' ps.jsonl)" -ge 2 ]
check "and both workers'" [ "$(grep '"event":"sys"' ps.jsonl | grep -c '"role":"worker"')" -ge 4 ]
finish
