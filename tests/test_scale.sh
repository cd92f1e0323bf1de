#!/bin/sh
# dtrain scale end to end on a tiny sweep: the memory stop (a batch that cannot fit
# ends the batch sizes cleanly and the report says so), resume after an interrupted
# sweep (only the unfinished config runs again), --force, the files it promises, and
# dtrain report --times on a CSV.
set -u
DTRAIN=$1
. "$(dirname "$0")/checks.sh"
sweep="$DTRAIN scale --model lenet5 --data synthetic:mnist --procs 1,2 --epochs 2 --max-samples 640 --test-samples 64 --out $tmp/s"

$sweep --batch-sizes 32,64,16000000 >"$tmp/out1" 2>&1
check "sweep exits 0 after the memory stop" [ $? -eq 0 ]
check "report notes the memory stop" grep -q "batch size 16000000 per process does not fit in memory" "$tmp/s/report.md"
check "the report opens with the system" grep -q "^| CPU | .*, [0-9]* CPUs (dtrain's kernels: " "$tmp/s/report.md"
check "... its software with versions" grep -q "^| software | dtrain [0-9.]* (.*); oneDNN [0-9.]*, OpenBLAS [0-9.]* (.* kernels), Open MPI v" "$tmp/s/report.md"
check "... one host" grep -q "^| hosts | one (" "$tmp/s/report.md"
check "the scaling efficiency in one sentence" grep -q "^\*\*Scaling efficiency:\*\* 2 processes at batch 64 each trained [0-9]* images/s, [0-9.]* times one process's [0-9]*: [0-9]*% of linear scaling" "$tmp/s/report.md"
check "runs.csv has the 4 configs that fit" [ "$(tail -n +2 "$tmp/s/runs.csv" | wc -l)" -eq 4 ]
for f in report.md runs.csv speedup.png speedup.svg epoch_time.png compute_comm.png loss.png plots.gp; do
    check "$f written" [ -s "$tmp/s/$f" ]
done

# Interrupt one config: its log loses its last epoch record.
log="$tmp/s/run_p2_b64.jsonl"
grep -v '"event":"epoch","epoch":1' "$log" >"$tmp/cut" && mv "$tmp/cut" "$log"
$sweep --batch-sizes 32,64 >"$tmp/out2" 2>&1
# (a finished config flagged busy on this shared machine is measured again instead)
check "resume keeps the 3 finished configs" \
    [ "$(grep -c 'done before, kept\|busy before, measured again' "$tmp/out2")" -eq 3 ]
check "resume runs the interrupted one again" grep -q "2 procs, batch 64: epoch time" "$tmp/out2"
check "the rerun log is complete" [ "$(grep -c '"event":"epoch"' "$log")" -eq 2 ]
# The performance model on the sweep: speed fit from runs.csv, loss fit from a log,
# and the prediction from both fits.
"$DTRAIN" fit-speed --allreduce "$tmp/s/runs.csv" --save "$tmp/speed.json" >"$tmp/out5" 2>&1
check "fit-speed reads runs.csv (4 configs, 4 thetas)" grep -q "theta3 = " "$tmp/out5"
"$DTRAIN" fit-loss "$tmp/s/run_p1_b32.jsonl" --every 2 --save "$tmp/loss.json" >"$tmp/out6" 2>&1
check "fit-loss fits a sweep log" grep -q "l(k) = 1 / (" "$tmp/out6"
"$DTRAIN" predict --loss-fit "$tmp/loss.json" --speed-fit "$tmp/speed.json" --batch 64 \
    --procs-max 4 --out "$tmp/p" >"$tmp/out7" 2>&1
check "predict from the fits names the best process count" grep -q "^best: [0-9]* processes" "$tmp/out7"
check "predict draws its plot" [ -s "$tmp/p/predict.png" ]
check "scale's report compares model and measurement" grep -q "## 7. Model vs measurement" "$tmp/s/report.md"
# Predicted before measuring: every config of the grid, the one that cannot fit left
# out with its reason; the report sets each beside its measurement, and `report`
# rebuilds the same from the folder.
check "scale predicted the 4 configs that fit" [ "$(grep -c ',0$' "$tmp/s/predicted.csv")" -eq 4 ]
check "... and past the machine: 1, 2, 4 .. 64 workers for each batch size" \
    [ "$(grep -c '^[0-9]*,\(32\|64\),1,.*10000 Mbit/s links and 20 us a message; 1 worker(s) a host (overlap),1$' "$tmp/s/predicted.csv")" -eq 14 ]
check "the report continues the curves past the machine" grep -q "^| 64 | 64 | [0-9.]* | [0-9.]* | [0-9.e-]* | [0-9.]* | [0-9]*% |$" "$tmp/s/report.md"
check "... before the first run" sh -c "grep -n 'predicting: lenet5 at batch 32' '$tmp/out1' | cut -d: -f1 |
    { read p; grep -n 'config 1/' '$tmp/out1' | cut -d: -f1 | { read r; [ \$p -lt \$r ]; }; }"
check "... and not the batch that does not fit" grep -q "no prediction at batch 16000000: .*does not fit in memory" "$tmp/out1"
check "the report sets predicted beside measured" grep -q "^| 2 | 64 | 1 | [0-9.]* | [0-9.]* | [0-9.]* | [0-9.]* | [-+][0-9.]*% |" "$tmp/s/report.md"
# (on a busy machine every config may be flagged busy: then no median, said so)
check "... with the median |error|" grep -q "^\*\*Median |error| [0-9.]*%\*\* over\|^\*\*No median |error|\*\*: no config was measured on a quiet" "$tmp/s/report.md"
grep -A9 '^## Predicted before measuring' "$tmp/s/report.md" >"$tmp/predicted_scale"
"$DTRAIN" report "$tmp/s" >/dev/null 2>&1
check "report DIR rebuilds the same predictions from the folder" \
    sh -c "grep -A9 '^## Predicted before measuring' '$tmp/s/report.md' | cmp -s - '$tmp/predicted_scale'"

# Time to a target loss from the runs' loss curves: the default target, every run in
# the table; --target-loss on report sets it.
check "the report has the time to target, a row per run" \
    [ "$(sed -n '/^## Time to a target loss/,/^Fit: \|^Fewer than two/p' "$tmp/s/report.md" | grep -c '^| [12] | \(32\|64\) | ')" -eq 4 ]
check "... its default target said" grep -q "^Target: training loss \*\*[0-9.]*\*\* (\`--target-loss\`; default: 90% of the way" "$tmp/s/report.md"
"$DTRAIN" report "$tmp/s" --target-loss 5 >/dev/null 2>&1
check "report --target-loss 5: every run reached it" grep -q "^Target: training loss \*\*5.000\*\* (\`--target-loss\`). .* 4 of 4 configs did" "$tmp/s/report.md"
check "... and the time against workers is drawn" [ -s "$tmp/s/time_to_target.png" ]
"$DTRAIN" report "$tmp/s" --target-loss 0 >"$tmp/out_t0" 2>&1
check "report --target-loss 0 is refused" [ $? -eq 2 ]
check "... in one line naming the flag" grep -q "^dtrain report: --target-loss" "$tmp/out_t0"

$sweep --batch-sizes 32 --force >"$tmp/out3" 2>&1
check "--force runs again" [ "$(grep -c 'done before' "$tmp/out3")" -eq 0 ]

# The same sweep with parameter servers: process counts are workers.
"$DTRAIN" scale --mode ps-sync --servers 1 --model lenet5 --data synthetic:mnist --procs 1,2 \
    --batch-sizes 32 --epochs 2 --max-samples 640 --test-samples 64 --out "$tmp/ps" >"$tmp/out8" 2>&1
check "scale --mode ps-sync runs and says so" grep -q "Mode ps-sync with 1 parameter server" "$tmp/ps/report.md"

# --hostfile: the multi-process runs go to mpirun --hostfile (here this machine alone),
# the settings record where they ran; a missing hostfile is one line before any run.
printf 'localhost slots=2\n' >"$tmp/hosts"
"$DTRAIN" scale --hostfile "$tmp/hosts" --link 1gbit --model lenet5 --data synthetic:mnist \
    --procs 2 --batch-sizes 32 --epochs 2 --max-samples 128 --test-samples 16 --out "$tmp/hf" >"$tmp/out12" 2>&1
check "scale --hostfile runs" [ $? -eq 0 ]
check "... recording the hosts with the run's settings" grep -q "^hosts hostfile $tmp/hosts, link 1gbit$" "$tmp/hf/run_p2_b32.jsonl.args"
check "... and writes the link table" grep -q "^lenet5,25,2,32,1,2,1000000000," "$tmp/hf/network.csv"
"$DTRAIN" scale --hostfile "$tmp/nohosts" --model lenet5 --procs 2 --out "$tmp/hf2" 2>"$tmp/err12" >/dev/null
check "a missing --hostfile fails" [ $? -ne 0 ]
check "... with one line naming it" sh -c "[ \$(wc -l <'$tmp/err12') -eq 1 ] && grep -q 'cannot read --hostfile $tmp/nohosts' '$tmp/err12'"

# A launch over other hosts whose ranks never start (an Open MPI daemon that does not
# come up: mpirun then waits forever) is ended after DTRAIN_START_TIMEOUT and started
# once more. A stand-in mpirun hangs the first time and is the real one the second.
# The timeout also bounds the real start, which takes seconds under ASan on a loaded
# machine: 10 s, not 3.
mkdir "$tmp/fakebin"
cat >"$tmp/fakebin/mpirun" <<FAKE
#!/bin/sh
if [ ! -e "$tmp/hung_once" ]; then echo \$\$ >"$tmp/hung_once"; echo "stand-in mpirun: hanging" >&2; exec sleep 300; fi
exec "$(command -v mpirun)" "\$@"
FAKE
chmod +x "$tmp/fakebin/mpirun"
PATH="$tmp/fakebin:$PATH" DTRAIN_START_TIMEOUT=10 "$DTRAIN" scale --hostfile "$tmp/hosts" \
    --model lenet5 --data synthetic:mnist --procs 2 --batch-sizes 32 --epochs 1 \
    --max-samples 128 --test-samples 16 --out "$tmp/hang" >"$tmp/out13" 2>"$tmp/err13"
check "a run whose ranks never start is started again, and the sweep finishes" [ $? -eq 0 ]
check "... saying so in one line" grep -q "^dtrain scale: the run with 2 processes, batch 32, did not start within 10 s (an Open MPI daemon on another host did not come up; see $tmp/hang/run_p2_b32.jsonl.hung.stderr); starting it again$" "$tmp/err13"
check "... which keeps what the hung launch wrote" grep -q "^stand-in mpirun: hanging$" "$tmp/hang/run_p2_b32.jsonl.hung.stderr"
check "... with the run's log" [ -s "$tmp/hang/run_p2_b32.jsonl" ]
check "... and the hung launch is gone" sh -c '! kill -0 "$(cat "$1")" 2>/dev/null' - "$tmp/hung_once"

# The run's CPU time counts what the Open MPI daemons of other hosts ran: they
# daemonize, leaving mpirun's process group and session, and end after it. A stand-in
# mpirun starts such a process (its own session, a 2 s sleep, then about a second of
# CPU, which it writes down) and runs the real one; the run's load record must hold
# that CPU time (before, it went to "other processes", and every run over emulated
# hosts was flagged busy).
cat >"$tmp/fakebin/mpirun" <<FAKE
#!/bin/sh
setsid sh -c 'sleep 2; awk "BEGIN { for (i = 0; i < 3e7; i++) s += i }"; times >"$tmp/burnt"' </dev/null >/dev/null 2>&1 &
exec "$(command -v mpirun)" "\$@"
FAKE
PATH="$tmp/fakebin:$PATH" "$DTRAIN" scale --hostfile "$tmp/hosts" --model lenet5 \
    --data synthetic:mnist --procs 2 --batch-sizes 32 --epochs 1 --max-samples 64 \
    --test-samples 16 --out "$tmp/daemon" >"$tmp/out14" 2>&1
check "a sweep whose mpirun leaves a daemonized process runs" [ $? -eq 0 ]
i=0 # (a sweep that does not wait for it ends first)
while [ ! -s "$tmp/burnt" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
burnt=$(sed -n 2p "$tmp/burnt" 2>/dev/null | sed 's/\([0-9]*\)m\([0-9.]*\)s/\1 \2/g' | awk '{ print 60 * $1 + $2 + 60 * $3 + $4 }')
run_cpu=$(grep '"event":"load"' "$tmp/daemon/run_p2_b32.jsonl" | sed 's/.*"wall_s":\([0-9.]*\),.*"run_cores":\([0-9.]*\),.*/\1 \2/' | awk '{ print $1 * $2 }')
check "... and its load record counts that process's CPU time (${burnt:-?} s in ${run_cpu:-?} s)" \
    awk -v b="${burnt:-0}" -v r="${run_cpu:-0}" 'BEGIN { exit !(b > 0.2 && r >= b) }'

# report from a CSV of times measured elsewhere
printf 'procs,batch_size,t_train,t_epoch\n1,64,50,52\n2,64,30,31\n4,64,20,21\n' >"$tmp/times.csv"
"$DTRAIN" report --times "$tmp/times.csv" --params 61706 --dataset-size 60000 --out "$tmp/r" >"$tmp/out4" 2>&1
check "report --times prints the tables (speed-up of the training time)" grep -q "| 64 | 1.00 | 1.67 | 2.50 |" "$tmp/out4"
check "speed-ups say they use the training time" grep -q "^Strong scaling speed-up T(1)/T(N) of the training time" "$tmp/out4"
check "the running time's speed-up is shown beside it" grep -A4 "^Strong scaling speed-up of the running time" "$tmp/out4" | grep -q "| 64 | 1.00 | 1.68 | 2.48 |"
check "N x T(1)/T(N) is printed with its definition" grep -A4 "^N x T(1)/T(N) of the training time, for readers" "$tmp/out4" | grep -q "| 64 | 1.00 | 3.33 | 10.00 |"
check "3 points: no model, no recommendation" grep -q "^No model: too few points" "$tmp/out4"
# times made exactly by the model (thetas 2e-4, 0.002, 0.004, 0.001; 60000 samples)
printf 'procs,batch_size,t_train\n1,64,13.8824\n2,64,9.2862\n3,64,6.927733\n1,256,12.502\n2,256,6.8676\n3,256,4.782133\n' >"$tmp/model.csv"
"$DTRAIN" report --times "$tmp/model.csv" --dataset-size 60000 --out "$tmp/m1" >"$tmp/out9" 2>&1
check "without --cores: compute per process, said" grep -q "cores unknown: compute per process" "$tmp/m1/report.md"
check "a fitting model recommends within the measured counts" grep -q "^- batch 64 per process: 3 processes" "$tmp/m1/report.md"
check "... and says it fits (leave-one-out under 20%)" grep -q "Leave-one-out error .* worst 0.0%" "$tmp/m1/report.md"
"$DTRAIN" report --times "$tmp/model.csv" --dataset-size 60000 --cores 8 --out "$tmp/m2" >"$tmp/out10" 2>&1
check "--cores 8: compute over min(N x threads, 8) cores" grep -q "U = min(N x 1 thread, 8 cores)" "$tmp/m2/report.md"
check "--cores 8: recommends 8, saying how far it extrapolates" grep -q "^- batch 64 per process: 8 processes .* extrapolated 5 processes beyond the largest measured count" "$tmp/m2/report.md"
# 6 noisy points: the model does not fit, and says so instead of recommending
printf 'procs,batch_size,t_train\n1,64,50\n2,64,30\n4,64,20\n1,128,40\n2,128,21\n4,128,11\n' >"$tmp/noisy.csv"
"$DTRAIN" report --times "$tmp/noisy.csv" --dataset-size 60000 --out "$tmp/m3" >/dev/null 2>&1
check "leave-one-out error above 20%: the model does not fit" grep -q "The model does not fit" "$tmp/m3/report.md"
check "... and recommends nothing" sh -c "! grep -q '^- batch 64 per process: [0-9]* processes' '$tmp/m3/report.md'"
# a model column: one model names the report; several (Theano-MPI's five-model figure)
# get a report each and one speed-up figure with a curve per model (times made up here:
# this checks the drawing, not a measurement)
printf 'model,procs,batch_size,t_train\nlenet5,1,64,50\nlenet5,2,64,30\n' >"$tmp/one.csv"
"$DTRAIN" report --times "$tmp/one.csv" --out "$tmp/m4" >/dev/null 2>&1
check "a model column with one model names the report" grep -q "^# Scaling study: lenet5" "$tmp/m4/report.md"
{
    echo "model,procs,batch_size,t_train"
    for m in alexnet:100:0.3 googlenet:160:0.05 vgg16:400:0.4 resnet50:300:0.1 lenet5:10:0.6; do
        name=${m%%:*} rest=${m#*:}
        t=${rest%%:*} c=${rest#*:}
        for n in 1 2 4 8; do echo "$name,$n,32,$(awk -v t="$t" -v n="$n" -v c="$c" 'BEGIN { print t / n * (1 + c * log(n) / log(2)) }')"; done
        echo "$name,1,64,$((t * 2))"
    done
} >"$tmp/five.csv"
"$DTRAIN" report --times "$tmp/five.csv" --out "$tmp/m5" 2>"$tmp/err6" >/dev/null
check "five models in one CSV: a report each" sh -c "ls '$tmp/m5'/*/report.md | wc -l | grep -qx 5"
check "... and models.md with a row per model at its most-measured batch" \
    sh -c "grep -c '^| [a-z0-9]* | 32 | 1.00 | ' '$tmp/m5/models.md' | grep -qx 5"
check "... resnet50's speed-ups in it" grep -q "^| resnet50 | 32 | 1.00 | 1.82 | 3.33 | 6.15 | " "$tmp/m5/models.md"
check "... one figure, five curves" sh -c "grep -m1 '^plot' '$tmp/m5/speedup_models.gp' | grep -o 'speedup_model_[0-9]*.dat' | sort -u | wc -l | grep -qx 5"
if command -v gnuplot >/dev/null; then
    check "... drawn" test -s "$tmp/m5/speedup_models.png"
fi
printf 'model,procs,batch_size,t_train\na/b,1,64,50\na_b,1,64,90\n' >"$tmp/clash.csv"
"$DTRAIN" report --times "$tmp/clash.csv" --out "$tmp/m6" 2>"$tmp/err7" >/dev/null
check "two models that would share a folder are refused in one line" \
    sh -c "[ \$(wc -l <'$tmp/err7') -eq 1 ] && grep -q \"models 'a/b' and 'a_b' would share the folder\" '$tmp/err7'"
check "report --times writes report.md" [ -s "$tmp/r/report.md" ]
printf 'procs,t_train\n1,50\n' >"$tmp/bad.csv"
"$DTRAIN" report --times "$tmp/bad.csv" --out "$tmp/r2" 2>"$tmp/err5"
status=$?
check "report --times: a missing column fails" [ "$status" -ne 0 ]
check "report --times: with one line naming it" [ "$(wc -l <"$tmp/err5")" -eq 1 ]
check "dtrain report DIR rebuilds" "$DTRAIN" report "$tmp/s"
# predict from given thetas writes its table and plot with --out (it used to ignore it)
"$DTRAIN" predict --theta 1e-4,0.01,0.02,0.001,0.002 --batch 512 --steps-per-epoch 100 \
    --epochs 10 --servers 1,2 --workers 1..8 --out "$tmp/pt" >"$tmp/out11" 2>&1
check "predict --theta --out writes the table" [ "$(wc -l <"$tmp/pt/predict.csv")" -eq 9 ]
check "... with a column per server count" grep -q "^workers,hours_servers_1,hours_servers_2$" "$tmp/pt/predict.csv"
check "... and the plot" [ -s "$tmp/pt/predict.png" ]
check "... the table's optimum is the printed one" sh -c "grep -q 'optimum for 1 servers: 2 workers' '$tmp/out11'"

# The predictions profile the model the runs train: --width too (they profiled the
# default width before: resnet18 --width 16 was predicted 13x its measured step).
"$DTRAIN" scale --model resnet20 --width 4 --data synthetic:cifar10 --procs 1 --batch-sizes 16 \
    --epochs 1 --max-samples 64 --test-samples 16 --out "$tmp/sw" >"$tmp/out_w" 2>&1
trained=$(grep -o '"params":[0-9]*' "$tmp/sw/run_p1_b16.jsonl" | head -1 | cut -d: -f2)
check "scale --width: the profile is of the trained width ($trained parameters)" \
    grep -q "^predicting: resnet20 at batch 16, .* ms a step here ($trained parameters)$" "$tmp/out_w"

finish
