#!/bin/sh
# Side-by-side training throughput, dtrain vs PyTorch (Debian's python3-torch): same
# model, batch, thread count and random data, in one run. PyTorch runs at its best: each
# repeat tries torch.set_num_threads 1 and THREADS (OpenBLAS threads to match) and, for
# convnets, channels_last; the table gives its best variant's median. Both sides are
# timed the same way: median step time after 3 warm-up steps, images/s = batch / median.
# Each side runs REPEATS times, alternating (this machine is shared and noisy).
# During each row the other processes' CPU use is measured (cores, column "other"); a
# row where it exceeds 0.25 cores is run again once, and the figure printed either way.
# dtrain's products run on oneDNN (convolutions and linear layers alike); PyTorch's
# linear layers, and some of its convolution passes, run on OpenBLAS, so PyTorch also
# tries OpenBLAS's AVX-512 kernels where the CPU has AVX-512 and the kernels loaded are
# not (OpenBLAS 0.3.21 loads its AVX2 ones on AMD's AVX-512 CPUs, and this sandbox sets
# OPENBLAS_CORETYPE=Haswell): on this AMD EPYC they made PyTorch's mlp 1.3x and its
# resnet18 1.1x faster. Raw JSON lines go to bench/results/ (gitignored).
#   bench/compare_torch.sh [DTRAIN] [THREADS] [MODELS...]
#   env: REPEATS (3), BATCH (128), STEPS (per model: 1000 small, 200 lenet5, 5 large),
#        PRECISION (fp32 | bf16: dtrain --precision bf16 against torch.autocast bf16)
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
MODELS=${*:-"logreg mlp lenet5 resnet18"}
REPEATS=${REPEATS:-3}
BATCH=${BATCH:-128}
PRECISION=${PRECISION:-fp32}
torch_prec=""
[ "$PRECISION" = bf16 ] && torch_prec="--bf16"
here=$(dirname "$0")
mkdir -p "$here/results"
out="$here/results/compare_torch_$(date +%Y%m%d_%H%M%S).jsonl"
. "$here/load_lib.sh" # other_cores: a row above 0.25 cores is run again (once)

# The yardsticks for the %peak and %best columns, measured first (before anything else
# runs): oneDNN's f32 or bf16 inner product at 2048^3 and at its fastest size.
if [ "$PRECISION" = bf16 ]; then
    peak_json=$("$(dirname "$DTRAIN")/bench_dnnl_peak" bf16 "$THREADS")
    peak=$(echo "$peak_json" | field bf16_gflops) peak_what="oneDNN bf16 GEMM"
    limit=$(echo "$peak_json" | field best)
else
    peak_json=$("$(dirname "$DTRAIN")/bench_dnnl_peak" f32 "$THREADS")
    peak=$(echo "$peak_json" | field f32_gflops) peak_what="oneDNN f32 GEMM"
    limit=$(echo "$peak_json" | field best)
fi
avx512=0
grep -q ' avx512f ' /proc/cpuinfo && avx512=1

torch_variants="1"
[ "$THREADS" -gt 1 ] && torch_variants="1 $THREADS"
printf '%-9s %5s %7s %6s %13s %13s %-25s %6s %9s %6s %6s\n' model batch threads other \
    dtrain_img/s torch_img/s torch_best ratio dtr_GF/s %peak %best
for model in $MODELS; do
    steps=1000
    layouts="plain"
    case "$model" in
    logreg | mlp) ;;
    lenet5 | lenet_cifar) steps=200 layouts="plain cl" ;;
    *) steps=5 layouts="plain cl" ;;
    esac
    steps=${STEPS:-$steps}
    attempt=1
    cores_known=0
    while :; do
    mark "$out.before"
    : >"$out.d"
    rm -f "$out".t.*
    r=0
    while [ "$r" -lt "$REPEATS" ]; do
        d=$("$DTRAIN" bench --model "$model" --batch-size "$BATCH" --threads "$THREADS" \
            --steps "$steps" --precision "$PRECISION")
        echo "$d" >>"$out"
        echo "$d" >>"$out.d"
        # PyTorch links the same OpenBLAS: it gets the kernels dtrain's OpenBLAS loaded
        # (src/core/blas_core.h: an unknown CPU otherwise gets SSE3 ones) and, on
        # an AVX-512 CPU where those are not AVX-512 ones, SkylakeX's too; the large
        # models (a few minutes a variant) take SkylakeX alone, faster on both there.
        if [ "$cores_known" = 0 ]; then
            core=$(echo "$d" | sed -n 's/.*"blas_core":"\([^"]*\)".*/\1/p')
            torch_cores=$core
            case "$core" in
            SkylakeX | Cooperlake | SapphireRapids) ;;
            *) if [ "$avx512" = 1 ]; then
                   torch_cores="$core SkylakeX"
                   [ "$steps" -lt 100 ] && torch_cores=SkylakeX
               fi ;;
            esac
            cores_known=1
        fi
        for nt in $torch_variants; do
            for lay in $layouts; do
                for tc in $torch_cores; do
                    flag=""
                    [ "$lay" = cl ] && flag="--channels-last"
                    t=$(OPENBLAS_CORETYPE=$tc OMP_NUM_THREADS=$nt OPENBLAS_NUM_THREADS=$nt \
                        /usr/bin/python3 "$here/torch_bench.py" --model "$model" \
                        --batch-size "$BATCH" --threads "$nt" --steps "$steps" $flag $torch_prec)
                    echo "$t" >>"$out"
                    echo "$t" >>"$out.t.$nt.$lay.$tc"
                done
            done
        done
        r=$((r + 1))
    done
    mark "$out.after"
    load=$(other_cores "$out.before" "$out.after")
    if [ "$attempt" -ge 2 ] || awk -v l="$load" 'BEGIN { exit !(l <= 0.25) }'; then break; fi
    echo "($model: other processes used $load cores during the row: running it again)" >&2
    attempt=$((attempt + 1))
    done
    dms=$(field ms_per_step <"$out.d" | median)
    gf=$(field gflops <"$out.d" | median)
    best_ms="" best=""
    for nt in $torch_variants; do
        for lay in $layouts; do
            for tc in $torch_cores; do
                ms=$(field ms_per_step <"$out.t.$nt.$lay.$tc" | median)
                rm -f "$out.t.$nt.$lay.$tc"
                if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
                    best_ms=$ms best="threads $nt $lay $tc"
                fi
            done
        done
    done
    printf '%-9s %5s %7s %6s %13.1f %13.1f %-25s %6.2f %9s %6.0f %6.0f\n' "$model" "$BATCH" "$THREADS" \
        "$load" "$(awk -v m="$dms" -v b="$BATCH" 'BEGIN { print b * 1000 / m }')" \
        "$(awk -v m="$best_ms" -v b="$BATCH" 'BEGIN { print b * 1000 / m }')" "$best" \
        "$(awk -v a="$dms" -v b="$best_ms" 'BEGIN { print b / a }')" "$gf" \
        "$(awk -v g="$gf" -v p="$peak" 'BEGIN { print 100 * g / p }')" \
        "$(awk -v g="$gf" -v p="$limit" 'BEGIN { print 100 * g / p }')"
done
rm -f "$out.d" "$out.before" "$out.after"
echo "$peak_json" >>"$out"
echo "peak at $THREADS threads: $peak_what $peak GFLOP/s at 2048^3 (%peak), $limit at its fastest size (%best: the limit, operands in cache)"
echo "precision $PRECISION (torch: ${torch_prec:-fp32}); medians of $REPEATS alternating runs (img/s = batch / median step); raw results: $out"
