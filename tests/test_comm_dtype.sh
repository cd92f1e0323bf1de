#!/bin/sh
# --comm-dtype from the command line: 16-bit gradients halve the bytes of the ring
# all-reduce and of parameter-server pushes, are recorded in the run log, train to the
# same loss as fp32 within the rounding's effect, and MPI's all-reduce is refused with
# them in one line.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"

run() { # mode dtype log: lenet5, 2 workers, 4 steps
    procs=2
    [ "$1" = ps-sync ] && procs=3
    mpirun -np "$procs" "$DTRAIN" train --mode "$1" --comm-dtype "$2" --model lenet5 \
        --max-samples 1024 --test-samples 500 --epochs 1 --threads 1 --log "$3" --quiet
}
num() { # field file: the first value of a numeric field in the matching records
    sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2" | head -1
}

for m in allreduce ps-sync; do
    for t in fp32 bf16 fp16; do
        run "$m" "$t" "$tmp/$m.$t.jsonl" || echo "FAIL: $m $t exited $?"
    done
    check "$m: the run record names bf16" grep -q '"comm_dtype":"bf16"' "$tmp/$m.bf16.jsonl"
done
for t in bf16 fp16; do
    b32=$(grep '"event":"step"' "$tmp/allreduce.fp32.jsonl" | head -1 >"$tmp/s32" && num bytes_sent "$tmp/s32")
    b16=$(grep '"event":"step"' "$tmp/allreduce.$t.jsonl" | head -1 >"$tmp/s16" && num bytes_sent "$tmp/s16")
    check "allreduce $t: half the bytes ($b16 vs $b32)" [ "$((2 * b16))" -eq "$b32" ]
    # a push is the gradient plus a 24-byte header (3 int64), 8 pushes here
    i32=$(grep '"event":"ps_server"' "$tmp/ps-sync.fp32.jsonl" >"$tmp/p32" && num bytes_in "$tmp/p32")
    i16=$(grep '"event":"ps_server"' "$tmp/ps-sync.$t.jsonl" >"$tmp/p16" && num bytes_in "$tmp/p16")
    check "ps-sync $t: the server receives half the gradient bytes ($i16 vs $i32)" \
        [ "$((2 * (i16 - 8 * 24)))" -eq "$((i32 - 8 * 24))" ]
    for m in allreduce ps-sync; do
        l32=$(grep '"event":"epoch"' "$tmp/$m.fp32.jsonl" >"$tmp/e32" && num test_loss "$tmp/e32")
        l16=$(grep '"event":"epoch"' "$tmp/$m.$t.jsonl" >"$tmp/e16" && num test_loss "$tmp/e16")
        check "$m $t: test loss $l16 within 1% of fp32's $l32" \
            awk -v a="$l16" -v b="$l32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b) }'
    done
done

mpirun -np 2 "$DTRAIN" train --comm-dtype bf16 --allreduce mpi --max-samples 256 --epochs 1 \
    --quiet >"$tmp/out" 2>"$tmp/err"
status=$?
check "bf16 with MPI's all-reduce fails" [ "$status" -ne 0 ]
check "and says why" grep -q "needs dtrain's ring all-reduce" "$tmp/err"
# hier's 16-bit wire runs between nodes only: on one node it would run fp32 under a
# bf16 record, so it is refused (tests/test_two_hosts.sh runs it on 2 nodes)
mpirun -np 2 "$DTRAIN" train --comm-dtype bf16 --allreduce hier --max-samples 256 --epochs 1 \
    --quiet >"$tmp/out" 2>"$tmp/err"
status=$?
check "bf16 with hier on one node fails" [ "$status" -ne 0 ]
check "and says why" grep -q "^dtrain train: --allreduce hier --comm-dtype bf16: the 2 ranks share one node" "$tmp/err"
"$DTRAIN" train --comm-dtype fp8 >"$tmp/out" 2>"$tmp/err"
check "an unknown dtype is refused in one line" sh -c "[ \$(wc -l <'$tmp/err') -eq 1 ] && grep -q 'must be fp32, bf16 or fp16' '$tmp/err'"
finish
