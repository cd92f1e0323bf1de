#!/bin/sh
# A one-node Slurm cluster on this machine, from Debian's packages (munge, slurmctld,
# slurmd, slurm-client; scripts/install-deps.sh installs them), for trying dtrain under a
# workload manager: tests/test_slurm.sh runs it, docs/cluster.md shows it. Needs root.
#   scripts/slurm-local.sh start DIR   writes DIR/slurm.conf (this host's short name,
#       2 CPUs, free ports, every state file under DIR, no cgroups: proctrack/linuxproc
#       and task/none work in a container), starts munged, slurmctld and slurmd in the
#       background, each in a process group of its own, and waits until the node takes
#       jobs. Then:  export SLURM_CONF=DIR/slurm.conf  (srun, salloc, sbatch, squeue)
#   scripts/slurm-local.sh stop DIR    cancels DIR's jobs, ends the daemons' process
#       groups and whatever they started (a job step's slurmstepd and tasks); leaves
#       nothing running. Safe to call twice, or after a failed start.
# Exits 77 with the reason on stderr where the cluster cannot start here (not root, a
# package missing, a daemon that does not come up: its log's last lines are shown).
set -u

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
action=$1
dir=$2
case $dir in /*) ;; *) dir=$(pwd)/$dir ;; esac
daemons="slurmd slurmctld munged"
plugins=/usr/lib/x86_64-linux-gnu/slurm-wlm

skip() { # the reason the cluster cannot start here; exit 77
    echo "slurm-local: $*" >&2
    exit 77
}

free_port() { # a TCP port from $1 upward that nothing listens on
    p=$1
    while ss -Htln "sport = :$p" | grep -q .; do p=$((p + 1)); done
    echo "$p"
}

alive() { # whether process group $1 still has a process that is not a zombie (the
    # daemons outlive the start: an init slow to reap orphans may keep them as zombies)
    g=$1
    for st in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$st" || continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        # shellcheck disable=SC2086
        set -- ${line##*) }
        [ "$3" = "$g" ] && [ "$1" != Z ] && return 0
    done
    return 1
}

ours() { # pids of the processes this cluster left: started by its daemons (marked by
    # DTRAIN_SLURM_LOCAL in their environment: slurmstepd) or a job's tasks (its
    # SLURM_CONF and a job id)
    for env in $(grep -lzxF "DTRAIN_SLURM_LOCAL=$dir" /proc/[0-9]*/environ 2>/dev/null) \
        $(grep -lzxF "SLURM_CONF=$dir/slurm.conf" /proc/[0-9]*/environ 2>/dev/null); do
        pid=${env#/proc/}
        pid=${pid%/environ}
        [ "$pid" = $$ ] && continue
        if grep -qzxF "DTRAIN_SLURM_LOCAL=$dir" "$env" 2>/dev/null ||
            grep -qz '^SLURM_JOB_ID=' "$env" 2>/dev/null; then
            echo "$pid"
        fi
    done | sort -u
}

stop() {
    [ -f "$dir/slurm.conf" ] || return 0
    export SLURM_CONF="$dir/slurm.conf"
    # jobs first, so their steps end through Slurm (at most 10 s)
    if [ -f "$dir/slurmctld.pgid" ] && alive "$(cat "$dir/slurmctld.pgid")"; then
        scancel --full --quiet --user=root >/dev/null 2>&1
        i=0
        while [ $i -lt 100 ] && [ -n "$(squeue -h -o %i 2>/dev/null)" ]; do
            sleep 0.1
            i=$((i + 1))
        done
    fi
    for d in $daemons; do
        [ -f "$dir/$d.pgid" ] && kill -TERM "-$(cat "$dir/$d.pgid")" 2>/dev/null
    done
    for d in $daemons; do
        [ -f "$dir/$d.pgid" ] || continue
        g=$(cat "$dir/$d.pgid")
        i=0
        while [ $i -lt 100 ] && alive "$g"; do
            sleep 0.1
            i=$((i + 1))
        done
        alive "$g" && kill -KILL "-$g" 2>/dev/null
        rm -f "$dir/$d.pgid"
    done
    left=$(ours)
    if [ -n "$left" ]; then
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
        echo "slurm-local: ended $(echo $left | wc -w) leftover process(es) of the cluster" >&2
    fi
    return 0
}

start_daemon() { # name, then the command (in the foreground: it stays in its group)
    name=$1
    shift
    DTRAIN_SLURM_LOCAL=$dir setsid "$@" >"$dir/$name.out" 2>&1 </dev/null &
    echo $! >"$dir/$name.pgid"
}

fail_start() { # a daemon did not come up: its log, the cluster stopped, exit 77
    echo "slurm-local: $1 did not come up; the end of $2:" >&2
    tail -n 5 -- "$2" >&2
    stop
    exit 77
}

start() {
    [ "$(id -u)" = 0 ] || skip "the daemons need root (munged's key, slurmd's job steps)"
    for p in munged slurmctld slurmd srun sbatch salloc sinfo squeue scancel ss; do
        command -v "$p" >/dev/null || skip "$p missing (scripts/install-deps.sh installs it)"
    done
    [ -d "$plugins" ] || skip "no Slurm plugins in $plugins"
    mkdir -p "$dir/state" "$dir/spool" "$dir/munge" || skip "cannot make folders in $dir"
    # munged wants its socket reachable by everyone (execute on each folder above it)
    # and nothing of its own writable by others
    chmod 755 "$dir" "$dir/munge"
    up=$dir
    while [ "$up" != / ]; do
        up=$(dirname "$up")
        case $(stat -c %A "$up") in
        *x | *t) ;;
        *) skip "munged needs every folder above its socket searchable by all: $up is $(stat -c %A "$up") (use a DIR elsewhere)" ;;
        esac
    done
    stop # what an earlier start into DIR left
    host=$(hostname -s)
    [ -n "$host" ] || skip "this host has no name"
    cpus=2
    ctld_port=$(free_port 16817)
    slurmd_port=$(free_port $((ctld_port + 1)))
    # munge: its own key and socket, beside any system munged
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null &&
        chmod 400 "$dir/munge/munge.key" || skip "cannot write a munge key"
    sock=$dir/munge/munge.sock
    start_daemon munged munged -F --key-file="$dir/munge/munge.key" --socket="$sock" \
        --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
        --seed-file="$dir/munge/munged.seed"
    i=0
    while [ $i -lt 100 ] && ! [ -S "$sock" ]; do
        alive "$(cat "$dir/munged.pgid")" || break
        sleep 0.1
        i=$((i + 1))
    done
    [ -S "$sock" ] || fail_start munged "$dir/munged.out"
    cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: one node ($host), $cpus CPUs, all state under
# $dir.
ClusterName=dtlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
PluginDir=$plugins
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$dir/slurm.conf"
    start_daemon slurmctld slurmctld -D -i -f "$SLURM_CONF"
    start_daemon slurmd slurmd -D -f "$SLURM_CONF" -N "$host"
    # up when the node is idle (slurmd registered with slurmctld): at most 30 s
    i=0
    while [ $i -lt 300 ]; do
        state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
        [ "$state" = idle ] && break
        alive "$(cat "$dir/slurmctld.pgid")" || fail_start slurmctld "$dir/slurmctld.log"
        alive "$(cat "$dir/slurmd.pgid")" || fail_start slurmd "$dir/slurmd.log"
        sleep 0.1
        i=$((i + 1))
    done
    [ "$state" = idle ] || fail_start "node $host (state '${state:-none}')" "$dir/slurmd.log"
    echo "slurm-local: node $host up ($cpus CPUs, slurmctld port $ctld_port); export SLURM_CONF=$SLURM_CONF"
}

case $action in
start) start ;;
stop) stop ;;
*) usage ;;
esac
