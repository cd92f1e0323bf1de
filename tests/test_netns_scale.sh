#!/bin/sh
# dtrain scale --hosts netns:H: a short sweep over 2 emulated hosts writes the report and
# the link table (per bucket size, beside the ring model) and removes its namespaces;
# a link delay the kernel cannot emulate fails with one line and removes what was
# built, and so does a sweep whose run fails; a sweep stopped with SIGTERM or SIGINT
# ends its ranks and removes its namespaces; one killed with SIGKILL leaves them
# behind, and the next sweep removes them and the processes inside. Exit 77 (skipped) when network namespaces cannot be made here.
set -u
DTRAIN=$1
. "$(dirname "$0")/netns_lib.sh"
. "$(dirname "$0")/checks.sh"
veths=$(ip -o link show type veth | wc -l)

ours() { # namespaces of sweep pid $1 still listed
    ip netns list | grep -c "^dtrain-$1-" || true
}
alive() { # how many of the pids in file $1 still run (a zombie has ended: it holds no
    # namespace, and this machine's init may be slow to reap orphans)
    n=0
    for p in $(cat "$1"); do
        state=$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null) || continue
        [ "$state" != Z ] && n=$((n + 1))
    done
    echo "$n"
}
ranks_in() { # the dtrain processes in network namespace $1
    for p in $(ip netns pids "$1" 2>/dev/null); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dtrain ] && echo "$p"
    done
}
wait_ranks() { # until a dtrain rank runs in each host of sweep $1 (at most 60 s), not a
    # fixed sleep: under load the second host's rank may start seconds after the
    # first's; then every process of both hosts into $2
    i=0
    while [ $i -lt 600 ]; do
        if [ -n "$(ranks_in "dtrain-$1-h1")" ] && [ -n "$(ranks_in "dtrain-$1-h2")" ]; then
            { ip netns pids "dtrain-$1-h1"; ip netns pids "dtrain-$1-h2"; } >"$2" 2>/dev/null
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# 1. A short sweep: report, link table per bucket size, nothing left. The hosts share
# the machine freely (--host-cpus none): the binding check below is about that case
# (test_host_cpus.sh checks the hosts' own CPUs).
"$DTRAIN" scale --hosts netns:2 --link 1gbit --model lenet5 --data synthetic:mnist --epochs 2 \
    --max-samples 640 --test-samples 64 --batch-sizes 32 --bucket-sizes 0.05,1 \
    --host-cpus none --out "$tmp/s" >"$tmp/out1" 2>"$tmp/err1"
check "netns sweep exits 0" [ $? -eq 0 ]
check "its predictions name the hosts' link" \
    grep -q "^2,32,1,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,emulated hosts: 1000 Mbit/s and 0 us a message (bursts of 256 KiB); 1 rank(s) a host" \
    "$tmp/s/bucket_0.05/predicted.csv"
check "... and the report sets them beside the measurements" \
    grep -q "^## Predicted before measuring" "$tmp/s/bucket_0.05/report.md"
pid=$(sed -n 's/.*namespaces dtrain-\([0-9]*\)-h1.*/\1/p' "$tmp/err1")
check "it names its namespaces" [ -n "$pid" ]
check "... and removed them all" [ "$(ours "$pid")" -eq 0 ]
check "report per bucket size" [ -s "$tmp/s/bucket_0.05/report.md" ] && [ -s "$tmp/s/bucket_1/report.md" ]
check "the report's system table names the emulated hosts" \
    grep -q "^| hosts | up to 2 emulated hosts (network namespaces" "$tmp/s/bucket_0.05/report.md"
check "network.md states the ring model" grep -q "T = k alpha + 2(P-1)/P n/B" "$tmp/s/network.md"
# lenet5: 61706 floats = 246824 bytes; 0.05 MiB buckets hold 13107 floats: 5 buckets.
# 2 procs, 640 samples, batch 32: 10 steps; model 10 x 2(1)/2 x 246824 x 8 / 1e9 s
check "2 procs at 0.05 MiB: 5 buckets, 10 steps, ring model 0.02 s" \
    grep -q "^| 0.05 | 2 | 32 | 5 | 10 | [0-9.]*\( busy\)\? | [0-9.]* | [0-9.]* | [0-9.]* | 0.02 |" "$tmp/s/network.md"
check "network.csv: a row per config and bucket size" [ "$(tail -n +2 "$tmp/s/network.csv" | wc -l)" -eq 4 ]
check "network.csv: the model column" grep -q "^lenet5,1,2,32,1,10,1000000000,0,.*,0.019746,[01]$" "$tmp/s/network.csv"
check "the table is printed" grep -q "^| 1 | 2 | 32 | 1 | 10 |" "$tmp/out1"
log2=$(ls "$tmp"/s/bucket_1/run_p2_b32*.jsonl | head -1)
# the emulated hosts share the machine's cores: each host's daemon must not bind its
# rank to core 0 (both ranks on one core computed at half speed)
check "ranks on emulated hosts are not bound to one core" sh -c \
    '! grep -q "cores this rank is bound to" "$1" && grep -q "\"overlap_why\":\"off: 2 ranks" "$1"' - "$log2"
check "the all-reduce goes over the link, not shared memory" \
    grep -q '"allreduce_used":"ring or mpi by measure (no shm: MPI was told not to use shared memory' "$log2"

# 1b. Two ranks per host (TCP between them too: shared memory crashed across emulated
# hosts): 4 ranks run; 2 ranks fit on host 1, so that config has no link model.
"$DTRAIN" scale --hosts netns:2 --ranks-per-host 2 --link 1gbit --model lenet5 \
    --data synthetic:mnist --procs 2,4 --epochs 2 --max-samples 640 --test-samples 64 \
    --batch-sizes 32 --out "$tmp/r" >"$tmp/out6" 2>&1
check "--ranks-per-host 2: 4 ranks on 2 hosts run" [ $? -eq 0 ]
check "... 2 ranks on one host: no link model" grep -q "^| 25 | 2 | 32 | 1 | 10 | .* | - | - | [0-9.]* |$" "$tmp/r/network.md"
check "... 4 ranks on two hosts: the ring model" grep -q "^| 25 | 4 | 32 | 1 | 5 | .* | 0.01 | [0-9.]* | [0-9.]* |$" "$tmp/r/network.md"

# 2. A delay needs netem: where the kernel lacks it, one line says so and nothing is left.
if ip netns add "$netns_probe" && ip -n "$netns_probe" link add va type veth peer name vb &&
    tc -n "$netns_probe" qdisc add dev va root netem delay 100us 2>/dev/null; then
    echo "note: this kernel has netem; the missing-netem message is not checked"
    ip netns del "$netns_probe"
else
    ip netns del "$netns_probe" 2>/dev/null
    sh -c 'echo $$ >"$1"; shift; exec "$@"' _ "$tmp/pid2" "$DTRAIN" scale --hosts netns:2 \
        --link 1gbit,100us --model lenet5 --data synthetic:mnist --procs 2 --batch-sizes 32 \
        --max-samples 64 --out "$tmp/d" >/dev/null 2>"$tmp/err2"
    check "a delay without netem fails" [ $? -ne 0 ]
    check "... with one line saying netem is missing" sh -c "[ \$(wc -l <'$tmp/err2') -eq 1 ] && grep -q 'this kernel has no netem qdisc' '$tmp/err2'"
    check "... and removes the namespaces it built" [ "$(ours "$(cat "$tmp/pid2")")" -eq 0 ]
fi

# 2b. A run that fails inside the sweep (no such weights to start from: the profiles
# before it do not read them): one line, namespaces removed.
sh -c 'echo $$ >"$1"; shift; exec "$@"' _ "$tmp/pid5" "$DTRAIN" scale --hosts netns:2 \
    --link 1gbit --model lenet5 --data synthetic:mnist --init /nonexistent.safetensors \
    --procs 2 --batch-sizes 32 --max-samples 64 --out "$tmp/f" >/dev/null 2>"$tmp/err5"
check "a failing run fails the sweep" [ $? -ne 0 ]
check "... naming the run and its cause" grep -q "^dtrain scale: run with 2 processes, batch 32 failed (dtrain train: cannot open /nonexistent" "$tmp/err5"
check "... and the namespaces are removed" [ "$(ours "$(cat "$tmp/pid5")")" -eq 0 ]

long="--hosts netns:2 --link 1gbit --model lenet5 --data synthetic:mnist --procs 2 --epochs 50 --batch-sizes 32 --test-samples 64"
# 3. SIGTERM or SIGINT (Ctrl-C) during a run: its ranks end, its namespaces go, non-zero exit.
for sig in TERM INT; do
    "$DTRAIN" scale $long --out "$tmp/t$sig" >/dev/null 2>"$tmp/err3" &
    job=$!
    check "SIG$sig: the ranks started in the hosts" wait_ranks "$job" "$tmp/pids3"
    kill -"$sig" "$job"
    wait "$job"
    check "SIG$sig: the sweep exits non-zero" [ $? -ne 0 ]
    check "SIG$sig: a line says the run was stopped with it" grep -q "stopped by signal [0-9]* (.*): the run with 2 processes" "$tmp/err3"
    check "SIG$sig: its namespaces are removed" [ "$(ours "$job")" -eq 0 ]
    check "SIG$sig: no process of the run is left" [ "$(alive "$tmp/pids3")" -eq 0 ]
done

# 4. SIGKILL: nothing can clean up then; the next sweep removes the leftovers.
"$DTRAIN" scale $long --out "$tmp/k" >/dev/null 2>&1 &
job=$!
check "SIGKILL: the ranks started in the hosts" wait_ranks "$job" "$tmp/pids4"
kill -KILL "$job"
wait "$job" 2>/dev/null
check "SIGKILL: the namespaces are left behind" [ "$(ours "$job")" -eq 3 ]
"$DTRAIN" scale --hosts netns:2 --link 1gbit --model lenet5 --data synthetic:mnist --procs 2 \
    --epochs 1 --batch-sizes 32 --max-samples 64 --test-samples 16 --out "$tmp/n" >/dev/null 2>"$tmp/err4"
check "the next sweep says it removed them" grep -q "removed 3 network namespaces left by a killed sweep" "$tmp/err4"
check "... none of the killed sweep's namespaces remain" [ "$(ours "$job")" -eq 0 ]
i=0
while [ "$(alive "$tmp/pids4")" -gt 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
check "... nor any process of its run" [ "$(alive "$tmp/pids4")" -eq 0 ]
check "no veth was left in this namespace" [ "$(ip -o link show type veth | wc -l)" -eq "$veths" ]

finish
