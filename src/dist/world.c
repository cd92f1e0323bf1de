#include "dtrain/world.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
