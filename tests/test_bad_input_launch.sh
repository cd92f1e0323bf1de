#!/bin/bash
# The bad-input catalogue, launch's part (issue 25 items 11 and 14): restarts wait and
# stop when a restart cannot help, the job dies with its supervisor, one supervisor
# per checkpoint directory, and a sweep's failed mpirun says what mpirun said.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"

# A job that counts its attempts (a line each in FILE) and exits with STATUS.
cat >count.sh <<'EOF'
echo x >>"$1"
exit "$2"
EOF
# A job that writes its pid to FILE (whole, by a rename), then sleeps.
cat >sleeper.sh <<'EOF'
echo $$ >"$1.tmp" && mv "$1.tmp" "$1"
exec sleep 300
EOF
attempts() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
# waits up to 30 s for FILE to exist
wait_file() {
    for _ in $(seq 600); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# whether pid runs (a zombie waiting for its new parent to reap it does not)
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$1/stat" 2>/dev/null; }

# --- restarts wait: 0.2, 0.4 and 0.8 s before restarts 1 to 3 (a lower bound only)
start=$(date +%s%N)
"$DTRAIN" launch --restarts 3 --restart-delay 0.2 --quiet -- sh count.sh n1 1 2>err1
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
if [ "$rc" -eq 1 ] && [ "$(attempts n1)" -eq 4 ] && [ "$elapsed_ms" -ge 1400 ]; then
    pass "launch: backoff"
else
    fail "launch: backoff (4 attempts in at least 1.4 s)" \
        "status $rc, $(attempts n1) attempts in $elapsed_ms ms" "$(cat err1)"
fi

# --- a usage error (exit 2) is not restarted
expect "launch: exit 2 is not restarted" \
    "dtrain launch: the job exited with status 2, a usage error that a restart would repeat; not restarting" \
    "" "$DTRAIN" launch --restarts 3 --quiet -- sh count.sh n2 2
[ "$(attempts n2)" -eq 1 ] && pass "launch: exit 2 ran once" ||
    fail "launch: exit 2 ran $(attempts n2) times"

# --- the same failure at the same checkpoint step twice stops the restarts
Q="--max-samples 64 --batch-size 16 --epochs 2 --test-samples 32 --threads 1 --quiet"
"$DTRAIN" train $Q --max-steps 3 --checkpoint ck --checkpoint-every 1steps --log L.jsonl ||
    echo "FAIL: cannot make a checkpoint"
expect "launch: the same failure at the same step twice" \
    "dtrain launch: the job failed twice in a row at checkpoint step 3 with exit status 1, a failure that a restart would repeat; not restarting" \
    "ck/checkpoint.safetensors" "$DTRAIN" launch --restarts 5 --quiet -- sh count.sh n3 1 \
    --checkpoint ck
[ "$(attempts n3)" -eq 2 ] && pass "launch: the same failure ran twice" ||
    fail "launch: the same failure ran $(attempts n3) times"
# ... as when the resumed run's log is gone: train's own line is passed on, twice at most
rm L.jsonl
"$DTRAIN" launch --restarts 5 --quiet -- "$DTRAIN" train $Q --max-steps 6 --checkpoint ck \
    --checkpoint-every 1steps --log L.jsonl --resume ck 2>err3
rc=$?
runs=$(grep -c '^dtrain train:' err3)
if [ "$rc" -ne 0 ] && [ "$runs" -ge 1 ] && [ "$runs" -le 2 ] &&
    tail -1 err3 | grep -q '^dtrain launch: .*not restarting$'; then
    pass "launch: a missing old log"
else
    fail "launch: a missing old log (stopped after at most 2 attempts)" \
        "status $rc, $runs attempts" "$(cat err3)"
fi

# --- kill -9 of launch ends the job (its death signal)
"$DTRAIN" launch --quiet -- sh sleeper.sh job.pid 2>/dev/null &
sup=$!
if wait_file job.pid; then
    job=$(cat job.pid)
    kill -KILL "$sup"
    wait "$sup" 2>/dev/null
    for _ in $(seq 200); do alive "$job" || break; sleep 0.05; done
    if alive "$job"; then
        fail "launch: kill -9 of launch leaves the job (pid $job) running"
        kill -KILL "$job"
    else
        pass "launch: kill -9 of launch ends the job"
    fi
else
    fail "launch: the job did not start"
    kill -KILL "$sup"
fi

# --- one supervisor per checkpoint directory
"$DTRAIN" launch --quiet -- sh sleeper.sh holder.pid --checkpoint lk 2>/dev/null &
holder=$!
if wait_file holder.pid; then
    expect "launch: a second launch on a locked checkpoint directory" \
        "dtrain launch: lk is in use by another dtrain launch (pid $holder): one run per checkpoint directory; wait for it to end or stop it" \
        "" "$DTRAIN" launch --quiet -- sh count.sh n4 1 --checkpoint lk
    [ "$(attempts n4)" -eq 0 ] && pass "launch: the refused job did not run" ||
        fail "launch: the refused job ran"
else
    fail "launch: the lock holder's job did not start"
fi
kill -TERM "$holder"
wait "$holder"

# --- scale --hostfile: mpirun's own line, not "no message" (a host of this machine's
# loopback where no ssh server listens: nothing leaves the machine)
if command -v ssh >/dev/null; then
    echo "127.0.0.2 slots=2" >hf
    expect "scale --hostfile with an unreachable host" \
        "dtrain scale: run with 2 processes, batch 32 failed (mpirun: ssh: connect to host 127.0.0.2 port 22: Connection refused; see sx/run_p2_b32.jsonl.stderr)" \
        "" "$DTRAIN" scale --model lenet5 --data synthetic:mnist --procs 2 --batch-sizes 32 \
        --epochs 1 --max-samples 64 --threads 1 --hostfile hf --out sx
else
    echo "note: no ssh here; the --hostfile case was not run"
fi

bad_input_done
