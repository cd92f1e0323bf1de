#!/bin/bash
# The simulator's validation data (docs/scaling.md, "dtrain simulate"): per-op profiles
# of the models (dtrain bench --profile-out) and short training runs on 1-2 processes
# over shared memory and over two network-namespace hosts at 1 and 10 Gbit/s, reduced
# to one CSV row per run for `dtrain simulate --validate`: OUT/validation_profile.csv
# (compute from the profiles taken at the start), OUT/validation_matched.csv (from a
# profile taken just before each run, as many benches at once as it has ranks) and
# OUT/validation.csv (compute of each run taken
# from its own log through compute_speedup, so that only the communication schedule
# is predicted). Every config runs REPEATS times (default 2), the least disturbed run
# (lowest median step) is kept: the machine is shared.
# Needs root (namespaces), Open MPI, python3. Takes about 4 minutes per repeat here.
#   bench/simulate_validation.sh [DTRAIN] [OUT]
set -eu
DTRAIN=$(realpath "${1:-build/dtrain}")
OUT=${2:-runs/simulate-validation}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1
# shellcheck source=../scripts/netns-hosts.sh
. "$HERE/scripts/netns-hosts.sh"

# Shared memory: alpha and beta from mpirun -np 2 bench_allreduce (4 KiB in 2 us, 2.8 MB
# at 11.8 GB/s bus bandwidth); the namespaces' links: the tbf rate, alpha measured the
# same way across them (LAT_NETNS, set below from a 4 KiB all-reduce).
SHM_LINK=${SHM_LINK:-10GB/s,1us}
REPEATS=${REPEATS:-2}
LENET="--model lenet5 --data fashion-mnist --batch-size 64 --max-samples 12800"
RESNET="--model resnet18 --width 16 --data synthetic:cifar10 --batch-size 32 --max-samples 3200"
COMMON="--epochs 2 --test-samples 64 --threads 1 --loader-workers 1 --lr 0.01 --quiet"
# the simulator's "allreduce" mode overlaps the buckets with backward: so must the runs
# (--overlap auto turns it off here, 2 ranks x 2 threads on 2 cores)
OVERLAP="--overlap on"

"$DTRAIN" bench --model lenet5 --batch-size 64 --threads 1 --steps 200 \
    --profile-out "$OUT/lenet5_b64.json" >/dev/null
"$DTRAIN" bench --model resnet18 --width 16 --batch-size 32 --threads 1 --steps 40 \
    --profile-out "$OUT/resnet18w16_b32.json" >/dev/null

ROWS=$OUT/rows.txt
: >"$ROWS"
# run NAME PROFILE WORKERS TOPOLOGY LINK MODE LAUNCHER... -- TRAIN ARGS
# Before each run, a profile under the run's conditions: as many bench processes at once
# as the run has ranks (both cores busy), the first one's written as
# NAME_rR.profile.json (validation_matched.csv), so load drift between configs and the
# cores' sharing reach the profile too.
BENCH_LENET="--model lenet5 --batch-size 64 --threads 1 --steps 200"
BENCH_RESNET="--model resnet18 --width 16 --batch-size 32 --threads 1 --steps 40"
run() {
    local name=$1 profile=$2 workers=$3 link=$4 mode=$5 batch=$6 bench i
    shift 6
    echo "== $name (repeat $r)" >&2
    case $profile in lenet5*) bench=$BENCH_LENET ;; *) bench=$BENCH_RESNET ;; esac
    for i in $(seq "$workers"); do
        "$DTRAIN" bench $bench --profile-out "$OUT/${name}_r$r.profile$i.json" >/dev/null &
    done
    wait
    mv "$OUT/${name}_r$r.profile1.json" "$OUT/${name}_r$r.profile.json"
    rm -f "$OUT/${name}_r$r".profile[0-9]*.json
    "$@" --log "$OUT/${name}_r$r.jsonl"
    [ "$r" -gt 1 ] || echo "$name $profile $workers $batch $link $mode" >>"$ROWS"
}

for r in $(seq "$REPEATS"); do
run lenet5_p1 lenet5_b64.json 1 "$SHM_LINK" allreduce 64 "$DTRAIN" train $LENET $COMMON
run lenet5_p2_shm lenet5_b64.json 2 "$SHM_LINK" allreduce 64 \
    mpirun -np 2 "$DTRAIN" train $LENET $COMMON $OVERLAP
run resnet18_p1 resnet18w16_b32.json 1 "$SHM_LINK" allreduce 32 "$DTRAIN" train $RESNET $COMMON
run resnet18_p2_shm resnet18w16_b32.json 2 "$SHM_LINK" allreduce 32 \
    mpirun -np 2 "$DTRAIN" train $RESNET $COMMON $OVERLAP

done

trap netns_down EXIT
netns_up $(($$ % 150 + 30))
for r in $(seq "$REPEATS"); do
for rate in 1gbit 10gbit; do
    # the token bucket holds 2 ms of the rate (256 KiB at 1 Gbit/s, as netns-hosts.sh):
    # a deeper one refills while ranks compute and lets whole buckets pass unshaped
    burst=$([ $rate = 1gbit ] && echo 256k || echo 2560k)
    tc -n "$NETNS_1" qdisc replace dev v1 root tbf rate $rate burst $burst latency 50ms
    tc -n "$NETNS_2" qdisc replace dev v2 root tbf rate $rate burst $burst latency 50ms
    [ -s "$OUT/allreduce_$rate.jsonl" ] ||
        netns_mpirun "$HERE/build/bench_allreduce" 20 4096 2805864 >"$OUT/allreduce_$rate.jsonl"
    lat=$(python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
print('%.0fus' % (r[0]['ring_ms'] * 1e3 / 2))" "$OUT/allreduce_$rate.jsonl")
    link="$rate,$lat"
    run lenet5_p2_$rate lenet5_b64.json 2 "$link" allreduce 64 \
        netns_mpirun "$DTRAIN" train $LENET $COMMON $OVERLAP
    run resnet18_p2_$rate resnet18w16_b32.json 2 "$link" allreduce 32 \
        netns_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP
    run resnet18_p2_${rate}_b1 resnet18w16_b32.json 2 "$link" allreduce:1 32 \
        netns_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP --bucket-mb 1
    run resnet18_p2_${rate}_b1_nooverlap resnet18w16_b32.json 2 "$link" \
        allreduce-no-overlap:1 32 netns_mpirun "$DTRAIN" train $RESNET $COMMON \
        --bucket-mb 1 --no-overlap
done
done

# One row per config: of its repeats the one with the lowest median step time over rank
# 0's steps of the 2nd epoch (compute + exposed communication; loader waits excluded,
# as t_train excludes them), its median compute and exposed time beside it.
python3 - "$OUT" "$ROWS" "$REPEATS" <<'PY'
import json, statistics, sys
out, rows, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
def medians(path):
    steps = [r for r in map(json.loads, open(path))
             if r.get("event") == "step" and r.get("rank", 0) == 0 and r.get("epoch") == 1]
    return (statistics.median(s["t_compute"] + s["t_comm_exposed"] for s in steps),
            statistics.median(s["t_compute"] for s in steps),
            statistics.median(s["t_comm_exposed"] for s in steps))
head = ("# made by bench/simulate_validation.sh: of %d repeats the run with the lowest median "
        "step time (rank 0, epoch 2)\n" % repeats)
cols = "name,profile,workers,batch_size,topology,link,latency,mode,bucket_mb"
plain = open(f"{out}/validation_profile.csv", "w")
matched = open(f"{out}/validation_matched.csv", "w")
matched.write(head + "# compute from a profile taken just before the kept run, with as many "
              "bench processes at once as it has ranks\n" + cols + ",step_ms,compute_ms,exposed_ms\n")
calib = open(f"{out}/validation.csv", "w")
plain.write(head + "# compute from the profiles alone\n" + cols + ",step_ms,compute_ms,exposed_ms\n")
calib.write(head + "# compute_speedup = profile compute / the run's own median compute: only "
            "communication is predicted\n" + cols + ",compute_speedup,step_ms,compute_ms,exposed_ms\n")
for line in open(rows):
    name, profile, workers, batch, link, mode = line.split()
    mode, _, bucket = mode.partition(":")
    rate, _, latency = link.partition(",")
    step, comp, exp, kept = min(medians(f"{out}/{name}_r{r}.jsonl") + (r,)
                                for r in range(1, repeats + 1))
    prof = json.load(open(f"{out}/{profile}"))
    speedup = prof["step_ms"] * int(batch) / prof["batch_size"] / (1e3 * comp)
    fields = f"{name},{profile},{workers},{batch},ring,{rate},{latency},{mode},{bucket or 25}"
    split = f"{1e3*step:.3f},{1e3*comp:.3f},{1e3*exp:.3f}"
    plain.write(f"{fields},{split}\n")
    matched.write(f"{fields},{split}\n".replace(f",{profile},", f",{name}_r{kept}.profile.json,", 1))
    if int(workers) > 1:
        calib.write(f"{fields},{speedup:.4f},{split}\n")
PY
"$DTRAIN" simulate --validate "$OUT/validation_profile.csv"
"$DTRAIN" simulate --validate "$OUT/validation_matched.csv"
"$DTRAIN" simulate --validate "$OUT/validation.csv"
