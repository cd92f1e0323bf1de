#!/bin/sh
# Two dtrain binaries side by side in one run (a change's before and after): the same
# `dtrain bench` command on each, alternating REPEATS times, so that the machine's
# minute-to-minute noise falls on both alike. Per case it prints each binary's median
# ms per step (and the spread of the repeats), the ratio before/after (> 1: the change
# is faster), peak resident memory (/usr/bin/time) and, with --profile cases, the time
# per step outside conv2d and linear (BatchNorm, ReLU, adds, pooling, the rest of the
# layers and SGD: the time `bench --profile` gives to the other layer kinds). The
# machine's limits are measured first, in the same run: oneDNN's f32 and bf16 GEMM
# (bench_dnnl_peak of the AFTER build) and the achieved GFLOP/s is given as their share:
# %peak of the 2048^3 GEMM (the yardstick of earlier figures), %best of the fastest size
# (the limit: operands in cache).
# Check that the machine is quiet first (top; other processes' CPU shows in "other").
#   bench/before_after.sh BEFORE_DTRAIN AFTER_DTRAIN [CASE...]
#   CASE: "model:precision:batch[:profile]" (default: the issue-27 set below)
#   env: REPEATS (3), THREADS (2), STEPS (per case: 5 for resnet18, 50 otherwise)
set -eu
BEFORE=$1
AFTER=$2
shift 2
CASES=${*:-"resnet18:fp32:128 resnet18:bf16:128:profile lenet5:fp32:128 mlp:fp32:128 logreg:fp32:128 resnet18:bf16:128"}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
. "$(dirname "$0")/load_lib.sh" # field, median, spread, HZ
peak_dir=$(dirname "$AFTER")
f32_json=$("$peak_dir/bench_dnnl_peak" f32 "$THREADS")
bf16_json=$("$peak_dir/bench_dnnl_peak" bf16 "$THREADS")
f32_peak=$(echo "$f32_json" | field f32_gflops) bf16_peak=$(echo "$bf16_json" | field bf16_gflops)
f32_best=$(echo "$f32_json" | field best) bf16_best=$(echo "$bf16_json" | field best)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads; oneDNN GEMM peak (2048^3) f32 $f32_peak, bf16 $bf16_peak GFLOP/s; best size (the limit, %best) f32 $f32_best, bf16 $bf16_best"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one BIN CASE REP: one run, its JSON line, peak RSS and outside-conv time appended
one() {
    bin=$1 model=$2 prec=$3 batch=$4 prof=$5 tag=$6
    steps=${STEPS:-$([ "$model" = resnet18 ] && echo 5 || echo 50)}
    set -- bench --model "$model" --precision "$prec" --batch-size "$batch" --threads "$THREADS" \
        --steps "$steps"
    [ -n "$prof" ] && set -- "$@" --profile
    s0=$(head -1 /proc/stat)
    /usr/bin/time -f "rss_kb %M cpu_s %U %S" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    s1=$(head -1 /proc/stat)
    ms=$(field ms_per_step <"$tmp/out")
    gf=$(field gflops <"$tmp/out")
    rss=$(sed -n 's/^rss_kb \([0-9]*\).*/\1/p' "$tmp/err")
    cpu=$(sed -n 's/^rss_kb [0-9]* cpu_s \([0-9.]*\) \([0-9.]*\)/\1 \2/p' "$tmp/err" | awk '{ print $1 + $2 }')
    # layers other than conv2d and linear, forward + backward, and sgd (ms per step)
    rest=$(awk '/^(batchnorm2d|relu|maxpool2d|avgpool2d|adaptive_avgpool2d|add|shortcut_pad|dropout|concat) / { s += $2 + $3 } /^sgd / { s += $2 } END { printf "%.1f", s }' "$tmp/err")
    # other processes' CPU during the run: the machine's busy time (/proc/stat before and
    # after) less the run's own user+sys (/usr/bin/time), in core-seconds
    other=$(printf '%s\n%s\n' "$s0" "$s1" | awk -v hz="$HZ" -v cpu="$cpu" '
        { t = 0; for (i = 2; i <= 11; i++) t += $i; busy[NR] = t - $5 - $6 }
        END { d = busy[2] - busy[1] - hz * cpu; printf "%.2f", (d > 0 ? d / hz : 0) }')
    echo "$ms $gf $rss $rest $other" >>"$tmp/$tag"
}
printf '%-26s %s %14s %14s %7s %9s %9s %12s %12s %12s\n' case "" "before ms" "after ms" ratio \
    "before MB" "after MB" "before rest" "after rest" "%peak %best"
for c in $CASES; do
    model=$(echo "$c" | cut -d: -f1) prec=$(echo "$c" | cut -d: -f2)
    batch=$(echo "$c" | cut -d: -f3) prof=$(echo "$c" | cut -d: -f4)
    rm -f "$tmp/b" "$tmp/a"
    r=0
    while [ $r -lt "$REPEATS" ]; do
        one "$BEFORE" "$model" "$prec" "$batch" "$prof" b
        one "$AFTER" "$model" "$prec" "$batch" "$prof" a
        r=$((r + 1))
    done
    bm=$(cut -d' ' -f1 "$tmp/b" | median) am=$(cut -d' ' -f1 "$tmp/a" | median)
    bs=$(cut -d' ' -f1 "$tmp/b" | spread) as=$(cut -d' ' -f1 "$tmp/a" | spread)
    brss=$(cut -d' ' -f3 "$tmp/b" | median) arss=$(cut -d' ' -f3 "$tmp/a" | median)
    brest=$(cut -d' ' -f4 "$tmp/b" | median) arest=$(cut -d' ' -f4 "$tmp/a" | median)
    agf=$(cut -d' ' -f2 "$tmp/a" | median)
    oth=$(cut -d' ' -f5 "$tmp/a" "$tmp/b" | sort -n | tail -1)
    peak=$([ "$prec" = bf16 ] && echo "$bf16_peak" || echo "$f32_peak")
    best=$([ "$prec" = bf16 ] && echo "$bf16_best" || echo "$f32_best")
    printf '%-26s %s %14s %14s %7.3f %9d %9d %12s %12s %6.0f%% %4.0f%%  (spread %s / %s ms; other processes up to %s core-s)\n' \
        "$c" "" "$bm" "$am" "$(echo "$bm $am" | awk '{ print $1 / $2 }')" \
        "$((brss / 1024))" "$((arss / 1024))" "$([ -n "$prof" ] && echo "$brest" || echo -)" \
        "$([ -n "$prof" ] && echo "$arest" || echo -)" "$(echo "$agf $peak" | awk '{ print 100 * $1 / $2 }')" \
        "$(echo "$agf $best" | awk '{ print 100 * $1 / $2 }')" "$bs" "$as" "$oth"
done
