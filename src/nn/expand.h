/* A parameter broadcast over the batch (ViT's class token, x.expand(N, -1, -1)):
 * every sample of y is the parameter; the parameter's gradient is the sum over the
 * batch. f32 or bf16 activations (one loop for both, nn/elem.h); the parameter f32. */
#ifndef DTRAIN_EXPAND_H
#define DTRAIN_EXPAND_H

#include <stddef.h>

#include "dtrain/dtype.h"

void dt_expand_forward(void *y, const float *param, dt_dtype dtype, int n, size_t per_sample);
/* dparam += sum over the n samples of dy, in sample order (any thread count alike). */
void dt_expand_backward(float *dparam, const void *dy, dt_dtype dtype, int n, size_t per_sample);

#endif
