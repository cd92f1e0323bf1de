#!/bin/sh
# Fuzzes the IDX and CIFAR-10 readers with libFuzzer (clang, ASan + UBSan) for
# SECONDS (default 600), starting from tests/fuzz/corpus. Findings land in
# build-fuzz/ as crash-* files.
set -eu
SECONDS_TO_RUN=${1:-600}
cd "$(dirname "$0")/.."
mkdir -p build-fuzz/corpus
clang -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fsanitize=fuzzer,address,undefined \
    -Iinclude tests/fuzz/fuzz_readers.c src/data/idx.c src/data/cifar.c src/core/error.c \
    -lz -o build-fuzz/fuzz_readers
cp tests/fuzz/corpus/* build-fuzz/corpus/
cd build-fuzz
./fuzz_readers -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=4096 -max_len=65536 corpus
