#include "nn/adaptive_avgpool2d.h"

#include <stddef.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/pool2d.h"

/* Adaptive windows through pool2d.c's loops: the same sums, in the same order, over
 * the window's cells. */
void dt_adaptive_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int ho,
                                   int wo, int in_blocked) {
    const dt_pool_windows wy = {1, h, ho, 0, 0, 0, 0, 0}, wx = {1, w, wo, 0, 0, 0, 0, 0};
    dt_avgpool2d_windows_forward(out, in, n, c, &wy, &wx, in_blocked);
}

void dt_adaptive_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w,
                                    int ho, int wo, int in_blocked) {
    const dt_pool_windows wy = {1, h, ho, 0, 0, 0, 0, 0}, wx = {1, w, wo, 0, 0, 0, 0, 0};
    dt_avgpool2d_windows_backward(din, dout, n, c, &wy, &wx, in_blocked);
}

/* The op in the model graph: the output size is the output value's shape. No FLOPs
 * counted: the counts are conv and linear multiply-adds (dtrain models, bench). */

static void adaptive_avgpool2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_adaptive_avgpool2d_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                                  n, x->c, x->h, x->w, y->h, y->w,
                                  dt_model_value_blocked(m, op->in));
}

static void adaptive_avgpool2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    float *din = dt_model_value_grad(m, op->in);
    if (din)
        dt_adaptive_avgpool2d_backward(din, dt_model_value_grad(m, op->out), n, x->c, x->h, x->w,
                                       y->h, y->w, dt_model_value_blocked(m, op->in));
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
