#!/bin/sh
# Parameter-server modes end to end (mpirun, oversubscribed on 2 cores):
#   ssp never lets a worker run more than S steps ahead (one worker slowed by
#   --test-delay): the servers' largest clock gap at a served pull equals S, not more;
#   ps-async still learns: logreg on Fashion-MNIST >= 75% test accuracy after 4 epochs
#     (untrained: 10%; see the bar below for what it reaches and why it varies);
#   ps-sync with fewer replicas than workers drops the late gradients and counts them;
#   a killed worker ends the job within 30 s.
set -u
DTRAIN=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
. "$(dirname "$0")/checks.sh"
. "$(dirname "$0")/wait_lib.sh"
field() { grep '"event":"ps_server"' "$1" | sed "s/.*\"$2\":\([0-9]*\).*/\1/" | sort -n | tail -1; }

mpirun -np 4 "$DTRAIN" train --mode ssp --staleness 2 --servers 1 --model logreg \
    --data synthetic:mnist --max-samples 3840 --batch-size 32 --epochs 1 --threads 1 \
    --test-delay 2:20 --test-samples 100 --quiet --log "$tmp/ssp.jsonl"
gap=$(field "$tmp/ssp.jsonl" max_clock_gap)
echo "ssp, staleness 2, worker 2 slowed by 20 ms a step: largest clock gap served $gap"
check "ssp bound held and was reached" [ "$gap" = 2 ]

mpirun -np 3 "$DTRAIN" train --mode ps-async --servers 1 --model logreg --data fashion-mnist \
    --epochs 4 --lr 0.01 --threads 1 >"$tmp/async.out" 2>&1
acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/async.out")
echo "ps-async logreg, Fashion-MNIST, 4 epochs: test accuracy $acc%"
# Not deterministic: which parameters each gradient meets depends on how the ranks are
# scheduled, and at a constant rate the final parameters (pulled after the other
# worker's last pushes) land anywhere on a noisy path (one run: 83.4% at its last epoch,
# 80.9% final). Measured 2026-11-25 on an AMD EPYC, 2 cores (lscpu), beside 1 busy loop
# (n = 10) and 2 (n = 10): min 80.87, median 83.79, max 84.13 (%); on another machine:
# 79.71 loaded, 79.95 alone (1 of 3), against the 80% bar this replaced (and after 2
# epochs under CI load once 77.6). 75% is well below all of them, and far above what a
# run that does not learn gives.
check "ps-async reaches 75%" awk -v a="$acc" 'BEGIN { exit !(a >= 75) }'

mpirun -np 4 "$DTRAIN" train --mode ps-sync --replicas-to-aggregate 1 --servers 2 --model mlp \
    --data synthetic:mnist --max-samples 1024 --batch-size 32 --epochs 1 --threads 1 \
    --test-samples 64 --quiet --log "$tmp/sync.jsonl"
dropped=$(field "$tmp/sync.jsonl" dropped)
echo "ps-sync, 1 replica of 2 workers, 2 servers: $dropped late gradients dropped (per server, max)"
check "ps-sync drops late gradients" [ "$dropped" -gt 0 ]
check "ps-sync logs both servers" [ "$(grep -c '"event":"ps_server"' "$tmp/sync.jsonl")" -eq 2 ]

# the kill lands once the first worker (rank 1, which prints) has finished an epoch, so
# both workers and the server are serving and training; the victim is worker rank 2
mpirun -np 3 "$DTRAIN" train --mode ps-async --servers 1 --model lenet5 --data synthetic:mnist \
    --epochs 20 --max-samples 2048 --test-samples 256 --threads 1 >"$tmp/kill.out" 2>"$tmp/kill.err" &
job=$!
check "the run reaches its first epoch" wait_line "$tmp/kill.err" "^epoch 1/" 120 "$job"
ranks=$(pgrep -P "$job")
victim=$(rank_pid "$job" 2)
check "worker rank 2 found among mpirun's children ($ranks)" [ -n "$victim" ]
[ -n "$victim" ] && kill -KILL "$victim"
i=0
while kill -0 "$job" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "a killed worker ends the job within 30 s" sh -c "! kill -0 $job 2>/dev/null"
kill -9 $ranks "$job" 2>/dev/null
wait "$job" 2>/dev/null

finish
