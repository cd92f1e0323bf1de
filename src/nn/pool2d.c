#include "dtrain/pool2d.h"

#include <stddef.h>

void dt_maxpool2d_forward(float *out, int32_t *argmax, const float *in, int n, int c, int h, int w,
                          int kernel, int stride) {
    const int ho = dt_pool2d_out_size(h, kernel, stride),
              wo = dt_pool2d_out_size(w, kernel, stride);
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const float *x = in + (size_t)plane * h * w;
        float *y = out + (size_t)plane * ho * wo;
        int32_t *am = argmax + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                int best = oy * stride * w + ox * stride;
                for (int i = 0; i < kernel; i++)
                    for (int j = 0; j < kernel; j++) {
                        int idx = (oy * stride + i) * w + ox * stride + j;
                        /* first maximum wins, and NaN propagates, as in PyTorch */
                        if (x[idx] > x[best] || x[idx] != x[idx]) best = idx;
                    }
                y[oy * wo + ox] = x[best];
                am[oy * wo + ox] = best;
            }
    }
}

void dt_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int n, int c,
                           int h, int w, int kernel, int stride) {
    const int ho = dt_pool2d_out_size(h, kernel, stride),
              wo = dt_pool2d_out_size(w, kernel, stride);
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        float *dx = din + (size_t)plane * h * w;
        const float *dy = dout + (size_t)plane * ho * wo;
        const int32_t *am = argmax + (size_t)plane * ho * wo;
        for (int o = 0; o < ho * wo; o++) dx[am[o]] += dy[o];
    }
}

void dt_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int kernel,
                          int stride) {
    const int ho = dt_pool2d_out_size(h, kernel, stride),
              wo = dt_pool2d_out_size(w, kernel, stride);
    const float inv = 1.0f / (float)(kernel * kernel);
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const float *x = in + (size_t)plane * h * w;
        float *y = out + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                float acc = 0.0f;
                for (int i = 0; i < kernel; i++)
                    for (int j = 0; j < kernel; j++)
                        acc += x[(oy * stride + i) * w + ox * stride + j];
                y[oy * wo + ox] = acc * inv;
            }
    }
}

void dt_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w, int kernel,
                           int stride) {
    const int ho = dt_pool2d_out_size(h, kernel, stride),
              wo = dt_pool2d_out_size(w, kernel, stride);
    const float inv = 1.0f / (float)(kernel * kernel);
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        float *dx = din + (size_t)plane * h * w;
        const float *dy = dout + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++) {
                float g = dy[oy * wo + ox] * inv;
                for (int i = 0; i < kernel; i++)
                    for (int j = 0; j < kernel; j++)
                        dx[(oy * stride + i) * w + ox * stride + j] += g;
            }
    }
}
