#include "world_mpi.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timer.h"

/* DTRAIN_PEER_TIMEOUT in seconds (default 25): a number above 0, else an error (a
 * typo must not quietly leave the default in force). */
static int peer_timeout_s(double *out, dt_error *err) {
    const char *text = getenv("DTRAIN_PEER_TIMEOUT");
    *out = 25.0;
    if (!text) return 0;
    char *end;
    errno = 0;
    const double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v <= 0 || v > 1e9)
        return dt_error_set(err,
                            "DTRAIN_PEER_TIMEOUT must be a number of seconds from 0 (excluded) to "
                            "1e9, got '%s' (unset it for the default 25)",
                            text);
    *out = v;
    return 0;
}

/* The only place dtrain names MPI's process world: the process world is created from
 * it and a failure anywhere aborts the whole job through it. Every other call goes
 * through a dt_world's communicator. */
static MPI_Comm job_comm(void) {
    return MPI_COMM_WORLD;
}

/* Whether mpirun or a PMI/PMIx server (srun --mpi=pmix or pmi2) gave this process
 * its place in a world. */
static int has_launcher_vars(void) {
    static const char *const set_by_launchers[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                                   "PMI_SIZE"};
    for (size_t i = 0; i < sizeof set_by_launchers / sizeof *set_by_launchers; i++)
        if (getenv(set_by_launchers[i])) return 1;
    return 0;
}

/* The task count of the Slurm job step when srun started this process itself
 * (SLURM_STEP_NUM_TASKS), else 0. A batch script and salloc's shell have SLURM_NTASKS
 * but no step, so `mpirun -np 1` inside `salloc -n 2` is a world of 1 as asked; ranks
 * of mpirun may inherit a step's variables from the daemons mpirun starts with srun
 * on other nodes, but carry mpirun's OMPI_COMM_WORLD_SIZE. */
static long srun_tasks(void) {
    const char *text = getenv("SLURM_STEP_NUM_TASKS");
    if (!text || getenv("OMPI_COMM_WORLD_SIZE")) return 0;
    char *end;
    errno = 0;
    const long n = strtol(text, &end, 10);
    return errno || end == text || *end || n < 1 ? 0 : n;
}

int dt_world_launched(void) {
    /* several srun tasks must form one world, or be refused by dt_world_init */
    return has_launcher_vars() || srun_tasks() > 1;
}

/* Under Open MPI's mpirun, before MPI starts: a rank's Open MPI help messages are
 * dropped, the 8-line MPI_ABORT notice among them (dtrain prints its own line first);
 * OMPI_MCA_orte_execute_quiet=0 in the environment keeps them. */
static void quiet_open_mpi(void) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) setenv("OMPI_MCA_orte_execute_quiet", "1", 0);
}

int dt_world_init(dt_world *w, int *argc, char ***argv, dt_error *err) {
    w->launcher = (long)getppid(); /* first: dt_world_exit may need it after a failure */
    if (peer_timeout_s(&w->timeout_s, err)) return -1; /* before MPI: one line, no MPI noise */
    /* srun --mpi=none (a cluster's MpiDefault): N tasks that would each train alone */
    const long tasks = srun_tasks();
    if (tasks > 1 && !has_launcher_vars())
        return dt_error_set(err,
                            "srun started %ld tasks without an MPI plugin (no PMIx or PMI "
                            "variables): use srun --mpi=pmix (or mpirun)",
                            tasks);
    int initialized = 0;
    MPI_Initialized(&initialized);
    quiet_open_mpi();
    int thread_level = 0;
    if (!initialized &&
        MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &thread_level) != MPI_SUCCESS)
        return dt_error_set(err, "MPI_Init_thread failed");
    if (initialized) MPI_Query_thread(&thread_level);
    if (thread_level < MPI_THREAD_SERIALIZED)
        return dt_error_set(err,
                            "this MPI grants thread level %d; dtrain's communication thread needs "
                            "MPI_THREAD_SERIALIZED",
                            thread_level);
    w->comm = malloc(sizeof *w->comm);
    if (!w->comm) {
        if (!initialized) MPI_Finalize();
        return dt_error_set(err, "out of memory for the process world");
    }
    w->comm->mpi = job_comm();
    w->owns_comm = 0;
    MPI_Comm_set_errhandler(w->comm->mpi, MPI_ERRORS_RETURN);
    MPI_Comm_rank(w->comm->mpi, &w->rank);
    MPI_Comm_size(w->comm->mpi, &w->size);
    w->job_rank = w->rank;
    if (tasks > 1 && w->size == 1) { /* an MPI that does not speak srun's PMI flavour */
        if (!initialized) MPI_Finalize();
        free(w->comm);
        w->comm = NULL;
        return dt_error_set(err,
                            "srun started %ld tasks but MPI sees a world of 1 (this MPI lacks "
                            "srun's --mpi plugin): use srun --mpi=pmix (or mpirun)",
                            tasks);
    }
    return 0;
}

void dt_world_finalize(dt_world *w) {
    free(w->comm);
    w->comm = NULL;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    /* No rank enters MPI_Finalize before every rank is past its last chance to abort
     * (a final save failing on rank 0; see await_abort). Polled without a timeout (a rank
     * may still be evaluating or saving) and with a sleep (not spinning on its core). */
    MPI_Request req;
    if (MPI_Ibarrier(job_comm(), &req) == MPI_SUCCESS) {
        const struct timespec poll = {0, 1000000};
        int done = 0;
        while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
            nanosleep(&poll, NULL);
    }
    MPI_Finalize();
}

void dt_world_split(const dt_world *parent, int color, int key, dt_world *out) {
    *out = *parent;
    out->comm = malloc(sizeof *out->comm);
    if (!out->comm) dt_world_abort(parent, "out of memory for a split world");
    DT_CHECK_MPI(MPI_Comm_split(parent->comm->mpi, color, key, &out->comm->mpi));
    DT_CHECK_MPI(MPI_Comm_set_errhandler(out->comm->mpi, MPI_ERRORS_RETURN));
    DT_CHECK_MPI(MPI_Comm_rank(out->comm->mpi, &out->rank));
    DT_CHECK_MPI(MPI_Comm_size(out->comm->mpi, &out->size));
    out->owns_comm = 1;
    out->launcher = parent->launcher;
}

void dt_world_free(dt_world *w) {
    if (w->owns_comm) {
        MPI_Comm_free(&w->comm->mpi);
        free(w->comm);
        w->comm = NULL;
    }
    w->owns_comm = 0;
}

/* Ends the whole job, naming the rank in the process world. */
static _Noreturn void abort_job(int job_rank, const char *msg) {
    fprintf(stderr, "dtrain: rank %d: %s\n", job_rank, msg);
    fflush(stderr);
    MPI_Abort(job_comm(), 1);
    exit(1);
}

/* How long a rank waits for another's abort to end it before it ends itself (the
 * launcher then ends the job): far longer than an abort takes (< 1 s). Only a
 * speaker that hangs or dies before its abort, with its launcher alive, makes a rank
 * wait that long; a launcher that is gone ends the wait at once (await_abort). */
#define ABORT_WAIT_S  60.0
#define ABORT_POLL_NS 100000000L /* 0.1 s */

/* Waits for the rank that aborts the job to end this process, outside MPI_Finalize:
 * Open MPI 4.1's mpirun (with PMIx 4.2) hung or crashed in 9-12 of 40 jobs whose abort
 * came while some ranks were in MPI_Finalize and others were not, and in none of 40
 * each where no rank was in it or all were (docs/distributed.md, "Failures"). _exit:
 * MPI is neither finalized nor to be torn down by exit's handlers; output is flushed. */
static _Noreturn void await_abort(long launcher, int status) {
    /* the launcher (mpirun, its orted, slurmstepd) is this rank's parent: once it is
     * gone (killed; this rank handed to init or a subreaper) no abort can come. Its
     * pid is the one recorded at start: a failure caused by its death finds this rank
     * handed over already. */
    const double until = dt_now() + ABORT_WAIT_S;
    const struct timespec poll = {0, ABORT_POLL_NS};
    while (dt_now() < until && (long)getppid() == launcher && launcher > 1) nanosleep(&poll, NULL);
    _exit(status);
}

void dt_world_exit(const dt_world *w, int status, dt_world_exit_how how) {
    const long launcher = w ? w->launcher : (long)getppid();
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    fflush(stdout);
    fflush(stderr);
    const int mpirun = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    if (mpirun && !initialized && !finalized) { /* a failure found before MPI started */
        quiet_open_mpi();
        initialized = MPI_Init(NULL, NULL) == MPI_SUCCESS;
    }
    if (initialized && !finalized) {
        if (how == DT_EXIT_ENDS_JOB) MPI_Abort(job_comm(), status);
        if (how == DT_EXIT_WAIT) await_abort(launcher, status);
        if (mpirun) { /* together: rank 0 ends the job */
            MPI_Comm_rank(job_comm(), &rank);
            if (rank == 0) MPI_Abort(job_comm(), status);
            await_abort(launcher, status);
        }
        MPI_Finalize(); /* together elsewhere (srun): every rank ends with its status */
    }
    exit(status);
}

void dt_world_abort(const dt_world *w, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    abort_job(w ? w->job_rank : -1, msg);
}

void dt_check_mpi(int code, const char *call, const char *file, int line) {
    if (code == MPI_SUCCESS) return;
    char why[MPI_MAX_ERROR_STRING], msg[MPI_MAX_ERROR_STRING + 256];
    int len = 0, rank = -1;
    MPI_Error_string(code, why, &len);
    MPI_Comm_rank(job_comm(), &rank);
    snprintf(msg, sizeof msg, "%s failed at %s:%d: %s (a peer rank died?)", call, file, line, why);
    abort_job(rank, msg);
}

int dt_world_job_rank_of(const dt_world *w, int peer) {
    MPI_Group mine, job;
    int out = peer;
    if (!w->comm || MPI_Comm_group(w->comm->mpi, &mine) != MPI_SUCCESS) return peer;
    if (MPI_Comm_group(job_comm(), &job) == MPI_SUCCESS) {
        if (MPI_Group_translate_ranks(mine, 1, &peer, job, &out) != MPI_SUCCESS ||
            out == MPI_UNDEFINED)
            out = peer;
        MPI_Group_free(&job);
    }
    MPI_Group_free(&mine);
    return out;
}

/* How a waiting rank pauses between polls after `waited` seconds: it yields the core
 * (a rank sharing it may run), or, with `nap`, once the wait passes NAP_AFTER_S, sleeps
 * NAP_NS (plus the kernel's timer slack, 50 us): for ranks whose waits are long and whose
 * CPU another rank needs (a parameter server and its workers on shared cores: spinning
 * with sched_yield the server took about a third of the CPU from a worker's compute,
 * lenet5 4.8 ms a step against 3.4 alone; docs/scaling.md). Polls come in runs: every
 * 1024th pauses without `nap`, every 64th with it until the first nap, then every poll
 * (64 polls a nap cost the server 83 us a wake-up; one poll a nap, lenet5's ps step on
 * emulated hosts sharing a core went from 16.2 to 11.4 ms). */
static const double NAP_AFTER_S = 200e-6;
enum { NAP_NS = 20000 };
typedef struct poller {
    double start;
    long polls;
    int nap, napping;
} poller;

static poller poller_start(int nap) {
    return (poller){.start = dt_now(), .nap = nap};
}

/* After a poll that found nothing: 1 when the wait has passed limit_s (checked at the
 * pauses); else pauses when its turn comes and returns 0. */
static int poller_pause(poller *p, double limit_s) {
    if (!p->napping && (++p->polls & (p->nap ? 63 : 1023)) != 0) return 0;
    const double waited = dt_now() - p->start;
    if (waited > limit_s) return 1;
    if (p->nap && waited > NAP_AFTER_S) {
        const struct timespec pause = {0, NAP_NS};
        nanosleep(&pause, NULL);
        p->napping = 1; /* from then on the wait naps at every poll */
    } else {
        sched_yield();
    }
    return 0;
}

/* Polls reqs until all complete, aborting after the world's timeout. */
static void wait_loop(const dt_world *w, int n, MPI_Request *reqs, int peer, const char *what,
                      int nap) {
    poller p = poller_start(nap);
    for (;;) {
        int done = 0;
        DT_CHECK_MPI(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        if (poller_pause(&p, w->timeout_s)) {
            /* In a collective of two ranks the one not answering is the other. */
            if (peer < 0 && w->size == 2) peer = 1 - w->rank;
            if (peer >= 0)
                dt_world_abort(w, "%s: no progress with rank %d for %g s (it died or hangs)", what,
                               dt_world_job_rank_of(w, peer), w->timeout_s);
            dt_world_abort(w, "%s: no progress for %g s (a rank died or hangs)", what,
                           w->timeout_s);
        }
    }
}

void dt_world_wait_all(const dt_world *w, int n, MPI_Request *reqs, int peer, const char *what) {
    wait_loop(w, n, reqs, peer, what, 0);
}

static MPI_Op mpi_op(dt_reduce_op op) {
    return op == DT_REDUCE_MAX ? MPI_MAX : op == DT_REDUCE_MIN ? MPI_MIN : MPI_SUM;
}

/* MPI counts are ints: a collective of more elements goes in pieces of this many. */
static const size_t PIECE = (size_t)1 << 28;

void dt_world_allreduce(const dt_world *w, void *buf, size_t n, dt_dtype type, dt_reduce_op op,
                        const char *what) {
    const size_t elem = dt_dtype_size(type);
    for (size_t off = 0; off < n; off += PIECE) {
        MPI_Request req;
        const int count = (int)(n - off < PIECE ? n - off : PIECE);
        DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * elem, count,
                                    dt_mpi_type(type), mpi_op(op), w->comm->mpi, &req));
        dt_world_wait_all(w, 1, &req, -1, what);
    }
}

void dt_world_allreduce_doubles(const dt_world *w, double *v, int n, dt_reduce_op op) {
    dt_world_allreduce(w, v, (size_t)n, DT_F64, op, "epoch statistics");
}

void dt_world_broadcast(const dt_world *w, void *buf, size_t n, dt_dtype type, int root,
                        const char *what) {
    const size_t elem = dt_dtype_size(type);
    for (size_t off = 0; off < n; off += PIECE) {
        MPI_Request req;
        const int count = (int)(n - off < PIECE ? n - off : PIECE);
        DT_CHECK_MPI(MPI_Ibcast((char *)buf + off * elem, count, dt_mpi_type(type), root,
                                w->comm->mpi, &req));
        dt_world_wait_all(w, 1, &req, root, what);
    }
}

void dt_world_broadcast_floats(const dt_world *w, float *v, size_t n) {
    dt_world_broadcast(w, v, n, DT_F32, 0, "broadcast of the initial weights");
}

void dt_world_allgather(const dt_world *w, const void *mine, void *all, size_t n, dt_dtype type,
                        const char *what) {
    if (n > PIECE) dt_world_abort(w, "%s: %zu values are too many to gather", what, n);
    MPI_Request req;
    const MPI_Datatype t = dt_mpi_type(type);
    DT_CHECK_MPI(MPI_Iallgather(mine, (int)n, t, all, (int)n, t, w->comm->mpi, &req));
    dt_world_wait_all(w, 1, &req, -1, what);
}

/* Every rank's key into a buffer of w->size keys of NODE_KEY bytes (free it): its host
 * name, and with `netns` also its network namespace as the kernel names it
 * ("net:[4026531840]"); mine gets this rank's. */
enum { NODE_KEY = MPI_MAX_PROCESSOR_NAME + 64 };
static char *gather_keys(const dt_world *w, int netns, char mine[NODE_KEY]) {
    memset(mine, 0, NODE_KEY);
    int len = 0;
    DT_CHECK_MPI(MPI_Get_processor_name(mine, &len));
    if (netns) {
        char ns[64] = "";
        const ssize_t got = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
        ns[got > 0 ? got : 0] = 0;
        snprintf(mine + strlen(mine), NODE_KEY - strlen(mine), " %s", ns);
    }
    char *all = malloc((size_t)NODE_KEY * (size_t)w->size);
    if (!all) dt_world_abort(w, "out of memory for the ranks' host names");
    dt_world_allgather(w, mine, all, NODE_KEY, DT_U8, "the ranks' host names");
    return all;
}

/* By host name, not MPI_Comm_split_type: emulated hosts (network namespaces) share the
 * machine's name and its cores, which is what the callers want counted, and Open MPI
 * 4.1's split by shared memory crashed there (TCP between ranks it thought local). */
void dt_world_hosts(const dt_world *w, int *local_ranks, int *spans_hosts) {
    char mine[NODE_KEY];
    char *all = gather_keys(w, 0, mine);
    int same = 0;
    for (int r = 0; r < w->size; r++) same += !strncmp(all + (size_t)r * NODE_KEY, mine, NODE_KEY);
    free(all);
    *local_ranks = same;
    double fewest = same;
    dt_world_allreduce_doubles(w, &fewest, 1, DT_REDUCE_MIN);
    *spans_hosts = (int)fewest < w->size;
}

int dt_world_split_nodes(const dt_world *w, dt_world *local, dt_world *cross) {
    char mine[NODE_KEY];
    char *all = gather_keys(w, 1, mine);
    int color = w->rank, nodes = 0;
    for (int r = 0; r < w->size; r++) {
        int first = 1; /* r is the first rank of its node */
        for (int q = 0; q < r && first; q++)
            first = strncmp(all + (size_t)q * NODE_KEY, all + (size_t)r * NODE_KEY, NODE_KEY) != 0;
        nodes += first;
        if (first && color == w->rank && !strncmp(all + (size_t)r * NODE_KEY, mine, NODE_KEY))
            color = r;
    }
    free(all);
    dt_world_split(w, color, w->rank, local);
    dt_world_split(w, local->rank, w->rank, cross);
    double sizes[2] = {local->size, -local->size}; /* fewest and most ranks a node */
    dt_world_allreduce_doubles(w, sizes, 2, DT_REDUCE_MIN);
    return sizes[0] == -sizes[1] ? nodes : 0;
}

void dt_world_library(char *out, size_t size) {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) text[0] = 0;
    text[strcspn(text, ",\n")] = 0; /* "Open MPI v4.1.4, package: ..." */
    snprintf(out, size, "%s", text[0] ? text : "MPI (version unknown)");
}

void dt_world_barrier(const dt_world *w, const char *what) {
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibarrier(w->comm->mpi, &req));
    dt_world_wait_all(w, 1, &req, -1, what);
}

void dt_world_send_bytes(const dt_world *w, const void *data, size_t n, int to, int tag,
                         const char *what) {
    MPI_Request req;
    DT_CHECK_MPI(MPI_Isend(data, (int)n, MPI_BYTE, to, tag, w->comm->mpi, &req));
    dt_world_wait_all(w, 1, &req, to, what);
}

void dt_world_recv_bytes(const dt_world *w, void *data, size_t n, int from, int tag,
                         const char *what) {
    MPI_Request req;
    DT_CHECK_MPI(MPI_Irecv(data, (int)n, MPI_BYTE, from, tag, w->comm->mpi, &req));
    dt_world_wait_all(w, 1, &req, from, what);
}

/* A dt_request holds an MPI_Request by value (copied in and out: no type punning). */
_Static_assert(sizeof(MPI_Request) <= sizeof(dt_request), "dt_request cannot hold an MPI_Request");

static void request_put(dt_request *req, MPI_Request r) {
    memset(req, 0, sizeof *req);
    memcpy(req->handle, &r, sizeof r);
}

static MPI_Request request_get(const dt_request *req) {
    MPI_Request r;
    memcpy(&r, req->handle, sizeof r);
    return r;
}

static int mpi_count(const dt_world *w, size_t n) {
    if (n > (size_t)1 << 30) dt_world_abort(w, "a message of %zu values is too long", n);
    return (int)n;
}

void dt_world_isend(const dt_world *w, const void *buf, size_t n, dt_dtype type, int to, int tag,
                    dt_request *req) {
    MPI_Request r;
    DT_CHECK_MPI(MPI_Isend(buf, mpi_count(w, n), dt_mpi_type(type), to, tag, w->comm->mpi, &r));
    request_put(req, r);
}

void dt_world_irecv(const dt_world *w, void *buf, size_t n, dt_dtype type, int from, int tag,
                    dt_request *req) {
    MPI_Request r;
    DT_CHECK_MPI(MPI_Irecv(buf, mpi_count(w, n), dt_mpi_type(type),
                           from == DT_ANY_SOURCE ? MPI_ANY_SOURCE : from,
                           tag == DT_ANY_TAG ? MPI_ANY_TAG : tag, w->comm->mpi, &r));
    request_put(req, r);
}

static void wait_requests(const dt_world *w, int n, dt_request *reqs, int peer, const char *what,
                          int nap) {
    enum { ON_STACK = 256 };
    MPI_Request stack[ON_STACK], *r = n <= ON_STACK ? stack : malloc(sizeof *r * (size_t)n);
    if (!r) dt_world_abort(w, "%s: out of memory for %d requests", what, n);
    for (int i = 0; i < n; i++) r[i] = request_get(&reqs[i]);
    wait_loop(w, n, r, peer, what, nap);
    for (int i = 0; i < n; i++) request_put(&reqs[i], r[i]); /* MPI_REQUEST_NULL now */
    if (r != stack) free(r);
}

void dt_world_wait(const dt_world *w, int n, dt_request *reqs, int peer, const char *what) {
    wait_requests(w, n, reqs, peer, what, 0);
}

void dt_world_wait_idle(const dt_world *w, int n, dt_request *reqs, int peer, const char *what) {
    wait_requests(w, n, reqs, peer, what, 1);
}

int dt_world_wait_message_idle(const dt_world *w, dt_request *req, dt_message *msg,
                               double limit_s) {
    poller p = poller_start(1);
    while (!dt_world_test(w, req, msg))
        if (poller_pause(&p, limit_s)) return 0;
    return 1;
}

void dt_world_cancel(const dt_world *w, dt_request *req) {
    (void)w;
    MPI_Request r = request_get(req);
    DT_CHECK_MPI(MPI_Cancel(&r));
    DT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    request_put(req, r);
}

int dt_world_test(const dt_world *w, dt_request *req, dt_message *msg) {
    (void)w;
    MPI_Request r = request_get(req);
    MPI_Status status;
    int done = 0;
    DT_CHECK_MPI(MPI_Test(&r, &done, &status));
    request_put(req, r);
    if (!done) return 0;
    if (msg) {
        int bytes = 0;
        DT_CHECK_MPI(MPI_Get_count(&status, MPI_BYTE, &bytes));
        msg->source = status.MPI_SOURCE;
        msg->tag = status.MPI_TAG;
        msg->bytes = (size_t)bytes;
    }
    return 1;
}
