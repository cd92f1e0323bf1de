/* Softmax and log-softmax along one axis of a value of any rank: the value is rows of
 * [len, inner] (the axis, then the axes after it), and each of the len-long columns
 * (stride inner) is normalised: y = exp(x - max) / sum exp(x - max), or its log.
 * f32 or bf16 activations (dtype), one loop for both (nn/elem.h). */
#ifndef DTRAIN_SOFTMAX_H
#define DTRAIN_SOFTMAX_H

#include <stddef.h>

#include "dtrain/dtype.h"

void dt_softmax_forward(void *y,       /* [rows, len, inner] */
                        const void *x, /* [rows, len, inner] */
                        dt_dtype dtype, size_t rows, int len, int inner, int log_softmax);

/* dx += the gradient through y = softmax(x) (its output, which backward reads). */
void dt_softmax_backward(void *dx, const void *dy, const void *y, dt_dtype dtype, size_t rows,
                         int len, int inner, int log_softmax);

#endif
