#include "dtrain/linear.h"

#include <cblas.h>
#include <stddef.h>

#include "dtrain/model.h"

/* A classifier head (few outputs) makes a GEMM too thin for sgemm to pay for its
 * packing and threading; plain loops that the compiler vectorises are faster there
 * (logreg's whole step: 0.17 ms with sgemm). */
enum { NARROW_OUT = 16 };

/* Four outputs per pass over the input row: four independent accumulator chains
 * instead of one latency-bound reduction. */
static void narrow_forward(float *out, const float *in, const float *weight, const float *bias,
                           int n, int in_f, int out_f) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)i * in_f;
        float *y = out + (size_t)i * out_f;
        int o = 0;
        for (; o + 4 <= out_f; o += 4) {
            const float *w0 = weight + (size_t)o * in_f, *w1 = w0 + in_f, *w2 = w1 + in_f,
                        *w3 = w2 + in_f;
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (int k = 0; k < in_f; k++) {
                a0 += x[k] * w0[k];
                a1 += x[k] * w1[k];
                a2 += x[k] * w2[k];
                a3 += x[k] * w3[k];
            }
            y[o] = a0, y[o + 1] = a1, y[o + 2] = a2, y[o + 3] = a3;
        }
        for (; o < out_f; o++) {
            const float *w = weight + (size_t)o * in_f;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int k = 0; k < in_f; k++) acc += x[k] * w[k];
            y[o] = acc;
        }
        if (bias)
            for (o = 0; o < out_f; o++) y[o] += bias[o];
    }
}

static void narrow_backward(float *din, float *dweight, const float *dout, const float *in,
                            const float *weight, int n, int in_f, int out_f) {
    /* dweight: each thread owns whole rows, so the sum order is fixed; four samples per
     * pass over a row cut its loads and stores by four. */
#pragma omp parallel for schedule(static)
    for (int o = 0; o < out_f; o++) {
        float *dw = dweight + (size_t)o * in_f;
        int i = 0;
        for (; i + 4 <= n; i += 4) {
            const float g0 = dout[(size_t)i * out_f + o], g1 = dout[(size_t)(i + 1) * out_f + o];
            const float g2 = dout[(size_t)(i + 2) * out_f + o],
                        g3 = dout[(size_t)(i + 3) * out_f + o];
            const float *x0 = in + (size_t)i * in_f, *x1 = x0 + in_f, *x2 = x1 + in_f,
                        *x3 = x2 + in_f;
#pragma omp simd
            for (int k = 0; k < in_f; k++)
                dw[k] += g0 * x0[k] + g1 * x1[k] + g2 * x2[k] + g3 * x3[k];
        }
        for (; i < n; i++) {
            const float g = dout[(size_t)i * out_f + o];
            const float *x = in + (size_t)i * in_f;
#pragma omp simd
            for (int k = 0; k < in_f; k++) dw[k] += g * x[k];
        }
    }
    if (!din) return;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        float *dx = din + (size_t)i * in_f;
        for (int o = 0; o < out_f; o++) {
            const float g = dout[(size_t)i * out_f + o];
            const float *w = weight + (size_t)o * in_f;
#pragma omp simd
            for (int k = 0; k < in_f; k++) dx[k] += g * w[k];
        }
    }
}

void dt_linear_forward(float *out, const float *in, const float *weight, const float *bias, int n,
                       int in_f, int out_f) {
    if (out_f <= NARROW_OUT) {
        narrow_forward(out, in, weight, bias, n, in_f, out_f);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_f, in_f, 1.0f, in, in_f, weight,
                in_f, 0.0f, out, out_f);
    if (bias) {
        for (int i = 0; i < n; i++) {
            float *row = out + (size_t)i * out_f;
            for (int o = 0; o < out_f; o++) row[o] += bias[o];
        }
    }
}

void dt_linear_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, int n, int in_f, int out_f) {
    if (out_f <= NARROW_OUT) {
        if (dbias)
            for (int i = 0; i < n; i++)
                for (int o = 0; o < out_f; o++) dbias[o] += dout[(size_t)i * out_f + o];
        narrow_backward(din, dweight, dout, in, weight, n, in_f, out_f);
        return;
    }
    /* dweight[o, i] += sum_n dout[n, o] * in[n, i] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_f, in_f, n, 1.0f, dout, out_f, in,
                in_f, 1.0f, dweight, in_f);
    if (dbias) {
        for (int i = 0; i < n; i++) {
            const float *row = dout + (size_t)i * out_f;
            for (int o = 0; o < out_f; o++) dbias[o] += row[o];
        }
    }
    if (din) {
        /* din[n, i] += sum_o dout[n, o] * weight[o, i] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_f, out_f, 1.0f, dout, out_f,
                    weight, in_f, 1.0f, din, in_f);
    }
}

/* The op in the model graph: the input is read flat, [n, c*h*w]. */

static void linear_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_linear_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in),
                      dt_model_param(m, op->weight), dt_model_param(m, op->bias), n,
                      x->c * x->h * x->w, y->c);
}

static void linear_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_linear_backward(dt_model_value_grad(m, op->in), dt_model_param_grad(m, op->weight),
                       dt_model_param_grad(m, op->bias), dt_model_value_grad(m, op->out),
                       dt_model_value_data(m, op->in), dt_model_param(m, op->weight), n,
                       x->c * x->h * x->w, y->c);
}

static double linear_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    double macs = (double)y->c * x->c * x->h * x->w * n;
    return 2.0 * macs;
}

static double linear_op_flops(const dt_model *m, const dt_op *op, int n) {
    int passes = dt_model_value_needs_grad(m, op->in) ? 3 : 2; /* fwd, dweight, dinput */
    return linear_op_forward_flops(m, op, n) * passes;
}

const dt_op_class dt_linear_op = {
    .name = "linear",
    .forward = linear_op_forward,
    .backward = linear_op_backward,
    .flops = linear_op_flops,
    .forward_flops = linear_op_forward_flops,
};
