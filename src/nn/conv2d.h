/* 2-D convolution (cross-correlation as in PyTorch), NCHW, weight [c_out, c_in / groups,
 * kh, kw]; optionally dilated and grouped (output channels [g * c_out / groups, ...) read
 * input channels [g * c_in / groups, ...) only, as PyTorch's Conv2d(groups=...)).
 * Computed as im2col + sgemm over chunks of samples so that small feature maps still
 * make wide GEMMs; the chunk size is fixed by the shape, so results are reproducible. */
#ifndef DTRAIN_CONV2D_H
#define DTRAIN_CONV2D_H

#include <stddef.h>

typedef struct dt_conv2d_shape {
    int n, c_in, h_in, w_in;
    int c_out, kh, kw;
    int stride_h, stride_w;
    int pad_top, pad_left, pad_bottom, pad_right; /* zeros around the input */
    int dilation;     /* spacing of the kernel's taps: 1 is a plain convolution */
    int groups;       /* divides c_in and c_out */
    int h_out, w_out; /* filled by dt_conv2d_shape_make */
} dt_conv2d_shape;

/* Fills h_out/w_out (dilation and groups 1); returns 0, or -1 if the kernel does not
 * fit the padded input. */
int dt_conv2d_shape_make(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out, int kh,
                         int kw, int stride, int pad);
/* The same with a dilation and groups; -1 also if groups does not divide both channel
 * counts. */
int dt_conv2d_shape_make_grouped(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out,
                                 int kh, int kw, int stride, int pad, int dilation, int groups);

/* The same with strides per axis and pads {top, left, bottom, right}. */
int dt_conv2d_shape_make_rect(dt_conv2d_shape *s, int n, int c_in, int h_in, int w_in, int c_out,
                              int kh, int kw, int stride_h, int stride_w, const int pads[4],
                              int dilation, int groups);

/* Floats of scratch the forward and backward need for this shape. */
size_t dt_conv2d_workspace_floats(const dt_conv2d_shape *s);

void dt_conv2d_forward(float *out,          /* [n, c_out, h_out, w_out] */
                       const float *in,     /* [n, c_in, h_in, w_in] */
                       const float *weight, /* [c_out, c_in / groups, kh, kw] */
                       const float *bias,   /* [c_out] or NULL */
                       float *workspace,    /* dt_conv2d_workspace_floats(s) */
                       const dt_conv2d_shape *s);

/* Accumulates (+=) into din, dweight, dbias; din or dbias may be NULL. */
void dt_conv2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                        const float *in, const float *weight, float *workspace,
                        const dt_conv2d_shape *s);

#endif
