#!/bin/sh
# train --trace: every worker's timeline in the Chrome trace event format, checked by
# check_trace.py against the format's rules (JSON, named ranks and tracks, no two
# complete events overlapping on a track) and dtrain's promises (every span inside its
# step, clocks aligned within the recorded error, the cap): 1 rank; 2 ranks with the
# all-reduce overlapped and not; 2 parameter-server workers; a 10,000-step run under
# the default cap and a capped one; 4 ranks over 2 emulated hosts (root and network
# namespaces: skipped without them, said so). Bad --trace flags end with one line
# before training.
set -u
DTRAIN=$1
CHECK="python3 $(dirname "$0")/check_trace.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
cleanup() {
    [ -n "${netns:-}" ] && netns_down_n
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
    echo "FAIL: $1"
    failed=$((failed + 1))
}
lenet="train --model lenet5 --data synthetic:mnist --epochs 1 --max-samples 2560 --batch-size 64 --threads 1 --test-samples 256 --quiet"
# name, ranks, steps, the command's words after dtrain (mpirun for more than 1 rank)
traced() {
    name=$1 ranks=$2 steps=$3
    shift 3
    if "$@" --trace "$tmp/$name.json" >"$tmp/$name.out" 2>&1 &&
        $CHECK "$tmp/$name.json" "$ranks" "$steps" ${MAX_BYTES:-}; then
        ok
    else
        cat "$tmp/$name.out"
        bad "$name"
    fi
}
traced one 1 40 "$DTRAIN" $lenet
traced allreduce 2 20 mpirun -np 2 "$DTRAIN" $lenet --bucket-mb 0.05 --overlap off
traced overlapped 2 20 mpirun -np 2 "$DTRAIN" $lenet --bucket-mb 0.05 --overlap on
traced ps 2 20 mpirun -np 3 "$DTRAIN" $lenet --mode ps-sync
# buckets: one span each, five a step (lenet5's 61,706 floats in 0.05 MiB buckets)
n=$(grep -c '"name":"bucket' "$tmp/overlapped.json")
[ "$n" = 200 ] && ok || bad "2 ranks x 20 steps x 5 buckets = 200 bucket spans, got $n"
n=$(grep -c '"name":"push"' "$tmp/ps.json")
[ "$n" = 40 ] && ok || bad "2 workers x 20 steps = 40 pushes, got $n"
grep -q '"name":"worker 1: rank 2 (' "$tmp/ps.json" && ok || bad "a ps worker named with its job rank"

# 10,000 steps: under the default cap (200,000 events) and 30 MB, every step traced
logreg="train --model logreg --data synthetic:mnist --max-samples 40000 --epochs 2 --batch-size 8 --threads 1 --test-samples 64 --quiet"
MAX_BYTES=31457280 traced long 1 10000 "$DTRAIN" $logreg
grep -q '"steps_traced":10000,"steps_left_out":0' "$tmp/long.json" && ok || bad "10,000 steps traced"
# capped: the steps past 20,000 events left out, and said
traced capped 1 10000 "$DTRAIN" $logreg --trace-events 20000
grep -q '"steps_left_out":0' "$tmp/capped.json" && bad "the capped trace left nothing out" || ok
# a window
traced window 1 10000 "$DTRAIN" $logreg --trace-steps 100:199
grep -q '"steps_traced":100,"steps_left_out":0' "$tmp/window.json" && ok || bad "steps 100..199 traced"

# bad flags: one line, before training, nothing written
for flags in "--trace-steps 5" "--trace-steps 9:3" "--trace-steps x:" "--trace-events 10"; do
    if "$DTRAIN" $lenet $flags --trace "$tmp/never.json" --log "$tmp/never.jsonl" >"$tmp/err.out" 2>&1; then
        bad "accepted: $flags"
    elif [ -e "$tmp/never.jsonl" ] || [ "$(wc -l <"$tmp/err.out")" -ne 1 ]; then
        cat "$tmp/err.out"
        bad "$flags: not one line before training"
    else
        ok
    fi
done
# a directory as --trace is refused by the file check, before training
if "$DTRAIN" $lenet --trace "$tmp" >"$tmp/err.out" 2>&1; then
    bad "--trace DIR accepted"
else
    grep -q -- "--trace" "$tmp/err.out" && ok || bad "--trace DIR: $(cat "$tmp/err.out")"
fi

# 4 ranks on 2 emulated hosts (network namespaces, MPI over TCP)
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "dtprobe_$$" 2>/dev/null; then
    echo "skipped: 4 ranks over 2 emulated hosts (needs root and network namespaces)"
else
    ip netns del "dtprobe_$$"
    . "$(dirname "$0")/../scripts/netns-hosts.sh"
    if netns_up_n $$ 2; then
        netns=1
        traced hosts 4 10 netns_mpirun_hosts 1:2,2:2 "$DTRAIN" $lenet --max-samples 2560
        # the ranks say their host: two names, two ranks each
        hosts=$(grep -o '"name":"rank [0-9] ([^)]*)' "$tmp/hosts.json" | sed 's/.*(//' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')
        [ "$hosts" = "2 2 " ] && ok || bad "4 ranks on 2 named hosts, got counts '$hosts'"
    else
        bad "cannot build 2 emulated hosts"
    fi
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
