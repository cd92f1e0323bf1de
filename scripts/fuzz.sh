#!/bin/sh
# Fuzzes dtrain's file readers with libFuzzer (clang, ASan + UBSan), one target after
# the other, each for SECONDS (default 600), starting from tests/fuzz/corpus*:
#   readers      IDX, CIFAR-10 and the gzip reader (tests/fuzz/fuzz_readers.c)
#   safetensors  the safetensors reader
#   runlog       the run-log reader (whole logs, single lines, loss smoothing)
#   csv          every CSV reader (report --times, fit-speed, fit-jobs)
#   fitfile      saved loss and speed fits
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...] (default: every target). Findings land
# in build-fuzz/TARGET/ as crash-*/leak-*/timeout-* files; a line per target says the
# executions and the findings.
set -eu
SECONDS_TO_RUN=${1:-600}
[ $# -gt 0 ] && shift
TARGETS=${*:-readers safetensors runlog csv fitfile}
cd "$(dirname "$0")/.."
ROOT=$PWD
SOURCES="src/core/error.c src/core/outfile.c src/data/idx.c src/data/cifar.c src/io/safetensors.c
    src/metrics/runlog.c src/perfmodel/nnls.c src/perfmodel/perfmodel.c src/perfmodel/jobs.c
    src/perfmodel/perfinput.c src/perfmodel/fitfile.c src/study/scaling.c"
for t in $TARGETS; do
    mkdir -p "build-fuzz/$t/corpus"
    # shellcheck disable=SC2086
    clang -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -Iinclude "tests/fuzz/fuzz_$t.c" $SOURCES \
        -lcjson -lz -lm -o "build-fuzz/fuzz_$t"
    [ -d "tests/fuzz/corpus_$t" ] && cp "tests/fuzz/corpus_$t"/* "build-fuzz/$t/corpus/"
    [ "$t" = readers ] && cp tests/fuzz/corpus/* "build-fuzz/$t/corpus/"
    cd "build-fuzz/$t"
    status=0
    "$ROOT/build-fuzz/fuzz_$t" -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 \
        -max_len=65536 -timeout=20 corpus >log.txt 2>&1 || status=$?
    execs=$(grep -o 'Done [0-9]* runs' log.txt | grep -o '[0-9]*' || true)
    findings=$(ls crash-* leak-* timeout-* oom-* 2>/dev/null | wc -l)
    echo "fuzz $t: ${SECONDS_TO_RUN} s, ${execs:-?} executions, $findings findings (exit $status)"
    cd "$ROOT"
done
