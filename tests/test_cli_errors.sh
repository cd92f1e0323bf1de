#!/bin/sh
# Bad input to the CLI: each case must end with exactly one line on stderr naming the
# problem and a non-zero exit status - never a crash (status >= 128) or a hang.
set -u
DTRAIN=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# expect "description" "expected fragment" command...
expect() {
    what=$1 fragment=$2
    shift 2
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    status=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$status" -ne 0 ] && [ "$status" -lt 124 ] && [ "$lines" -eq 1 ] &&
        grep -qF -- "$fragment" "$tmp/err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $what (status $status, $lines stderr lines):"
        cat "$tmp/err"
    fi
}

expect "unknown model" "unknown model 'vgg'" "$DTRAIN" train --model vgg
expect "negative lr" "--lr must be between" "$DTRAIN" train --lr -1
expect "lr not a number" "--lr expects a number" "$DTRAIN" train --lr fast
expect "batch 0" "--batch-size must be between 1" "$DTRAIN" train --batch-size 0
expect "unknown flag" "unknown or incomplete option '--frobnicate'" "$DTRAIN" train --frobnicate
expect "missing flag value" "unknown or incomplete option" "$DTRAIN" train --epochs
expect "unknown data" "unknown data spec 'imagenet'" "$DTRAIN" train --data imagenet --quiet
expect "missing data dir" "cannot open $tmp/nodata/train-images-idx3-ubyte" "$DTRAIN" train --data "fashion-mnist:$tmp/nodata" --quiet
expect "bad loader workers" "--loader-workers must be between 0 and 64" "$DTRAIN" train --loader-workers -1
expect "bad schedule" "--lr-schedule must be constant, cosine or step" "$DTRAIN" train --lr-schedule fast
expect "bad mode" "--mode must be allreduce" "$DTRAIN" train --mode gossip
expect "bad all-reduce" "--allreduce must be auto, shm, hier, ring or mpi" "$DTRAIN" train --allreduce tree
expect "bad bucket size" "--bucket-mb must be auto or a number from 1e-06 to 100000, got '0'" "$DTRAIN" train --bucket-mb 0
expect "scale refuses a measured bucket size" "--bucket-mb auto is for train" "$DTRAIN" scale --bucket-mb auto
expect "bad lr scaling" "--lr-scaling must be linear or none" "$DTRAIN" train --lr-scaling sqrt
expect "shape mismatch" "takes 3x32x32 inputs" "$DTRAIN" train --model resnet18 --data synthetic:mnist --quiet
expect "input below the minimum" "needs inputs of at least 63x63" "$DTRAIN" train --model alexnet --data synthetic:cifar10 --quiet
expect "fixed input says why" "model lenet_cifar takes 3x32x32 inputs but synthetic:mnist has 1x28x28 images (its fc1 is sized" "$DTRAIN" train --model lenet_cifar --data synthetic:mnist --quiet
expect "bench fixed input" "dtrain bench: model lenet5 takes 1x28x28 inputs" "$DTRAIN" bench --model lenet5 --data synthetic:cifar10
expect "batch too large" "does not fit in memory" "$DTRAIN" train --model resnet18 --batch-size 1000000 --quiet
expect "missing init file" "cannot open $tmp/none.safetensors" "$DTRAIN" train --init "$tmp/none.safetensors" --quiet
expect "bench unknown model" "unknown model 'x'" "$DTRAIN" bench --model x
expect "unknown command" "unknown command 'fly'" "$DTRAIN" fly

# train, scale and bench share one flag table: the same flag fails the same way.
expect "train threads out of range" "dtrain train: --threads must be between 1 and 1024, got 2000" "$DTRAIN" train --threads 2000
expect "scale threads out of range" "dtrain scale: --threads must be between 1 and 1024, got 2000" "$DTRAIN" scale --threads 2000
expect "bench threads out of range" "dtrain bench: --threads must be between 1 and 1024, got 2000" "$DTRAIN" bench --threads 2000
expect "scale epochs out of range" "dtrain scale: --epochs must be between 1 and 100000, got 0" "$DTRAIN" scale --epochs 0
expect "scale bad mode" "dtrain scale: --mode must be allreduce, ps-sync, ps-async or ssp, got 'gossip'" "$DTRAIN" scale --mode gossip
expect "scale bad schedule" "dtrain scale: --lr-schedule must be constant, cosine or step, got 'fast'" "$DTRAIN" scale --lr-schedule fast
# scale over hosts: each bad flag is one line before anything is built or run
expect "scale --hosts not netns" "dtrain scale: --hosts expects netns:H (emulated hosts), got 'cluster'" "$DTRAIN" scale --hosts cluster
expect "scale --hosts netns:0" "dtrain scale: --hosts netns: must be between 1 and 64, got 0" "$DTRAIN" scale --hosts netns:0
expect "scale --link bad unit" "dtrain scale: --link: '1gbps' is not a rate from 8kbit to 1000gbit" "$DTRAIN" scale --link 1gbps
expect "scale --link bad delay" "dtrain scale: --link: '5' is not a delay up to 10 s" "$DTRAIN" scale --link 1gbit,5
expect "scale --hosts without --link" "dtrain scale: --hosts netns:2 needs --link RATE[,DELAY]" "$DTRAIN" scale --model lenet5 --hosts netns:2
expect "scale --procs beyond the hosts" "dtrain scale: --procs 4 is more than --hosts netns:2 x --ranks-per-host 1 slots" "$DTRAIN" scale --model lenet5 --hosts netns:2 --link 1gbit --procs 2,4
expect "scale --ranks-per-host alone" "dtrain scale: --ranks-per-host goes with --hosts netns:H" "$DTRAIN" scale --model lenet5 --ranks-per-host 2
expect "scale --host-cpus alone" "dtrain scale: --host-cpus goes with --hosts netns:H" "$DTRAIN" scale --model lenet5 --host-cpus 0.5
expect "scale --host-cpus 0" "dtrain scale: --host-cpus expects cores per host from 0.01 to 1024, cpuset or none, got '0'" "$DTRAIN" scale --hosts netns:2 --link 1gbit --host-cpus 0
expect "scale --host-cpus a word" "dtrain scale: --host-cpus expects cores per host from 0.01 to 1024, cpuset or none, got 'half'" "$DTRAIN" scale --hosts netns:2 --link 1gbit --host-cpus half
expect "scale --bucket-sizes not ascending" "dtrain scale: --bucket-sizes expects ascending MiB values like 1,5,25, got '5,1'" "$DTRAIN" scale --bucket-sizes 5,1
expect "netns-rsh unknown host" "dtrain netns-rsh: unknown host 10.0.0.1" "$DTRAIN" netns-rsh dtrain-1 10.0.0.1 true
expect "test delay with trailing junk" "--test-delay expects WORKER:MS, got '2x'" "$DTRAIN" train --test-delay 2x
expect "test delay with a bad MS" "--test-delay expects WORKER:MS, got '2:5x'" "$DTRAIN" train --test-delay 2:5x
for cmd in train scale; do
    "$DTRAIN" $cmd --threads 0 2>"$tmp/threads_$cmd" >/dev/null
done
if [ "$(sed 's/^dtrain [a-z]*: //' "$tmp/threads_train")" = "$(sed 's/^dtrain [a-z]*: //' "$tmp/threads_scale")" ]; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: train and scale word --threads 0 differently"
fi

# A file with the wrong tensors: lenet5 weights given to mlp.
"$DTRAIN" train --model lenet5 --max-steps 1 --max-samples 64 --test-samples 64 --save "$tmp/lenet.safetensors" --quiet >/dev/null 2>&1
expect "wrong tensors" "tensor fc1.weight has shape [120, 400], expected [256, 784]" \
    "$DTRAIN" train --model mlp --init "$tmp/lenet.safetensors" --quiet
head -c 100 "$tmp/lenet.safetensors" >"$tmp/trunc.safetensors"
expect "truncated weights" "truncated" "$DTRAIN" train --model lenet5 --init "$tmp/trunc.safetensors" --quiet
expect "eval without --init" "dtrain eval: --init FILE is required" "$DTRAIN" eval --model lenet5
expect "eval missing weights" "dtrain eval: cannot open $tmp/none.safetensors" "$DTRAIN" eval --init "$tmp/none.safetensors"
expect "eval truncated weights" "truncated" "$DTRAIN" eval --init "$tmp/trunc.safetensors"
expect "eval wrong tensors" "tensor fc1.weight has shape [120, 400], expected [256, 784]" "$DTRAIN" eval --model mlp --init "$tmp/lenet.safetensors"
expect "eval unknown model" "dtrain eval: unknown model 'vgg'" "$DTRAIN" eval --model vgg --init "$tmp/lenet.safetensors"
expect "eval shape mismatch" "takes 1x28x28 inputs" "$DTRAIN" eval --data synthetic:cifar10 --init "$tmp/lenet.safetensors"
expect "eval bad batch size" "dtrain eval: --batch-size must be between 1" "$DTRAIN" eval --batch-size 0 --init "$tmp/lenet.safetensors"
expect "eval bad test samples" "dtrain eval: --test-samples expects an integer, got '5k'" "$DTRAIN" eval --test-samples 5k --init "$tmp/lenet.safetensors"
expect "eval takes no training flag" "unknown or incomplete option '--lr'" "$DTRAIN" eval --lr 0.1 --init "$tmp/lenet.safetensors"
expect "eval stray argument" "unexpected argument 'extra'" "$DTRAIN" eval --init "$tmp/lenet.safetensors" extra
expect "diverging loss" "loss is" "$DTRAIN" train --model mlp --lr 1e5 --max-samples 2048 --test-samples 64 --quiet

# And the good path of the same flags: --save then --init round-trips and trains on.
if "$DTRAIN" train --model lenet5 --init "$tmp/lenet.safetensors" --max-steps 2 --max-samples 64 \
    --test-samples 64 --save "$tmp/again.safetensors" --quiet && [ -s "$tmp/again.safetensors" ] &&
    ! ls "$tmp"/*.tmp.* >/dev/null 2>&1; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: --init from a saved file, then --save"
fi

# The performance-model commands: the textbook exercise's optimum, and bad input.
out=$("$DTRAIN" predict --theta 1.02,2.78,4.92,0,0.02 --batch 128 --steps-per-epoch 391 \
    --epochs 85 --servers 2,4 --workers 1..99)
if echo "$out" | grep -q "optimum for 2 servers: 7 workers" &&
    echo "$out" | grep -q "optimum for 4 servers: 10 workers"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "FAIL: predict's textbook optimum"
fi
printf 'workers,servers,batch,step_time\n1,1,128,0.5\n2,1,128,-0.3\n1,2,128,0.4\n2,2,128,0.3\n3,1,128,0.3\n3,2,128,0.2\n' >"$tmp/speed.csv"
expect "negative step time" "step time must be positive" "$DTRAIN" fit-speed "$tmp/speed.csv"
printf 'workers,batch,step_time\n1,128,0.5\n' >"$tmp/speed2.csv"
expect "speed CSV without servers" "missing column 'servers'" "$DTRAIN" fit-speed "$tmp/speed2.csv"
printf 'workers,servers,batch,step_time\n1,1,128,0.5\n2,1,128,0.3\n' >"$tmp/speed3.csv"
expect "too few speed points" "too few points" "$DTRAIN" fit-speed "$tmp/speed3.csv"
printf '{"event":"run","steps_per_epoch":4}\n{"event":"step","rank":0,"epoch":0,"step":0,"loss":2.1}\n' >"$tmp/short.jsonl"
expect "too few loss points" "too few points" "$DTRAIN" fit-loss "$tmp/short.jsonl" --every 1
printf '{"event":"run","steps_per_epoch":4}\n{"event":"step","rank":0,"epoch":0,"step":0,"loss":nan}\n' >"$tmp/nan.jsonl"
expect "NaN loss in a log" "is not a finite number" "$DTRAIN" fit-loss "$tmp/nan.jsonl"
printf 'name,depth,b0,b1\nA,5,0.1,0.5\n' >"$tmp/jobs.csv"
expect "jobs CSV without b2" "missing column 'b2'" "$DTRAIN" fit-jobs "$tmp/jobs.csv"
printf '# comment\nname,depth,b0,b1,b2\nA,20,0.1,0.5,0.2\nB,32,0.08,0.6,0.2\n' >"$tmp/jobs2.csv"
expect "fit-jobs unknown feature" "--features: no column 'width'" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --features width
expect "fit-jobs b0 as a feature" "--features: not a feature: 'b0'" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --features depth,b0
expect "fit-jobs unknown hold-out" "--hold-out: no job 'C'" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --hold-out C
expect "fit-jobs too few after hold-out" "too few jobs to fit (1; need 2) (after --hold-out)" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --hold-out B
expect "fit-jobs bad predict" "--predict expects numbers separated by commas" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --predict 5x
expect "fit-jobs bad target" "--target-loss must be between" "$DTRAIN" fit-jobs "$tmp/jobs2.csv" --target-loss 0
printf 'name,remaining_steps,batch,theta0,theta1,theta2,theta3,theta4\nA,100,128,1,1,1,0,0\nB,100,128,1,1,1,0,0\n' >"$tmp/alloc.csv"
expect "budget too small" "cannot give each of 2 jobs a worker and a server" "$DTRAIN" allocate "$tmp/alloc.csv" --budget 3
expect "bad theta" "--theta expects 5 non-negative numbers" "$DTRAIN" predict --theta 1,2

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
