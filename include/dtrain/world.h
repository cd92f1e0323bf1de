/* A world: a group of ranks with its own MPI communicator. The process world holds
 * every process started by mpirun (a process started alone has no world and needs no
 * MPI: see dt_world_launched); a mode splits it into smaller worlds (dt_world_split),
 * e.g. the workers of a parameter-server job, and every collective or message of
 * dtrain goes through a world's communicator.
 * Any MPI failure ends the whole job with one line naming the rank and the cause,
 * never a hang: MPI calls return errors (MPI_ERRORS_RETURN) and go through
 * DT_CHECK_MPI, and waits on peers give up after a timeout. */
#ifndef DTRAIN_WORLD_H
#define DTRAIN_WORLD_H

#include <mpi.h>

#include "dtrain/error.h"

typedef struct dt_world {
    MPI_Comm comm;    /* owned by a split world; the process world's is MPI's own */
    int rank, size;   /* in comm */
    int job_rank;     /* in the process world: what error messages name */
    int thread_level; /* what MPI_Init_thread granted */
    double timeout_s; /* longest wait on a peer before the job is aborted */
    int owns_comm;
} dt_world;

/* Whether a launcher (Open MPI's mpirun, or a PMI/PMIx launcher such as srun)
 * started this process; also one of several tasks of a Slurm job step, which
 * dt_world_init refuses when srun gave them no MPI plugin (SLURM_STEP_NUM_TASKS > 1
 * without PMIx/PMI variables, or a world of 1: N separate trainings otherwise). One
 * started alone trains without MPI: a singleton MPI_Init costs about 0.5 s (1.8 s
 * under AddressSanitizer) and starts a daemon, for a world of one rank that never
 * communicates. */
int dt_world_launched(void);

/* The process world. Initialises MPI with at least MPI_THREAD_SERIALIZED (a
 * communication thread and the trainer take turns; they never call MPI at the same
 * time). */
int dt_world_init(dt_world *w, int *argc, char ***argv, dt_error *err);
void dt_world_finalize(dt_world *w);

/* Collective over parent: the ranks passing the same color form one world, ordered
 * by (key, parent rank). Free with dt_world_free. */
void dt_world_split(const dt_world *parent, int color, int key, dt_world *out);
void dt_world_free(dt_world *w);

/* Ends this process of a job that failed with `status`, its one line printed already
 * by the rank that speaks for the job:
 * - DT_EXIT_TOGETHER: every rank of the process world calls it at the same point (a
 *   failure they agreed on, or found before MPI started, which is then started);
 * - DT_EXIT_ENDS_JOB: this rank ends the others (MPI_Abort);
 * - DT_EXIT_WAIT: another rank ends the job (in MPI_Finalize until it does).
 * Under Open MPI's mpirun, together means rank 0 aborts the job and the others wait:
 * mpirun answers a rank's non-zero exit after MPI_Finalize with a 10-line notice of
 * its own, and an abort with nothing but the rank's Open MPI help, which dt_world_init
 * has dropped (the 8-line MPI_ABORT notice). Elsewhere (srun) together is MPI_Finalize
 * on every rank. */
typedef enum { DT_EXIT_TOGETHER, DT_EXIT_ENDS_JOB, DT_EXIT_WAIT } dt_world_exit_how;
_Noreturn void dt_world_exit(int status, dt_world_exit_how how);

/* Prints "dtrain: rank R: <message>" and aborts every rank. */
_Noreturn void dt_world_abort(const dt_world *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The rank in the process world of rank `peer` of w's communicator (the number a user
 * sees in mpirun's messages), or peer itself if MPI cannot say. */
int dt_world_job_rank_of(const dt_world *w, int peer);

/* Waits for n requests, polling; after the world's timeout with no completion the
 * job is aborted with a line naming `what` and the peer waited on (-1: any). */
void dt_world_wait_all(const dt_world *w, int n, MPI_Request *reqs, int peer, const char *what);

/* Collectives for the trainer's bookkeeping, with the same timeout. In place. */
void dt_world_allreduce_doubles(const dt_world *w, double *v, int n, MPI_Op op);
void dt_world_broadcast_floats(const dt_world *w, float *v, size_t n);
/* Collective over w: how many of w's ranks run on this rank's host (by host name:
 * emulated hosts on one machine count as one), and whether w's ranks span hosts. */
void dt_world_hosts(const dt_world *w, int *local_ranks, int *spans_hosts);
/* Waits until every rank of w has arrived. */
void dt_world_barrier(const dt_world *w, const char *what);

/* Point-to-point bytes within w (small records such as statistics), with the
 * world's timeout. */
void dt_world_send_bytes(const dt_world *w, const void *data, size_t n, int to, int tag,
                         const char *what);
void dt_world_recv_bytes(const dt_world *w, void *data, size_t n, int from, int tag,
                         const char *what);

/* Checks an MPI return code: on failure aborts the job naming the call, the place
 * and MPI's own explanation. */
void dt_check_mpi(int code, const char *call, const char *file, int line);
#define DT_CHECK_MPI(call) dt_check_mpi((call), #call, __FILE__, __LINE__)

#endif
