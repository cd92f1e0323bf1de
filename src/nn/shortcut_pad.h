/* The parameter-free shortcut of the CIFAR ResNets (He et al. 2016, option A):
 * out = x[:, :, ::stride, ::stride] with zero channels added, pad_lo before and the
 * rest after, as PyTorch's F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, p, p)). NCHW. */
#ifndef DTRAIN_SHORTCUT_PAD_H
#define DTRAIN_SHORTCUT_PAD_H

/* Output side of a subsampled plane: every stride-th row from row 0 (ceil(h/stride)). */
static inline int dt_shortcut_pad_out_size(int in, int stride) {
    return (in - 1) / stride + 1;
}

void dt_shortcut_pad_forward(float *out,      /* [n, c_out, ho, wo] */
                             const float *in, /* [n, c_in, h, w] */
                             int n, int c_in, int h, int w, int c_out, int pad_lo, int stride);
/* Accumulates (+=) into din; the padded channels have no input and get nothing. */
void dt_shortcut_pad_backward(float *din,        /* [n, c_in, h, w] */
                              const float *dout, /* [n, c_out, ho, wo] */
                              int n, int c_in, int h, int w, int c_out, int pad_lo, int stride);

#endif
