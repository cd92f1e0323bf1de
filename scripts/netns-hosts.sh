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

# N hosts (the 4-host and 2x2 validations of bench/simulate_validation.sh): N network
# namespaces dtn1_TAG .. dtnN_TAG, each joined by a veth pair (eth0 in the host, pI in
# the switch) to a bridge in namespace dtnbr_TAG, as src/study/netns.c builds them for
# `dtrain scale`. Every link is shaped in both directions (the host's eth0: its egress;
# the switch's pI: its ingress), as a switch port of that rate: a ring crosses each
# host's link once per direction per step, and a server receiving from W workers gets
# them through its one shaped port. Addresses $NETNS_N_NET.I on a subnet that exists
# only inside these namespaces. Independent of netns_up's two hosts (other names, other
# subnet): both may be up at once.
#   netns_up_n TAG N [RATE [BURST]]  creates the hosts and the switch (default 1gbit, 256k)
#   netns_shape_n RATE BURST         reshapes every link (both directions)
#   netns_host_ns I / netns_host_addr I   host I's namespace / address (1-based)
#   netns_mpirun_hosts SPEC ARGS...  mpirun over hosts: SPEC is I:SLOTS,... (e.g. 1:2,2:2,
#                     ranks in that order, by slot: 0,1 on host 1, 2,3 on host 2); mpirun
#                     runs in the first listed host; btl from $NETNS_BTL (self,tcp;
#                     self,vader,tcp for shared memory between ranks of one host: the
#                     agent gives every host it starts its own vader backing directory,
#                     as vader names its segments by the hostname the hosts share and
#                     crashed with one directory)
#   netns_ps_n        lists every host's processes (pid, state, age, command)
#   netns_kill_n      ends every process inside the hosts (mpirun, its daemons, the ranks:
#                     all started here), by pid: TERM, KILL after 2 s (a hung launch)
#   netns_down_n      netns_kill_n, then removes the namespaces

netns_host_ns() {
    echo "dtn${1}_$NETNS_N_TAG"
}

netns_host_addr() {
    echo "$NETNS_N_NET.$1"
}

netns_shape_n() {
    _nsn_i=1
    while [ "$_nsn_i" -le "$NETNS_N" ]; do
        tc -n "$(netns_host_ns "$_nsn_i")" qdisc replace dev eth0 root tbf rate "$1" \
            burst "$2" latency 50ms &&
            tc -n "$NETNS_N_BR" qdisc replace dev "p$_nsn_i" root tbf rate "$1" \
                burst "$2" latency 50ms || return 1
        _nsn_i=$((_nsn_i + 1))
    done
}

netns_up_n() {
    NETNS_N_TAG=$1
    NETNS_N=$2
    NETNS_N_BR=dtnbr_$NETNS_N_TAG
    NETNS_N_NET=10.214.$((NETNS_N_TAG % 200 + 20))
    NETNS_N_DIR=$(mktemp -d)
    NETNS_N_SHM=/dev/shm/dtn_$NETNS_N_TAG
    ip netns add "$NETNS_N_BR" &&
        ip -n "$NETNS_N_BR" link add br0 type bridge &&
        ip -n "$NETNS_N_BR" link set br0 up || return 1
    _nsn_case=
    _nsn_i=1
    while [ "$_nsn_i" -le "$NETNS_N" ]; do
        _nsn_ns=$(netns_host_ns "$_nsn_i")
        ip netns add "$_nsn_ns" &&
            ip -n "$NETNS_N_BR" link add "p$_nsn_i" type veth peer name eth0 netns "$_nsn_ns" &&
            ip -n "$NETNS_N_BR" link set "p$_nsn_i" master br0 &&
            ip -n "$NETNS_N_BR" link set "p$_nsn_i" up &&
            ip -n "$_nsn_ns" addr add "$(netns_host_addr "$_nsn_i")/24" dev eth0 &&
            ip -n "$_nsn_ns" link set eth0 up && ip -n "$_nsn_ns" link set lo up || return 1
        mkdir -p "$NETNS_N_SHM/h$_nsn_i" || return 1
        _nsn_case="$_nsn_case $(netns_host_addr "$_nsn_i")) ns=$_nsn_ns i=$_nsn_i ;;"
        _nsn_i=$((_nsn_i + 1))
    done
    netns_shape_n "${3:-1gbit}" "${4:-256k}" || return 1
    # ssh stand-in for mpirun: run the command inside the namespace of the named host
    cat >"$NETNS_N_DIR/netns-rsh" <<AGENT
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in$_nsn_case *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns env OMPI_MCA_btl_vader_backing_directory=$NETNS_N_SHM/h\$i sh -c "\$*"
AGENT
    chmod +x "$NETNS_N_DIR/netns-rsh"
}

netns_mpirun_hosts() {
    _nsn_spec=$1
    shift
    _nsn_hosts=
    _nsn_np=0
    _nsn_first=
    for _nsn_h in $(echo "$_nsn_spec" | tr , ' '); do
        _nsn_i=${_nsn_h%%:*}
        _nsn_slots=${_nsn_h#*:}
        [ -n "$_nsn_first" ] || _nsn_first=$_nsn_i
        _nsn_hosts="$_nsn_hosts${_nsn_hosts:+,}$(netns_host_addr "$_nsn_i"):$_nsn_slots"
        _nsn_np=$((_nsn_np + _nsn_slots))
    done
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        ip netns exec "$(netns_host_ns "$_nsn_first")" mpirun -np "$_nsn_np" \
        --host "$_nsn_hosts" --bind-to none \
        --mca plm_rsh_agent "$NETNS_N_DIR/netns-rsh" --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$NETNS_N_NET.0/24" --mca btl "${NETNS_BTL:-self,tcp}" \
        --mca btl_tcp_if_include "$NETNS_N_NET.0/24" --mca mpi_yield_when_idle 1 \
        --mca btl_tcp_links 2 "$@"
}

netns_pids_n() {
    _nsn_i=1
    while [ "$_nsn_i" -le "$NETNS_N" ]; do
        ip netns pids "$(netns_host_ns "$_nsn_i")" 2>/dev/null
        _nsn_i=$((_nsn_i + 1))
    done
}

netns_ps_n() {
    _nsn_i=1
    while [ "$_nsn_i" -le "$NETNS_N" ]; do
        echo "host $_nsn_i ($(netns_host_addr "$_nsn_i")):"
        for _nsn_pid in $(ip netns pids "$(netns_host_ns "$_nsn_i")" 2>/dev/null); do
            ps -o pid=,stat=,etime=,args= -p "$_nsn_pid" | cut -c1-160
        done
        _nsn_i=$((_nsn_i + 1))
    done
}

netns_kill_n() {
    [ -n "${NETNS_N_BR:-}" ] || return 0
    _nsn_pids=$(netns_pids_n)
    [ -n "$_nsn_pids" ] || return 0
    # shellcheck disable=SC2086 # a list of pids
    kill $_nsn_pids 2>/dev/null
    sleep 2
    _nsn_pids=$(netns_pids_n)
    # shellcheck disable=SC2086
    [ -z "$_nsn_pids" ] || kill -9 $_nsn_pids 2>/dev/null
    return 0
}

netns_down_n() {
    [ -n "${NETNS_N_BR:-}" ] || return 0
    netns_kill_n # what a killed run left inside (orted, ranks): ours, ended by pid
    _nsn_i=1
    while [ "$_nsn_i" -le "$NETNS_N" ]; do
        ip netns del "$(netns_host_ns "$_nsn_i")" 2>/dev/null
        _nsn_i=$((_nsn_i + 1))
    done
    ip netns del "$NETNS_N_BR" 2>/dev/null
    rm -rf "$NETNS_N_DIR" "$NETNS_N_SHM"
    NETNS_N_BR=
}
