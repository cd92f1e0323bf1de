#include "nn/relu.h"

#include "dtrain/kernel.h"
#include "dtrain/model.h"

void dt_relu_forward(float *out, const float *in, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void dt_relu_backward(float *din, const float *dout, const float *out, size_t count) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < count; i++) din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

/* The op in the model graph runs in place: its output shares the input's storage
 * (and so its gradient), and backward masks by the output. */

static void relu_op_forward(dt_model *m, dt_op *op, int n) {
    dt_relu_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                    dt_model_value_floats(m, op->in, n));
}

static void relu_op_backward(dt_model *m, dt_op *op, int n) {
    float *din = dt_model_value_grad(m, op->in);
    if (din)
        dt_relu_backward(din, dt_model_value_grad(m, op->out), dt_model_value_data(m, op->out),
                         dt_model_value_floats(m, op->out, n));
}

const dt_op_class dt_relu_op = {
    .name = "relu",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_relu_f32_kernel = {
    .kind = DT_OP_RELU,
    .name = "relu.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .forward = relu_op_forward,
    .backward = relu_op_backward,
};
