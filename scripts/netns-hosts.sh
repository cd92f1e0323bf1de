# Two "hosts" on one machine for MPI over a real (virtual) link: two network
# namespaces joined by a veth pair shaped to 1 Gbit/s with tbf. Sourced by
# tests/test_two_hosts.sh and bench/allreduce_two_hosts.sh; needs root and iproute2.
# Recipe and pitfalls: shared/notes/mpi-here.md.
#   netns_up TAG      creates hosts $NETNS_A / $NETNS_B in namespaces dth1_TAG / dth2_TAG
#   netns_mpirun ...  mpirun -np 2 across the two hosts (rank 0 on A, rank 1 on B),
#                     unbound: each host's daemon would bind its rank to core 0
#   netns_down        removes both namespaces (call it from a trap)

netns_up() {
    NETNS_TAG=$1
    NETNS_1=dth1_$NETNS_TAG
    NETNS_2=dth2_$NETNS_TAG
    NETNS_NET=10.213.$((NETNS_TAG % 200 + 20))
    NETNS_A=$NETNS_NET.1
    NETNS_B=$NETNS_NET.2
    NETNS_DIR=$(mktemp -d)
    ip netns add "$NETNS_1" && ip netns add "$NETNS_2" &&
        ip link add v1 netns "$NETNS_1" type veth peer name v2 netns "$NETNS_2" &&
        ip -n "$NETNS_1" addr add "$NETNS_A/24" dev v1 &&
        ip -n "$NETNS_2" addr add "$NETNS_B/24" dev v2 &&
        ip -n "$NETNS_1" link set v1 up && ip -n "$NETNS_2" link set v2 up &&
        ip -n "$NETNS_1" link set lo up && ip -n "$NETNS_2" link set lo up &&
        tc -n "$NETNS_1" qdisc replace dev v1 root tbf rate 1gbit burst 256k latency 50ms &&
        tc -n "$NETNS_2" qdisc replace dev v2 root tbf rate 1gbit burst 256k latency 50ms ||
        return 1
    # ssh stand-in for mpirun: run the command inside the namespace of the named host
    cat >"$NETNS_DIR/netns-rsh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in $NETNS_A) ns=$NETNS_1 ;; $NETNS_B) ns=$NETNS_2 ;; *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
    chmod +x "$NETNS_DIR/netns-rsh"
}

netns_mpirun() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        ip netns exec "$NETNS_1" mpirun -np 2 --host "$NETNS_A:1,$NETNS_B:1" --bind-to none \
        --mca plm_rsh_agent "$NETNS_DIR/netns-rsh" --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca btl self,tcp \
        --mca btl_tcp_if_include "$NETNS_NET.0/24" --mca mpi_yield_when_idle 1 \
        --mca btl_tcp_links 2 "$@"
}

netns_down() {
    ip netns del "$NETNS_1" 2>/dev/null
    ip netns del "$NETNS_2" 2>/dev/null
    rm -rf "$NETNS_DIR"
}
