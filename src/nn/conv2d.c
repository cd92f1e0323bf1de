#include "nn/conv2d.h"

#include <cblas.h>
#include <string.h>

#include "dtrain/model.h"

/* GEMM width (output pixels of a chunk of samples) we aim for: narrower GEMMs waste
 * the sgemm kernel, wider ones only grow the im2col buffer. */
enum { TARGET_GEMM_COLS = 1024 };

int dt_conv2d_shape_make(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out, int kh,
                         int kw, int stride, int pad) {
    return dt_conv2d_shape_make_grouped(s, n, c_in, h_in, w_in, c_out, kh, kw, stride, pad, 1, 1);
}

int dt_conv2d_shape_make_grouped(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out,
                                 int kh, int kw, int stride, int pad, int dilation, int groups) {
    const int pads[4] = {pad, pad, pad, pad};
    return dt_conv2d_shape_make_rect(s, n, c_in, h_in, w_in, c_out, kh, kw, stride, stride, pads,
                                     dilation, groups);
}

int dt_conv2d_shape_make_rect(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out,
                              int kh, int kw, int stride_h, int stride_w, const int pads[4],
                              int dilation, int groups) {
    s->n = n;
    s->c_in = c_in;
    s->h_in = h_in;
    s->w_in = w_in;
    s->c_out = c_out;
    s->kh = kh;
    s->kw = kw;
    s->stride_h = stride_h;
    s->stride_w = stride_w;
    s->pad_top = pads[0];
    s->pad_left = pads[1];
    s->pad_bottom = pads[2];
    s->pad_right = pads[3];
    s->dilation = dilation;
    s->groups = groups;
    if (stride_h < 1 || stride_w < 1 || pads[0] < 0 || pads[1] < 0 || pads[2] < 0 || pads[3] < 0 ||
        kh < 1 || kw < 1 || dilation < 1 || groups < 1)
        return -1;
    if (c_in % groups || c_out % groups) return -1;
    /* the kernel's extent: taps dilation apart */
    const long long span_h = (long long)dilation * (kh - 1) + 1;
    const long long span_w = (long long)dilation * (kw - 1) + 1;
    const long long padded_h = (long long)h_in + pads[0] + pads[2],
                    padded_w = (long long)w_in + pads[1] + pads[3];
    if (padded_h < span_h || padded_w < span_w) return -1;
    s->h_out = (int)((padded_h - span_h) / stride_h + 1);
    s->w_out = (int)((padded_w - span_w) / stride_w + 1);
    return 0;
}

static int chunk_samples(const dt_conv2d_shape *s) {
    int pixels = s->h_out * s->w_out;
    int chunk = (TARGET_GEMM_COLS + pixels - 1) / pixels;
    if (chunk > s->n) chunk = s->n;
    return chunk < 1 ? 1 : chunk;
}

static int is_pointwise(const dt_conv2d_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_top == 0 &&
           s->pad_left == 0 && s->pad_bottom == 0 && s->pad_right == 0;
}

size_t dt_conv2d_workspace_floats(const dt_conv2d_shape *s) {
    size_t chunk = (size_t)chunk_samples(s);
    size_t cols = chunk * (size_t)(s->h_out * s->w_out);
    size_t k = (size_t)s->c_in * s->kh * s->kw;
    size_t col = k * cols; /* im2col, then dcol in backward */
    size_t gathered = chunk > 1 ? (size_t)s->c_out * cols : 0;
    return col + gathered;
}

/* col[(c*kh + i)*kw + j, m*P + p] = in[m, c, oy*stride_h - pad_top + i*dilation,
 *                                       ox*stride_w - pad_left + j*dilation]: the rows of
 * group g's input channels are one contiguous block. */
static void im2col(float *col, const float *in, int chunk, const dt_conv2d_shape *s) {
    const int P = s->h_out * s->w_out, cols = chunk * P;
    const int rows = s->c_in * s->kh * s->kw;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        int c = r / (s->kh * s->kw), i = (r / s->kw) % s->kh, j = r % s->kw;
        for (int m = 0; m < chunk; m++) {
            const float *plane = in + ((size_t)m * s->c_in + c) * s->h_in * s->w_in;
            float *dst = col + (size_t)r * cols + (size_t)m * P;
            for (int oy = 0; oy < s->h_out; oy++) {
                int y = oy * s->stride_h - s->pad_top + i * s->dilation;
                float *drow = dst + oy * s->w_out;
                if (y < 0 || y >= s->h_in) {
                    memset(drow, 0, sizeof(float) * s->w_out);
                    continue;
                }
                const float *srow = plane + (size_t)y * s->w_in;
                for (int ox = 0; ox < s->w_out; ox++) {
                    int x = ox * s->stride_w - s->pad_left + j * s->dilation;
                    drow[ox] = (x >= 0 && x < s->w_in) ? srow[x] : 0.0f;
                }
            }
        }
    }
}

/* Adds col back into din (the adjoint of im2col). Parallel over (sample, channel):
 * each writes its own plane, so no races and a fixed summation order. */
static void col2im_add(float *din, const float *col, int chunk, const dt_conv2d_shape *s) {
    const int P = s->h_out * s->w_out, cols = chunk * P;
#pragma omp parallel for schedule(static)
    for (int mc = 0; mc < chunk * s->c_in; mc++) {
        int m = mc / s->c_in, c = mc % s->c_in;
        float *plane = din + ((size_t)m * s->c_in + c) * s->h_in * s->w_in;
        for (int i = 0; i < s->kh; i++) {
            for (int j = 0; j < s->kw; j++) {
                const float *src =
                    col + ((size_t)(c * s->kh + i) * s->kw + j) * cols + (size_t)m * P;
                for (int oy = 0; oy < s->h_out; oy++) {
                    int y = oy * s->stride_h - s->pad_top + i * s->dilation;
                    if (y < 0 || y >= s->h_in) continue;
                    float *drow = plane + (size_t)y * s->w_in;
                    const float *srow = src + oy * s->w_out;
                    for (int ox = 0; ox < s->w_out; ox++) {
                        int x = ox * s->stride_w - s->pad_left + j * s->dilation;
                        if (x >= 0 && x < s->w_in) drow[x] += srow[ox];
                    }
                }
            }
        }
    }
}

void dt_conv2d_forward(float *out, const float *in, const float *weight, const float *bias,
                       float *workspace, const dt_conv2d_shape *s) {
    const int P = s->h_out * s->w_out, K = s->c_in * s->kh * s->kw;
    const int G = s->groups, Kg = K / G, cog = s->c_out / G; /* one group's GEMM */
    const int chunk_max = chunk_samples(s);
    const size_t in_sample = (size_t)s->c_in * s->h_in * s->w_in;
    const size_t out_sample = (size_t)s->c_out * P;
    for (int n0 = 0; n0 < s->n; n0 += chunk_max) {
        int chunk = s->n - n0 < chunk_max ? s->n - n0 : chunk_max;
        int cols = chunk * P;
        const float *x = in + (size_t)n0 * in_sample;
        const float *col = x;
        if (!(chunk == 1 && is_pointwise(s))) {
            im2col(workspace, x, chunk, s);
            col = workspace;
        }
        float *y = out + (size_t)n0 * out_sample;
        float *gemm_out = chunk == 1 ? y : workspace + (size_t)K * chunk_max * P;
        for (int g = 0; g < G; g++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, cols, Kg, 1.0f,
                        weight + (size_t)g * cog * Kg, Kg, col + (size_t)g * Kg * cols, cols, 0.0f,
                        gemm_out + (size_t)g * cog * cols, cols);
        }
        /* Scatter [c_out, chunk*P] to NCHW and add the bias. */
#pragma omp parallel for schedule(static)
        for (int mo = 0; mo < chunk * s->c_out; mo++) {
            int m = mo / s->c_out, o = mo % s->c_out;
            float b = bias ? bias[o] : 0.0f;
            float *dst = y + (size_t)m * out_sample + (size_t)o * P;
            const float *src = gemm_out + (size_t)o * cols + (size_t)m * P;
            if (src == dst) {
                if (bias)
                    for (int p = 0; p < P; p++) dst[p] += b;
            } else {
                for (int p = 0; p < P; p++) dst[p] = src[p] + b;
            }
        }
    }
}

void dt_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, float *workspace,
                        const dt_conv2d_shape *s) {
    const int P = s->h_out * s->w_out, K = s->c_in * s->kh * s->kw;
    const int G = s->groups, Kg = K / G, cog = s->c_out / G;
    const int chunk_max = chunk_samples(s);
    const size_t in_sample = (size_t)s->c_in * s->h_in * s->w_in;
    const size_t out_sample = (size_t)s->c_out * P;
    float *col_space = workspace;
    float *gathered = workspace + (size_t)K * chunk_max * P;
    if (dbias) {
        for (int m = 0; m < s->n; m++)
            for (int o = 0; o < s->c_out; o++) {
                const float *src = dout + (size_t)m * out_sample + (size_t)o * P;
                float acc = 0.0f;
                for (int p = 0; p < P; p++) acc += src[p];
                dbias[o] += acc;
            }
    }
    for (int n0 = 0; n0 < s->n; n0 += chunk_max) {
        int chunk = s->n - n0 < chunk_max ? s->n - n0 : chunk_max;
        int cols = chunk * P;
        const float *x = in + (size_t)n0 * in_sample;
        const float *dy = dout + (size_t)n0 * out_sample;
        const float *col = x;
        if (!(chunk == 1 && is_pointwise(s))) {
            im2col(col_space, x, chunk, s);
            col = col_space;
        }
        const float *g = dy;
        if (chunk > 1) {
#pragma omp parallel for schedule(static)
            for (int mo = 0; mo < chunk * s->c_out; mo++) {
                int m = mo / s->c_out, o = mo % s->c_out;
                memcpy(gathered + (size_t)o * cols + (size_t)m * P,
                       dy + (size_t)m * out_sample + (size_t)o * P, sizeof(float) * P);
            }
            g = gathered;
        }
        /* dweight[o, k] += sum_c g[o, c] * col[k, c], group by group; all of them before
         * dcol overwrites col */
        for (int gi = 0; gi < G; gi++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cog, Kg, cols, 1.0f,
                        g + (size_t)gi * cog * cols, cols, col + (size_t)gi * Kg * cols, cols, 1.0f,
                        dweight + (size_t)gi * cog * Kg, Kg);
        if (!din) continue;
        float *dx = din + (size_t)n0 * in_sample;
        /* dcol is din itself when pointwise: accumulate straight into it. */
        const int direct = chunk == 1 && is_pointwise(s);
        float *dcol = direct ? dx : col_space;
        for (int gi = 0; gi < G; gi++)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kg, cols, cog, 1.0f,
                        weight + (size_t)gi * cog * Kg, Kg, g + (size_t)gi * cog * cols, cols,
                        direct ? 1.0f : 0.0f, dcol + (size_t)gi * Kg * cols, cols);
        if (!direct) col2im_add(dx, col_space, chunk, s);
    }
}

/* The op in the model graph: its kernels (oneDNN, or the im2col above) are the
 * backend's (src/exec/exec.c); the row holds its cost. */

static double conv2d_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    double macs = (double)y->c * y->h * y->w * (x->c / op->groups) * op->kh * op->kw * n;
    return 2.0 * macs;
}

static double conv2d_op_flops(const dt_model *m, const dt_op *op, int n) {
    int passes = dt_model_value_needs_grad(m, op->in) ? 3 : 2; /* fwd, dweight, dinput */
    return conv2d_op_forward_flops(m, op, n) * passes;
}

const dt_op_class dt_conv2d_op = {
    .name = "conv2d",
    .flops = conv2d_op_flops,
    .forward_flops = conv2d_op_forward_flops,
};
