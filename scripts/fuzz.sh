#!/bin/sh
# Fuzzes dtrain's file readers with libFuzzer (clang, ASan + UBSan), one target after
# the other, each for SECONDS (default 600), starting from tests/fuzz/corpus*:
#   readers      IDX, CIFAR-10 and the gzip reader (tests/fuzz/fuzz_readers.c)
#   safetensors  the safetensors reader
#   runlog       the run-log reader (whole logs, single lines, loss smoothing)
#   csv          every CSV reader (report --times, fit-speed, fit-jobs)
#   fitfile      saved loss and speed fits
#   checkpoint   a training checkpoint's metadata (resume.c's dt_resume_parse and
#                dt_resume_check_run) and the whole --resume load of a logreg run
#   quant        a quantized file's metadata and tensors (quant.c's dt_qnet_load)
#   onnx         the ONNX importer (src/nn/onnx.c): spec and graph of any file
# The last three need the whole library: it is compiled once into build-fuzz/lib
# (again for the sources changed since).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...] (default: every target). Findings land
# in build-fuzz/TARGET/ as crash-*/leak-*/timeout-* files; a line per target says the
# executions and the findings.
set -eu
SECONDS_TO_RUN=${1:-600}
[ $# -gt 0 ] && shift
TARGETS=${*:-readers safetensors runlog csv fitfile checkpoint quant onnx}
cd "$(dirname "$0")/.."
ROOT=$PWD
SOURCES="src/core/error.c src/core/outfile.c src/core/textfile.c src/data/idx.c src/data/cifar.c
    src/io/safetensors.c src/metrics/runlog.c src/perfmodel/nnls.c src/perfmodel/perfmodel.c
    src/perfmodel/jobs.c src/perfmodel/perfinput.c src/perfmodel/fitfile.c src/study/scaling.c src/study/scale_csv.c
    src/study/reading.c src/core/parse.c src/core/runlock.c src/core/stats.c"
CFLAGS="-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fno-sanitize-recover=undefined -Iinclude -Isrc"
BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp
# the library as CMake globs it, instrumented, into build-fuzz/lib/libdtrain.a (an
# object again when its source or any header is newer)
library() {
    mkdir -p build-fuzz/lib build-fuzz/generated
    # the generated sources, as CMake makes them: the ONNX parser and the commit header
    [ build-fuzz/generated/onnx/onnx.pb-c.c -nt /usr/include/onnx/onnx.proto ] ||
        protoc-c --c_out=build-fuzz/generated -I/usr/include onnx/onnx.proto
    cmake -DSRC="$ROOT" -DOUT=build-fuzz/generated/dt_git_commit.h -P cmake/git_version.cmake
    version=$(sed -n 's/^project(dtrain VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
    flags="$CFLAGS -fopenmp -fsanitize=fuzzer-no-link,address,undefined -Ibuild-fuzz/generated
        -DDT_VERSION=\"$version\"
        -I/usr/include/x86_64-linux-gnu/openblas-openmp $(pkg-config --cflags ompi-c libcjson)"
    for f in src/core/*.c src/nn/*.c src/exec/*.c src/optim/*.c src/data/*.c src/io/*.c \
        src/metrics/*.c src/train/*.c src/parallel/*.c src/study/*.c src/perfmodel/*.c \
        src/quant/*.c build-fuzz/generated/onnx/onnx.pb-c.c; do
        o=build-fuzz/lib/$(echo "$f" | tr / _).o
        if [ ! "$o" -nt "$f" ] || [ -n "$(find include src -name '*.h' -newer "$o")" ]; then
            printf '%s\n%s\n' "$f" "$o"
        fi
    done | xargs -r -n 2 -P 2 sh -c 'clang $0 -c "$1" -o "$2"' "$flags"
    rm -f build-fuzz/lib/libdtrain.a
    ar rcs build-fuzz/lib/libdtrain.a build-fuzz/lib/*.o
}
for t in $TARGETS; do
    mkdir -p "build-fuzz/$t/corpus"
    max_len=65536
    case $t in
    checkpoint | quant | onnx)
        max_len=262144 # the corpus's files are whole small networks
        library
        # shellcheck disable=SC2046
        clang $CFLAGS -fopenmp -fsanitize=fuzzer,address,undefined \
            $(pkg-config --cflags ompi-c libcjson) "tests/fuzz/fuzz_$t.c" \
            build-fuzz/lib/libdtrain.a -L$BLAS -Wl,-rpath,$BLAS -lopenblas -ldnnl \
            $(pkg-config --libs ompi-c libcjson libprotobuf-c) -lz -lm -lpthread \
            -o "build-fuzz/fuzz_$t"
        ;;
    *)
        # shellcheck disable=SC2086
        clang $CFLAGS -fsanitize=fuzzer,address,undefined "tests/fuzz/fuzz_$t.c" $SOURCES \
            -lcjson -lz -lm -o "build-fuzz/fuzz_$t"
        ;;
    esac
    [ -d "tests/fuzz/corpus_$t" ] && cp "tests/fuzz/corpus_$t"/* "build-fuzz/$t/corpus/"
    [ "$t" = readers ] && cp tests/fuzz/corpus/* "build-fuzz/$t/corpus/"
    cd "build-fuzz/$t"
    status=0
    "$ROOT/build-fuzz/fuzz_$t" -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 \
        -max_len=$max_len -timeout=20 corpus >log.txt 2>&1 || status=$?
    execs=$(grep -o 'Done [0-9]* runs' log.txt | grep -o '[0-9]*' || true)
    findings=$(ls crash-* leak-* timeout-* oom-* 2>/dev/null | wc -l)
    echo "fuzz $t: ${SECONDS_TO_RUN} s, ${execs:-?} executions, $findings findings (exit $status)"
    cd "$ROOT"
done
