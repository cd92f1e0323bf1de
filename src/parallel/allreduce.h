/* Sum all-reduce of float buffers across the ranks of the world, by one of:
 *   shm   through shared memory, when every rank is on one host (shm_allreduce.h);
 *   mpi   MPI's own all-reduce (Open MPI's choice of algorithm);
 *   ring  reduce-scatter then all-gather around the ring of ranks over MPI
 *         point-to-point, each step cut into chunks so that the reduction of one
 *         chunk overlaps the transfer of the next (Horovod / Baidu ring);
 *   hier  two levels, for ranks on several nodes with several a node (Horovod's
 *         hierarchical all-reduce, NCCL's tree in spirit): a reduce-scatter among the
 *         node's ranks (shared memory where MPI may use it, else the ring) leaves each
 *         with one of L segments summed over the node, local rank i all-reduces its
 *         segment with the ranks of local rank i on the other nodes (a ring over the
 *         nodes, L rings at once), and an all-gather in the node hands every rank the
 *         others' segments. Between H nodes: 2(H-1) steps where the flat ring over P = HL
 *         ranks takes 2(P-1), and 2(H-1)/H of the buffer out of each node against
 *         2(P-1)/P (ranks numbered node by node; L times that when they alternate).
 *         It needs as many ranks on every node;
 *   auto  measured, as Horovod's autotuning: for each call size (a DDP bucket) the
 *         candidates (shm where the ranks can share memory, hier where they span
 *         nodes with several ranks on each, ring, mpi) are timed on
 *         the first calls, the fastest is kept, and the size is measured again when
 *         its time shifts by more than 2x. Every rank makes the same choices (the
 *         timings are agreed over the ranks). With 2 ranks every algorithm gives the
 *         same bits; with 3 or more they sum in different orders, so a run's bits
 *         depend on the choice (name the algorithm for bit-reproducible runs).
 * With a 16-bit wire format (--comm-dtype bf16|fp16, comm_dtype.h) the ring sends
 * half the bytes and is used at every size (MPI has no bf16/fp16 sum; shared memory
 * has nothing to gain from rounding).
 * Waits poll with a timeout: a peer that stops answering ends the job with one line. */
#ifndef DTRAIN_ALLREDUCE_H
#define DTRAIN_ALLREDUCE_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/world.h"
#include "parallel/comm_dtype.h"
#include "parallel/shm_allreduce.h"

typedef enum dt_allreduce_algo {
    DT_ALLREDUCE_AUTO,
    DT_ALLREDUCE_MPI,
    DT_ALLREDUCE_RING,
    DT_ALLREDUCE_SHM,
    DT_ALLREDUCE_HIER,
} dt_allreduce_algo;

enum { DT_RING_MIN_BYTES = 1 << 16 };

enum { DT_AUTO_SIZES = 16, DT_AUTO_CANDIDATES = 4, DT_AUTO_SAMPLES = 5 };

/* --allreduce auto's measurements for the calls of one size (allreduce.c). */
typedef struct dt_allreduce_tuner {
    size_t floats;                         /* 0: unused */
    int chosen;                            /* index into candidates; -1 while measuring */
    int round, next;                       /* measuring: the round, the next candidate */
    int warmed;                            /* measuring: next's untimed first call is done */
    double best_s[DT_AUTO_CANDIDATES];     /* this measuring's best agreed time; < 0 dropped */
    double measured_s[DT_AUTO_CANDIDATES]; /* the last measuring's, for the record */
    double warm_s[DT_AUTO_CANDIDATES];     /* this measuring's warm-up calls */
    double chosen_s, watched_s;            /* the winner's time then, and its recent median */
    double window[DT_AUTO_SAMPLES];        /* the chosen one's timed calls, this rank */
    double tried_s[DT_AUTO_CANDIDATES];    /* watching: a close runner-up's one call, agreed */
    double spent_s;                        /* measuring: the counted calls' time, all candidates */
    long calls;
    int tunings; /* measurings done */
} dt_allreduce_tuner;

typedef struct dt_allreduce dt_allreduce;

/* hier's two levels (allreduce.c). */
typedef struct dt_allreduce_levels {
    dt_world local, cross;           /* this node's ranks; local rank i on every node */
    dt_allreduce *in_node, *between; /* over local (shm or ring), over cross (ring) */
    int nodes;
} dt_allreduce_levels;

struct dt_allreduce {
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
    dt_allreduce_algo candidates[DT_AUTO_CANDIDATES]; /* auto: what it measures */
    int n_candidates;
    dt_allreduce_tuner tuners[DT_AUTO_SIZES]; /* auto: one per call size, in order of first call */
    dt_allreduce_levels *levels;              /* hier (asked, or a candidate of auto), else NULL */
};

/* Refuses algo mpi or shm with a 16-bit dtype (hier sends it between nodes, so it
 * refuses one on a single node, where it would sum in fp32 only), shm where
 * the ranks cannot share memory, and hier where nodes hold different numbers of ranks.
 * Collective over w when algo is auto, shm or hier (they look for shared memory and
 * nodes). */
int dt_allreduce_init(dt_allreduce *ar, const dt_world *w, dt_allreduce_algo algo,
                      dt_comm_dtype dtype, size_t max_floats, dt_error *err);
/* Collective over the world when shared memory or hier's levels are in use. */
void dt_allreduce_free(dt_allreduce *ar);

/* In place: buf[0..n) becomes the element-wise sum over all ranks. */
void dt_allreduce_sum(dt_allreduce *ar, float *buf, size_t n);

/* auto: one call with candidate algo (shm, hier, ring or mpi; one not among auto's
 * candidates here aborts) on auto's own
 * resources, outside its tuning: what auto chooses from, timed on the same memory. */
void dt_allreduce_sum_with(dt_allreduce *ar, dt_allreduce_algo algo, float *buf, size_t n);
/* auto: whether the calls of n floats have a chosen algorithm yet, and which. */
int dt_allreduce_auto_chosen(const dt_allreduce *ar, size_t n, dt_allreduce_algo *algo);
/* auto: what was measured and chosen per call size, one line for the run log, e.g.
 * "44.7 MB: shm 5.1 ms, ring 12.3 ms, mpi 148.2 (dropped) ms, -> shm (...)". */
void dt_allreduce_auto_report(const dt_allreduce *ar, char *out, size_t size);

int dt_allreduce_parse(const char *name, dt_allreduce_algo *algo);
const char *dt_allreduce_name(dt_allreduce_algo algo);

#endif
