#!/bin/sh
# The bad-input catalogue, Slurm's part (issue 26 item 8), without a cluster: what srun
# gives its tasks is set by hand. tests/test_slurm.sh runs the same cases for real.
set -u
DTRAIN=$1
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/bad_input_lib.sh"
small="--model logreg --data synthetic:mnist --max-samples 64 --epochs 1 --threads 1"
# a Slurm task's variables, but not the allocation's, and none of an MPI launcher
unset SLURM_JOB_ID SLURM_STEP_NUM_TASKS PMIX_RANK PMI_RANK PMI_SIZE OMPI_COMM_WORLD_SIZE

# srun -n 2 --mpi=none: two tasks that would each train alone
# shellcheck disable=SC2086
expect "srun's 2 tasks without an MPI plugin" \
    "dtrain train: srun started 2 tasks without an MPI plugin (no PMIx or PMI variables): use srun --mpi=pmix (or mpirun)" \
    "" env SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 "$DTRAIN" train $small --log none.jsonl
if [ -e none.jsonl ]; then fail "... and it trained nothing (none.jsonl written)"; else pass; fi
# one task, or a batch script's SLURM_NTASKS without a step: trains alone
# shellcheck disable=SC2086
ok_case "srun -n 1 --mpi=none trains alone" env SLURM_STEP_NUM_TASKS=1 "$DTRAIN" train $small
# shellcheck disable=SC2086
ok_case "a batch script's SLURM_NTASKS=2 with no step trains alone" \
    env SLURM_NTASKS=2 SLURM_JOB_ID=1 "$DTRAIN" train $small

# scale --launcher
expect "scale --launcher of another name" "dtrain scale: --launcher expects mpirun or srun, got 'ssh'" \
    "" "$DTRAIN" scale --launcher ssh --model logreg --data synthetic:mnist --out s1
expect "scale --launcher srun outside an allocation" \
    "dtrain scale: --launcher srun needs a Slurm allocation (no SLURM_JOB_ID): run the sweep inside salloc or an sbatch script" \
    "" "$DTRAIN" scale --launcher srun --model logreg --data synthetic:mnist --out s2
echo "localhost slots=2" >hosts
expect "scale --launcher srun --hostfile" \
    "dtrain scale: --launcher srun runs on the Slurm allocation's nodes: drop --hostfile" \
    "hosts" env SLURM_JOB_ID=1 "$DTRAIN" scale --launcher srun --hostfile hosts --model logreg \
    --data synthetic:mnist --out s3
expect "scale --launcher srun --hosts netns:2" \
    "dtrain scale: --launcher srun runs on the Slurm allocation's nodes: drop --hosts (emulated hosts need mpirun)" \
    "" env SLURM_JOB_ID=1 "$DTRAIN" scale --launcher srun --hosts netns:2 --link 1gbit \
    --model logreg --data synthetic:mnist --out s4
if [ -e s1 ] || [ -e s2 ] || [ -e s3 ] || [ -e s4 ]; then fail "a refused sweep made its folder"; else pass; fi

bad_input_done
