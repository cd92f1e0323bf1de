/* torch.utils.data.DistributedSampler semantics, also on one process: shuffle all
 * indices with (seed, epoch), pad by repeating from the start to a multiple of the
 * process count, and give rank r every world-th index starting at r. Each rank sees
 * ceil(size / world) samples per epoch. */
#ifndef DTRAIN_SAMPLER_H
#define DTRAIN_SAMPLER_H

#include <stdint.h>

#include "dtrain/error.h"

typedef struct dt_sampler {
    int size, rank, world, shuffle;
    uint64_t seed;
    int num_samples; /* per rank: ceil(size / world) */
    int *perm;       /* [size], owned */
    int *indices;    /* [num_samples], owned: this rank's share of the epoch */
} dt_sampler;

int dt_sampler_init(dt_sampler *s, int size, int rank, int world, int shuffle, uint64_t seed,
                    dt_error *err);
void dt_sampler_free(dt_sampler *s);
/* This rank's indices for an epoch (s->num_samples of them). */
const int *dt_sampler_epoch(dt_sampler *s, int epoch);
/* The rest of an epoch after its first `start` positions of the padded list (what
 * every rank took before a checkpoint, whatever the process count was then), split
 * over this sampler's ranks the same way: rank r takes start + r + i*world. *count
 * gets how many (ceil((size - start) / world); start 0 is dt_sampler_epoch). */
const int *dt_sampler_epoch_from(dt_sampler *s, int epoch, long start, int *count);

#endif
