/* The MPI side of a world (world.h), for the files of src/parallel that implement
 * communication on MPI: world.c, and the all-reduce algorithms that post MPI messages
 * or share an MPI window themselves (allreduce.c, shm_allreduce.c). No other file
 * includes it, so no other file sees an MPI type. */
#ifndef DTRAIN_WORLD_MPI_H
#define DTRAIN_WORLD_MPI_H

#include <mpi.h>

#include "dtrain/world.h"

struct dt_comm {
    MPI_Comm mpi; /* MPI_COMM_WORLD for the process world, else owned by the world */
};

static inline MPI_Comm dt_world_mpi(const dt_world *w) {
    return w->comm->mpi;
}

static inline MPI_Datatype dt_mpi_type(dt_dtype type) {
    switch (type) {
    case DT_F32:
        return MPI_FLOAT;
    case DT_F64:
        return MPI_DOUBLE;
    case DT_S32:
        return MPI_INT32_T;
    case DT_S64:
        return MPI_INT64_T;
    case DT_BF16:
        return MPI_UINT16_T; /* moved, never summed by MPI */
    case DT_S8:
        return MPI_INT8_T;
    case DT_U8:
        return MPI_UINT8_T;
    default:
        return MPI_BYTE;
    }
}

/* Waits for n requests, polling; after the world's timeout with no completion the
 * job is aborted with a line naming `what` and the peer waited on (-1: any). */
void dt_world_wait_all(const dt_world *w, int n, MPI_Request *reqs, int peer, const char *what);

/* Checks an MPI return code: on failure aborts the job naming the call, the place
 * and MPI's own explanation. */
void dt_check_mpi(int code, const char *call, const char *file, int line);
#define DT_CHECK_MPI(call) dt_check_mpi((call), #call, __FILE__, __LINE__)

#endif
