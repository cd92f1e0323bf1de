#include "dtrain/relu.h"

void dt_relu_forward(float *out, const float *in, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void dt_relu_backward(float *din, const float *dout, const float *out, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}
