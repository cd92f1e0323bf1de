#include "dtrain/transform.h"

#include <stddef.h>
#include <string.h>

#include "core/rng.h"

void dt_transform_init(dt_transform *t, const dt_dataset *ds, int augment, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->c = ds->c;
    t->h = ds->h;
    t->w = ds->w;
    t->crop_pad = augment ? 4 : 0;
    t->flip = augment;
    memcpy(t->mean, ds->mean, sizeof t->mean);
    memcpy(t->std, ds->std, sizeof t->std);
    t->seed = seed;
}

void dt_transform_apply(const dt_transform *t, const uint8_t *src, int epoch, int index,
                        float *dst) {
    int top = t->crop_pad, left = t->crop_pad, flip = 0;
    if (t->crop_pad || t->flip) {
        dt_rng rng =
            dt_rng_make(t->seed ^ 0x7f4a7c15ull, ((uint64_t)epoch << 32) | (uint32_t)index);
        /* torchvision: offsets uniform in [0, 2*pad], flip with probability 0.5 */
        if (t->crop_pad) {
            top = (int)dt_rng_below(&rng, (uint32_t)(2 * t->crop_pad + 1));
            left = (int)dt_rng_below(&rng, (uint32_t)(2 * t->crop_pad + 1));
        }
        if (t->flip) flip = dt_rng_uniform(&rng) < 0.5f;
    }
    const int plane = t->h * t->w;
    for (int ch = 0; ch < t->c; ch++) {
        const float scale = 1.0f / (255.0f * t->std[ch]), shift = -t->mean[ch] / t->std[ch];
        const uint8_t *s = src + (size_t)ch * plane;
        float *d = dst + (size_t)ch * plane;
        for (int y = 0; y < t->h; y++) {
            /* Output row y, column x reads padded row y + top, column x + left, i.e.
             * source row y + top - pad; padding is zero (normalises to shift). */
            int sy = y + top - t->crop_pad;
            float *drow = d + y * t->w;
            if (sy < 0 || sy >= t->h) {
                for (int x = 0; x < t->w; x++) drow[x] = shift;
                continue;
            }
            const uint8_t *srow = s + sy * t->w;
            for (int x = 0; x < t->w; x++) {
                int cx = flip ? t->w - 1 - x : x; /* flip after the crop */
                int sx = cx + left - t->crop_pad;
                drow[x] = (sx >= 0 && sx < t->w) ? srow[sx] * scale + shift : shift;
            }
        }
    }
}

void dt_transform_batch(const dt_transform *t, const dt_dataset *ds, const int *indices, int n,
                        int epoch, uint8_t *scratch, float *x, int32_t *y) {
    const size_t sample = (size_t)t->c * t->h * t->w;
    for (int i = 0; i < n; i++) {
        y[i] = dt_dataset_sample(ds, indices[i], scratch);
        dt_transform_apply(t, scratch, epoch, indices[i], x + (size_t)i * sample);
    }
}
