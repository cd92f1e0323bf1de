/* Adaptive average pooling to a fixed output size (PyTorch's AdaptiveAvgPool2d), NCHW:
 * output cell (i, j) averages input rows floor(i*h/ho) .. ceil((i+1)*h/ho) - 1 and the
 * columns likewise, so any input of at least 1x1 gives ho x wo (cells may overlap or,
 * for a smaller input, repeat). */
#ifndef DTRAIN_ADAPTIVE_AVGPOOL2D_H
#define DTRAIN_ADAPTIVE_AVGPOOL2D_H

/* PyTorch's start_index / end_index: the cell's first row and one past its last. */
static inline int dt_adaptive_start(int i, int in, int out) {
    return (int)(((long long)i * in) / out);
}

static inline int dt_adaptive_end(int i, int in, int out) {
    return (int)(((long long)(i + 1) * in + out - 1) / out);
}

void dt_adaptive_avgpool2d_forward(float *out,      /* [n, c, ho, wo] */
                                   const float *in, /* [n, c, h, w] */
                                   int n, int c, int h, int w, int ho, int wo);
/* Accumulates (+=) into din. */
void dt_adaptive_avgpool2d_backward(float *din, const float *dout, int n, int c, int h, int w,
                                    int ho, int wo);

/* The same with the input (and din) in nChw16c, c a multiple of 16; output NCHW. */
void dt_adaptive_avgpool2d_forward_blocked_in(float *out, const float *in, int n, int c, int h,
                                              int w, int ho, int wo);
void dt_adaptive_avgpool2d_backward_blocked_in(float *din, const float *dout, int n, int c, int h,
                                               int w, int ho, int wo);

#endif
