#!/bin/sh
# Two hosts on one machine: 2 ranks in 2 network namespaces joined by a veth pair
# shaped to 1 Gbit/s (tbf), MPI over TCP between them. Trains a few steps with each
# all-reduce algorithm and checks the weights equal the shared-memory run's, bit for
# bit. Needs root and iproute2; cleans up after itself, also when it fails.
# Recipe: shared/notes/mpi-here.md.  Exit 77 (skipped) when not root.
set -u
DTRAIN=$1
[ "$(id -u)" = 0 ] || { echo "skipped: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null || { echo "skipped: iproute2 missing"; exit 77; }
tag=$$
ns1=dth1_$tag ns2=dth2_$tag
net=10.213.$((tag % 200 + 20))
a=$net.1 b=$net.2
tmp=$(mktemp -d)
cleanup() {
    pkill -9 -f "$tmp" 2>/dev/null
    ip netns del "$ns1" 2>/dev/null
    ip netns del "$ns2" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

ip netns add "$ns1" && ip netns add "$ns2" &&
    ip link add v1 netns "$ns1" type veth peer name v2 netns "$ns2" &&
    ip -n "$ns1" addr add "$a/24" dev v1 && ip -n "$ns2" addr add "$b/24" dev v2 &&
    ip -n "$ns1" link set v1 up && ip -n "$ns2" link set v2 up &&
    ip -n "$ns1" link set lo up && ip -n "$ns2" link set lo up &&
    tc -n "$ns1" qdisc replace dev v1 root tbf rate 1gbit burst 256k latency 50ms &&
    tc -n "$ns2" qdisc replace dev v2 root tbf rate 1gbit burst 256k latency 50ms ||
    { echo "FAIL: cannot build the two-host network"; exit 1; }

# ssh stand-in for mpirun: run the command inside the namespace of the named host.
cat >"$tmp/netns-rsh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in $a) ns=$ns1 ;; $b) ns=$ns2 ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
chmod +x "$tmp/netns-rsh"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train="$DTRAIN train --model lenet5 --data synthetic:mnist --epochs 1 --max-steps 8 --batch-size 32 --threads 1 --max-samples 4096 --test-samples 256 --quiet"
passed=0
failed=0
for algo in ring mpi; do
    OMPI_MCA_mpi_yield_when_idle=1 mpirun -np 2 $train --allreduce "$algo" \
        --save "$tmp/shm_$algo.safetensors" || { failed=$((failed + 1)); continue; }
    ip netns exec "$ns1" mpirun -np 2 --host "$a:1,$b:1" --mca plm_rsh_agent "$tmp/netns-rsh" \
        --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include "$net.0/24" --mca btl self,tcp \
        --mca btl_tcp_if_include "$net.0/24" --mca mpi_yield_when_idle 1 --mca btl_tcp_links 2 \
        $train --allreduce "$algo" --save "$tmp/net_$algo.safetensors" --log "$tmp/net_$algo.jsonl"
    if [ $? -eq 0 ] && cmp -s "$tmp/shm_$algo.safetensors" "$tmp/net_$algo.safetensors"; then
        bytes=$(grep '"event":"epoch"' "$tmp/net_$algo.jsonl" | sed 's/.*"bytes_sent":\([0-9]*\).*/\1/')
        comm=$(grep '"event":"epoch"' "$tmp/net_$algo.jsonl" | sed 's/.*"t_comm":\([0-9.e-]*\).*/\1/')
        echo "ok: $algo over the 1 Gbit/s veth equals shared memory bit for bit ($bytes bytes sent, t_comm $comm s)"
        passed=$((passed + 1))
    else
        echo "FAIL: $algo over the network differs from shared memory (or failed)"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
