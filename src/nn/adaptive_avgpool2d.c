#include "dtrain/adaptive_avgpool2d.h"

#include <stddef.h>

#include "dtrain/model.h"

void dt_adaptive_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int ho,
                                   int wo) {
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const float *x = in + (size_t)plane * h * w;
        float *y = out + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = dt_adaptive_start(oy, h, ho), y1 = dt_adaptive_end(oy, h, ho);
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = dt_adaptive_start(ox, w, wo), x1 = dt_adaptive_end(ox, w, wo);
                float acc = 0.0f;
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) acc += x[i * w + j];
                y[oy * wo + ox] = acc / (float)((y1 - y0) * (x1 - x0));
            }
        }
    }
}

void dt_adaptive_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w,
                                    int ho, int wo) {
    /* One plane per iteration: overlapping cells add into their own plane only. */
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        float *dx = din + (size_t)plane * h * w;
        const float *dy = dout + (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            const int y0 = dt_adaptive_start(oy, h, ho), y1 = dt_adaptive_end(oy, h, ho);
            for (int ox = 0; ox < wo; ox++) {
                const int x0 = dt_adaptive_start(ox, w, wo), x1 = dt_adaptive_end(ox, w, wo);
                const float g = dy[oy * wo + ox] / (float)((y1 - y0) * (x1 - x0));
                for (int i = y0; i < y1; i++)
                    for (int j = x0; j < x1; j++) dx[i * w + j] += g;
            }
        }
    }
}

/* The op in the model graph: the output size is the output value's shape. No FLOPs
 * counted: the counts are conv and linear multiply-adds (dtrain models, bench). */

static void adaptive_avgpool2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_adaptive_avgpool2d_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                                  n, x->c, x->h, x->w, y->h, y->w);
}

static void adaptive_avgpool2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    float *din = dt_model_value_grad(m, op->in);
    if (din)
        dt_adaptive_avgpool2d_backward(din, dt_model_value_grad(m, op->out), n, x->c, x->h, x->w,
                                       y->h, y->w);
}

const dt_op_class dt_adaptive_avgpool2d_op = {
    .name = "adaptive_avgpool2d",
    .forward = adaptive_avgpool2d_op_forward,
    .backward = adaptive_avgpool2d_op_backward,
};
