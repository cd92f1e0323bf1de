/* Sum all-reduce between ranks of one host through shared memory (an MPI-3 shared
 * window), with no MPI message on the data path.
 *
 * The buffer goes in rounds of a few MiB; round k is cut into one segment per rank.
 * Each rank copies the segments others own into its slots of the window, reduces its
 * own segment from every rank's slot in rank order (so each sum is computed once and
 * every rank gets the same bits), publishes it, and copies the others' reduced
 * segments back. Ranks signal through three counters each (posted, reduced, done),
 * and two sets of slots let round k+1 start while peers still read round k. Per rank
 * this moves what a ring moves on a single-copy transport, (P-1)/P of the buffer in
 * and out, without the ring's P-1 steps of message matching.
 *
 * Waits on a peer's counter give up after the world's timeout, ending the job with a
 * line naming the rank: a dead peer never hangs the job. */
#ifndef DTRAIN_SHM_ALLREDUCE_H
#define DTRAIN_SHM_ALLREDUCE_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/world.h"

typedef struct dt_shm_allreduce dt_shm_allreduce;

/* Collective over w. 0: *out is ready. 1: the ranks cannot share memory here (not one
 * host, MPI told not to use shared memory, or no unified shared window); err says
 * why and *out is NULL. -1: out of memory. */
int dt_shm_allreduce_create(dt_shm_allreduce **out, const dt_world *w, dt_error *err);

/* Collective over the world given at creation: frees the window. NULL is a no-op. */
void dt_shm_allreduce_destroy(dt_shm_allreduce *s);

/* In place: buf[0..n) becomes the element-wise sum over all ranks. Every rank calls
 * it with the same n, in the same order as the others. */
void dt_shm_allreduce_sum(dt_shm_allreduce *s, float *buf, size_t n);

/* What a rank does to its reduced segment before the others copy it (hier's step
 * between nodes): segment[0..count) in place, the same count on the ranks of the same
 * rank index on every node. */
typedef void (*dt_shm_segment_fn)(void *ctx, float *segment, size_t count);
/* dt_shm_allreduce_sum as a reduce-scatter, then `between` on each rank's reduced
 * segment of each round, then an all-gather of the segments so changed: with
 * between == NULL, the sum. */
void dt_shm_allreduce_sum_between(dt_shm_allreduce *s, float *buf, size_t n,
                                  dt_shm_segment_fn between, void *ctx);

/* Floats per round (tests shrink it to cover many rounds on small buffers). At
 * least one per rank; takes effect at the next call, set on every rank alike. */
void dt_shm_allreduce_set_round(dt_shm_allreduce *s, size_t floats);

/* Whether a wait on a peer that lasts over 1 ms may sleep (nanosleep naps) instead of
 * yielding the core. Default: only where this host's ranks outnumber its cores. */
void dt_shm_allreduce_set_naps(dt_shm_allreduce *s, int naps);
/* How long a wait spins before it yields the core. Default: 100 us, or 64 polls only
 * where this host's ranks outnumber its cores. */
void dt_shm_allreduce_set_spin(dt_shm_allreduce *s, double seconds);

/* Where a rank's time went in dt_shm_allreduce_sum, and how far its waits on peers
 * went: every wait spins, then yields the core, then (ranks outnumbering cores) naps. */
enum {
    DT_SHM_WAIT_FREE, /* for the peers to finish reading the slot set (two rounds ago) */
    DT_SHM_COPY_IN,   /* copying the others' segments into this rank's slots */
    DT_SHM_WAIT_IN,   /* for the peers' values */
    DT_SHM_REDUCE,    /* summing this rank's segment */
    DT_SHM_WAIT_OUT,  /* for the peers' sums */
    DT_SHM_COPY_OUT,  /* copying the peers' sums back */
    DT_SHM_PHASES
};
typedef struct dt_shm_stats {
    long calls, rounds;
    long waits;       /* waits on a peer not over at the first poll */
    long yield_waits; /* ... that reached the yield phase */
    long nap_waits;   /* ... that reached the nap phase */
    long naps;        /* nanosleep calls */
    double t_wait, longest_wait;
    double t_phase[DT_SHM_PHASES];
} dt_shm_stats;

/* This rank's figures since creation or the last reset. */
void dt_shm_allreduce_stats(dt_shm_allreduce *s, dt_shm_stats *out, int reset);

/* Segment i of n values cut into `parts` nearly equal pieces, each piece's length a
 * multiple of `align` (the last shorter; trailing ones may be empty): its first index
 * and length. The ring all-reduce cuts with align 1, the shared-memory one with cache
 * lines of floats. */
void dt_allreduce_segment(size_t n, int parts, int i, size_t align, size_t *begin, size_t *count);

/* Whether MPI's shared-memory transport is allowed by the MCA setting `btl` (the value
 * of OMPI_MCA_btl; NULL: not set, allowed). dtrain's emulated hosts set "self,tcp" so
 * that their ranks talk over the shaped links: dtrain must not bypass them either. */
int dt_shm_allowed_by_btl(const char *btl);

#endif
