#!/bin/sh
# What the trace costs a step: the same `dtrain train` on 2 ranks with a build from
# before the trace's spans (BEFORE), with the current build without --trace (AFTER),
# and with --trace (AFTER, TRACED), alternating REPEATS times so that the machine's
# drift falls on all three alike. Per model: the median ms per step of each (an
# epoch's t_train / its steps, as the run log has them), the spread of the repeats, and
# the ratios to BEFORE. Check that the machine is quiet first (top).
#   bench/trace_cost.sh BEFORE_DTRAIN AFTER_DTRAIN [MODEL...]
#   MODEL: "name:batch:samples[:width]" (default lenet5:64:12800 resnet18:32:1280:16)
#   env: REPEATS (5)
set -eu
BEFORE=$1
AFTER=$2
shift 2
MODELS=${*:-"lenet5:64:12800 resnet18:32:1280:16"}
REPEATS=${REPEATS:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
. "$(dirname "$0")/load_lib.sh" # field, median, spread, mark, other_cores
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; 2 ranks, 1 thread each"
echo "| model | before ms/step | after, no trace | after, --trace | after/before | traced/before |"
echo "|---|---|---|---|---|---|"
for spec in $MODELS; do
    IFS=: read -r model batch samples width <<EOF
$spec
EOF
    args="train --model $model --batch-size $batch --max-samples $samples --epochs 1 --threads 1 --test-samples 64 --quiet"
    [ -n "${width:-}" ] && args="$args --width $width"
    : >"$tmp/before" && : >"$tmp/after" && : >"$tmp/traced"
    mark "$tmp/m0"
    r=0
    while [ "$r" -lt "$REPEATS" ]; do
        for v in before after traced; do
            bin=$AFTER extra=
            [ "$v" = before ] && bin=$BEFORE
            [ "$v" = traced ] && extra="--trace $tmp/t.json"
            rm -f "$tmp/log.jsonl"
            mpirun -np 2 "$bin" $args $extra --log "$tmp/log.jsonl" >/dev/null
            steps=$(grep '"event":"run"' "$tmp/log.jsonl" | field steps_per_epoch)
            t=$(grep '"event":"epoch"' "$tmp/log.jsonl" | field t_train)
            awk -v t="$t" -v s="$steps" 'BEGIN { printf "%.4f\n", t / s * 1000 }' >>"$tmp/$v"
        done
        r=$((r + 1))
    done
    mark "$tmp/m1"
    echo "($model: other processes used $(other_cores "$tmp/m0" "$tmp/m1") cores meanwhile)" >&2
    b=$(median <"$tmp/before") a=$(median <"$tmp/after") t=$(median <"$tmp/traced")
    printf "| %s b%s | %s (%s) | %s (%s) | %s (%s) | %.3f | %.3f |\n" "$model" "$batch" \
        "$b" "$(spread <"$tmp/before")" "$a" "$(spread <"$tmp/after")" "$t" \
        "$(spread <"$tmp/traced")" "$(echo "$a $b" | awk '{ print $1 / $2 }')" \
        "$(echo "$t $b" | awk '{ print $1 / $2 }')"
done
