/* A world: a group of ranks that communicate. The process world holds every process
 * started by the launcher (a process started alone has no world and needs none: see
 * dt_world_launched); a mode splits it into smaller worlds (dt_world_split), e.g. the
 * workers of a parameter-server job, and every collective or message of dtrain goes
 * through a world.
 *
 * This header is the whole communication interface: collectives (all-reduce,
 * broadcast, all-gather, barrier), point-to-point bytes, split. MPI implements it
 * (src/parallel/world.c), and no MPI type or header appears outside src/parallel; the
 * element types of a collective are dtrain's (dtype.h), its reductions dt_reduce_op.
 * Any failure ends the whole job with one line naming the rank and the cause, never a
 * hang: every wait on a peer gives up after the world's timeout. */
#ifndef DTRAIN_WORLD_H
#define DTRAIN_WORLD_H

#include <stddef.h>

#include "dtrain/dtype.h"
#include "dtrain/error.h"

/* The implementation's communicator (an MPI communicator). */
typedef struct dt_comm dt_comm;

typedef struct dt_world {
    dt_comm *comm;    /* NULL: one process without a launcher, which never communicates */
    int rank, size;   /* in this world */
    int job_rank;     /* in the process world: what error messages name */
    double timeout_s; /* longest wait on a peer before the job is aborted */
    int owns_comm;    /* a split world's: freed by dt_world_free */
    long launcher;    /* the parent process at dt_world_init (mpirun, orted, slurmstepd) */
} dt_world;

typedef enum dt_reduce_op { DT_REDUCE_SUM, DT_REDUCE_MAX, DT_REDUCE_MIN } dt_reduce_op;

/* A message in flight (dt_world_isend, dt_world_irecv): the implementation's handle,
 * held by value so that a protocol keeps arrays of them on its stack. */
typedef struct dt_request {
    _Alignas(8) unsigned char handle[16];
} dt_request;

/* A received message: whose, under which tag, how many bytes. */
typedef struct dt_message {
    int source, tag;
    size_t bytes;
} dt_message;

enum { DT_ANY_SOURCE = -1, DT_ANY_TAG = -1 };

/* Whether a launcher (Open MPI's mpirun, or a PMI/PMIx launcher such as srun)
 * started this process; also one of several tasks of a Slurm job step, which
 * dt_world_init refuses when srun gave them no MPI plugin (SLURM_STEP_NUM_TASKS > 1
 * without PMIx/PMI variables, or a world of 1: N separate trainings otherwise). One
 * started alone trains without MPI: a singleton MPI start costs about 0.5 s (1.8 s
 * under AddressSanitizer) and starts a daemon, for a world of one rank that never
 * communicates. */
int dt_world_launched(void);

/* The process world. Initialises MPI with at least MPI_THREAD_SERIALIZED (a
 * communication thread and the trainer take turns; they never communicate at the same
 * time). dt_world_finalize ends it well, collectively: every rank waits there for the
 * others before MPI ends (a rank failing meanwhile ends the job with MPI's abort). */
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
 * - DT_EXIT_ENDS_JOB: this rank ends the others (MPI's abort);
 * - DT_EXIT_WAIT: another rank ends the job (this one sleeps until it does, not in
 *   MPI's finalize, whose mix with an abort can hang Open MPI's mpirun; it exits with
 *   the status at once when its launcher, its parent process at dt_world_init (w's;
 *   the parent now when w is NULL), is gone, even before the wait began, and after
 *   60 s otherwise, the launcher then ending the job).
 * Under Open MPI's mpirun, together means rank 0 aborts the job and the others wait:
 * mpirun answers a rank's non-zero exit after finalize with a 10-line notice of its
 * own, and an abort with nothing but the rank's Open MPI help, which dt_world_init
 * has dropped (the 8-line MPI_ABORT notice). Elsewhere (srun) together is finalize on
 * every rank. */
typedef enum { DT_EXIT_TOGETHER, DT_EXIT_ENDS_JOB, DT_EXIT_WAIT } dt_world_exit_how;
_Noreturn void dt_world_exit(const dt_world *w, int status, dt_world_exit_how how);

/* Prints "dtrain: rank R: <message>" and aborts every rank. */
_Noreturn void dt_world_abort(const dt_world *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The rank in the process world of rank `peer` of w's communicator (the number a user
 * sees in mpirun's messages), or peer itself if MPI cannot say. */
int dt_world_job_rank_of(const dt_world *w, int peer);

/* Collectives over w, every rank calling them in the same order, each waiting with
 * the world's timeout; `what` names the exchange in the timeout's message. */
/* In place: buf[0..n) becomes op over the ranks, element by element (f32, f64, s32, s64). */
void dt_world_allreduce(const dt_world *w, void *buf, size_t n, dt_dtype type, dt_reduce_op op,
                        const char *what);
/* The same for the trainer's bookkeeping (epoch statistics). */
void dt_world_allreduce_doubles(const dt_world *w, double *v, int n, dt_reduce_op op);
/* buf[0..n) of rank root to every rank. */
void dt_world_broadcast(const dt_world *w, void *buf, size_t n, dt_dtype type, int root,
                        const char *what);
/* Rank 0's floats to every rank (the initial weights). */
void dt_world_broadcast_floats(const dt_world *w, float *v, size_t n);
/* all[r * n .. (r + 1) * n) = rank r's mine[0..n). */
void dt_world_allgather(const dt_world *w, const void *mine, void *all, size_t n, dt_dtype type,
                        const char *what);
/* The MPI library's name and version ("Open MPI v4.1.4"), for a run's record. */
void dt_world_library(char *out, size_t size);
/* Waits until every rank of w has arrived. */
void dt_world_barrier(const dt_world *w, const char *what);
/* How many of w's ranks run on this rank's host (by host name: emulated hosts on one
 * machine count as one), and whether w's ranks span hosts. */
void dt_world_hosts(const dt_world *w, int *local_ranks, int *spans_hosts);
/* Collective over w: splits it by node for a two-level collective. A node is a host
 * name and a network namespace (an emulated host is a node of its own, though it
 * shares the machine's name). `local` gets w's ranks on this rank's node, `cross` the
 * ranks with this rank's local rank on every node, both ordered by w's rank. Returns
 * the number of nodes when every node holds the same number of ranks, else 0 (and the
 * worlds are split all the same). Free both with dt_world_free. */
int dt_world_split_nodes(const dt_world *w, dt_world *local, dt_world *cross);

/* Point-to-point messages within w (the parameter-server protocol): n values of type
 * to or from a rank of w under a tag (from and tag may be DT_ANY_SOURCE, DT_ANY_TAG).
 * The buffer must stay untouched until the request completes: dt_world_wait waits for
 * n of them with the world's timeout (naming `peer`, -1: any, in its message);
 * dt_world_test says whether one has completed, and for a receive what arrived.
 * 16-bit words (a bf16 or fp16 wire) travel as DT_BF16: moved, never summed. */
void dt_world_isend(const dt_world *w, const void *buf, size_t n, dt_dtype type, int to, int tag,
                    dt_request *req);
void dt_world_irecv(const dt_world *w, void *buf, size_t n, dt_dtype type, int from, int tag,
                    dt_request *req);
void dt_world_wait(const dt_world *w, int n, dt_request *reqs, int peer, const char *what);
/* dt_world_wait for a rank that mostly waits (a parameter server): it sleeps between
 * polls once a wait passes 0.2 ms, leaving its CPU to a rank that shares it. */
void dt_world_wait_idle(const dt_world *w, int n, dt_request *reqs, int peer, const char *what);
/* One receive waited for as dt_world_wait_idle waits, at most limit_s seconds: 1 with
 * msg filled (as dt_world_test), 0 when limit_s passed first (the request still stands;
 * the caller decides whether that is a dead peer). */
int dt_world_wait_message_idle(const dt_world *w, dt_request *req, dt_message *msg, double limit_s);
int dt_world_test(const dt_world *w, dt_request *req, dt_message *msg);
/* Withdraws a receive that will never be matched (a server's standing receive once
 * its worker is done) and waits until MPI has let go of its buffer. */
void dt_world_cancel(const dt_world *w, dt_request *req);

/* Point-to-point bytes within w (small records such as statistics), with the
 * world's timeout. */
void dt_world_send_bytes(const dt_world *w, const void *data, size_t n, int to, int tag,
                         const char *what);
void dt_world_recv_bytes(const dt_world *w, void *data, size_t n, int from, int tag,
                         const char *what);

#endif
