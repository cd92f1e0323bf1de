#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

int dt_sampler_init(dt_sampler *s, int size, int rank, int world, int shuffle, uint64_t seed,
                    dt_error *err) {
    memset(s, 0, sizeof *s);
    if (size < 1) return dt_error_set(err, "sampler: the dataset is empty");
    if (world < 1 || rank < 0 || rank >= world)
        return dt_error_set(err, "sampler: rank %d of %d is not valid", rank, world);
    s->size = size;
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->seed = seed;
    s->num_samples = (size + world - 1) / world;
    s->perm = malloc(sizeof(int) * (size_t)size);
    s->indices = malloc(sizeof(int) * (size_t)s->num_samples);
    if (!s->perm || !s->indices) {
        dt_sampler_free(s);
        return dt_error_set(err, "sampler: out of memory for %d indices", size);
    }
    return 0;
}

void dt_sampler_free(dt_sampler *s) {
    free(s->perm);
    free(s->indices);
    s->perm = s->indices = NULL;
}

const int *dt_sampler_epoch(dt_sampler *s, int epoch) {
    int count;
    return dt_sampler_epoch_from(s, epoch, 0, &count);
}

const int *dt_sampler_epoch_from(dt_sampler *s, int epoch, long start, int *count) {
    for (int i = 0; i < s->size; i++) s->perm[i] = i;
    if (s->shuffle) { /* Fisher-Yates keyed by (seed, epoch): the same on every rank */
        dt_rng rng = dt_rng_make(s->seed, 0x5a3d1e00ull + (uint64_t)epoch);
        for (int i = s->size - 1; i > 0; i--) {
            int j = (int)dt_rng_below(&rng, (uint32_t)(i + 1));
            int tmp = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = tmp;
        }
    }
    /* Position k of the padded list is perm[k mod size]; rank r takes k = r + i*world. */
    if (start < 0 || start > s->size) start = s->size;
    *count = (int)((s->size - start + s->world - 1) / s->world);
    if (start == 0) *count = s->num_samples;
    for (int i = 0; i < *count; i++) {
        long k = start + (long)s->rank + (long)i * s->world;
        s->indices[i] = s->perm[k % s->size];
    }
    return s->indices;
}
