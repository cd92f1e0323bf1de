#include "nn/linear.h"

#include <stddef.h>

#include "core/gemm.h"
#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* A classifier head over many inputs (logreg's 784 -> 10) makes out = in weight^T a GEMM
 * whose rows are too short to vectorise; out^T = weight in^T has rows of n and is faster
 * there (oneDNN sgemm, 2 threads, batch 128: 784 -> 10 in 16.8 against 19.1 us, logreg's
 * step 21-24% faster), but not over few inputs (84 -> 10: 7.1 against 6.4 us; 256 -> 10
 * even) nor at 16 outputs (512 -> 16: 37 against 14 us). */
enum { HEAD_MAX_OUT = 15, HEAD_MIN_IN = 512 };

static int is_head(int in_f, int out_f) {
    return out_f <= HEAD_MAX_OUT && in_f >= HEAD_MIN_IN;
}

size_t dt_linear_scratch_floats(int n, int in_f, int out_f) {
    return is_head(in_f, out_f) ? (size_t)n * (size_t)out_f : 0;
}

void dt_linear_forward(float *out, const float *in, const float *weight, const float *bias, int n,
                       int in_f, int out_f, float *scratch) {
    if (scratch && is_head(in_f, out_f)) {
        float *out_t = scratch; /* [out_f, n] */
        dt_sgemm(0, 1, out_f, n, in_f, 1.0f, weight, in_f, in, in_f, 0.0f, out_t, n);
        for (int i = 0; i < n; i++)
            for (int o = 0; o < out_f; o++)
                out[(size_t)i * out_f + o] = out_t[(size_t)o * n + i] + (bias ? bias[o] : 0.0f);
        return;
    }
    dt_sgemm(0, 1, n, out_f, in_f, 1.0f, in, in_f, weight, in_f, 0.0f, out, out_f);
    if (bias) {
        for (int i = 0; i < n; i++) {
            float *row = out + (size_t)i * out_f;
            for (int o = 0; o < out_f; o++) row[o] += bias[o];
        }
    }
}

void dt_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int n, int in_f, int out_f) {
    /* dweight[o, i] += sum_n dout[n, o] * in[n, i] */
    dt_sgemm(1, 0, out_f, in_f, n, 1.0f, dout, out_f, in, in_f, 1.0f, dweight, in_f);
    if (dbias) {
        for (int i = 0; i < n; i++) {
            const float *row = dout + (size_t)i * out_f;
            for (int o = 0; o < out_f; o++) dbias[o] += row[o];
        }
    }
    if (din) {
        /* din[n, i] += sum_o dout[n, o] * weight[o, i] */
        dt_sgemm(0, 0, n, in_f, out_f, 1.0f, dout, out_f, weight, in_f, 1.0f, din, in_f);
    }
}

/* The op in the model graph: the input read flat, [n, c*h*w], into a vector; or, for
 * an output of rank >= 2 (dt_model_linear_last_axis), over the last axis, one row per
 * position: [n, .., in] -> [n, .., out] is a GEMM of n * (the positions) rows. */
void dt_linear_op_geometry(const dt_model *m, const dt_op *op, int n, int *rows, int *in_f,
                           int *out_f) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    if (y->rank >= 2) {
        *in_f = x->dims[x->rank - 1];
        *out_f = y->dims[y->rank - 1];
        *rows = n * (int)(dt_model_value_floats(m, op->out, 1) / (size_t)*out_f);
    } else {
        *in_f = (int)dt_model_value_floats(m, op->in, 1); /* x read flat */
        *out_f = y->c;
        *rows = n;
    }
}

static size_t linear_op_scratch_floats(const dt_model *m, const dt_op *op, int n) {
    int rows, in_f, out_f;
    dt_linear_op_geometry(m, op, n, &rows, &in_f, &out_f);
    return dt_linear_scratch_floats(rows, in_f, out_f);
}

static int linear_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)err;
    *bytes += sizeof(float) * linear_op_scratch_floats(m, op, max_batch);
    return 0;
}

static int linear_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    const size_t floats = linear_op_scratch_floats(m, op, max_batch);
    if (!floats) return 0;
    op->state = dt_alloc(sizeof(float) * floats, "linear head scratch", err);
    return op->state ? 0 : -1;
}

static void linear_op_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_free(op->state);
    op->state = NULL;
}

static void linear_op_forward(dt_model *m, dt_op *op, int n) {
    int rows, in_f, out_f;
    dt_linear_op_geometry(m, op, n, &rows, &in_f, &out_f);
    dt_linear_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                      dt_model_param(m, op->weight), dt_model_param(m, op->bias), rows, in_f, out_f,
                      op->state);
}

static void linear_op_backward(dt_model *m, dt_op *op, int n) {
    int rows, in_f, out_f;
    dt_linear_op_geometry(m, op, n, &rows, &in_f, &out_f);
    dt_linear_backward(dt_model_value_grad(m, op->in), dt_model_param_grad(m, op->weight),
                       dt_model_param_grad(m, op->bias), dt_model_value_grad(m, op->out),
                       dt_model_value_data(m, op->in), dt_model_param(m, op->weight), rows, in_f,
                       out_f);
}

static double linear_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    int rows, in_f, out_f;
    dt_linear_op_geometry(m, op, n, &rows, &in_f, &out_f);
    double macs = (double)out_f * in_f * rows;
    return 2.0 * macs;
}

static double linear_op_flops(const dt_model *m, const dt_op *op, int n) {
    int passes = dt_model_value_needs_grad(m, op->in) ? 3 : 2; /* fwd, dweight, dinput */
    return linear_op_forward_flops(m, op, n) * passes;
}

const dt_op_class dt_linear_op = {
    .name = "linear",
    .flops = linear_op_flops,
    .forward_flops = linear_op_forward_flops,
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_linear_f32_kernel = {
    .kind = DT_OP_LINEAR,
    .name = "linear.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = linear_op_plan,
    .alloc = linear_op_alloc,
    .free = linear_op_free,
    .forward = linear_op_forward,
    .backward = linear_op_backward,
};
