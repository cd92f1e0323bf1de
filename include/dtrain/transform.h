/* Per-sample transforms with torchvision semantics, in this order:
 * RandomCrop(h, padding = crop_pad) with zero fill, RandomHorizontalFlip(0.5),
 * ToTensor (/255), Normalize(mean, std). The random draws of a sample depend only on
 * (seed, epoch, sample index), so any number of loader workers gives the same data. */
#ifndef DTRAIN_TRANSFORM_H
#define DTRAIN_TRANSFORM_H

#include <stdint.h>

#include "dtrain/dataset.h"

typedef struct dt_transform {
    int c, h, w;
    int crop_pad; /* 0: no random crop */
    int flip;     /* 1: random horizontal flip */
    float mean[3], std[3];
    uint64_t seed;
} dt_transform;

/* augment = 1 turns on RandomCrop(padding 4) + RandomHorizontalFlip. */
void dt_transform_init(dt_transform *t, const dt_dataset *ds, int augment, uint64_t seed);

/* src: [c, h, w] uint8 -> dst: [c, h, w] float. */
void dt_transform_apply(const dt_transform *t, const uint8_t *src, int epoch, int index,
                        float *dst);

/* Decodes samples indices[0..n) of ds into x [n, c, h, w] and y [n] (sequential;
 * scratch holds one sample's c*h*w bytes). */
void dt_transform_batch(const dt_transform *t, const dt_dataset *ds, const int *indices, int n,
                        int epoch, uint8_t *scratch, float *x, int32_t *y);

#endif
