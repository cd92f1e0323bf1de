/* Max and average pooling over square windows, NCHW. Average pooling: no padding,
 * floor mode (PyTorch defaults). Max pooling also takes PyTorch's padding (as -inf)
 * and ceil_mode, and saves the argmax for backward. */
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

/* Where plane (sample, channel) = `plane` of an [n, c, h, w] input starts and how
 * far apart its pixels are (*step): NCHW, or nChw16c ([n, c/16, h, w, 16], c a
 * multiple of 16) when blocked. */
static inline size_t dt_pool2d_plane_base(int plane, int c, int hw, int blocked, size_t *step) {
    *step = blocked ? 16 : 1;
    if (!blocked) return (size_t)plane * hw;
    const int m = plane / c, ch = plane % c;
    return ((size_t)m * (c / 16) + ch / 16) * hw * 16 + ch % 16;
}

/* The input NCHW, or nChw16c when in_blocked (the same values per channel, summed in
 * the same order); the output NCHW. */
void dt_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int kernel,
                          int stride, int in_blocked);
/* Accumulates (+=) into din (of the input's layout). */
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
