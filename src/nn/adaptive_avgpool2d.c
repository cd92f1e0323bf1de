#include "nn/adaptive_avgpool2d.h"

#include <stddef.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/pool2d.h"

static void pool_forward(float *out, const float *in, int n, int c, int h, int w, int ho, int wo,
                         int blocked) {
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        size_t st;
        const float *x = in + dt_pool2d_plane_base(plane, c, h * w, blocked, &st);
        float *y = out + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = dt_adaptive_start(oy, h, ho), y1 = dt_adaptive_end(oy, h, ho);
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = dt_adaptive_start(ox, w, wo), x1 = dt_adaptive_end(ox, w, wo);
                float acc = 0.0f;
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) acc += x[(size_t)(i * w + j) * st];
                y[oy * wo + ox] = acc / (float)((y1 - y0) * (x1 - x0));
            }
        }
    }
}

static void pool_backward(float *din, const float *dout, int n, int c, int h, int w, int ho, int wo,
                          int blocked) {
    /* One plane per iteration: overlapping cells add into their own plane only. */
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        size_t st;
        float *dx = din + dt_pool2d_plane_base(plane, c, h * w, blocked, &st);
        const float *dy = dout + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = dt_adaptive_start(oy, h, ho), y1 = dt_adaptive_end(oy, h, ho);
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = dt_adaptive_start(ox, w, wo), x1 = dt_adaptive_end(ox, w, wo);
                const float g = dy[oy * wo + ox] / (float)((y1 - y0) * (x1 - x0));
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) dx[(size_t)(i * w + j) * st] += g;
            }
        }
    }
}

void dt_adaptive_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int ho,
                                   int wo) {
    pool_forward(out, in, n, c, h, w, ho, wo, 0);
}

void dt_adaptive_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w,
                                    int ho, int wo) {
    pool_backward(din, dout, n, c, h, w, ho, wo, 0);
}

void dt_adaptive_avgpool2d_forward_blocked_in(float *out, const float *in, int n, int c, int h,
                                              int w, int ho, int wo) {
    pool_forward(out, in, n, c, h, w, ho, wo, 1);
}

void dt_adaptive_avgpool2d_backward_blocked_in(float *din, const float *dout, int n, int c, int h,
                                               int w, int ho, int wo) {
    pool_backward(din, dout, n, c, h, w, ho, wo, 1);
}

/* The op in the model graph: the output size is the output value's shape. No FLOPs
 * counted: the counts are conv and linear multiply-adds (dtrain models, bench). */

static void adaptive_avgpool2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    pool_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in), n, x->c, x->h,
                 x->w, y->h, y->w, dt_model_value_blocked(m, op->in));
}

static void adaptive_avgpool2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    float *din = dt_model_value_grad(m, op->in);
    if (din)
        pool_backward(din, dt_model_value_grad(m, op->out), n, x->c, x->h, x->w, y->h, y->w,
                      dt_model_value_blocked(m, op->in));
}

const dt_op_class dt_adaptive_avgpool2d_op = {
    .name = "adaptive_avgpool2d",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_adaptive_avgpool2d_f32_kernel = {
    .kind = DT_OP_ADAPTIVE_AVGPOOL2D,
    .name = "adaptive_avgpool2d.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .forward = adaptive_avgpool2d_op_forward,
    .backward = adaptive_avgpool2d_op_backward,
};
