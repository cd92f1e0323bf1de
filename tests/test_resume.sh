#!/bin/sh
# Resume contract (docs/checkpoints.md): a run stopped by --max-steps K with
# --checkpoint, then continued with --resume and the same flags, saves weights
# bit-identical (cmp) to the uninterrupted run's, and its log has the same step
# numbers: one process, 2-rank all-reduce, 1 server + 2 workers ps-sync. Flags that
# differ are refused in one line; all-reduce continues on another process count.
set -u
DTRAIN=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
. "$(dirname "$0")/checks.sh"
F="--model lenet5 --data fashion-mnist --max-samples 1024 --batch-size 32 --epochs 2
   --test-samples 100 --threads 1 --quiet"
steps() { grep '"event":"step","rank":0,' "$1" | sed 's/.*"step":\([0-9]*\).*/\1/'; }

# name, K, launcher...: full run, stopped run, resumed run; weights and step numbers
contract() {
    name=$1 k=$2
    shift 2
    "$@" "$DTRAIN" train $F $extra --log "$tmp/$name.full.jsonl" --save "$tmp/$name.full.st"
    "$@" "$DTRAIN" train $F $extra --log "$tmp/$name.jsonl" --checkpoint "$tmp/$name.ck" \
        --checkpoint-every 5steps --max-steps "$k"
    "$@" "$DTRAIN" train $F $extra --log "$tmp/$name.jsonl" --resume "$tmp/$name.ck" \
        --save "$tmp/$name.st"
    check "$name: stopped at $k and resumed = uninterrupted, bit for bit" \
        cmp "$tmp/$name.full.st" "$tmp/$name.st"
    steps "$tmp/$name.full.jsonl" >"$tmp/a"
    steps "$tmp/$name.jsonl" >"$tmp/b"
    check "$name: the log continues the step numbering" cmp "$tmp/a" "$tmp/b"
    check "$name: the log records the resume" \
        grep -q "\"event\":\"resume\",\"step\":$k," "$tmp/$name.jsonl"
}
extra=""
contract one 20
contract one-epoch-end 32
contract allreduce 9 mpirun -np 2
# --allreduce auto (the default) measures shm, ring and mpi on the first steps (all sum
# 2 ranks' gradients to the same bits, so the contract above holds) and says so per
# epoch. Its measurement takes up to 48 calls (8 rounds of 3 candidates, 2 calls each,
# while the calls are short), more than the contract's 32 steps: a run of 64 steps.
mpirun -np 2 "$DTRAIN" train $F --max-samples 4096 --epochs 1 --log "$tmp/auto.jsonl"
check "allreduce: the epoch record names auto's measured times and choice" \
    grep -q '"allreduce_auto":"0\.2468 MB: shm [0-9.]*[^"]* ms, ring [0-9.]*[^"]* ms, mpi [^"]*-> ' \
    "$tmp/auto.jsonl"
extra="--mode ps-sync --servers 1"
contract ps-sync 9 mpirun -np 3
extra=""

# refused: other flags, another worker count in ps-sync
msg=$("$DTRAIN" train $F --batch-size 16 --resume "$tmp/one.ck" 2>&1)
check "another batch size is refused in one line" [ "$msg" = "dtrain train: --resume $tmp/one.ck: \
the checkpoint was written with --batch-size 32, this run has --batch-size 16 (resume with the \
same flags)" ]
msg=$(mpirun -np 4 "$DTRAIN" train $F --mode ps-sync --servers 1 --resume "$tmp/ps-sync.ck" 2>&1)
check "ps-sync on 3 workers from a 2-worker checkpoint is refused" \
    sh -c "echo '$msg' | grep -q 'written by 2 workers, this run has 3'"
msg=$("$DTRAIN" train $F --resume "$tmp/none" 2>&1)
check "no checkpoint: one line" sh -c "echo '$msg' | grep -q 'no checkpoint there'"

# all-reduce on another process count: the rest of the epoch split over 1 and 3 ranks.
# After 9 steps of 2 x 32 samples, 448 of epoch 0 are left: 1 rank takes 14 + 32 more
# steps, 3 ranks ceil(150/32) + ceil(342/32) = 5 + 11.
for nw in "1 46" "3 16"; do
    set -- $nw
    rm -rf "$tmp/ckn"
    cp -r "$tmp/allreduce.ck" "$tmp/ckn"
    mpirun -np "$1" "$DTRAIN" train $F --log "$tmp/n$1.jsonl" --resume "$tmp/ckn" \
        --save "$tmp/n$1.st"
    check "2 ranks -> $1: finishes" [ -s "$tmp/n$1.st" ]
    got=$(grep -c '"event":"step"' "$tmp/n$1.jsonl")
    check "2 ranks -> $1: $got steps after the resume (want $2)" [ "$got" -eq "$2" ]
done
finish
