/* Datasets: labelled images addressed by index, decoded to normalised float NCHW.
 * Every source (synthetic now; IDX and CIFAR-10 files in their own modules) fills the
 * same struct, so the sampler and loader need not know where images come from. */
#ifndef DTRAIN_DATASET_H
#define DTRAIN_DATASET_H

#include <stdint.h>

#include "dtrain/error.h"

typedef struct dt_dataset {
    char name[64];
    int size; /* number of samples */
    int c, h, w;
    int classes;
    float mean[3], std[3]; /* Normalize((x/255 - mean) / std) per channel */
    /* Synthetic source: sample i is a class template plus noise, generated from
     * (seed, i) on demand, so it is deterministic and needs no memory. */
    uint64_t seed;
} dt_dataset;

/* Opens the train (train = 1) or test split named by spec. Supported now:
 * synthetic:mnist (60,000 / 10,000 of 1x28x28) and synthetic:cifar10
 * (50,000 / 10,000 of 3x32x32). */
int dt_dataset_open(dt_dataset *ds, const char *spec, int train, dt_error *err);
void dt_dataset_close(dt_dataset *ds);

/* Writes samples indices[0..n) as normalised floats [n, c, h, w] and their labels. */
void dt_dataset_get(const dt_dataset *ds, const int *indices, int n, float *x, int32_t *y);

#endif
