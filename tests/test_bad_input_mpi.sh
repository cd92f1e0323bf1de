#!/bin/bash
# The bad-input catalogue under mpirun -np 2 (issue 26 item 3): one error, once. A
# flag or file error prints one line (rank 0's) and nothing else — no copy per rank,
# no MPI_ABORT notice, no mpirun notice of a non-zero exit — and the job ends with a
# non-zero status. Here the whole of stderr must be that one line (bad_input_lib's
# expect counts only lines starting with "dtrain").
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
command -v mpirun >/dev/null || { echo "skipped: no mpirun"; exit 77; }

# alone "description" status "exact line" command...: stderr is exactly that line,
# the status exactly that one
alone() {
    what=$1 want=$2 line=$3
    shift 3
    cases=$((cases + 1))
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    if [ "$status" -eq "$want" ] && [ "$(cat "$tmp/err")" = "$line" ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what (status $status, expected $want); expected only: $line; stderr:"
        cat "$tmp/err"
    fi
}

M="mpirun -np 2 $DTRAIN train --threads 1 --model logreg --max-samples 256 --test-samples 64"
# the line one process prints (the zoo's list of names)
alone "an unknown model" 2 "$("$DTRAIN" train --model nosuch 2>&1)" $M --model nosuch
alone "a flag value out of range" 2 \
    "dtrain train: --batch-size must be between 1 and 16777216, got 0" $M --batch-size 0
alone "an unknown flag" 2 \
    "dtrain train: unknown or incomplete option '--bogus' (see dtrain train --help)" $M --bogus
alone "a missing data folder" 1 \
    "dtrain train: cannot open $tmp/none/train-images-idx3-ubyte: neither it nor train-images-idx3-ubyte.gz exists" \
    $M --data "mnist:$tmp/none"
alone "a --log in a folder that does not exist" 1 \
    "dtrain train: --log: cannot write $tmp/none/run.jsonl: folder $tmp/none: No such file or directory" \
    $M --log "$tmp/none/run.jsonl"
[ ! -e "$tmp/none" ] || fail "the missing folder was created"
# parameter servers: every rank a server (no worker to speak: each refuses alike), and
# workers that agree on a failure while the server waits (the first worker ends the job)
alone "ps-sync without a worker" 1 \
    "dtrain train: ps-sync needs more processes than --servers 2 (got 2)" \
    $M --mode ps-sync --servers 2
alone "ps-sync, the workers' data missing" 1 \
    "dtrain train: cannot open $tmp/none/train-images-idx3-ubyte: neither it nor train-images-idx3-ubyte.gz exists" \
    mpirun -np 3 "$DTRAIN" train --threads 1 --model logreg --max-samples 256 --mode ps-sync \
    --servers 1 --data "mnist:$tmp/none"
mkdir ro && chmod 555 ro
if [ "$(id -u)" -ne 0 ]; then # root writes anywhere
    alone "a --log in a folder that cannot be written" 1 \
        "dtrain train: --log: cannot write $tmp/ro/run.jsonl: folder $tmp/ro: Permission denied" \
        $M --log "$tmp/ro/run.jsonl"
fi
# only rank 1's data is missing: rank 0 says it, naming rank 1
alone "data missing on one rank" 1 \
    "dtrain train: rank 1: cannot open $tmp/none/train-images-idx3-ubyte: neither it nor train-images-idx3-ubyte.gz exists" \
    mpirun -np 1 "$DTRAIN" train --threads 1 --model logreg --max-samples 256 : \
    -np 1 "$DTRAIN" train --threads 1 --model logreg --max-samples 256 --data "mnist:$tmp/none"
bad_input_done
