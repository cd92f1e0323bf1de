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
finish
