#include "nn/shortcut_pad.h"

#include <stddef.h>
#include <string.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"

void dt_shortcut_pad_forward(float *out, const float *in, int n, int c_in, int h, int w, int c_out,
                             int pad_lo, int stride) {
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    const size_t plane = (size_t)ho * wo;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < n * c_out; p++) {
        const int s = p / c_out, c = p % c_out - pad_lo;
        float *y = out + (size_t)p * plane;
        if (c < 0 || c >= c_in) { /* a zero channel: written every call, the buffer is reused */
            memset(y, 0, sizeof(float) * plane);
            continue;
        }
        const float *x = in + ((size_t)s * c_in + c) * h * w;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++)
                y[oy * wo + ox] = x[(size_t)oy * stride * w + (size_t)ox * stride];
    }
}

void dt_shortcut_pad_backward(float *din, const float *dout, int n, int c_in, int h, int w,
                              int c_out, int pad_lo, int stride) {
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    const size_t plane = (size_t)ho * wo;
    /* One input plane per iteration: each gradient element has one writer. */
#pragma omp parallel for schedule(static)
    for (int p = 0; p < n * c_in; p++) {
        const int s = p / c_in, c = p % c_in;
        float *dx = din + (size_t)p * h * w;
        const float *dy = dout + ((size_t)s * c_out + c + pad_lo) * plane;
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++)
                dx[(size_t)oy * stride * w + (size_t)ox * stride] += dy[oy * wo + ox];
    }
}

/* The op in the model graph: op->stride subsamples, op->pad zero channels go first. */

static void shortcut_pad_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_shortcut_pad_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in), n,
                            x->c, x->h, x->w, y->c, op->pad, op->stride);
}

static void shortcut_pad_op_backward(dt_model *m, dt_op *op, int n) {
    float *din = dt_model_value_grad(m, op->in);
    if (!din) return;
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_shortcut_pad_backward(din, dt_model_value_grad(m, op->out), n, x->c, x->h, x->w, y->c,
                             op->pad, op->stride);
}

const dt_op_class dt_shortcut_pad_op = {
    .name = "shortcut_pad",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_shortcut_pad_f32_kernel = {
    .kind = DT_OP_SHORTCUT_PAD,
    .name = "shortcut_pad.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = shortcut_pad_op_forward,
    .backward = shortcut_pad_op_backward,
};
