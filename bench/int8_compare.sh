#!/bin/sh
# int8 inference side by side, in one run: dtrain float32, dtrain int8 (oneDNN int8
# engine), PyTorch 1.13 float32 and PyTorch's own FX post-training static quantization
# with the onednn engine (bench/torch_int8_bench.py), same model, weights, batch and
# threads. Each side runs REPEATS times, alternating; the table gives images/s from the
# median batch time of each run (robust to the other processes of a shared machine,
# whose time slices otherwise dominate small models' means), the median over the runs,
# the ratios, dtrain's achieved GOP/s (multiply-adds x2) in each format with its share
# of oneDNN's GEMM peak in that format (bench_dnnl_peak f32 and int8, measured first in
# the same run), and dtrain's peak resident memory (/usr/bin/time) of each.
# Raw JSON lines go to bench/results/ (gitignored).
#   bench/int8_compare.sh [DTRAIN] [THREADS] [BATCH] MODEL[:W.safetensors:Q.safetensors]...
# W: float weights (dtrain train --save), Q: dtrain quantize's file made from them;
# without them both sides use random weights (dtrain quantizes its own on random images).
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
BATCH=${3:-128}
if [ $# -ge 3 ]; then shift 3; else shift $#; fi
SPECS=${*:-"lenet5 resnet18"}
REPEATS=${REPEATS:-3}
here=$(dirname "$0")
# PyTorch's float layers partly run on OpenBLAS: on an AVX-512 CPU it gets OpenBLAS's
# AVX-512 kernels (as in compare_torch.sh; 0.3.21 loads AVX2 ones on AMD's AVX-512
# CPUs, and this sandbox sets OPENBLAS_CORETYPE=Haswell). dtrain multiplies on oneDNN.
torch_core=${OPENBLAS_CORETYPE:-}
grep -q ' avx512f ' /proc/cpuinfo && torch_core=SkylakeX
mkdir -p "$here/results"
out="$here/results/int8_compare_$(date +%Y%m%d_%H%M%S).jsonl"
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
rate() { field ms_per_batch | awk -v b="$BATCH" '{ printf "%.1f\n", 1000 * b / $1 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The yardsticks for the %peak columns, measured before anything else runs.
json32=$("$(dirname "$DTRAIN")/bench_dnnl_peak" f32 "$THREADS")
json8=$("$(dirname "$DTRAIN")/bench_dnnl_peak" int8 "$THREADS")
peak32=$(echo "$json32" | field f32_gflops) peak8=$(echo "$json8" | field int8_gops)
echo "oneDNN GEMM peaks at $THREADS threads (2048^3, the %peak yardsticks): f32 $peak32 GFLOP/s, int8 $peak8 GOP/s; at the fastest size: f32 $(echo "$json32" | field best), int8 $(echo "$json8" | field best)"

printf '%-9s %5s %3s %11s %11s %11s %11s %8s %8s %8s %6s %8s %6s %9s %9s\n' model batch thr \
    dtrain_fp32 dtrain_int8 torch_fp32 torch_int8 d8/d32 d8/t8 d32_GF/s %peak d8_GOP/s %peak \
    d32_MB d8_MB
for spec in $SPECS; do
    model=${spec%%:*}
    w=$(echo "$spec" | cut -s -d: -f2)
    q=$(echo "$spec" | cut -s -d: -f3)
    steps=10
    [ "$model" = lenet5 ] && steps=200
    winit=""
    qinit=""
    [ -n "$w" ] && winit="--init $w"
    [ -n "$q" ] && qinit="--init $q"
    for f in d32 d8 t32 t8 g32 g8; do : >"$out.$f"; done
    r=0
    while [ "$r" -lt "$REPEATS" ]; do
        # shellcheck disable=SC2086
        "$DTRAIN" bench --infer --model "$model" --batch-size "$BATCH" --threads "$THREADS" \
            --steps "$steps" $winit >"$out.run"
        tee -a "$out" <"$out.run" | rate >>"$out.d32"
        field gops <"$out.run" >>"$out.g32"
        # shellcheck disable=SC2086
        "$DTRAIN" bench --infer --int8 --model "$model" --batch-size "$BATCH" --threads "$THREADS" \
            --steps "$steps" $qinit >"$out.run"
        tee -a "$out" <"$out.run" | rate >>"$out.d8"
        field gops <"$out.run" >>"$out.g8"
        # shellcheck disable=SC2086
        env ${torch_core:+OPENBLAS_CORETYPE=$torch_core} /usr/bin/python3 \
            "$here/torch_int8_bench.py" --model "$model" --batch-size "$BATCH" \
            --threads "$THREADS" --steps "$steps" $winit >"$out.t"
        tee -a "$out" <"$out.t" | grep '"fp32"' | rate >>"$out.t32"
        grep '"int8"' "$out.t" | rate >>"$out.t8"
        r=$((r + 1))
    done
    d32=$(median <"$out.d32")
    d8=$(median <"$out.d8")
    t32=$(median <"$out.t32")
    t8=$(median <"$out.t8")
    g32=$(median <"$out.g32")
    g8=$(median <"$out.g8")
    # peak resident memory of one inference run each (KB -> MB)
    # shellcheck disable=SC2086
    m32=$(/usr/bin/time -f %M "$DTRAIN" bench --infer --model "$model" --batch-size "$BATCH" \
        --threads "$THREADS" --steps 2 $winit 2>&1 >/dev/null | tail -1)
    # shellcheck disable=SC2086
    m8=$(/usr/bin/time -f %M "$DTRAIN" bench --infer --int8 --model "$model" --batch-size "$BATCH" \
        --threads "$THREADS" --steps 2 $qinit 2>&1 >/dev/null | tail -1)
    printf '%-9s %5s %3s %11.1f %11.1f %11.1f %11.1f %8.2f %8.2f %8.1f %6.0f %8.1f %6.0f %9.1f %9.1f\n' \
        "$model" "$BATCH" "$THREADS" "$d32" "$d8" "$t32" "$t8" "$(echo "$d8 / $d32" | bc -l)" \
        "$(echo "$d8 / $t8" | bc -l)" "$g32" "$(echo "100 * $g32 / $peak32" | bc -l)" "$g8" \
        "$(echo "100 * $g8 / $peak8" | bc -l)" "$(echo "$m32 / 1024" | bc -l)" \
        "$(echo "$m8 / 1024" | bc -l)"
    rm -f "$out.d32" "$out.d8" "$out.t32" "$out.t8" "$out.t" "$out.g32" "$out.g8" "$out.run"
done
echo "raw: $out"
