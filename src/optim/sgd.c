#include "dtrain/sgd.h"

int dt_sgd_init(dt_sgd *opt, size_t n, float lr, float momentum, float weight_decay,
                dt_error *err) {
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->n = n;
    opt->steps = 0;
    opt->velocity = NULL;
    if (momentum != 0.0f && !(opt->velocity = dt_alloc(sizeof(float) * n, "momentum buffers", err)))
        return -1;
    return 0;
}

void dt_sgd_free(dt_sgd *opt) {
    dt_free(opt->velocity);
    opt->velocity = NULL;
}

void dt_sgd_update_range(dt_sgd *opt, float *params, float *grads, size_t offset, size_t count) {
    const float lr = opt->lr, mu = opt->momentum, wd = opt->weight_decay;
    const int first = opt->steps == 0;
    float *p = params + offset, *g = grads + offset;
    float *v = opt->velocity ? opt->velocity + offset : NULL;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        float d = g[i] + wd * p[i];
        if (v) {
            v[i] = first ? d : mu * v[i] + d;
            d = v[i];
        }
        p[i] -= lr * d;
    }
}

void dt_sgd_step(dt_sgd *opt, float *params, float *grads) {
    dt_sgd_update_range(opt, params, grads, 0, opt->n);
    opt->steps++;
}
