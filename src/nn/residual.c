#include "dtrain/residual.h"

void dt_residual_add_forward(float *out, const float *a, const float *b, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) out[i] = a[i] + b[i];
}

void dt_residual_add_backward(float *da, float *db, const float *dout, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
