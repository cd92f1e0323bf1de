#!/bin/sh
# OpenBLAS's kernels (src/core/blas_core.h): on a CPU with AVX2 or AVX-512 dtrain
# never runs on the generic SSE3 fallback, on one with AVX-512 it runs AVX-512 kernels,
# and a user's OPENBLAS_CORETYPE is kept.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"

core_of() { sed -n 's/.*"blas_core":"\([^"]*\)".*/\1/p' "$1"; }

OPENBLAS_CORETYPE=Prescott "$DTRAIN" bench --model logreg --steps 2 --threads 1 >"$tmp/user.json"
check "a user's OPENBLAS_CORETYPE is kept" [ "$(core_of "$tmp/user.json")" = Prescott ]

env -u OPENBLAS_CORETYPE "$DTRAIN" bench --model logreg --steps 2 --threads 1 >"$tmp/auto.json"
core=$(core_of "$tmp/auto.json")
check "bench names the kernels in use" [ -n "$core" ]
if grep -qw avx2 /proc/cpuinfo; then
    check "not the SSE3 fallback on a CPU with AVX2 (got $core)" [ "$core" != Prescott ]
fi
flags=$(grep -m1 '^flags' /proc/cpuinfo)
if echo "$flags" | grep -qw avx512f && echo "$flags" | grep -qw avx512bw &&
    echo "$flags" | grep -qw avx512vl && echo "$flags" | grep -qw avx512dq; then
    case $core in
    SkylakeX | Cooperlake | SapphireRapids) avx512_core=yes ;;
    *) avx512_core=no ;;
    esac
    check "AVX-512 kernels on a CPU with AVX-512 (got $core)" [ $avx512_core = yes ]
fi
finish
