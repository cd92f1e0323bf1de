#!/bin/sh
# Two hosts on one machine: 2 ranks in 2 network namespaces joined by a veth pair
# shaped to 1 Gbit/s, MPI over TCP between them (scripts/netns-hosts.sh). Trains a few
# steps with each all-reduce algorithm and checks the weights equal the shared-memory
# run's, bit for bit. Cleans up after itself, also when it fails. Exit 77 (skipped)
# when network namespaces cannot be made (not root, or no CAP_SYS_ADMIN/CAP_NET_ADMIN).
set -u
DTRAIN=$1
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
trap 'netns_down; rm -rf "$tmp"' EXIT INT TERM
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
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
