#!/bin/sh
# Threads that fit the launcher (issue 26 item 2): under mpirun -np 2 without --threads
# each rank runs the cores it may use, and the run record says how many and why:
# mpirun's default binding gives each rank one core; with --bind-to none both share
# the mask. An explicit --threads wins, with one warning line when the ranks' threads
# outnumber the cores.
set -u
DTRAIN=$1
command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
# the run record's field $2 of log $1, as JSON text
field() { python3 -c 'import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).readline())[sys.argv[2]]))' "$1" "$2"; }
T="train --model logreg --max-samples 256 --test-samples 64 --max-steps 2 --quiet"
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # the affinity mask

# 1. mpirun's default: bound to a core each (1-2 ranks), 1 thread
if mpirun -np 2 "$DTRAIN" $T --log "$tmp/bound.jsonl" 2>"$tmp/err"; then
    threads=$(field "$tmp/bound.jsonl" threads) why=$(field "$tmp/bound.jsonl" threads_from)
    if [ "$threads" = 1 ] && echo "$why" | grep -q "affinity mask" && [ ! -s "$tmp/err" ]; then
        ok "mpirun -np 2: threads $threads, from $why"
    else
        bad "mpirun -np 2: threads $threads, from $why"; cat "$tmp/err"
    fi
else
    bad "mpirun -np 2 failed"; cat "$tmp/err"
fi

# 2. --bind-to none: the mask shared by the host's 2 ranks
want=$((cores / 2 > 0 ? cores / 2 : 1))
if mpirun --bind-to none -np 2 "$DTRAIN" $T --log "$tmp/none.jsonl" 2>"$tmp/err"; then
    threads=$(field "$tmp/none.jsonl" threads) why=$(field "$tmp/none.jsonl" threads_from)
    if [ "$threads" = "$want" ] &&
        [ "$why" = "\"$cores cores in the affinity mask / 2 ranks on this host (OMPI_COMM_WORLD_LOCAL_SIZE)\"" ]; then
        ok "--bind-to none: threads $threads, from $why"
    else
        bad "--bind-to none: threads $threads (want $want), from $why"
    fi
else
    bad "mpirun --bind-to none failed"; cat "$tmp/err"
fi

# 3. --threads wins; 2 ranks x T threads above the cores: one warning line (rank 0's)
over=$((cores / 2 + 1))
if mpirun -np 2 "$DTRAIN" $T --threads $over --log "$tmp/asked.jsonl" 2>"$tmp/err"; then
    threads=$(field "$tmp/asked.jsonl" threads) why=$(field "$tmp/asked.jsonl" threads_from)
    line="dtrain train: warning: 2 ranks on this host x $over threads = $((2 * over)) threads on $cores cores: they compete for cores (give fewer --threads, or leave it to its default)"
    if [ "$threads" = "$over" ] && [ "$why" = '"--threads"' ] && [ "$(cat "$tmp/err")" = "$line" ]; then
        ok "--threads $over: asked, warned once"
    else
        bad "--threads $over: threads $threads, from $why; stderr:"; cat "$tmp/err"
    fi
else
    bad "mpirun --threads $over failed"; cat "$tmp/err"
fi

# 4. one process alone: its mask
if "$DTRAIN" $T --log "$tmp/alone.jsonl" 2>"$tmp/err" &&
    [ "$(field "$tmp/alone.jsonl" threads)" = "$cores" ]; then
    ok "alone: $(field "$tmp/alone.jsonl" threads_from)"
else
    bad "alone: threads $(field "$tmp/alone.jsonl" threads 2>&1) (want $cores)"
fi
[ "$failed" -eq 0 ]
