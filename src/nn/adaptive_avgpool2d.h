/* Adaptive average pooling to a fixed output size (PyTorch's AdaptiveAvgPool2d), NCHW:
 * output cell (i, j) averages input rows floor(i*h/ho) .. ceil((i+1)*h/ho) - 1 and the
 * columns likewise, so any input of at least 1x1 gives ho x wo (cells may overlap or,
 * for a smaller input, repeat). */
#ifndef DTRAIN_ADAPTIVE_AVGPOOL2D_H
#define DTRAIN_ADAPTIVE_AVGPOOL2D_H

#include "nn/pool2d.h" /* dt_adaptive_start, dt_adaptive_end */

/* The input (and din) NCHW, or nChw16c when in_blocked (c a multiple of 16); the
 * output NCHW. */
void dt_adaptive_avgpool2d_forward(float *out,      /* [n, c, ho, wo] */
                                   const float *in, /* [n, c, h, w] */
                                   int n, int c, int h, int w, int ho, int wo, int in_blocked);
/* Accumulates (+=) into din. */
void dt_adaptive_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w,
                                    int ho, int wo, int in_blocked);

#endif
