/* Max and average pooling over square windows, NCHW, no padding, floor mode
 * (PyTorch defaults). Max pooling saves the argmax for backward. */
#ifndef DTRAIN_POOL2D_H
#define DTRAIN_POOL2D_H

#include <stdint.h>

static inline int dt_pool2d_out_size(int in, int kernel, int stride) {
    return (in - kernel) / stride + 1;
}

void dt_maxpool2d_forward(float *out,      /* [n, c, ho, wo] */
                          int32_t *argmax, /* [n, c, ho, wo] index into the input plane */
                          const float *in, /* [n, c, h, w] */
                          int n, int c, int h, int w, int kernel, int stride);
/* Accumulates (+=) into din. */
void dt_maxpool2d_backward(float *din, const float *dout, const int32_t *argmax, int n, int c,
                           int h, int w, int kernel, int stride);

void dt_avgpool2d_forward(float *out, const float *in, int n, int c, int h, int w, int kernel,
                          int stride);
/* Accumulates (+=) into din. */
void dt_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w, int kernel,
                           int stride);

#endif
