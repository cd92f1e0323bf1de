#!/bin/sh
# A parameter server does not take a worker's evaluation for its death: with a 1 s
# peer timeout, a run whose evaluations take longer (t_eval in its log) succeeds.
# Its own test, run alone (RUN_SERIAL): it is about time, and another test on the
# other core would stretch the run's steps toward the timeout.
set -u
DTRAIN=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
. "$(dirname "$0")/checks.sh"
cd "$tmp" || exit 1
# (resnet20 at width 32 evaluating 1000 test images: 2.2 s here, 6.4 s under ASan,
# while its steps of batch 2 take 15 and 47 ms; the first step, which sets up oneDNN's
# sgemm, takes 0.42 s under ASan: a 0.2 s timeout was too tight for it)
DTRAIN_PEER_TIMEOUT=1 timeout 120 mpirun -x DTRAIN_PEER_TIMEOUT -np 2 "$DTRAIN" train \
    --mode ps-sync --model resnet20 --width 32 --data synthetic:cifar10 --max-samples 64 \
    --test-samples 1000 --batch-size 2 --epochs 2 --threads 1 --quiet --log ps.jsonl >ps.out 2>&1
status=$?
check "a parameter-server run with evaluations longer than the peer timeout succeeds" \
    [ "$status" -eq 0 ]
check "both its evaluations took longer than the timeout (t_eval > 1 s)" python3 -c '
import json, sys
ev = [json.loads(l)["t_eval"] for l in open("ps.jsonl") if "\"epoch\"" in l and "t_eval" in l]
sys.exit(0 if len(ev) == 2 and min(ev) > 1.0 else 1)'
[ "$failed" -eq 0 ] || { grep -v '^\[' ps.out | head -5; grep -o '"t_eval":[0-9.e-]*' ps.jsonl; }
finish
