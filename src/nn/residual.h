/* Residual addition out = a + b (same shape), the join of a ResNet block. */
#ifndef DTRAIN_RESIDUAL_H
#define DTRAIN_RESIDUAL_H

#include <stddef.h>

void dt_residual_add_forward(float *out, const float *a, const float *b, size_t count);
/* Accumulates dout into both da and db. */
void dt_residual_add_backward(float *da, float *db, const float *dout, size_t count);

#endif
