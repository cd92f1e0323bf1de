#include "dtrain/linear.h"

#include <math.h>
#include <stddef.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "dtrain/gemm.h"
#include "dtrain/model.h"

/* A classifier head (few outputs) makes a GEMM too thin for sgemm to pay for its
 * packing and threading; plain loops that the compiler vectorises are faster there
 * (logreg's whole step: 0.17 ms with sgemm). */
enum { NARROW_OUT = 16 };

/* out[i][o..o+4) for samples i and i + 1 at once: 8 dot products share each load of
 * the two inputs and the four weight rows (6 loads per 8 multiply-adds instead of 5 per
 * 4: the loop is load-bound). */
static void narrow_dot_2x4(float *y0, float *y1, const float *x0, const float *x1,
                           const float *weight, int in_f) {
    const float *w0 = weight, *w1 = w0 + in_f, *w2 = w1 + in_f, *w3 = w2 + in_f;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
    for (int k = 0; k < in_f; k++) {
        a0 += x0[k] * w0[k];
        a1 += x0[k] * w1[k];
        a2 += x0[k] * w2[k];
        a3 += x0[k] * w3[k];
        b0 += x1[k] * w0[k];
        b1 += x1[k] * w1[k];
        b2 += x1[k] * w2[k];
        b3 += x1[k] * w3[k];
    }
    y0[0] = a0, y0[1] = a1, y0[2] = a2, y0[3] = a3;
    y1[0] = b0, y1[1] = b1, y1[2] = b2, y1[3] = b3;
}

static void narrow_forward(float *out, const float *in, const float *weight, const float *bias,
                           int n, int in_f, int out_f) {
    /* pairs of samples; an odd last sample is paired with itself */
#pragma omp parallel for schedule(static)
    for (int pair = 0; pair < (n + 1) / 2; pair++) {
        const int i0 = 2 * pair, i1 = i0 + 1 < n ? i0 + 1 : i0;
        const float *x0 = in + (size_t)i0 * in_f, *x1 = in + (size_t)i1 * in_f;
        float *y0 = out + (size_t)i0 * out_f, *y1 = out + (size_t)i1 * out_f;
        int o = 0;
        for (; o + 4 <= out_f; o += 4)
            narrow_dot_2x4(y0 + o, y1 + o, x0, x1, weight + (size_t)o * in_f, in_f);
        for (; o < out_f; o++) {
            const float *w = weight + (size_t)o * in_f;
            float acc0 = 0.0f, acc1 = 0.0f;
#pragma omp simd reduction(+ : acc0, acc1)
            for (int k = 0; k < in_f; k++) {
                acc0 += x0[k] * w[k];
                acc1 += x1[k] * w[k];
            }
            y0[o] = acc0, y1[o] = acc1;
        }
        if (bias)
            for (o = 0; o < out_f; o++) {
                y0[o] += bias[o];
                if (i1 != i0) y1[o] += bias[o];
            }
    }
}

#ifdef __AVX2__
/* dweight[o0 .. o0 + NO)[k0 .. k0 + 16) += sum over samples of dout[i][o] * in[i][k], the
 * 2 x NO sums held in registers across all samples (NO is a constant where this is
 * inlined: 5 or 1). Per sample 2 + NO loads feed 2 NO multiply-adds, where row by row it
 * took 6 loads and a store per 4. */
static inline __attribute__((always_inline)) void
narrow_dweight_block(float *dweight, const float *dout, const float *in, int n, int in_f, int out_f,
                     int o0, int k0, const int NO) {
    __m256 acc[5][2];
    for (int j = 0; j < NO; j++) {
        acc[j][0] = _mm256_loadu_ps(dweight + (size_t)(o0 + j) * in_f + k0);
        acc[j][1] = _mm256_loadu_ps(dweight + (size_t)(o0 + j) * in_f + k0 + 8);
    }
    for (int i = 0; i < n; i++) {
        const float *x = in + (size_t)i * in_f + k0, *g = dout + (size_t)i * out_f + o0;
        const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
        for (int j = 0; j < NO; j++) {
            const __m256 gj = _mm256_broadcast_ss(g + j);
            acc[j][0] = _mm256_fmadd_ps(gj, x0, acc[j][0]);
            acc[j][1] = _mm256_fmadd_ps(gj, x1, acc[j][1]);
        }
    }
    for (int j = 0; j < NO; j++) {
        _mm256_storeu_ps(dweight + (size_t)(o0 + j) * in_f + k0, acc[j][0]);
        _mm256_storeu_ps(dweight + (size_t)(o0 + j) * in_f + k0 + 8, acc[j][1]);
    }
}
#endif

static void narrow_backward(float *din, float *dweight, const float *dout, const float *in,
                            const float *weight, int n, int in_f, int out_f) {
    /* dweight: each element sums its samples in order 0 .. n-1 onto its old value, one
     * multiply-add each, whichever thread owns it: the result does not depend on the
     * thread count. Threads split the columns (k), 16 at a time. */
#ifdef __AVX2__
    const int blocks = in_f / 16;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < blocks; b++) {
        int o = 0;
        for (; o + 5 <= out_f; o += 5)
            narrow_dweight_block(dweight, dout, in, n, in_f, out_f, o, 16 * b, 5);
        for (; o < out_f; o++)
            narrow_dweight_block(dweight, dout, in, n, in_f, out_f, o, 16 * b, 1);
    }
    const int k_done = 16 * blocks;
#else
    const int k_done = 0;
#endif
    for (int o = 0; o < out_f; o++) {
        float *dw = dweight + (size_t)o * in_f;
        for (int i = 0; i < n; i++) {
            const float g = dout[(size_t)i * out_f + o];
            const float *x = in + (size_t)i * in_f;
            for (int k = k_done; k < in_f; k++) dw[k] = fmaf(g, x[k], dw[k]);
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
    if (out_f <= NARROW_OUT) {
        if (dbias)
            for (int i = 0; i < n; i++)
                for (int o = 0; o < out_f; o++) dbias[o] += dout[(size_t)i * out_f + o];
        narrow_backward(din, dweight, dout, in, weight, n, in_f, out_f);
        return;
    }
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
