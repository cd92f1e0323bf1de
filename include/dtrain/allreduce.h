/* Sum all-reduce of float buffers across the ranks of the world, by one of:
 *   shm   through shared memory, when every rank is on one host (shm_allreduce.h);
 *   mpi   MPI_Iallreduce (Open MPI's own choice of algorithm);
 *   ring  reduce-scatter then all-gather around the ring of ranks over MPI
 *         point-to-point, each step cut into chunks so that the reduction of one
 *         chunk overlaps the transfer of the next (Horovod / Baidu ring);
 *   auto  shm where the ranks can share memory, else ring from DT_RING_MIN_BYTES up
 *         and mpi below (measured crossovers, see docs/distributed.md).
 * With a 16-bit wire format (--comm-dtype bf16|fp16, comm_dtype.h) the ring sends
 * half the bytes and is used at every size (MPI has no bf16/fp16 sum; shared memory
 * has nothing to gain from rounding).
 * Waits poll with a timeout: a peer that stops answering ends the job with one line. */
#ifndef DTRAIN_ALLREDUCE_H
#define DTRAIN_ALLREDUCE_H

#include <stddef.h>

#include "dtrain/comm_dtype.h"
#include "dtrain/error.h"
#include "dtrain/shm_allreduce.h"
#include "dtrain/world.h"

typedef enum dt_allreduce_algo {
    DT_ALLREDUCE_AUTO,
    DT_ALLREDUCE_MPI,
    DT_ALLREDUCE_RING,
    DT_ALLREDUCE_SHM,
} dt_allreduce_algo;

enum { DT_RING_MIN_BYTES = 1 << 16 };

typedef struct dt_allreduce {
    const dt_world *world;
    dt_allreduce_algo algo;
    dt_comm_dtype dtype;   /* on the wire; sums are fp32 */
    dt_shm_allreduce *shm; /* shm (asked, or chosen by auto), else NULL */
    char used[96];         /* what runs, and for auto why: for the run record */
    float *scratch;        /* one ring segment, [max_floats / size + 1] */
    size_t scratch_floats;
    uint16_t *wire_send, *wire_recv; /* 16-bit wire: one segment each, else NULL */
    size_t chunk_floats;             /* pipelining grain of the ring */
    long long bytes_sent; /* by this rank, cumulative (mpi: the ring's volume, a model) */
} dt_allreduce;

/* Refuses algo mpi or shm with a 16-bit dtype, and shm where the ranks cannot share
 * memory. Collective over w when algo is auto or shm (they look for shared memory). */
int dt_allreduce_init(dt_allreduce *ar, const dt_world *w, dt_allreduce_algo algo,
                      dt_comm_dtype dtype, size_t max_floats, dt_error *err);
/* Collective over the world when shared memory is in use. */
void dt_allreduce_free(dt_allreduce *ar);

/* In place: buf[0..n) becomes the element-wise sum over all ranks. */
void dt_allreduce_sum(dt_allreduce *ar, float *buf, size_t n);

int dt_allreduce_parse(const char *name, dt_allreduce_algo *algo);
const char *dt_allreduce_name(dt_allreduce_algo algo);

#endif
