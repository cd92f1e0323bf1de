#include "nn/concat.h"

#include <stddef.h>
#include <string.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"

void dt_concat_part_forward(float *out, const float *in, size_t outer, int total, int offset,
                            int size, size_t inner) {
    const size_t block = (size_t)size * inner;
#pragma omp parallel for schedule(static)
    for (size_t o = 0; o < outer; o++)
        memcpy(out + (o * total + offset) * inner, in + o * block, sizeof(float) * block);
}

void dt_concat_part_backward(float *din, const float *dout, size_t outer, int total, int offset,
                             int size, size_t inner) {
    const size_t block = (size_t)size * inner;
#pragma omp parallel for schedule(static)
    for (size_t o = 0; o < outer; o++) {
        const float *dy = dout + (o * total + offset) * inner;
        float *dx = din + o * block;
        for (size_t i = 0; i < block; i++) dx[i] += dy[i];
    }
}

static int sum_of(const int *channels, int count) {
    int total = 0;
    for (int k = 0; k < count; k++) total += channels[k];
    return total;
}

void dt_concat_forward(float *out, const float *const *ins, const int *channels, int count, int n,
                       int hw) {
    const int total = sum_of(channels, count);
    for (int k = 0, offset = 0; k < count; offset += channels[k++])
        dt_concat_part_forward(out, ins[k], (size_t)n, total, offset, channels[k], (size_t)hw);
}

void dt_concat_backward(float *const *dins, const float *dout, const int *channels, int count,
                        int n, int hw) {
    const int total = sum_of(channels, count);
    for (int k = 0, offset = 0; k < count; offset += channels[k++])
        if (dins[k])
            dt_concat_part_backward(dins[k], dout, (size_t)n, total, offset, channels[k],
                                    (size_t)hw);
}

/* The op in the model graph: its inputs are dt_op_input(m, op, 0 .. n_ins), joined along
 * op->axis of each sample: outer = n times the axes before it, inner the axes after. */
void dt_concat_op_geometry(const dt_model *m, const dt_op *op, int n, size_t *outer, int *total,
                           size_t *inner) {
    const dt_value *y = &m->values[op->out];
    *outer = (size_t)n;
    *inner = 1;
    for (int d = 0; d < op->axis; d++) *outer *= (size_t)y->dims[d];
    for (int d = op->axis + 1; d < y->rank; d++) *inner *= (size_t)y->dims[d];
    *total = y->dims[op->axis];
}

static void concat_op_forward(dt_model *m, dt_op *op, int n) {
    size_t outer, inner;
    int total;
    dt_concat_op_geometry(m, op, n, &outer, &total, &inner);
    float *out = dt_model_value_data(m, op->out);
    for (int k = 0, offset = 0; k < op->n_ins; k++) {
        const int x = dt_op_input(m, op, k), size = m->values[x].dims[op->axis];
        dt_concat_part_forward(out, dt_model_value_data(m, x), outer, total, offset, size, inner);
        offset += size;
    }
}

static void concat_op_backward(dt_model *m, dt_op *op, int n) {
    size_t outer, inner;
    int total;
    dt_concat_op_geometry(m, op, n, &outer, &total, &inner);
    const float *dout = dt_model_value_grad(m, op->out);
    for (int k = 0, offset = 0; k < op->n_ins; k++) {
        const int x = dt_op_input(m, op, k), size = m->values[x].dims[op->axis];
        float *din = dt_model_value_grad(m, x);
        if (din) dt_concat_part_backward(din, dout, outer, total, offset, size, inner);
        offset += size;
    }
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
