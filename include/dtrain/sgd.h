/* SGD with momentum and weight decay, exactly torch.optim.SGD (dampening 0, no
 * Nesterov):  g += wd * p;  v = g on the first step, else v = mu * v + g;  p -= lr * v.
 * Works on the flat parameter buffer, or any offset range of it (one shard of a
 * parameter server), so the optimizer never needs per-layer copies. */
#ifndef DTRAIN_SGD_H
#define DTRAIN_SGD_H

#include <stddef.h>

#include "dtrain/error.h"

typedef struct dt_sgd {
    float lr, momentum, weight_decay;
    float *velocity; /* [n], owned */
    size_t n;
    long steps; /* completed steps; 0 means the next step initialises velocity */
} dt_sgd;

int dt_sgd_init(dt_sgd *opt, size_t n, float lr, float momentum, float weight_decay, dt_error *err);
void dt_sgd_free(dt_sgd *opt);

/* Updates params[offset .. offset+count) from grads of the same range (read only).
 * Does not count a step: the caller updates every range, then bumps opt->steps. */
void dt_sgd_update_range(dt_sgd *opt, float *params, float *grads, size_t offset, size_t count);
/* One whole step over all n parameters; counts the step. */
void dt_sgd_step(dt_sgd *opt, float *params, float *grads);

#endif
