#!/bin/bash
# The simulator's validation data (docs/scaling.md, "dtrain simulate"): per-op profiles
# of the models (dtrain bench --profile-out) and short training runs on 1-2 processes
# over shared memory and over two network-namespace hosts at 1 and 10 Gbit/s, then over
# emulated hosts on a switch (scripts/netns-hosts.sh, netns_up_n) at 1 and 10 Gbit/s:
# 4 hosts with one rank each (ring), 2 hosts with 2 ranks each (the 2x2 layout of
# `--topology tree:2`; dtrain's all-reduce is a flat ring over the 4 ranks there, so the
# rows say ring: see below) and a parameter server on its own host with 2 workers on 2
# others (ps-sync, `--topology ps:1`), reduced
# to one CSV row per run for `dtrain simulate --validate`: OUT/validation_profile.csv
# (compute from the profiles taken at the start), OUT/validation_matched.csv (from a
# profile taken just before each run, as many benches at once as it has ranks) and
# OUT/validation.csv (compute of each run taken
# from its own log through compute_speedup, so that only the communication schedule
# is predicted). Every config runs REPEATS times (default 2), the least disturbed run
# (lowest median step) is kept: the machine is shared. OUT/validation_tree_model.csv
# holds the 2x2 runs once more as `--topology tree:2` (compute from each run): what the
# simulator's hierarchical schedule says of a job that runs a flat ring;
# OUT/validation_hier.csv and validation_hier_matched.csv the 2x2 runs with
# `--allreduce hier`, dtrain's two-level all-reduce, as tree:2 (compute from each run,
# and from the matched profile).
# Needs root (namespaces), Open MPI, python3. Takes about 4 minutes per repeat here for
# one and two hosts, and about as long again for the switch's configs.
#   bench/simulate_validation.sh [DTRAIN] [OUT]
# Environment: REPEATS (2); PARTS, the groups of configs to run (default "shares", below;
# the earlier validation: "host pair switch": one host, the 2-host veth pair, the hosts
# on a switch; "hier": only the 2 x 2 runs, ring and hier, on the switch); LENET_SAMPLES
# (12800) and RESNET_SAMPLES (3200), the training samples (smaller for a quick check).
set -euo pipefail
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
PARTS=${PARTS:-shares}
LENET="--model lenet5 --data fashion-mnist --batch-size 64 --max-samples ${LENET_SAMPLES:-12800}"
RESNET="--model resnet18 --width 16 --data synthetic:cifar10 --batch-size 32 --max-samples ${RESNET_SAMPLES:-3200}"
COMMON="--epochs 2 --test-samples 64 --threads 1 --loader-workers 1 --lr 0.01 --quiet"
# the simulator's "allreduce" mode overlaps the buckets with backward: so must the runs
# (--overlap auto turns it off here, 2 ranks x 2 threads on 2 cores)
OVERLAP="--overlap on"

part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# Part "shares" (the default): the predictor as users meet it, `dtrain scale` over
# emulated hosts with a CPU share each (--host-cpus, default cpuset; SHARES=none for
# the same without shares), every config predicted before it runs: 4 and 8 hosts with
# one rank each (--allreduce ring); 2 x 2 and 4 x 2 ranks (--allreduce hier); a
# parameter server (ps-sync) with 1 and 2 servers and 2, 4 and 6 workers on 8 hosts;
# each at 1 and 10 Gbit/s, lenet5 and resnet18 width 16. REPEATS passes, each in
# OUT/shares_<SHARES>/pass<r>/<group>_<model>_<rate>, then summary.md: per group and
# pass the configs, how many ran faithful (not busy, not throttled), median and worst
# |error| over those, and Kendall's tau of predicted against measured step times.
if part shares; then
    SHARES=${SHARES:-cpuset}
    base=$OUT/shares_$SHARES
    lenet_args="--model lenet5 --data fashion-mnist --batch-sizes 64 --max-samples ${LENET_SAMPLES:-12800}"
    resnet_args="--model resnet18 --width 16 --data synthetic:cifar10 --batch-sizes 32 --max-samples ${RESNET_SAMPLES:-3200}"
    for r in $(seq "$REPEATS"); do
        for rate in 1gbit 10gbit; do
            for model in lenet5 resnet18; do
                margs=$([ $model = lenet5 ] && echo "$lenet_args" || echo "$resnet_args")
                for group in ring4 ring8 hier2x2 hier4x2 ps1 ps2; do
                    case $group in
                    ring4) gargs="--hosts netns:4 --allreduce ring --procs 1,2,4" ;;
                    ring8) gargs="--hosts netns:8 --allreduce ring --procs 1,2,4,8" ;;
                    hier2x2) gargs="--hosts netns:2 --ranks-per-host 2 --allreduce hier --procs 1,2,4" ;;
                    hier4x2) gargs="--hosts netns:4 --ranks-per-host 2 --allreduce hier --procs 2,4,8" ;;
                    ps1) gargs="--hosts netns:8 --mode ps-sync --servers 1 --procs 2,4,6" ;;
                    ps2) gargs="--hosts netns:8 --mode ps-sync --servers 2 --procs 2,4,6" ;;
                    esac
                    echo "== pass $r: $group $model $rate" >&2
                    # shellcheck disable=SC2086 # the argument lists split into flags
                    "$DTRAIN" scale $gargs $margs --link $rate --host-cpus "$SHARES" \
                        --epochs 2 --threads 1 --test-samples 64 --predict-workers 0 --quiet \
                        --out "$base/pass$r/${group}_${model}_$rate" >/dev/null ||
                        echo "pass $r: $group $model $rate failed" >&2
                done
            done
        done
    done
    python3 "$HERE/bench/validation_summary.py" "$base" | tee "$base/summary.md"
fi
part host || part pair || part switch || part hier || exit 0

"$DTRAIN" bench --model lenet5 --batch-size 64 --threads 1 --steps 200 \
    --profile-out "$OUT/lenet5_b64.json" >/dev/null
"$DTRAIN" bench --model resnet18 --width 16 --batch-size 32 --threads 1 --steps 40 \
    --profile-out "$OUT/resnet18w16_b32.json" >/dev/null

ROWS=$OUT/rows.txt
: >"$ROWS"
# run NAME PROFILE WORKERS LINK MODE BATCH TOPOLOGY RANKS LAUNCHER... TRAIN ARGS
# (WORKERS: the simulator's workers, RANKS: the job's processes, servers included)
# Before each run, a profile under the run's conditions: as many bench processes at once
# as the run has ranks (both cores busy), the first one's written as
# NAME_rR.profile.json (validation_matched.csv), so load drift between configs and the
# cores' sharing reach the profile too.
BENCH_LENET="--model lenet5 --batch-size 64 --threads 1 --steps 200"
BENCH_RESNET="--model resnet18 --width 16 --batch-size 32 --threads 1 --steps 40"
run() {
    local name=$1 profile=$2 workers=$3 link=$4 mode=$5 batch=$6 topology=$7 ranks=$8 bench i
    shift 8
    echo "== $name (repeat $r)" >&2
    case $profile in lenet5*) bench=$BENCH_LENET ;; *) bench=$BENCH_RESNET ;; esac
    for i in $(seq "$ranks"); do
        "$DTRAIN" bench $bench --profile-out "$OUT/${name}_r$r.profile$i.json" >/dev/null &
    done
    wait
    mv "$OUT/${name}_r$r.profile1.json" "$OUT/${name}_r$r.profile.json"
    rm -f "$OUT/${name}_r$r".profile[0-9]*.json
    if [ -n "${NETNS_N_BR:-}" ]; then # hosts on the switch: a launch may hang
        watched "$OUT/${name}_r$r.jsonl" "$@" --log "$OUT/${name}_r$r.jsonl"
    else
        "$@" --log "$OUT/${name}_r$r.jsonl"
    fi
    [ "$r" -gt 1 ] || echo "$name $profile $workers $batch $link $mode $topology" >>"$ROWS"
}

# watched FILE CMD...: CMD in the background; if FILE is still empty after
# START_TIMEOUT seconds, the launch hung: now and then one emulated host's Open MPI
# daemon never comes up and mpirun waits for it forever (docs/scaling.md, the 4-host
# sweeps; here one of the 4-rank runs hung 15 min before it failed). Then every process
# in the hosts is ended and CMD starts once more, once.
START_TIMEOUT=${DTRAIN_START_TIMEOUT:-120}
watched() {
    local file=$1 attempt pid waited
    shift
    for attempt in 1 2; do
        rm -f "$file"
        "$@" &
        pid=$!
        waited=0
        while kill -0 "$pid" 2>/dev/null && [ ! -s "$file" ] && [ "$waited" -lt "$START_TIMEOUT" ]; do
            sleep 1
            waited=$((waited + 1))
        done
        if [ -s "$file" ] || ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            return
        fi
        echo "$file: still empty after ${START_TIMEOUT} s, the launch hung (attempt $attempt):" \
            "ending the processes in the hosts, which were:" >&2
        netns_ps_n >&2
        netns_kill_n
        wait "$pid" || true
    done
    return 1
}
# to_file FILE CMD...: CMD's output into FILE (for watched)
to_file() {
    local file=$1
    shift
    "$@" >"$file"
}

if part host; then
for r in $(seq "$REPEATS"); do
run lenet5_p1 lenet5_b64.json 1 "$SHM_LINK" allreduce 64 ring 1 "$DTRAIN" train $LENET $COMMON
run lenet5_p2_shm lenet5_b64.json 2 "$SHM_LINK" allreduce 64 ring 2 \
    mpirun -np 2 "$DTRAIN" train $LENET $COMMON $OVERLAP
run resnet18_p1 resnet18w16_b32.json 1 "$SHM_LINK" allreduce 32 ring 1 "$DTRAIN" train $RESNET $COMMON
run resnet18_p2_shm resnet18w16_b32.json 2 "$SHM_LINK" allreduce 32 ring 2 \
    mpirun -np 2 "$DTRAIN" train $RESNET $COMMON $OVERLAP

done
fi

trap '[ -z "${NETNS_1:-}" ] || netns_down; netns_down_n' EXIT
if part pair; then
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
    run lenet5_p2_$rate lenet5_b64.json 2 "$link" allreduce 64 ring 2 \
        netns_mpirun "$DTRAIN" train $LENET $COMMON $OVERLAP
    run resnet18_p2_$rate resnet18w16_b32.json 2 "$link" allreduce 32 ring 2 \
        netns_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP
    run resnet18_p2_${rate}_b1 resnet18w16_b32.json 2 "$link" allreduce:1 32 ring 2 \
        netns_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP --bucket-mb 1
    run resnet18_p2_${rate}_b1_nooverlap resnet18w16_b32.json 2 "$link" \
        allreduce-no-overlap:1 32 ring 2 netns_mpirun "$DTRAIN" train $RESNET $COMMON \
        --bucket-mb 1 --no-overlap
done
done
netns_down
NETNS_1=
fi

# Hosts on a switch (netns_up_n: every host's link shaped both ways, as a switch port).
# 4 hosts x 1 rank: the ring of the simulator. 2 hosts x 2 ranks (vader between the
# ranks of a host): with --allreduce ring (or auto's MPI_Iallreduce) all 4 ranks form
# one ring in rank order, crossing the hosts' link twice, once each way, in each of its
# 2(P-1) steps: the simulator's ring of 4 workers on the link; with --allreduce hier
# (part "hier", also in "switch") the two levels: `--topology tree:2` on the
# shared-memory link inside a node (a reduce-scatter and an all-gather there, as
# dtrain's hier since 2026-11-28). The ring layouts force --allreduce ring
# (auto chose by noisy timings on 4 ranks sharing 2 cores; its MPI candidate is not a
# ring). The parameter server: rank 0 (the server) on host 1, the 2 workers on hosts 2
# and 3; the simulator's ps:1 with 2 workers. The 4-rank runs take fewer steps (the
# same samples split 4 ways).
RING4=1:1,2:1,3:1,4:1
TREE=1:2,2:2
PSH=1:1,2:1,3:1
tree_mpirun() { NETNS_BTL=self,vader,tcp netns_mpirun_hosts "$TREE" "$@"; }
# alpha of a layout: a 4 KiB all-reduce across it (bench_allreduce's ring) over its
# 2(P-1) steps; ps: host to host, the 2-host ring's 2 steps
alpha() { # NAME STEPS LAUNCHER...
    local name=$1 steps=$2
    shift 2
    [ -s "$OUT/allreduce_${name}_$rate.jsonl" ] ||
        watched "$OUT/allreduce_${name}_$rate.jsonl" to_file "$OUT/allreduce_${name}_$rate.jsonl" \
            "$@" "$HERE/build/bench_allreduce" 20 4096 2805864
    python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
print('%.0fus' % (r[0]['ring_ms'] * 1e3 / int(sys.argv[2])))" "$OUT/allreduce_${name}_$rate.jsonl" "$steps"
}
if part switch || part hier; then
netns_up_n $((($$ + 1) % 150 + 30)) 4
for r in $(seq "$REPEATS"); do
for rate in 1gbit 10gbit; do
    burst=$([ $rate = 1gbit ] && echo 256k || echo 2560k)
    netns_shape_n $rate "$burst"
    link4="$rate,$(alpha 4hosts 6 netns_mpirun_hosts $RING4)"
    link2x2="$rate,$(alpha 2x2 6 tree_mpirun)"
    run lenet5_2x2hier_$rate lenet5_b64.json 4 "$link2x2" allreduce 64 tree:2 4 \
        tree_mpirun "$DTRAIN" train $LENET $COMMON $OVERLAP --allreduce hier
    run resnet18_2x2hier_$rate resnet18w16_b32.json 4 "$link2x2" allreduce 32 tree:2 4 \
        tree_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP --allreduce hier
    if part hier && ! part switch; then
        run resnet18_2x2_$rate resnet18w16_b32.json 4 "$link2x2" allreduce 32 2x2 4 \
            tree_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP --allreduce ring
        continue
    fi
    linkps="$rate,$(alpha star2 2 netns_mpirun_hosts 1:1,2:1)"
    run lenet5_p4_$rate lenet5_b64.json 4 "$link4" allreduce 64 ring 4 \
        netns_mpirun_hosts $RING4 "$DTRAIN" train $LENET $COMMON $OVERLAP --allreduce ring
    run resnet18_p4_$rate resnet18w16_b32.json 4 "$link4" allreduce 32 ring 4 \
        netns_mpirun_hosts $RING4 "$DTRAIN" train $RESNET $COMMON $OVERLAP --allreduce ring
    run resnet18_p4_${rate}_b1 resnet18w16_b32.json 4 "$link4" allreduce:1 32 ring 4 \
        netns_mpirun_hosts $RING4 "$DTRAIN" train $RESNET $COMMON $OVERLAP --bucket-mb 1 \
        --allreduce ring
    run resnet18_p4_${rate}_b1_nooverlap resnet18w16_b32.json 4 "$link4" \
        allreduce-no-overlap:1 32 ring 4 netns_mpirun_hosts $RING4 "$DTRAIN" train $RESNET \
        $COMMON --bucket-mb 1 --no-overlap --allreduce ring
    run lenet5_2x2_$rate lenet5_b64.json 4 "$link2x2" allreduce 64 2x2 4 \
        tree_mpirun "$DTRAIN" train $LENET $COMMON $OVERLAP --allreduce ring
    run resnet18_2x2_$rate resnet18w16_b32.json 4 "$link2x2" allreduce 32 2x2 4 \
        tree_mpirun "$DTRAIN" train $RESNET $COMMON $OVERLAP --allreduce ring
    run lenet5_ps1_$rate lenet5_b64.json 2 "$linkps" ps-sync 64 ps:1 3 \
        netns_mpirun_hosts $PSH "$DTRAIN" train $LENET $COMMON --mode ps-sync --servers 1
    run resnet18_ps1_$rate resnet18w16_b32.json 2 "$linkps" ps-sync 32 ps:1 3 \
        netns_mpirun_hosts $PSH "$DTRAIN" train $RESNET $COMMON --mode ps-sync --servers 1
done
done
fi

# One row per config: of its repeats the one with the lowest median step time over rank
# 0's steps of the 2nd epoch (compute + exposed communication; loader waits excluded,
# as t_train excludes them), its median compute and exposed time beside it.
python3 - "$OUT" "$ROWS" "$REPEATS" "$SHM_LINK" <<'PY'
import json, statistics, sys
out, rows, repeats, shm_link = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
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
hier = open(f"{out}/validation_hier.csv", "w")
hier.write(head + "# --allreduce hier on 2 hosts x 2 ranks as the simulator's tree:2 (intra-node "
           "link: the shared-memory link), "
           "compute_speedup as in validation.csv\n" + cols
           + ",intra_link,compute_speedup,step_ms,compute_ms,exposed_ms\n")
hier_matched = open(f"{out}/validation_hier_matched.csv", "w")
hier_matched.write(head + "# the same, compute from the matched profile\n" + cols
                   + ",intra_link,step_ms,compute_ms,exposed_ms\n")
tree = open(f"{out}/validation_tree_model.csv", "w")
tree.write(head + "# the 2 hosts x 2 ranks runs (a flat ring over 4 ranks) read as the simulator's "
           "tree:2 (intra-node link: the shared-memory link's rate), compute_speedup as in "
           "validation.csv\n" + cols + ",intra_link,compute_speedup,step_ms,compute_ms,exposed_ms\n")
for line in open(rows):
    name, profile, workers, batch, link, mode, topology = line.split()
    mode, _, bucket = mode.partition(":")
    rate, _, latency = link.partition(",")
    step, comp, exp, kept = min(medians(f"{out}/{name}_r{r}.jsonl") + (r,)
                                for r in range(1, repeats + 1))
    prof = json.load(open(f"{out}/{profile}"))
    speedup = prof["step_ms"] * int(batch) / prof["batch_size"] / (1e3 * comp)
    # the 2x2 layout runs a flat ring over its 4 ranks (see above)
    ring_like = "ring" if topology == "2x2" else topology
    fields = f"{name},{profile},{workers},{batch},{ring_like},{rate},{latency},{mode},{bucket or 25}"
    split = f"{1e3*step:.3f},{1e3*comp:.3f},{1e3*exp:.3f}"
    if topology.startswith("tree:"):  # hier: its own files (an intra_link column)
        value = float(shm_link.split(",")[0].rstrip("GB/s"))
        intra = f"{value:g}GB/s"
        hier.write(f"{fields},{intra},{speedup:.4f},{split}\n")
        hier_matched.write(f"{fields},{intra},{split}\n".replace(
            f",{profile},", f",{name}_r{kept}.profile.json,", 1))
        continue
    plain.write(f"{fields},{split}\n")
    matched.write(f"{fields},{split}\n".replace(f",{profile},", f",{name}_r{kept}.profile.json,", 1))
    if int(workers) > 1:
        calib.write(f"{fields},{speedup:.4f},{split}\n")
    if topology == "2x2":
        # the reader splits at every comma and intra_link has no latency column of its
        # own: the rate alone (0 latency inside the node)
        intra = shm_link.split(",")[0]
        tree.write(f"{fields},{intra},{speedup:.4f},{split}\n".replace(",ring,", ",tree:2,", 1))
PY
# each table, then its median and largest |error| per group of configs
for csv in validation_profile validation_matched validation validation_tree_model \
    validation_hier validation_hier_matched; do
    # a header and no rows (PARTS without the configs of that file): nothing to validate
    [ "$(grep -vc '^#' "$OUT/$csv.csv")" -gt 1 ] || continue
    echo "== $csv.csv"
    "$DTRAIN" simulate --validate "$OUT/$csv.csv" | tee "$OUT/$csv.md"
    python3 - "$OUT/$csv.md" <<'PY'
import re, statistics, sys
groups = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 10 or not cells[-1].endswith("%") or cells[0] == "config":
        continue
    name = cells[0]
    group = ("4 hosts" if "_p4_" in name else "2x2 hier as tree:2" if "_2x2hier_" in name
             else "2x2 (tree layout)" if "_2x2_" in name
             else "ps:1" if "_ps1_" in name else "2 hosts" if re.search(r"_p2_\d", name)
             else "one host")
    groups.setdefault(group, []).append(abs(float(cells[-1].rstrip("%"))))
for g, errs in groups.items():
    print(f"{g}: median |error| {statistics.median(errs):.1f}%, largest {max(errs):.1f}% "
          f"({len(errs)} configs)")
PY
done
