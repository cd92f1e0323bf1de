/* Layer normalization (ONNX's LayerNormalization, PyTorch's nn.LayerNorm): each of
 * `rows` rows of len values is normalised by its own mean and biased variance, then
 * scaled and shifted per position: y = (x - mean) / sqrt(var + eps) * weight + bias.
 * f32 or bf16 activations (dtype), one loop for both (nn/elem.h); weight, bias, the
 * saved statistics and the parameter gradients f32. */
#ifndef DTRAIN_LAYERNORM_H
#define DTRAIN_LAYERNORM_H

#include <stddef.h>

#include "dtrain/dtype.h"

void dt_layernorm_forward(void *y,             /* [rows, len] */
                          float *save_mean,    /* [rows] */
                          float *save_invstd,  /* [rows] */
                          const void *x,       /* [rows, len] */
                          const float *weight, /* [len] */
                          const float *bias,   /* [len] or NULL */
                          dt_dtype dtype, size_t rows, int len, float eps);

/* dx (may be NULL), dweight, dbias (may be NULL) += the gradients, from the forward's
 * saved statistics. The parameter gradients are summed over rows in row order, each
 * position by one thread: the same result at any thread count. */
void dt_layernorm_backward(void *dx, float *dweight, float *dbias, const void *dy, const void *x,
                           const float *save_mean, const float *save_invstd, const float *weight,
                           dt_dtype dtype, size_t rows, int len);

#endif
