#!/bin/sh
# OpenBLAS's kernels (src/core/blas_core.h): on a CPU with AVX2 or AVX-512 dtrain
# never runs on the generic SSE3 fallback, on one with AVX-512 it runs AVX-512 kernels,
# and a user's OPENBLAS_CORETYPE is kept; ONEDNN_MAX_CPU_ISA=AVX2 makes it choose as on
# an AVX2 host, =AVX as on an AVX host, =SSE41 as on an SSE4.1 one.
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
# The CPU as dtrain sees it (core/cpu_isa: oneDNN's ISA, capped by ONEDNN_MAX_CPU_ISA)
isa=$(sed -n 's/.*"isa":"\([^"]*\)".*/\1/p' "$tmp/auto.json")
check "bench names the ISA in use" [ -n "$isa" ]
case $core in
SkylakeX | Cooperlake | SapphireRapids) avx512_core=yes ;;
*) avx512_core=no ;;
esac
case $isa in
avx512_core*) check "AVX-512 kernels on a CPU with AVX-512 (got $core)" [ $avx512_core = yes ] ;;
*) check "no AVX-512 kernels where the ISA ($isa) has none (got $core)" [ $avx512_core = no ] ;;
esac
if grep -qw avx512f /proc/cpuinfo; then
    ONEDNN_MAX_CPU_ISA=AVX2 env -u OPENBLAS_CORETYPE "$DTRAIN" bench --model logreg --steps 2 \
        --threads 1 >"$tmp/capped.json"
    capped=$(core_of "$tmp/capped.json")
    check "ONEDNN_MAX_CPU_ISA=AVX2 keeps OpenBLAS on AVX2 kernels (got $capped)" \
        [ "$capped" = Haswell ]
    check "ONEDNN_MAX_CPU_ISA=AVX2: bench names isa avx2" grep -q '"isa":"avx2"' "$tmp/capped.json"
fi
# caps below AVX2 follow one switch down: AVX (Sandybridge's kernels), SSE4.1 (Nehalem's)
if grep -qw avx2 /proc/cpuinfo; then
    for cap in AVX:Sandybridge SSE41:Nehalem; do
        ONEDNN_MAX_CPU_ISA=${cap%%:*} env -u OPENBLAS_CORETYPE "$DTRAIN" bench --model logreg \
            --steps 2 --threads 1 >"$tmp/low.json"
        low=$(core_of "$tmp/low.json")
        check "ONEDNN_MAX_CPU_ISA=${cap%%:*} runs OpenBLAS's ${cap#*:} kernels (got $low)" \
            [ "$low" = "${cap#*:}" ]
    done
fi
finish
