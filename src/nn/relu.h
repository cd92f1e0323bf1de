/* Rectified linear unit, elementwise; may run in place (out == in). */
#ifndef DTRAIN_RELU_H
#define DTRAIN_RELU_H

#include <stddef.h>

void dt_relu_forward(float *out, const float *in, size_t count);
/* din = dout * (out > 0); works in place (din == dout), which is how the model graph
 * uses it: the gradient of an in-place ReLU is masked where it lies. */
void dt_relu_backward(float *din, const float *dout, const float *out, size_t count);

#endif
