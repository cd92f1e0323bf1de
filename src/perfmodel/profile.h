/* A model's measured per-op times, for the simulator (dtrain bench --profile-out,
 * read by dtrain simulate). One JSON file, the ops in forward (execution) order:
 *   {"profile": "dtrain-ops", "model": .., "width": .., "batch_size": .., "threads": ..,
 *    "steps": .., "params": .., "step_ms": .., "sgd_ms": .., "other_ms": ..,
 *    "ops": [{"name": .., "kind": .., "forward_ms": .., "backward_ms": ..,
 *             "param_offset": .., "param_count": ..}, ...]}
 * Times are per step: the means over the timed steps, scaled to add up to the median
 * step. param_offset/param_count: the range
 * of the gradient buffer an op's backward writes (floats; count 0 for ops without
 * parameters), which decides when a DDP bucket is complete. other_ms is the step time
 * not spent in ops or the update (loss, zeroing gradients). */
#ifndef DTRAIN_PROFILE_H
#define DTRAIN_PROFILE_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/model.h"

typedef struct dt_profile_op {
    char name[80], kind[32];
    double forward_s, backward_s;
    size_t param_offset, param_count;
} dt_profile_op;

/* A model's name as --model gave it: a zoo row or an ONNX file's path, never cut
 * (PATH_MAX bytes with its end: a longer path could not be opened). */
enum { DT_PROFILE_MODEL_MAX = 4096 };

typedef struct dt_profile {
    char model[DT_PROFILE_MODEL_MAX];
    int width, batch, threads;
    long steps;
    size_t params;
    double step_s, sgd_s, other_s; /* per step */
    dt_profile_op *ops;
    int n_ops;
} dt_profile;

/* From a model profiled over `steps` steps (dt_model_enable_profile), named `model`
 * (the --model given; -1 if longer than DT_PROFILE_MODEL_MAX - 1 bytes): mean_s and
 * median_s are the mean and median step times, sgd_s the mean update time. The per-op
 * means are scaled by median / mean so that they add up to the median step: on a
 * shared machine a few preempted steps inflate every mean (30-50% measured here). */
int dt_profile_from_model(dt_profile *p, const dt_model *m, const char *model, int width, int batch,
                          int threads, long steps, double mean_s, double median_s, double sgd_s,
                          dt_error *err);
int dt_profile_write(const dt_profile *p, const char *path, dt_error *err);
/* Reads and checks a profile (every field present, times >= 0 and finite, parameter
 * ranges inside params); err names the file and the field. */
int dt_profile_read(dt_profile *p, const char *path, dt_error *err);
void dt_profile_free(dt_profile *p);

#endif
