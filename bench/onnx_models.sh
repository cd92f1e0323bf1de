#!/bin/sh
# Imported torchvision models, dtrain against PyTorch side by side in one run: each model
# of bench/torchvision_models.py (mobilenet_v2 at full width; vit, issue 41's ViT
# fixture's architecture at full size) is exported by PyTorch with docs/onnx.md's recipe
# into a temporary folder, then trained on random data, same batch, same steps, same
# thread count: `dtrain bench --model X.onnx` against bench/torch_bench.py at its best
# (torch.set_num_threads 1 and THREADS with OpenBLAS's threads matched, NCHW and
# channels_last: the best variant's median). The two sides alternate (A B A B ...,
# REPEATS rounds) so that other processes' load falls on both alike.
# dtrain runs at THREADS (the ratio's side) and, for reference, at 1 thread: on a
# loaded machine one thread loses less to a preempted partner than two.
# Each side's step is also given as a share of the machine's limit, measured in the same
# run before the models: a step's products (FLOPs of convolutions, linear layers and
# attention's matmuls, bench/torchvision_models.py costs) at oneDNN's f32 GEMM peak
# (bench_dnnl_peak's best size), plus the bytes its depthwise convolutions must move at
# memcpy's bandwidth (bench_mem_bandwidth): limit ms = GFLOP / peak + MB / bandwidth,
# share = limit ms / step ms (1.00 would be the machine's limit).
# Figures: the median of the REPEATS runs' medians (each run's median over its STEPS
# steps, after 3 warm-up steps) and their spread (min-max of the runs' medians); column
# "other": the cores other processes used during the model's rounds (/proc/stat less
# this script's children): figures with other > 0.25 were taken under load.
# OMP_WAIT_POLICY, if set, reaches both sides (both are GNU OpenMP programs): on a
# shared machine `passive` keeps a thread whose partner was preempted from spinning out
# its time slice at every barrier (mobilenet_v2 at 2 threads under ~1.5 other cores'
# load: dtrain 404 -> 96 ms a step, PyTorch 829 -> 144); the header says which was used.
#   bench/onnx_models.sh [DTRAIN] [THREADS] [MODELS...]     (default: mobilenet_v2)
#   env: REPEATS (3), BATCH (64), STEPS (10), KEEP (a folder: keep the .onnx files there)
set -eu
DTRAIN=${1:-build/dtrain}
THREADS=${2:-2}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
MODELS=${*:-mobilenet_v2}
REPEATS=${REPEATS:-3}
BATCH=${BATCH:-64}
STEPS=${STEPS:-10}
here=$(cd "$(dirname "$0")" && pwd)
bindir=$(dirname "$DTRAIN")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$here/results"
out="$here/results/onnx_models_$(date +%Y%m%d_%H%M%S).jsonl"
. "$here/load_lib.sh"
spread() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f-%.1f", lo, hi }'; }

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mark "$tmp/before"
peak_json=$("$bindir/bench_dnnl_peak" f32 "$THREADS")
bw_json=$("$bindir/bench_mem_bandwidth" "$THREADS")
mark "$tmp/after"
yard_load=$(other_cores "$tmp/before" "$tmp/after")
echo "$peak_json" >>"$out"
echo "$bw_json" >>"$out"
peak=$(echo "$peak_json" | field best)
bw=$(echo "$bw_json" | field memcpy_gbs)
echo "CPU: $cpu, $CORES cores; $THREADS threads, batch $BATCH, $STEPS steps a run, $REPEATS alternating rounds; OMP_WAIT_POLICY ${OMP_WAIT_POLICY:-unset}"
echo "limits (other processes: $yard_load cores): oneDNN f32 GEMM $peak GFLOP/s (best size), memcpy $bw GB/s (read + write)"

# PyTorch on an AVX-512 CPU also gets OpenBLAS's AVX-512 kernels (SkylakeX), as
# bench/compare_torch.sh gives its large models: faster for it on the AMD EPYC there.
torch_core=""
grep -q ' avx512f ' /proc/cpuinfo && torch_core=SkylakeX
variants="1"
[ "$THREADS" -gt 1 ] && variants="1 $THREADS"

printf '%-13s %-7s %-30s %9s %13s %8s %8s %9s %6s %6s\n' model side variant ms/step spread img/s GFLOP/s limit_ms share other
for model in $MODELS; do
    onnx="$tmp/$model.onnx"
    if ! /usr/bin/python3 "$here/torchvision_models.py" export "$model" "$onnx" 2>"$tmp/export.err"; then
        tail -1 "$tmp/export.err"
        continue
    fi
    [ -n "${KEEP:-}" ] && cp "$onnx" "$KEEP/"
    costs=$(/usr/bin/python3 "$here/torchvision_models.py" costs "$model" "$BATCH" 2>/dev/null)
    echo "$costs" >>"$out"
    gflop=$(echo "$costs" | field train_gflop)
    dwmb=$(echo "$costs" | field dw_mbytes)
    limit_ms=$(awk -v g="$gflop" -v p="$peak" -v m="$dwmb" -v b="$bw" 'BEGIN { printf "%.2f", 1e3 * g / p + m / b }')
    rm -f "$tmp"/t.* "$tmp"/d.*
    refused=""
    mark "$tmp/before"
    r=0
    while [ "$r" -lt "$REPEATS" ]; do
        for nt in $variants; do
            if d=$("$DTRAIN" bench --model "$onnx" --batch-size "$BATCH" --threads "$nt" \
                --steps "$STEPS" 2>"$tmp/dtrain.err"); then
                echo "$d" >>"$out"
                echo "$d" | field ms_per_step >>"$tmp/d.$nt"
            else
                refused=$(tail -1 "$tmp/dtrain.err")
            fi
        done
        for nt in $variants; do
            for lay in plain cl; do
                flag=""
                [ "$lay" = cl ] && flag="--channels-last"
                t=$(OPENBLAS_CORETYPE=${torch_core:-${OPENBLAS_CORETYPE:-}} OMP_NUM_THREADS=$nt \
                    OPENBLAS_NUM_THREADS=$nt /usr/bin/python3 "$here/torch_bench.py" --model "$model" \
                    --batch-size "$BATCH" --threads "$nt" --steps "$STEPS" $flag 2>/dev/null)
                echo "$t" >>"$out"
                echo "$t" | field ms_per_step >>"$tmp/t.$nt.$lay"
            done
        done
        r=$((r + 1))
    done
    mark "$tmp/after"
    load=$(other_cores "$tmp/before" "$tmp/after")
    best_ms="" best=""
    for nt in $variants; do
        for lay in plain cl; do
            ms=$(median <"$tmp/t.$nt.$lay")
            if [ -z "$best_ms" ] || awk -v a="$ms" -v b="$best_ms" 'BEGIN { exit !(a < b) }'; then
                best_ms=$ms best="threads $nt $lay" best_file="$tmp/t.$nt.$lay"
            fi
        done
    done
    row() { # side variant median spread
        printf '%-13s %-7s %-30s %9.1f %13s %8.1f %8.2f %9s %6.2f %6s\n' "$model" "$1" "$2" "$3" "$4" \
            "$(awk -v m="$3" -v b="$BATCH" 'BEGIN { print b * 1000 / m }')" \
            "$(awk -v m="$3" -v g="$gflop" 'BEGIN { print 1e3 * g / m }')" "$limit_ms" \
            "$(awk -v m="$3" -v l="$limit_ms" 'BEGIN { print l / m }')" "$load"
    }
    torch_variant="$best${torch_core:+ $torch_core}"
    if [ -s "$tmp/d.$THREADS" ]; then
        dms=$(median <"$tmp/d.$THREADS")
        row dtrain "threads $THREADS (the acceptance)" "$dms" "$(spread <"$tmp/d.$THREADS")"
        [ "$THREADS" -gt 1 ] && row dtrain "threads 1" "$(median <"$tmp/d.1")" "$(spread <"$tmp/d.1")"
        row pytorch "$torch_variant" "$best_ms" "$(spread <"$best_file")"
        awk -v a="$dms" -v b="$best_ms" -v m="$model" \
            'BEGIN { printf "%-13s dtrain / PyTorch best images/s: %.2fx\n", m, b / a }'
    else
        row pytorch "$torch_variant" "$best_ms" "$(spread <"$best_file")"
        echo "$model: dtrain: $refused"
    fi
    echo "$model: step $gflop GFLOP in products, depthwise convolutions $dwmb MB at least ($(echo "$costs" | field dw_layers) layers)"
    # The depthwise layers' own share of the bandwidth, from one more dtrain run that
    # times each op (`bench --profile-out`; PyTorch's side has no per-layer times here).
    if [ -s "$tmp/d.$THREADS" ] && [ "$(echo "$costs" | field dw_layers)" != 0 ] &&
        "$DTRAIN" bench --model "$onnx" --batch-size "$BATCH" --threads "$THREADS" \
            --steps "$STEPS" --profile-out "$tmp/prof.json" >/dev/null 2>&1 &&
        dw=$(/usr/bin/python3 "$here/torchvision_models.py" dw-time "$model" "$BATCH" "$tmp/prof.json" 2>&1); then
        echo "$dw" >>"$out"
        awk -v t="$(echo "$dw" | field dw_ms)" -v s="$(echo "$dw" | field step_ms)" -v m="$dwmb" -v b="$bw" -v x="$model" \
            'BEGIN { printf "%s: dtrain'"'"'s depthwise layers (forward + backward) %.1f ms of a %.1f ms step (profile run): %.2f GB/s, %.2f of memcpy'"'"'s\n", x, t, s, m / t, m / t / b }'
    fi
done
echo "limit_ms = GFLOP / $peak GFLOP/s + MB / $bw GB/s; share = limit_ms / ms; raw results: $out"
