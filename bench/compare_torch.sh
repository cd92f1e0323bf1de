#!/bin/sh
# Side-by-side training throughput, dtrain vs PyTorch (Debian's python3-torch): same
# model, batch, thread count and synthetic data, in one run. Each side runs REPEATS
# times, alternating, and the table gives the medians and their ratio (this machine is
# shared and noisy; PyTorch's small-model figures swing by 3x between runs).
# Raw JSON lines go to bench/results/ (gitignored).
#   bench/compare_torch.sh [DTRAIN] [THREADS] [MODELS...]      REPEATS=3 by default
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
shift 2 2>/dev/null || shift $#
MODELS=${*:-"logreg mlp lenet5 resnet18"}
REPEATS=${REPEATS:-3}
here=$(dirname "$0")
mkdir -p "$here/results"
out="$here/results/compare_torch_$(date +%Y%m%d_%H%M%S).jsonl"
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-9s %6s %7s %14s %14s %7s %10s\n' model batch threads dtrain_img/s torch_img/s ratio dtrain_GF/s
for model in $MODELS; do
    steps=1000
    [ "$model" = lenet5 ] && steps=200
    [ "$model" = resnet18 ] && steps=5
    : >"$out.d"
    : >"$out.t"
    r=0
    while [ "$r" -lt "$REPEATS" ]; do
        d=$("$DTRAIN" bench --model "$model" --batch-size 128 --threads "$THREADS" --steps "$steps")
        t=$(/usr/bin/python3 "$here/torch_bench.py" --model "$model" --batch-size 128 \
            --threads "$THREADS" --steps "$steps")
        echo "$d" >>"$out"
        echo "$t" >>"$out"
        echo "$d" >>"$out.d"
        echo "$t" >>"$out.t"
        r=$((r + 1))
    done
    di=$(field images_per_s <"$out.d" | median)
    ti=$(field images_per_s <"$out.t" | median)
    gf=$(field gflops <"$out.d" | median)
    printf '%-9s %6s %7s %14s %14s %7.2f %10s\n' "$model" 128 "$THREADS" "$di" "$ti" \
        "$(awk -v a="$di" -v b="$ti" 'BEGIN { print a / b }')" "$gf"
done
rm -f "$out.d" "$out.t"
peak=$("$(dirname "$DTRAIN")/bench_sgemm_peak" "$THREADS")
echo "$peak" >>"$out"
echo "OpenBLAS sgemm peak at $THREADS threads (2048^3, best of 10): $(echo "$peak" | field sgemm_gflops) GFLOP/s"
echo "medians of $REPEATS alternating runs; raw results: $out"
