#include "nn/dropout.h"

#include <string.h>

#include "core/rng.h"
#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* The scale of a kept element; p = 1 drops everything (PyTorch returns zeros). */
static float keep_scale(float p) {
    return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

static int keeps(dt_dropout_key key, size_t i, float p) {
    dt_rng rng = {key.seed, key.stream, key.counter + i};
    return dt_rng_uniform(&rng) >= p;
}

void dt_dropout_forward(float *out, const float *in, size_t count, float p, dt_dropout_key key) {
    const float scale = keep_scale(p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) out[i] = keeps(key, i, p) ? in[i] * scale : 0.0f;
}

void dt_dropout_backward(float *din, const float *dout, size_t count, float p, dt_dropout_key key) {
    const float scale = keep_scale(p);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++)
        if (keeps(key, i, p)) din[i] += dout[i] * scale;
}

/* The op in the model graph. Its mask in the t-th training forward comes from
 * (m->dropout_seed, the op's index, t * 2^40): one call never reaches 2^40 elements,
 * so calls and ops never share random numbers. Eval mode (and p = 0) is the identity. */

enum { CALL_SHIFT = 40 };

dt_dropout_key dt_dropout_op_key(const dt_model *m, const dt_op *op) {
    return (dt_dropout_key){m->dropout_seed, (uint64_t)(op - m->ops),
                            m->dropout_calls << CALL_SHIFT};
}

static void dropout_op_forward(dt_model *m, dt_op *op, int n) {
    float *out = dt_model_value_data(m, op->out);
    const float *in = dt_model_value_data(m, op->in);
    const size_t count = dt_model_value_floats(m, op->in, n);
    if (m->training && op->p > 0.0f)
        dt_dropout_forward(out, in, count, op->p, dt_dropout_op_key(m, op));
    else
        memcpy(out, in, sizeof(float) * count);
}

static void dropout_op_backward(dt_model *m, dt_op *op, int n) {
    float *din = dt_model_value_grad(m, op->in);
    if (!din) return;
    const float *dout = dt_model_value_grad(m, op->out);
    const size_t count = dt_model_value_floats(m, op->in, n);
    if (m->training && op->p > 0.0f) {
        dt_dropout_backward(din, dout, count, op->p, dt_dropout_op_key(m, op));
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) din[i] += dout[i];
}

/* No FLOPs counted: the counts are conv and linear multiply-adds. */
const dt_op_class dt_dropout_op = {
    .name = "dropout",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_dropout_f32_kernel = {
    .kind = DT_OP_DROPOUT,
    .name = "dropout.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = dropout_op_forward,
    .backward = dropout_op_backward,
};
