#include "dtrain/linear.h"

#include <cblas.h>

void dt_linear_forward(float *out, const float *in, const float *weight, const float *bias, int n,
                       int in_f, int out_f) {
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
