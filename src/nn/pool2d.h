/* Max and average pooling over windows kh x kw, NCHW, with strides and pads per side
 * (ONNX's [top, left, bottom, right]) and PyTorch's ceil_mode; average pooling counts
 * the padding in its divisor or not (count_include_pad), or takes adaptive windows
 * (adaptive_avgpool2d.h). The windows' description below serves the bf16 kernels too
 * (exec/bf16_ops.c). Max pooling pads with -inf and saves the argmax for backward. */
#ifndef DTRAIN_POOL2D_H
#define DTRAIN_POOL2D_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/model.h"

static inline int dt_pool2d_out_size(int in, int kernel, int stride) {
    return (in - kernel) / stride + 1;
}

/* PyTorch's pooling_output_shape with a pad before (pad) and after (pad_end) the input:
 * in ceil mode a last partial window counts if it starts inside the input or its
 * leading padding. Below 1: the window does not fit. */
static inline int dt_pool2d_out_size_pads(int in, int kernel, int stride, int pad, int pad_end,
                                          int ceil_mode) {
    int span = in + pad + pad_end - kernel + (ceil_mode ? stride - 1 : 0);
    if (span < 0) return 0;
    int out = span / stride + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

static inline int dt_pool2d_out_size_padded(int in, int kernel, int stride, int pad,
                                            int ceil_mode) {
    return dt_pool2d_out_size_pads(in, kernel, stride, pad, pad, ceil_mode);
}

/* A pooling window's shape: kh x kw, its strides, its pads per side, ceil_mode. */
typedef struct dt_pool2d_geom {
    int kh, kw, stride_h, stride_w;
    int pad_top, pad_left, pad_bottom, pad_right;
    int ceil_mode;
} dt_pool2d_geom;

/* The square, symmetric window of the functions taking (kernel, stride, pad). */
static inline dt_pool2d_geom dt_pool2d_square(int kernel, int stride, int pad, int ceil_mode) {
    const dt_pool2d_geom g = {kernel, kernel, stride, stride, pad, pad, pad, pad, ceil_mode};
    return g;
}

static inline int dt_pool2d_geom_ho(const dt_pool2d_geom *g, int h) {
    return dt_pool2d_out_size_pads(h, g->kh, g->stride_h, g->pad_top, g->pad_bottom, g->ceil_mode);
}

static inline int dt_pool2d_geom_wo(const dt_pool2d_geom *g, int w) {
    return dt_pool2d_out_size_pads(w, g->kw, g->stride_w, g->pad_left, g->pad_right, g->ceil_mode);
}

/* A pooling op's window. */
static inline dt_pool2d_geom dt_op_pool_geom(const dt_op *op) {
    const dt_pool2d_geom g = {op->kh,         op->kw,        op->stride_h,
                              op->stride_w,   op->pad_top,   op->pad_left,
                              op->pad_bottom, op->pad_right, op->ceil_mode};
    return g;
}

/* Max pooling over any window; every window must hold an input pixel (pads below the
 * kernel's side). */
void dt_maxpool2d_forward_geom(float *out, int32_t *argmax, const float *in, int n, int c, int h,
                               int w, const dt_pool2d_geom *g, int in_blocked);
void dt_maxpool2d_backward_geom(float *din, const float *dout, const int32_t *argmax, int n, int c,
                                int h, int w, const dt_pool2d_geom *g, int in_blocked);

void dt_maxpool2d_forward(float *out,      /* [n, c, ho, wo] */
                          int32_t *argmax, /* [n, c, ho, wo] index into the input plane */
                          const float *in, /* [n, c, h, w] */
                          int n, int c, int h, int w, int kernel, int stride, int pad,
                          int ceil_mode);
/* Accumulates (+=) into din. */
void dt_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int n, int c,
                           int h, int w, int kernel, int stride, int pad, int ceil_mode);

/* PyTorch's adaptive pooling start_index / end_index: output cell i's first input row
 * and one past its last. */
static inline int dt_adaptive_start(int i, int in, int out) {
    return (int)(((long long)i * in) / out);
}

static inline int dt_adaptive_end(int i, int in, int out) {
    return (int)(((long long)(i + 1) * in + out - 1) / out);
}

/* The output windows along one axis, for the fp32 and bf16 pools alike: window o covers
 * inputs [start(o), end(o)), clipped to the input. Starts and ends never decrease with
 * o, so the windows covering input i form a range [lo, hi] that only moves forward as i
 * grows (dt_pool_cover_next). */
typedef struct dt_pool_windows {
    int adaptive; /* dt_adaptive_start/end over (in, out); else o*stride - pad, + kernel */
    int in, out, kernel, stride, pad;
    int pad_end;   /* the padding after the input (fixed windows) */
    int count_pad; /* count_include_pad: the divisor counts padded cells (not past pad_end) */
} dt_pool_windows;

static inline int dt_pool_win_start(const dt_pool_windows *w, int o) {
    if (w->adaptive) return dt_adaptive_start(o, w->in, w->out);
    const int s = o * w->stride - w->pad;
    return s < 0 ? 0 : s;
}

static inline int dt_pool_win_end(const dt_pool_windows *w, int o) {
    if (w->adaptive) return dt_adaptive_end(o, w->in, w->out);
    const int e = o * w->stride - w->pad + w->kernel;
    return e > w->in ? w->in : e;
}

/* The cells window o counts in its divisor: its input cells, or with count_pad those
 * of the padded input (PyTorch's avg_pool2d: the window clipped to in + pad_end). */
static inline int dt_pool_win_cells(const dt_pool_windows *w, int o) {
    if (w->adaptive || !w->count_pad) return dt_pool_win_end(w, o) - dt_pool_win_start(w, o);
    const int s = o * w->stride - w->pad, e = s + w->kernel;
    return (e > w->in + w->pad_end ? w->in + w->pad_end : e) - s;
}

/* Whether every window is kernel cells of input: fixed, unpadded and inside the input.
 * Such pools scale by 1/k^2 (inv), as they always have, bit for bit. */
static inline int dt_pool_win_uniform(const dt_pool_windows *w) {
    return !w->adaptive && w->pad == 0 && w->pad_end == 0 &&
           (w->out - 1) * w->stride + w->kernel <= w->in;
}

/* Moves [*lo, *hi] to the windows covering input i (i ascending from 0; start with
 * *lo = 0, *hi = -1). Empty when *hi < *lo. */
static inline void dt_pool_cover_next(const dt_pool_windows *w, int i, int *lo, int *hi) {
    while (*lo < w->out && dt_pool_win_end(w, *lo) <= i) (*lo)++;
    while (*hi + 1 < w->out && dt_pool_win_start(w, *hi + 1) <= i) (*hi)++;
}

/* 1/(ky kx) where both axes' windows are uniform, else 0: dt_pool_avg_scale's inv. */
static inline float dt_pool_avg_inv(const dt_pool_windows *wy, const dt_pool_windows *wx) {
    return dt_pool_win_uniform(wy) && dt_pool_win_uniform(wx)
               ? 1.0f / (float)(wy->kernel * wx->kernel)
               : 0.0f;
}

/* Average pooling's scale of window (oy, ox)'s sum (or of its output's gradient): uniform
 * windows times inv = 1/k^2, the others over their counted cells. One rule, so the fp32
 * and bf16 kernels give the same bits on the same inputs. */
static inline float dt_pool_avg_scale(const dt_pool_windows *wy, const dt_pool_windows *wx, int oy,
                                      int ox, float acc, float inv) {
    return inv != 0.0f ? acc * inv
                       : acc / (float)(dt_pool_win_cells(wy, oy) * dt_pool_win_cells(wx, ox));
}

/* The windows of an average pool along its two axes. */
void dt_avgpool2d_windows_of(const dt_pool2d_geom *g, int count_include_pad, int h, int w,
                             dt_pool_windows *wy, dt_pool_windows *wx);

/* Average pooling over windows wy x wx (fixed, or adaptive). The input
 * NCHW, or nChw16c when in_blocked (the same values per channel, summed in the same
 * order); the output NCHW. */
void dt_avgpool2d_windows_forward(float *out, const float *in, int n, int c,
                                  const dt_pool_windows *wy, const dt_pool_windows *wx,
                                  int in_blocked);
/* Accumulates (+=) into din (of the input's layout). */
void dt_avgpool2d_windows_backward(float *din, const float *dout, int n, int c,
                                   const dt_pool_windows *wy, const dt_pool_windows *wx,
                                   int in_blocked);

/* Fixed windows (kernel, stride), through the above. */
void dt_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int kernel,
                          int stride, int in_blocked);
void dt_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w, int kernel,
                           int stride, int in_blocked);

/* The same on nChw16c data (c a multiple of 16): the same values and argmax per
 * channel, argmax laid out as the output. */
void dt_maxpool2d_forward_blocked(float *out, int32_t *argmax, const float *in, int n, int c, int h,
                                  int w, int kernel, int stride, int pad, int ceil_mode);
void dt_maxpool2d_backward_blocked(float *din, const float *dout, const int32_t *argmax, int n,
                                   int c, int h, int w, int kernel, int stride, int pad,
                                   int ceil_mode);

#endif
