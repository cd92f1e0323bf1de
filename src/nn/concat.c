#include "nn/concat.h"

#include <stddef.h>
#include <string.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"

void dt_concat_forward(float *out, const float *const *ins, const int *channels, int count, int n,
                       int hw) {
    int total = 0;
    for (int k = 0; k < count; k++) total += channels[k];
#pragma omp parallel for schedule(static)
    for (int s = 0; s < n; s++) {
        float *y = out + (size_t)s * total * hw;
        for (int k = 0; k < count; k++) {
            const size_t block = (size_t)channels[k] * hw;
            memcpy(y, ins[k] + (size_t)s * block, sizeof(float) * block);
            y += block;
        }
    }
}

void dt_concat_backward(float *const *dins, const float *dout, const int *channels, int count,
                        int n, int hw) {
    int total = 0;
    for (int k = 0; k < count; k++) total += channels[k];
#pragma omp parallel for schedule(static)
    for (int s = 0; s < n; s++) {
        const float *dy = dout + (size_t)s * total * hw;
        for (int k = 0; k < count; k++) {
            const size_t block = (size_t)channels[k] * hw;
            if (dins[k]) {
                float *dx = dins[k] + (size_t)s * block;
                for (size_t i = 0; i < block; i++) dx[i] += dy[i];
            }
            dy += block;
        }
    }
}

/* The op in the model graph: its inputs are op->ins[0 .. n_ins). */

static void concat_op_forward(dt_model *m, dt_op *op, int n) {
    const float *ins[DT_OP_MAX_INPUTS];
    int channels[DT_OP_MAX_INPUTS];
    for (int k = 0; k < op->n_ins; k++) {
        ins[k] = dt_model_value_data(m, op->ins[k]);
        channels[k] = m->values[op->ins[k]].c;
    }
    const dt_value *y = &m->values[op->out];
    dt_concat_forward(dt_model_value_data(m, op->out), ins, channels, op->n_ins, n, y->h * y->w);
}

static void concat_op_backward(dt_model *m, dt_op *op, int n) {
    float *dins[DT_OP_MAX_INPUTS];
    int channels[DT_OP_MAX_INPUTS];
    for (int k = 0; k < op->n_ins; k++) {
        dins[k] = dt_model_value_grad(m, op->ins[k]);
        channels[k] = m->values[op->ins[k]].c;
    }
    const dt_value *y = &m->values[op->out];
    dt_concat_backward(dins, dt_model_value_grad(m, op->out), channels, op->n_ins, n, y->h * y->w);
}

/* No FLOPs counted: a copy (the counts are conv and linear multiply-adds). */
const dt_op_class dt_concat_op = {
    .name = "concat",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_concat_f32_kernel = {
    .kind = DT_OP_CONCAT,
    .name = "concat.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = concat_op_forward,
    .backward = concat_op_backward,
};
