#!/bin/sh
# Two hosts on one machine: 2 ranks in 2 network namespaces joined by a veth pair
# shaped to 1 Gbit/s, MPI over TCP between them (scripts/netns-hosts.sh). Trains a few
# steps with each all-reduce algorithm and checks the weights equal the shared-memory
# run's, bit for bit. Then two hosts of two ranks on a switch: --allreduce hier finds
# the nodes and sums exactly (TEST_ALLREDUCE's hier test, the second argument), trains,
# and auto counts it among its candidates. Cleans up after itself, also when it fails.
# Exit 77 (skipped) when network namespaces cannot be made (not root, or no
# CAP_SYS_ADMIN/CAP_NET_ADMIN).
set -u
DTRAIN=$1
TEST_ALLREDUCE=${2:-} # (without it, the 2 x 2 part is skipped)
[ "$(id -u)" = 0 ] || { echo "skipped: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "skipped: iproute2 missing"; exit 77; }
# root is not enough in a container without CAP_SYS_ADMIN / CAP_NET_ADMIN
if ! why=$(ip netns add "dtprobe_$$" 2>&1); then
    echo "skipped: cannot create a network namespace here (ip netns add: $why)"
    exit 77
fi
ip netns del "dtprobe_$$"
. "$(dirname "$0")/../scripts/netns-hosts.sh"
tmp=$(mktemp -d)
trap 'netns_down; netns_down_n; rm -rf "$tmp"' EXIT INT TERM
netns_up $$ || { echo "FAIL: cannot build the two-host network"; exit 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train="$DTRAIN train --model lenet5 --data synthetic:mnist --epochs 1 --max-steps 8 --batch-size 32 --threads 1 --max-samples 4096 --test-samples 256 --quiet"
passed=0
failed=0
for algo in ring mpi; do
    OMPI_MCA_mpi_yield_when_idle=1 mpirun -np 2 $train --allreduce "$algo" \
        --save "$tmp/shm_$algo.safetensors" || { failed=$((failed + 1)); continue; }
    netns_mpirun $train --allreduce "$algo" --save "$tmp/net_$algo.safetensors" \
        --log "$tmp/net_$algo.jsonl"
    if [ $? -eq 0 ] && cmp -s "$tmp/shm_$algo.safetensors" "$tmp/net_$algo.safetensors"; then
        bytes=$(grep '"event":"epoch"' "$tmp/net_$algo.jsonl" | sed 's/.*"bytes_sent":\([0-9]*\).*/\1/')
        echo "ok: $algo over the 1 Gbit/s veth equals shared memory bit for bit ($bytes bytes sent)"
        passed=$((passed + 1))
    else
        echo "FAIL: $algo over the network differs from shared memory (or failed)"
        failed=$((failed + 1))
    fi
done
# hier over 2 nodes x 2 ranks (4 ranks on this machine's cores: slow, not timed)
expect() { # description, then the command that must succeed
    what=$1
    shift
    if "$@"; then
        echo "ok: $what"
        passed=$((passed + 1))
    else
        echo "FAIL: $what"
        failed=$((failed + 1))
    fi
}
if [ -z "$TEST_ALLREDUCE" ]; then
    echo "skipped: 2 hosts x 2 ranks (no test_allreduce given)"
elif netns_up_n $$ 2; then
    netns_mpirun_hosts 1:2,2:2 -x DT_TEST_ONLY=test_hier "$TEST_ALLREDUCE" >"$tmp/hier.out" 2>&1
    rc=$?
    cat "$tmp/hier.out"
    expect "hier over 2 emulated nodes sums exactly (test_allreduce's test_hier)" test $rc -eq 0
    expect "... on 2 nodes x 2 ranks, found by network namespace" \
        grep -q "hier on 4 ranks: hier: 2 nodes x 2 ranks, ring in a node" "$tmp/hier.out"
    # vader offered: Open MPI makes a shared window in the first namespace only (its
    # segments are named by the host name the namespaces share), and hier's nodes must
    # all take the same road (shared memory and the ring own different segments): the
    # ring in every node, exact sums
    NETNS_BTL=self,vader,tcp netns_mpirun_hosts 1:2,2:2 -x DT_TEST_ONLY=test_hier \
        "$TEST_ALLREDUCE" >"$tmp/hier_shm.out" 2>&1
    rc=$?
    cat "$tmp/hier_shm.out"
    expect "hier with vader offered sums exactly over 2 emulated nodes" test $rc -eq 0
    expect "... every node on the ring, as the node without a window" \
        grep -q "hier on 4 ranks: hier: 2 nodes x 2 ranks, ring in a node" "$tmp/hier_shm.out"
    netns_mpirun_hosts 1:2,2:2 $train --allreduce hier --log "$tmp/hier.jsonl"
    expect "train --allreduce hier on 2 x 2 runs" test $? -eq 0
    expect "... its record says how" \
        grep -q '"allreduce_used":"hier: 2 nodes x 2 ranks, ring in a node"' "$tmp/hier.jsonl"
    # a 16-bit wire: between the nodes (the ring in a node stays fp32), and said so
    netns_mpirun_hosts 1:2,2:2 $train --allreduce hier --comm-dtype bf16 --log "$tmp/hier16.jsonl"
    expect "train --allreduce hier --comm-dtype bf16 on 2 x 2 runs" test $? -eq 0
    expect "... its record says the wire between the nodes is bf16" \
        grep -q '"allreduce_used":"hier: 2 nodes x 2 ranks, ring in a node, bf16 between nodes"' \
        "$tmp/hier16.jsonl"
    step_bytes() { grep '"event":"step"' "$1" | head -1 | sed 's/.*"bytes_sent":\([0-9]*\).*/\1/'; }
    b32=$(step_bytes "$tmp/hier.jsonl") b16=$(step_bytes "$tmp/hier16.jsonl")
    expect "... and sends fewer bytes than fp32's hier ($b16 vs $b32)" test "$b16" -lt "$b32"
    netns_mpirun_hosts 1:2,2:2 $train --allreduce auto --log "$tmp/auto.jsonl"
    expect "train --allreduce auto on 2 x 2 runs" test $? -eq 0
    expect "... with hier among its candidates" \
        grep -q '"allreduce_used":"hier, ring or mpi by measure' "$tmp/auto.jsonl"
else
    echo "FAIL: cannot build the switch of two hosts"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
