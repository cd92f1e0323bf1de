/* Max and average pooling over square windows, NCHW. Average pooling: no padding,
 * floor mode (PyTorch defaults), or adaptive windows (adaptive_avgpool2d.h); the
 * windows' description below serves the bf16 kernels too (exec/bf16_ops.c). Max
 * pooling also takes PyTorch's padding (as -inf) and ceil_mode, and saves the argmax
 * for backward. */
#ifndef DTRAIN_POOL2D_H
#define DTRAIN_POOL2D_H

#include <stddef.h>
#include <stdint.h>

static inline int dt_pool2d_out_size(int in, int kernel, int stride) {
    return (in - kernel) / stride + 1;
}

/* PyTorch's pooling_output_shape: in ceil mode a last partial window counts if it
 * starts inside the input or its left padding. Below 1: the window does not fit. */
static inline int dt_pool2d_out_size_padded(int in, int kernel, int stride, int pad,
                                            int ceil_mode) {
    int span = in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0);
    if (span < 0) return 0;
    int out = span / stride + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

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
 * inputs [start(o), end(o)). Starts and ends never decrease with o, so the windows
 * covering input i form a range [lo, hi] that only moves forward as i grows
 * (dt_pool_cover_next). */
typedef struct dt_pool_windows {
    int adaptive; /* dt_adaptive_start/end over (in, out); else o*stride - pad, + kernel */
    int in, out, kernel, stride, pad;
} dt_pool_windows;

static inline int dt_pool_win_start(const dt_pool_windows *w, int o) {
    return w->adaptive ? dt_adaptive_start(o, w->in, w->out) : o * w->stride - w->pad;
}

static inline int dt_pool_win_end(const dt_pool_windows *w, int o) {
    return w->adaptive ? dt_adaptive_end(o, w->in, w->out) : o * w->stride - w->pad + w->kernel;
}

/* Moves [*lo, *hi] to the windows covering input i (i ascending from 0; start with
 * *lo = 0, *hi = -1). Empty when *hi < *lo. */
static inline void dt_pool_cover_next(const dt_pool_windows *w, int i, int *lo, int *hi) {
    while (*lo < w->out && dt_pool_win_end(w, *lo) <= i) (*lo)++;
    while (*hi + 1 < w->out && dt_pool_win_start(w, *hi + 1) <= i) (*hi)++;
}

/* Average pooling's scale of a window's sum (or of its output's gradient): fixed windows
 * times inv = 1/k^2, adaptive ones over the window's cells. One rule, so the fp32 and
 * bf16 kernels give the same bits on the same inputs. */
static inline float dt_pool_avg_scale(int adaptive, float acc, int cells, float inv) {
    return adaptive ? acc / (float)cells : acc * inv;
}

/* Average pooling over windows wy x wx (fixed without padding, or adaptive). The input
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
