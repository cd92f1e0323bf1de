#include "dtrain/dataset.h"

#include <stdio.h>
#include <string.h>

#include "dtrain/rng.h"

static const uint64_t SYNTHETIC_SEED = 20261122;

int dt_dataset_open(dt_dataset *ds, const char *spec, int train, dt_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->classes = 10;
    ds->seed = SYNTHETIC_SEED + (train ? 0 : 1);
    if (!strcmp(spec, "synthetic:mnist")) {
        ds->size = train ? 60000 : 10000;
        ds->c = 1;
        ds->h = ds->w = 28;
        ds->mean[0] = 0.1307f;
        ds->std[0] = 0.3081f;
    } else if (!strcmp(spec, "synthetic:cifar10")) {
        static const float mean[3] = {0.4914f, 0.4822f, 0.4465f};
        static const float std[3] = {0.2023f, 0.1994f, 0.2010f};
        ds->size = train ? 50000 : 10000;
        ds->c = 3;
        ds->h = ds->w = 32;
        memcpy(ds->mean, mean, sizeof mean);
        memcpy(ds->std, std, sizeof std);
    } else {
        return dt_error_set(err,
                            "unknown data spec '%s' (this build reads synthetic:mnist and "
                            "synthetic:cifar10)",
                            spec);
    }
    snprintf(ds->name, sizeof ds->name, "%s", spec);
    return 0;
}

void dt_dataset_close(dt_dataset *ds) {
    memset(ds, 0, sizeof *ds);
}

static int32_t synthetic_label(const dt_dataset *ds, int index) {
    dt_rng rng = dt_rng_make(ds->seed, (uint64_t)index);
    return (int32_t)dt_rng_below(&rng, (uint32_t)ds->classes);
}

/* A learnable image: a fixed random template per class (shared by both splits)
 * blended with per-sample noise, as uint8 pixels, then normalised like real data. */
static void synthetic_image(const dt_dataset *ds, int index, int32_t label, float *out) {
    const int plane = ds->h * ds->w;
    dt_rng noise = dt_rng_make(ds->seed, (uint64_t)index);
    dt_rng_next_u64(&noise); /* the label's draw */
    dt_rng tmpl = dt_rng_make(SYNTHETIC_SEED, (1ull << 40) + (uint64_t)label);
    for (int ch = 0; ch < ds->c; ch++) {
        for (int p = 0; p < plane; p++) {
            float t = dt_rng_uniform(&tmpl), u = dt_rng_uniform(&noise);
            float pixel = (float)(int)(255.0f * (0.6f * t + 0.4f * u)); /* uint8 as real data */
            out[ch * plane + p] = (pixel / 255.0f - ds->mean[ch]) / ds->std[ch];
        }
    }
}

void dt_dataset_get(const dt_dataset *ds, const int *indices, int n, float *x, int32_t *y) {
    const int sample = ds->c * ds->h * ds->w;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        int32_t label = synthetic_label(ds, indices[i]);
        y[i] = label;
        synthetic_image(ds, indices[i], label, x + (size_t)i * sample);
    }
}
