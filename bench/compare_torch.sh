#!/bin/sh
# Side-by-side training throughput, dtrain vs PyTorch (Debian's python3-torch), same
# model, batch, thread count and synthetic data, in one run. Prints a table with
# images/s of both and the ratio; raw JSON lines go to bench/results/ (gitignored).
#   bench/compare_torch.sh [DTRAIN] [THREADS] [MODELS...]
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
shift 2 2>/dev/null || shift $#
MODELS=${*:-"logreg mlp lenet5 resnet18"}
here=$(dirname "$0")
mkdir -p "$here/results"
out="$here/results/compare_torch_$(date +%Y%m%d_%H%M%S).jsonl"
field() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p"; }

printf '%-9s %6s %7s %14s %14s %7s %10s\n' model batch threads dtrain_img/s torch_img/s ratio dtrain_GF/s
for model in $MODELS; do
    steps=200
    [ "$model" = resnet18 ] && steps=10
    d=$("$DTRAIN" bench --model "$model" --batch-size 128 --threads "$THREADS" --steps "$steps")
    t=$(/usr/bin/python3 "$here/torch_bench.py" --model "$model" --batch-size 128 --threads "$THREADS" --steps "$steps")
    echo "$d" >>"$out"
    echo "$t" >>"$out"
    di=$(echo "$d" | field images_per_s)
    ti=$(echo "$t" | field images_per_s)
    gf=$(echo "$d" | field gflops)
    printf '%-9s %6s %7s %14s %14s %7.2f %10s\n' "$model" 128 "$THREADS" "$di" "$ti" \
        "$(awk -v a="$di" -v b="$ti" 'BEGIN { print a / b }')" "$gf"
done
peak=$("$(dirname "$DTRAIN")/bench_sgemm_peak" "$THREADS")
echo "$peak" >>"$out"
echo "OpenBLAS sgemm peak at $THREADS threads (2048^3, best of 10): $(echo "$peak" | field sgemm_gflops) GFLOP/s"
echo "raw results: $out"
