#!/bin/sh
# dtrain scale --hosts netns:H --host-cpus (issue 42): each emulated host's CPU. By
# default (cpuset) each host gets CPUs of its own; with X, a cgroup quota of X cores;
# with none, the hosts share the machine. Each run's load record holds the share, the
# least CPU any host used (so every host's daemon and rank were inside its group), the
# hosts' throttling and the machine's idle time; rank 0's run record holds the quota
# it saw. No group is left after a sweep, and one a SIGKILLed sweep left (a dead
# owner's) is removed by the next. Exit 77 where namespaces or cgroups cannot be made.
set -u
DTRAIN=$1
. "$(dirname "$0")/netns_lib.sh"
cpu=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/self/mounts)
cpuset=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpuset(,|$)/ { print $2; exit }' /proc/self/mounts)
if [ -z "$cpu" ] || [ -z "$cpuset" ] || ! mkdir "$cpu/$netns_probe" 2>/dev/null; then
    echo "skipped: this machine has no writable cgroup v1 cpu and cpuset hierarchies"
    exit 77
fi
rmdir "$cpu/$netns_probe"
. "$(dirname "$0")/checks.sh"
groups_left() { # groups named dtrain-<pid>-h<i> of any owner
    ls "$cpu" "$cpuset" 2>/dev/null | grep -c '^dtrain-[0-9]*-h[0-9]*$' || true
}
before=$(groups_left)
# the value of a load record's field, "null" when unknown
field() { sed -n "s/.*\"event\":\"load\".*\"$2\":\([^,}]*\).*/\1/p" "$1"; }
sweep() { # OUT HOST_CPUS...
    out=$1
    shift
    "$DTRAIN" scale --hosts netns:2 --link 1gbit --model lenet5 --data synthetic:mnist \
        --procs 2 --batch-sizes 32 --epochs 1 --max-samples 640 --test-samples 64 \
        --out "$tmp/$out" "$@" >"$tmp/$out.out" 2>&1
}

sweep own
check "cpuset (the default): the sweep ends well" grep -q "^report: " "$tmp/own.out"
check "... says the hosts' CPUs" grep -q "2 emulated hosts .*, CPUs of their own (1 a host)" "$tmp/own.out"
log=$tmp/own/run_p2_b32.jsonl
check "... records the share: 1 CPU a host" [ "$(field "$log" host_cpus)" = 1 ]
check "... no throttling" [ "$(field "$log" throttled_max)" = 0 ]
check "... every host's processes used CPU" awk -v u="$(field "$log" host_used_min)" 'BEGIN { exit !(u > 0) }'
check "... the machine's idle share, mean and least" \
    awk -v a="$(field "$log" idle_mean)" -v b="$(field "$log" idle_min)" 'BEGIN { exit !(a >= 0 && a <= 1 && b >= 0 && b <= a + 0.05) }'
check "... no group left" [ "$(groups_left)" -eq "$before" ]

# A fifth of a core: a rank that computes runs out of it in most periods, so the run
# is unfaithful (DT_SCALE_THROTTLED_MAX), said and measured again by the next sweep.
sweep quota --host-cpus 0.2
log=$tmp/quota/run_p2_b32.jsonl
check "--host-cpus 0.2: the sweep ends well" grep -q "^report: " "$tmp/quota.out"
check "... records the share" [ "$(field "$log" host_cpus)" = 0.2 ]
check "... rank 0 saw its quota" grep -q '"cpu_quota":0.2[,}]' "$log"
check "... every host's processes used CPU" awk -v u="$(field "$log" host_used_min)" 'BEGIN { exit !(u > 0) }'
check "... the hosts ran out of their quota in most periods" \
    awk -v t="$(field "$log" throttled_max)" 'BEGIN { exit !(t > 0.5 && t <= 1) }'
check "... the run is flagged unfaithful" grep -q "batch 32: epoch time .*(unfaithful: a host ran out of its CPU quota in [0-9]*% of periods" "$tmp/quota.out"
check "... in the report's load table" grep -q "^| 2 | 32 | no | 1 | [0-9.]* | [0-9]*% | \*\*unfaithful\*\* |$" "$tmp/quota/report.md"
check "... and its prediction left out of the error" grep -q "^| 2 | 32 | 1 | .* | unfaithful (hosts out of CPU quota): left out |$" "$tmp/quota/report.md"
check "... no group left" [ "$(groups_left)" -eq "$before" ]
sweep quota --host-cpus 0.2
check "the next sweep measures an unfaithful run again" grep -q "unfaithful before, measured again: a host ran out of its CPU quota in [0-9]*% of periods" "$tmp/quota.out"

sweep free --host-cpus none
log=$tmp/free/run_p2_b32.jsonl
check "--host-cpus none: no share recorded" [ "$(field "$log" host_cpus)" = null ]
check "... rank 0 saw no quota" grep -q '"cpu_quota":0[,}]' "$log"

# A group a SIGKILLed sweep left: its owner's pid no longer runs.
sh -c 'exit 0' &
dead=$!
wait "$dead"
mkdir "$cpu/dtrain-$dead-h1"
sweep stale
check "the next sweep removes a dead sweep's group" [ ! -e "$cpu/dtrain-$dead-h1" ]
check "... and says so" grep -q "removed 1 CPU share group left by a killed sweep" "$tmp/stale.out"
rmdir "$cpu/dtrain-$dead-h1" 2>/dev/null
finish
