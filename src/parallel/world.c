#include "dtrain/world.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtrain/timer.h"

int dt_world_init(dt_world *w, int *argc, char ***argv, dt_error *err) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized &&
        MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &w->thread_level) != MPI_SUCCESS)
        return dt_error_set(err, "MPI_Init_thread failed");
    if (initialized) MPI_Query_thread(&w->thread_level);
    if (w->thread_level < MPI_THREAD_SERIALIZED)
        return dt_error_set(err,
                            "this MPI grants thread level %d; dtrain's communication thread needs "
                            "MPI_THREAD_SERIALIZED",
                            w->thread_level);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    const char *timeout = getenv("DTRAIN_PEER_TIMEOUT");
    w->timeout_s = timeout ? atof(timeout) : 25.0;
    if (w->timeout_s <= 0) w->timeout_s = 25.0;
    return 0;
}

void dt_world_finalize(dt_world *w) {
    (void)w;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

void dt_world_abort(const dt_world *w, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "dtrain: rank %d: %s\n", w ? w->rank : -1, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void dt_check_mpi(int code, const char *call, const char *file, int line) {
    if (code == MPI_SUCCESS) return;
    char why[MPI_MAX_ERROR_STRING];
    int len = 0, rank = -1;
    MPI_Error_string(code, why, &len);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "dtrain: rank %d: %s failed at %s:%d: %s (a peer rank died?)\n", rank, call,
            file, line, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void dt_world_wait_all(const dt_world *w, int n, MPI_Request *reqs, int peer, const char *what) {
    double start = dt_now();
    long polls = 0;
    for (;;) {
        int done = 0;
        DT_CHECK_MPI(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
        if (done) return;
        if ((++polls & 1023) == 0) {
            if (dt_now() - start > w->timeout_s) {
                if (peer >= 0)
                    dt_world_abort(w, "%s: no progress with rank %d for %.0f s (it died or hangs)",
                                   what, peer, w->timeout_s);
                dt_world_abort(w, "%s: no progress for %.0f s (a rank died or hangs)", what,
                               w->timeout_s);
            }
            sched_yield(); /* let a rank sharing this core run */
        }
    }
}

void dt_world_allreduce_doubles(const dt_world *w, double *v, int n, MPI_Op op) {
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD, &req));
    dt_world_wait_all(w, 1, &req, -1, "epoch statistics");
}

void dt_world_broadcast_floats(const dt_world *w, float *v, size_t n) {
    const size_t piece = (size_t)1 << 28; /* MPI counts are ints */
    for (size_t off = 0; off < n; off += piece) {
        MPI_Request req;
        int count = (int)(n - off < piece ? n - off : piece);
        DT_CHECK_MPI(MPI_Ibcast(v + off, count, MPI_FLOAT, 0, MPI_COMM_WORLD, &req));
        dt_world_wait_all(w, 1, &req, 0, "broadcast of the initial weights");
    }
}
