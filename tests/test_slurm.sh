#!/bin/sh
# dtrain under Slurm, for real: a one-node cluster from Debian's packages
# (scripts/slurm-local.sh: munged, slurmctld, slurmd, 2 CPUs) started here and stopped
# at exit, then
#   (a) srun -n 2 --mpi=pmix direct launch trains the same weights, byte for byte, as
#       mpirun -np 2 with the same flags (PMIx: Debian's Open MPI 4.1 has no Slurm PMI-2
#       support, so srun --mpi=pmi2 fails in MPI_Init);
#   (b) mpirun inside salloc (-np 2, and -np 1 in a 2-task allocation) and inside an
#       sbatch job (scripts/dtrain.sbatch, waited for through its output file);
#   (c) dtrain scale --launcher srun runs its study inside an allocation, its 2-process
#       run as a Slurm job step; outside an allocation, or with --hosts, it is refused;
#   (d) srun -n 2 --mpi=none (two tasks, no MPI plugin: two separate trainings) is
#       refused in one line, and nothing trains; srun -n 1 --mpi=none trains alone;
#   (e) launch -- srun ... train --checkpoint DIR: the job's train under launch's lock.
# Exit 77 (skipped) with the reason where the cluster cannot start (not root, packages
# missing, a daemon that does not come up).
set -u
DTRAIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") # the tests run in a scratch folder
here=$(cd "$(dirname "$0")" && pwd)
slurm_local=$here/../scripts/slurm-local.sh
[ "$(id -u)" = 0 ] || { echo "skipped: a Slurm cluster here needs root (munged, slurmd)"; exit 77; }
. "$here/checks.sh"
# its own folder: munged wants every folder above its socket searchable by all
cluster=$(mktemp -d /tmp/dtslurm.XXXXXX) || exit 1
trap '"$slurm_local" stop "$cluster"; rm -rf "$tmp" "$cluster"' EXIT
trap 'exit 1' INT TERM
"$slurm_local" start "$cluster" >"$tmp/start.out" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    echo "skipped: the local Slurm cluster did not start (exit $rc):"
    cat "$tmp/start.out"
    [ $rc -eq 77 ] && exit 77
    exit 1
fi
export SLURM_CONF="$cluster/slurm.conf"
cat "$tmp/start.out"
echo "srun's MPI plugins: $(srun --mpi=list 2>&1 | tr -s '\n\t ' ' ')"
cd "$tmp" || exit 1
# small and deterministic: logreg on synthetic MNIST, 512 samples, one thread a rank
small="--model logreg --data synthetic:mnist --max-samples 512 --test-samples 64 --epochs 2
    --batch-size 32 --lr 0.01 --threads 1"

# (a) direct launch: the same weights as mpirun
# shellcheck disable=SC2086
srun -n 2 --mpi=pmix "$DTRAIN" train $small --save srun.safetensors --log srun.jsonl \
    >srun.out 2>&1
check "srun -n 2 --mpi=pmix trains" [ $? -eq 0 ]
# shellcheck disable=SC2086
mpirun -np 2 "$DTRAIN" train $small --save mpirun.safetensors --log mpirun.jsonl \
    >mpirun.out 2>&1
check "mpirun -np 2 trains" [ $? -eq 0 ]
check "srun's ranks form one world of 2 (8 steps an epoch, not 16)" \
    grep -q '"procs":2,.*"steps_per_epoch":8,' srun.jsonl
check "srun and mpirun save the same weights, byte for byte" cmp -s srun.safetensors mpirun.safetensors
check "... and log the same losses" sh -c \
    'grep -o "\"loss\":[^,]*" srun.jsonl >a; grep -o "\"loss\":[^,]*" mpirun.jsonl >b; [ -s a ] && cmp -s a b'

# (b) mpirun inside salloc, and inside an sbatch job
# shellcheck disable=SC2086
salloc -n 2 mpirun -np 2 "$DTRAIN" train $small --log salloc2.jsonl >salloc2.out 2>&1
check "mpirun -np 2 inside salloc -n 2 trains a world of 2" \
    grep -q '"procs":2,.*"steps_per_epoch":8,' salloc2.jsonl
# shellcheck disable=SC2086
salloc -n 2 mpirun -np 1 "$DTRAIN" train $small --log salloc1.jsonl >salloc1.out 2>&1
check "mpirun -np 1 inside salloc -n 2 is not refused: a world of 1 as asked" \
    grep -q '"procs":1,.*"steps_per_epoch":16,' salloc1.jsonl
check "docs/cluster.md shows scripts/dtrain.sbatch as it is" sh -c \
    'awk "/^\`\`\`sh\$/{on=1;next} /^\`\`\`\$/{if(on)exit} on" "$1/docs/cluster.md" | cmp -s - "$1/scripts/dtrain.sbatch"' - "$here/.."
# shellcheck disable=SC2086
job=$(DTRAIN=$DTRAIN sbatch --parsable -o "$tmp/job-%j.out" "$here/../scripts/dtrain.sbatch" \
    $small --log "$tmp/sbatch.jsonl")
check "sbatch takes the job" [ -n "$job" ]
joblog=$tmp/job-$job.out
i=0 # the job's last line says it ended (at most 90 s)
while [ $i -lt 900 ] && ! grep -q "^dtrain job $job ended" "$joblog" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
echo "--- sbatch job $job's output ($joblog):"
cat "$joblog" 2>/dev/null
echo "---"
check "the sbatch job ends with exit code 0" grep -q "^dtrain job $job ended: exit code 0$" "$joblog"
check "... after mpirun trained a world of 2" grep -q '"procs":2,.*"steps_per_epoch":8,' sbatch.jsonl
check "... the same losses as mpirun -np 2 outside Slurm" sh -c \
    'grep -o "\"loss\":[^,]*" sbatch.jsonl >c; [ -s c ] && cmp -s b c'

# (c) scale --launcher srun inside an allocation: its 2-process run is a job step
# shellcheck disable=SC2086
salloc -n 2 sh -c 'echo "$SLURM_JOB_ID" >scale.job; exec "$@"' - "$DTRAIN" scale --launcher srun \
    --model logreg --data synthetic:mnist --max-samples 512 --epochs 2 --batch-sizes 32 \
    --procs 1,2 --lr 0.01 --out study >scale.out 2>&1
check "scale --launcher srun inside salloc exits 0" [ $? -eq 0 ]
check "... writes its report" [ -s study/report.md ]
check "... its 2-process run was a world of 2" grep -q '"procs":2,.*"steps_per_epoch":8,' study/run_p2_b32.jsonl
check "... started by srun as step 0 of the allocation" \
    grep -q "launch task StepId=$(cat scale.job).0 " "$cluster/slurmd.log"
check "... and recorded with its settings" grep -qx "launcher srun" study/run_p2_b32.jsonl.args
"$DTRAIN" scale --launcher srun --model logreg --data synthetic:mnist --out nojob >nojob.out 2>&1
check "scale --launcher srun outside an allocation: exit 2" [ $? -eq 2 ]
check "... with one line" sh -c '[ "$(cat nojob.out)" = "dtrain scale: --launcher srun needs a Slurm allocation (no SLURM_JOB_ID): run the sweep inside salloc or an sbatch script" ]'
check "... and no study" [ ! -e nojob ]
salloc -n 2 "$DTRAIN" scale --launcher srun --hosts netns:2 --link 1gbit --model logreg \
    --data synthetic:mnist --out nohosts >nohosts.out 2>&1
check "scale --launcher srun --hosts: refused" \
    grep -qx "dtrain scale: --launcher srun runs on the Slurm allocation's nodes: drop --hosts (emulated hosts need mpirun)" nohosts.out

# (d) srun without an MPI plugin: refused, nothing trained
# shellcheck disable=SC2086
srun -n 2 --mpi=none "$DTRAIN" train $small --log none.jsonl >none.out 2>&1
check "srun -n 2 --mpi=none: exit non-zero" [ $? -ne 0 ]
msg="dtrain train: srun started 2 tasks without an MPI plugin (no PMIx or PMI variables): use srun --mpi=pmix (or mpirun)"
check "... in one line (the first task speaks)" sh -c '[ "$(grep "^dtrain" none.out)" = "$1" ]' - "$msg"
check "... and nothing trained" sh -c '! grep -q "^trained\|^epoch" none.out && [ ! -e none.jsonl ]'
# shellcheck disable=SC2086
srun -n 1 --mpi=none "$DTRAIN" train $small --log one.jsonl >one.out 2>&1
check "srun -n 1 --mpi=none trains alone" grep -q '"procs":1,.*"steps_per_epoch":16,' one.jsonl

# (e) launch over srun: Slurm's tasks are slurmstepd's children, not launch's; the job's
# train takes launch's lock as its own by DTRAIN_LAUNCH_LOCK, which srun passes on
# shellcheck disable=SC2086
salloc -n 2 "$DTRAIN" launch -- srun -n 2 --mpi=pmix "$DTRAIN" train $small --checkpoint cks \
    --max-steps 2 >launch.out 2>&1
check "launch -- srun -n 2 ... train --checkpoint DIR trains under launch's lock" [ $? -eq 0 ]
check "... and writes its checkpoint" [ -s cks/checkpoint.safetensors ]

for f in srun mpirun salloc2 salloc1 scale nojob nohosts none one launch; do
    [ "$failed" -eq 0 ] || { echo "--- $f.out"; cat "$f.out"; }
done
finish
