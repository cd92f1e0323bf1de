#!/bin/sh
# A failed job ends promptly with its status (include/dtrain/world.h, dt_world_exit).
# Open MPI 4.1.4's mpirun (PMIx 4.2.2) hung or crashed in 9-12 of 40 jobs when one
# rank's abort came while some ranks were in MPI_Finalize and others were not: each
# way of ending (world_exit.c) runs 20 times, and every run must end within 20 s
# with status 1 and the one line said.
set -u
DRIVER=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
. "$(dirname "$0")/checks.sh"
for how in mixed together late; do
    want="world_exit: rank 1 ends the job"
    [ "$how" = together ] && want="world_exit: ended together"
    [ "$how" = late ] && want="dtrain: rank 1: world_exit: rank 1 fails last"
    bad=0 said=0
    for i in $(seq 1 20); do
        timeout -k 5 20 mpirun -np 4 "$DRIVER" "$how" >"$tmp/out" 2>&1
        rc=$?
        [ "$rc" -eq 1 ] || { bad=$((bad + 1)); echo "$how run $i: status $rc"; }
        [ "$(cat "$tmp/out")" = "$want" ] || { said=$((said + 1)); cat "$tmp/out"; }
        [ "$bad" -lt 2 ] || break # a hang takes 20 s: two say enough
    done
    check "$how: 20 of 20 jobs ended with status 1 (not hung, not crashed)" [ "$bad" -eq 0 ]
    check "$how: each printed its one line and nothing else" [ "$said" -eq 0 ]
done
# the abort never comes and mpirun is gone (killed): the waiting ranks end at once
# (they watch their parent), not after the 60 s bound
mpirun -np 4 "$DRIVER" orphaned >"$tmp/orphans" 2>&1 &
job=$!
# mpirun does not keep the ranks' lines in order: wait for all 4, not for rank 3's
n=0
for i in $(seq 1 300); do # up to 30 s
    n=$(grep -c ' waits$' "$tmp/orphans")
    [ "$n" -ge 4 ] || ! kill -0 "$job" 2>/dev/null && break
    sleep 0.1
done
if [ "$n" -eq 4 ]; then
    pids=$(sed -n 's/.*(pid \([0-9]*\)) waits$/\1/p' "$tmp/orphans")
    kill -KILL "$job"
    wait "$job" 2>/dev/null
    left="$pids"
    for i in $(seq 1 50); do # up to 5 s
        # running, not a zombie its new parent has yet to reap
        left=$(for p in $pids; do
            st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null) && [ "$st" != Z ] && echo "$p"
        done)
        [ -z "$left" ] && break
        sleep 0.1
    done
    check "orphaned: every waiting rank ended within 5 s of mpirun's kill" [ -z "$left" ]
    for p in $left; do kill -KILL "$p" 2>/dev/null; done
else
    check "orphaned: 4 ranks waiting" false
    kill -KILL "$job" 2>/dev/null
fi
finish
