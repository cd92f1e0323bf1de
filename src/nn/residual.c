#include "nn/residual.h"

#include "dtrain/kernel.h"
#include "dtrain/model.h"

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

/* The op in the model graph: out = in + in2. */

static void add_op_forward(dt_model *m, dt_op *op, int n) {
    dt_residual_add_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                            dt_model_value_data(m, op->in2), dt_model_value_floats(m, op->out, n));
}

static void add_op_backward(dt_model *m, dt_op *op, int n) {
    dt_residual_add_backward(dt_model_value_grad(m, op->in), dt_model_value_grad(m, op->in2),
                             dt_model_value_grad(m, op->out), dt_model_value_floats(m, op->out, n));
}

const dt_op_class dt_add_op = {
    .name = "add",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_add_f32_kernel = {
    .kind = DT_OP_ADD,
    .name = "add.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .forward = add_op_forward,
    .backward = add_op_backward,
};
