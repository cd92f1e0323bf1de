#include "nn/expand.h"

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/elem.h"

static inline void expand_body(void *y, const float *param, int n, size_t per_sample, int bf16) {
#pragma omp parallel for schedule(static)
    for (int s = 0; s < n; s++)
        for (size_t j = 0; j < per_sample; j++)
            dt_elem_store(y, (size_t)s * per_sample + j, param[j], bf16);
}

static inline void expand_backward_body(float *dparam, const void *dy, int n, size_t per_sample,
                                        int bf16) {
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < per_sample; j++) {
        float sum = 0.0f;
        for (int s = 0; s < n; s++) sum += dt_elem_load(dy, (size_t)s * per_sample + j, bf16);
        dparam[j] += sum;
    }
}

void dt_expand_forward(void *y, const float *param, dt_dtype dtype, int n, size_t per_sample) {
    if (dtype == DT_BF16)
        expand_body(y, param, n, per_sample, 1);
    else
        expand_body(y, param, n, per_sample, 0);
}

void dt_expand_backward(float *dparam, const void *dy, dt_dtype dtype, int n, size_t per_sample) {
    if (dtype == DT_BF16)
        expand_backward_body(dparam, dy, n, per_sample, 1);
    else
        expand_backward_body(dparam, dy, n, per_sample, 0);
}

/* The op in the graph: its `in` is the model's input, read by no kernel here, so its
 * kernels go by the output's dtype alone. */

static void expand_op_forward(dt_model *m, dt_op *op, int n) {
    dt_expand_forward(dt_model_value_ptr(m, op->out), dt_model_param(m, op->weight),
                      dt_model_value_dtype(m, op->out), n, dt_model_value_floats(m, op->out, 1));
}

static void expand_op_backward(dt_model *m, dt_op *op, int n) {
    dt_expand_backward(dt_model_param_grad(m, op->weight), dt_model_value_grad_ptr(m, op->out),
                       dt_model_value_dtype(m, op->out), n, dt_model_value_floats(m, op->out, 1));
}

static int expand_accepts_f32(const dt_model *m, const dt_op *op) {
    return dt_model_value_dtype(m, op->out) == DT_F32;
}

static int expand_accepts_bf16(const dt_model *m, const dt_op *op) {
    return dt_model_value_dtype(m, op->out) == DT_BF16;
}

const dt_op_class dt_expand_param_op = {.name = "expand_param"};

const dt_kernel dt_expand_param_f32_kernel = {
    .kind = DT_OP_EXPAND_PARAM,
    .name = "expand_param.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .accepts = expand_accepts_f32,
    .forward = expand_op_forward,
    .backward = expand_op_backward,
};

const dt_kernel dt_expand_param_bf16_kernel = {
    .kind = DT_OP_EXPAND_PARAM,
    .name = "expand_param.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .accepts = expand_accepts_bf16,
    .forward = expand_op_forward,
    .backward = expand_op_backward,
};
