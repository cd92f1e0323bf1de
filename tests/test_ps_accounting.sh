#!/bin/sh
# Parameter-server accounting: a ps-sync sweep's report uses the parameter-server
# traffic formula (not the ring's), and its per-role table (each server, each worker:
# bytes in and out, updates, applied, dropped) holds exactly the run logs' figures;
# the servers' measured MB per epoch is the logs' sum over servers.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
"$DTRAIN" scale --mode ps-sync --servers 1 --model logreg --data synthetic:mnist --procs 1,2 \
    --batch-sizes 32 --epochs 2 --max-samples 1024 --test-samples 64 --out "$tmp/ps" --quiet \
    >"$tmp/o" 2>&1
check "the ps-sync sweep exits 0" [ $? -eq 0 ]
check "section 4 is the parameter-server traffic" grep -q "^## 4. Parameter-server traffic" "$tmp/ps/report.md"
check "it says the ring formula does not apply" grep -q "the ring all-reduce formula does not describe it" "$tmp/ps/report.md"
check "no all-reduce bandwidth section" sh -c "! grep -q '^## 4. All-reduce bandwidth' '$tmp/ps/report.md'"
/usr/bin/python3 - "$tmp/ps" >"$tmp/py" 2>&1 <<'PY'
import json, sys
d = sys.argv[1]
report = open(d + "/report.md").read().splitlines()
problems, checked = [], 0
for n in (1, 2):
    recs = [json.loads(l) for l in open("%s/run_p%d_b32.jsonl" % (d, n))]
    epochs = next(r for r in recs if r["event"] == "run")["epochs"]
    servers = [r for r in recs if r["event"] == "ps_server"]
    workers = [r for r in recs if r["event"] == "worker"]
    steps = [r for r in recs if r["event"] == "step"]
    if len(servers) != 1 or len(workers) != n:
        problems.append("p%d: %d server and %d worker records" % (n, len(servers), len(workers)))
    # rank 0's worker record is the sum of its step records
    w0 = next(w for w in workers if w["rank"] == 0)
    if w0["bytes_sent"] != sum(s["bytes_sent"] for s in steps if s["rank"] == 0):
        problems.append("p%d: worker 0's bytes_sent is not its steps' sum" % n)
    rows = {}
    for line in report:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 11 and cells[0] == str(n) and cells[1] == "32":
            rows[cells[2]] = cells
    for s in servers:
        row = rows.get("server %d" % s["server"])
        want = [str(s["bytes_in"]), str(s["bytes_out"]), str(s["updates"]), str(s["applied"]), str(s["dropped"])]
        if not row or row[3:8] != want: problems.append("p%d server: %s vs log %s" % (n, row, want))
        else: checked += 1
    for w in workers:
        row = rows.get("worker %d" % w["rank"])
        want = [str(w["bytes_received"]), str(w["bytes_sent"]), str(w["steps"])]
        if not row or row[3:6] != want: problems.append("p%d worker: %s vs log %s" % (n, row, want))
        else: checked += 1
    total = sum(s["bytes_in"] + s["bytes_out"] for s in servers) / epochs / 1e6
    traffic = [l for l in report if l.startswith("| %d | 32 | " % n) and l.count("|") == 9]
    if not traffic or traffic[0].split("|")[7].strip() != "%.3f" % total:
        problems.append("p%d: servers' MB/epoch %s, logs %.3f" % (n, traffic, total))
    else: checked += 1
print("\n".join(problems) if problems else "ok: %d figures match the logs" % checked)
sys.exit(1 if problems or checked != 7 else 0)
PY
check "per-role bytes match the logs' ($(tail -n 1 "$tmp/py"))" [ $? -eq 0 ]
# Predicted before measuring on the ps:1 schedule, past the machine too; a config with
# more processes (workers + the server) than cores is said and left out of the median.
check "ps-sync predicted on its own schedule" [ "$(grep -c '(ps-sync; 1 server(s)),0$' "$tmp/ps/predicted.csv")" -eq 2 ]
check "... and past the machine" grep -q '^64,32,1,.*(ps-sync; 1 server(s)),1$' "$tmp/ps/predicted.csv"
if [ "$(nproc)" -lt 3 ]; then
    check "2 workers + 1 server on $(nproc) cores: left out of the median" \
        grep -q "^| 2 | 32 | 1 | .* | more processes than cores: left out |$" "$tmp/ps/report.md"
fi
finish
