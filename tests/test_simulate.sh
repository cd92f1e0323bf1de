#!/bin/sh
# dtrain simulate on the committed profiles and validation data (made by
# bench/simulate_validation.sh; nothing is trained here): resnet18 to 1,024 workers
# well within a second's budget, the validation's median |error| within the 10% target
# (the communication schedule with compute from each run, and the whole step from the
# profile taken at the start) and within what docs/scaling.md states, the output files, and bad input refused in
# one line.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
fx="$(dirname "$0")/fixtures/simulate"
# docs/scaling.md's median |error| of the profile-only validations (percent, one decimal)
STATED_PROFILE_ONLY_PCT=5.1
STATED_MATCHED_PCT=2.4

start=$(date +%s%N)
"$DTRAIN" simulate --profile "$fx/resnet18_b32.json" --model resnet18 --link 10gbit,20us \
    --workers 1..1024 >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "simulate resnet18 1..1024: ${elapsed_ms} ms"
check "simulate resnet18 to 1024 workers runs" test $rc -eq 0
check "one row per worker count 1, 2, 4 .. 1024" test "$(grep -c '^ *[0-9]' "$tmp/out")" -eq 11
check "1024 workers is the last row" grep -q '^ *1024 ' "$tmp/out"
# under a second here (Release); the bound leaves room for the sanitizer build
check "resnet18 to 1024 workers within 5 s (took ${elapsed_ms} ms)" test "$elapsed_ms" -lt 5000

"$DTRAIN" simulate --validate "$fx/validation.csv" --max-median-error 10 >"$tmp/val" 2>&1
check "validation against the measured runs: median |error| <= 10%" test $? -eq 0
cat "$tmp/val"
"$DTRAIN" simulate --validate "$fx/validation_profile.csv" --max-median-error 10 >"$tmp/valp" 2>&1
check "profile-only validation (compute predicted too): median |error| <= 10%" test $? -eq 0
median=$(sed -n 's/.*median |error| \([0-9.]*\)%.*/\1/p' "$tmp/valp")
check "profile-only median |error| ($median%) as docs/scaling.md states" \
    awk -v m="$median" -v s="$STATED_PROFILE_ONLY_PCT" 'BEGIN { exit !(m != "" && m <= s + 0.05) }'

"$DTRAIN" simulate --validate "$fx/validation_matched.csv" >"$tmp/valm" 2>&1
check "matched-profile validation runs" test $? -eq 0
median=$(sed -n 's/.*median |error| \([0-9.]*\)%.*/\1/p' "$tmp/valm")
check "matched-profile median |error| ($median%) as docs/scaling.md states" \
    awk -v m="$median" -v s="$STATED_MATCHED_PCT" 'BEGIN { exit !(m != "" && m <= s + 0.05) }'

"$DTRAIN" simulate --profile "$fx/resnet18w16_b32.json" --link 1gbit --workers 1,2,8 \
    --topology tree:4 --intra-link 10GB/s --out "$tmp/sim" >/dev/null 2>&1
check "--out writes simulate.csv (header + 3 rows)" test "$(wc -l <"$tmp/sim/simulate.csv")" -eq 4
check "--out writes simulate.md" grep -q "Simulated scaling" "$tmp/sim/simulate.md"
if command -v gnuplot >/dev/null; then
    check "--out draws the study's speed-up plot" test -s "$tmp/sim/speedup.png"
fi
# a simulation has no run logs: no loss_*.dat (they were left empty), no empty file at all
check "--out writes no loss data without loss curves" sh -c "! ls '$tmp/sim'/loss_*.dat 2>/dev/null"
check "--out leaves no empty file" test -z "$(find "$tmp/sim" -type f -empty)"
check "--out's epoch plot says its time is simulated" \
    grep -q "^set ylabel 'simulated time per epoch (s: steps x simulated step, no data loading)' noenhanced$" "$tmp/sim/plots.gp"

# What if: one step measured on another device rescales the profile's compute to it, and
# communication stays the link's. The profile's own step (36.778 ms at batch 32) doubled:
"$DTRAIN" simulate --profile "$fx/resnet18w16_b32.json" --link 1gbit --workers 1,2 \
    >"$tmp/here.txt" 2>&1
"$DTRAIN" simulate --profile "$fx/resnet18w16_b32.json" --link 1gbit --workers 1,2 \
    --step-time 73.556 >"$tmp/there.txt" 2>&1
check "--step-time: one worker's step is the one given" grep -q "^ *1 *73.556 *73.556 *0.000" "$tmp/there.txt"
check "... and says the factor" grep -q "a step of 73.556 ms there against 36.778 ms in the profile, at batch 32: compute x2" "$tmp/there.txt"
check "... the communication as before" \
    sh -c "[ \"\$(awk '\$1 == 2 { print \$4 }' '$tmp/here.txt')\" = \"\$(awk '\$1 == 2 { print \$4 }' '$tmp/there.txt')\" ]"

# The same what-if for times measured elsewhere: report --times --profile. The 1-process
# row (73.556 ms a step, as above) rescales the profile; the 2-process config is then
# the --step-time prediction on the same link, beside its measured step.
printf 'procs,batch_size,t_train,iterations\n1,32,14.7112,200\n2,32,7.5,100\n4,32,4.0,50\n' \
    >"$tmp/times.csv"
"$DTRAIN" report --times "$tmp/times.csv" --params 701466 --dataset-size 6400 \
    --profile "$fx/resnet18w16_b32.json" --link 1gbit --out "$tmp/whatif" >/dev/null 2>&1
check "report --times --profile runs" test $? -eq 0
check "... the 1-process prediction is its measured step (it calibrates)" \
    grep -q '^1,32,1,73.556,73.556,0,0,' "$tmp/whatif/predicted.csv"
two=$(awk '$1 == 2 { print $2 }' "$tmp/there.txt")
check "... 2 processes as simulate --step-time says ($two ms)" \
    sh -c "awk -F, '\$1 == 2 { printf \"%.3f\\n\", \$4 }' '$tmp/whatif/predicted.csv' | grep -qx '$two'"
check "... 1 to 64 workers past the machine" grep -q '^64,32,1,.*,1$' "$tmp/whatif/predicted.csv"
check "... the report sets them beside the measured steps" \
    grep -q '| 2 | 32 | 1 | .* | 75.00 | ' "$tmp/whatif/report.md"
check "... and leaves the calibrating 1-process config out of the error" \
    grep -q 'over 2 configs' "$tmp/whatif/report.md"
printf 'procs,batch_size,t_train,iterations\n2,32,7.5,100\n' >"$tmp/times2.csv"
"$DTRAIN" report --times "$tmp/times2.csv" --params 701466 --dataset-size 6400 \
    --profile "$fx/resnet18w16_b32.json" --out "$tmp/whatif2" >/dev/null 2>"$tmp/whatif2.err"
check "... refused without a 1-process row" test $? -ne 0
check "... in one line" test "$(wc -l <"$tmp/whatif2.err")" -eq 1
check "... saying why" grep -q 'no 1-process row' "$tmp/whatif2.err"
check "... and nothing written" test ! -e "$tmp/whatif2/predicted.csv"
"$DTRAIN" report "$tmp/whatif" --profile "$fx/resnet18w16_b32.json" >/dev/null 2>"$tmp/whatif3.err"
check "... --profile without --times refused" grep -q 'go with --times' "$tmp/whatif3.err"

# A profile made here reads back: lenet5, 2 steps.
"$DTRAIN" bench --model lenet5 --batch-size 4 --threads 1 --steps 2 \
    --profile-out "$tmp/lenet5.json" >/dev/null 2>&1
check "bench --profile-out writes a profile" test $? -eq 0
check "the profile lists lenet5's ops in order" \
    sh -c "grep -o '\"name\": \"[a-z0-9.]*\"' '$tmp/lenet5.json' | grep -v '\"\"' | tr '\n' ' ' |
        grep -q 'conv1.*conv2.*fc1.*fc2.*fc3'"
"$DTRAIN" simulate --profile "$tmp/lenet5.json" --model lenet5 --link 1gbit --workers 1,2 \
    >"$tmp/own" 2>&1
check "simulate reads bench's profile" test $? -eq 0
# Without --profile the model is profiled here first, as a user of a simulator expects.
"$DTRAIN" simulate --model lenet5 --batch-size 8 --profile-steps 2 --link 1gbit --workers 1,4 \
    >"$tmp/here" 2>"$tmp/here.err"
check "simulate --model without --profile profiles it here" test $? -eq 0
check "it says so on stderr" grep -q "simulate: profiling lenet5 at batch 8 here (2 steps" \
    "$tmp/here.err"
check "and predicts for 1 and 4 workers" test "$(grep -c '^ *[14] ' "$tmp/here")" -eq 2
"$DTRAIN" bench --model lenet5 --infer --profile-out "$tmp/x.json" >/dev/null 2>"$tmp/inf.err"
check "bench --profile-out with --infer is refused" grep -q "drop --infer" "$tmp/inf.err"
# --feed: the steps take their batches from the data through train's loader; the
# loader's time is the profile's, outside the ops (other_ms).
"$DTRAIN" bench --model lenet5 --data synthetic:mnist --feed --loader-workers 0 --batch-size 8 \
    --threads 1 --steps 3 --profile-out "$tmp/fed.json" >"$tmp/fed.out" 2>"$tmp/fed.err"
check "bench --feed times steps fed by the loader" grep -q '"batch_size":8' "$tmp/fed.out"
check "... and writes their profile" grep -q '"other_ms"' "$tmp/fed.json"
"$DTRAIN" bench --model lenet5 --feed --steps 1 >/dev/null 2>"$tmp/feed.err"
check "bench --feed without --data: exit 2" test $? -eq 2
check "... in one line naming --feed" sh -c "[ \$(wc -l <'$tmp/feed.err') -eq 1 ] && grep -q -- '--feed' '$tmp/feed.err'"
# --load: a rank's load beside a measurement (scale's profiles): says when it is warm,
# then runs until killed.
# A byte on its stdin asks for its median step since the last ask.
mkfifo "$tmp/load.fifo" "$tmp/ask.fifo"
"$DTRAIN" bench --model lenet5 --batch-size 4 --threads 1 --load <"$tmp/ask.fifo" \
    >"$tmp/load.fifo" 2>/dev/null &
load_pid=$!
exec 3>"$tmp/ask.fifo" 4<"$tmp/load.fifo"
warm=$(timeout 120 head -n 1 <&4)
check "bench --load says it is warm" test "$warm" = "load: warm"
check "... and keeps running" kill -0 $load_pid
printf '?' >&3
answer=$(timeout 120 head -n 1 <&4)
check "... and asked, tells its median step ($answer)" \
    awk -v a="$answer" 'BEGIN { exit !(a ~ /^load: [0-9.e-]+$/ && substr(a, 7) + 0 > 0) }'
exec 3>&- 4<&-
kill $load_pid
wait $load_pid 2>/dev/null
"$DTRAIN" bench --model lenet5 --load --profile-out "$tmp/y.json" >/dev/null 2>"$tmp/load.err"
check "bench --load with a profile is refused" grep -q -- "--load runs training steps until killed" "$tmp/load.err"
"$DTRAIN" bench --model lenet5 --steps 1 --profile-out "$tmp/none/x.json" >/dev/null \
    2>"$tmp/dir.err"
check "bench --profile-out into a missing folder: one line" test "$(wc -l <"$tmp/dir.err")" -eq 1

# Bad input: non-zero exit, exactly one line naming the problem.
refuse() { # description, expected text, then the arguments
    what=$1 text=$2
    shift 2
    "$DTRAIN" simulate "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    rc=$?
    check "$what: non-zero exit" test $rc -ne 0
    check "$what: one line" test "$(wc -l <"$tmp/bad.err")" -eq 1
    check "$what: says '$text'" grep -qF -- "$text" "$tmp/bad.err"
}
p="$fx/resnet18w16_b32.json"
refuse "unknown topology" "unknown topology 'mesh'" --profile "$p" --link 1gbit --topology mesh
refuse "two rescales" "--step-time and --compute-speedup both rescale compute: give one" \
    --profile "$p" --link 1gbit --step-time 5 --compute-speedup 2
refuse "step time 0" "--step-time" --profile "$p" --link 1gbit --step-time 0
refuse "tree without K" "tree:K needs K" --profile "$p" --link 1gbit --topology tree:
refuse "workers from 0" "--workers (LO)" --profile "$p" --link 1gbit --workers 0..4
refuse "workers not a range" "--workers (HI) expects an integer" --profile "$p" --link 1gbit --workers 1...
refuse "workers decreasing" "must increase" --profile "$p" --link 1gbit --workers 8,4
refuse "workers beyond 2^20" "--workers" --profile "$p" --link 1gbit --workers 1..2000000
refuse "missing profile" "cannot open profile" --profile "$tmp/none.json" --link 1gbit
refuse "neither model nor profile" "--model M (profiled here) or --profile FILE" --link 1gbit
refuse "unknown model to profile" "unknown model 'nosuch'" --model nosuch --link 1gbit
refuse "no link" "--link RATE[,LATENCY] is required" --profile "$p"
refuse "link without unit" "link '10'" --profile "$p" --link 10
refuse "latency without unit" "link '1gbit,5'" --profile "$p" --link 1gbit,5
refuse "zero speed-up" "--compute-speedup" --profile "$p" --link 1gbit --compute-speedup 0
refuse "ps mode on a ring" "needs the ps:S topology" --profile "$p" --link 1gbit --mode ps-sync
refuse "unknown mode" "unknown mode 'gossip'" --profile "$p" --link 1gbit --mode gossip
refuse "another model" "is a profile of resnet18" --profile "$p" --link 1gbit --model lenet5
printf 'not json' >"$tmp/bad.json"
refuse "profile not JSON" "is not JSON" --profile "$tmp/bad.json" --link 1gbit
sed 's/"param_count": 432/"param_count": 99999999/' "$p" >"$tmp/range.json"
refuse "parameters outside the model" "outside the model's" --profile "$tmp/range.json" --link 1gbit
sed 's/"backward_ms": [0-9.]*/"backward_ms": -1/' "$p" >"$tmp/neg.json"
refuse "negative time" "'backward_ms' = -1 is outside" --profile "$tmp/neg.json" --link 1gbit
printf 'name,workers\nx,2\n' >"$tmp/cols.csv"
awk 'BEGIN { for (i = 0; i < 300; i++) printf "%sc%d", i ? "," : "", i; print "" }' >"$tmp/wide.csv"
refuse "validation CSV too wide" "line 1: more than 256 fields" --validate "$tmp/wide.csv"
refuse "validation CSV without a column" "no 'profile' column" --validate "$tmp/cols.csv"
printf 'name,profile,workers,batch_size,topology,link,mode,step_ms\nx,%s,2x,32,ring,1gbit,allreduce,5\n' \
    "$(realpath "$p")" >"$tmp/num.csv"
refuse "validation CSV bad number" "line 2: bad workers '2x'" --validate "$tmp/num.csv"
printf 'name,profile,workers,batch_size,topology,link,mode,step_ms\nx,%s,2,32,ring,1gbit,allreduce,5\n' \
    "$(realpath "$p")" >"$tmp/ok.csv"
refuse "validation above the bound" "above --max-median-error" --validate "$tmp/ok.csv" \
    --max-median-error 1
finish
