/* Where the launcher placed this process, read from its environment and its CPU
 * affinity: the rank it was given (so that one rank speaks for the job before MPI
 * starts) and the compute threads that fit the cores it may use. The rules take the
 * environment and the mask as inputs (no global state); the _here variants pass this
 * process's own.
 *
 * Threads by default (asked = 0), the cores this rank may use:
 * - n: the cores of its affinity mask (the host's online cores if unknown); k: the
 *   ranks on its host, as the launcher says (OMPI_COMM_WORLD_LOCAL_SIZE; MPICH's
 *   MPI_LOCALNRANKS; Slurm's SLURM_STEP_TASKS_PER_NODE for this node), 1 if none does;
 * - one rank on the host: n;
 * - Slurm's srun with SLURM_CPUS_PER_TASK (-c): at most that, within the mask;
 * - a mask the launcher narrowed to this rank (Open MPI: OMPI_MCA_orte_bound_at_launch,
 *   its default binding for 1-2 ranks; srun: SLURM_CPU_BIND_TYPE, else its step's
 *   tasks share the step's cpuset; a launcher that does not say: a mask narrower than
 *   the host): n, at most host cores / k (ranks bound to one socket share it);
 * - otherwise the mask is shared by the host's ranks: n / k, at least 1.
 * An explicit --threads wins. */
#ifndef DTRAIN_PLACEMENT_H
#define DTRAIN_PLACEMENT_H

#include <stddef.h>

/* The rank the launcher gave this process: the first valid of OMPI_COMM_WORLD_RANK,
 * PMIX_RANK, PMI_RANK, SLURM_PROCID; -1 if none is set. env: "NAME=value" strings,
 * NULL-terminated (as environ). */
int dt_placement_rank(char *const *env);
int dt_placement_rank_here(void);

typedef struct dt_threads_choice {
    int threads;
    char why[200];     /* the run record's threads_from: "--threads", or the rule applied */
    int local_ranks;   /* ranks on this host as the launcher says, 1 if it does not */
    int host_cores;    /* the host's online cores */
    char warning[240]; /* "" or one line: more threads x ranks than the host has cores */
} dt_threads_choice;

/* asked > 0: that many (--threads); 0: the default above. mask_cores: cores in the
 * affinity mask (0: unknown); host_cores: the host's online cores. The warning is set
 * when local ranks x threads > host cores with more than one thread per rank (fewer
 * threads would help; one thread per rank is already the least). */
void dt_threads_choose(int asked, char *const *env, int mask_cores, int host_cores,
                       dt_threads_choice *out);
void dt_threads_choose_here(int asked, dt_threads_choice *out);

#endif
