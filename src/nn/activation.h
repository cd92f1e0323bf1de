/* The elementwise activations (dtrain/activation.h) on flat arrays of f32 or bf16
 * (uint16_t) elements, any layout: one loop body for both element types, arithmetic
 * in f32 (a bf16 result rounded once, to nearest even). */
#ifndef DTRAIN_NN_ACTIVATION_H
#define DTRAIN_NN_ACTIVATION_H

#include <stddef.h>

#include "dtrain/activation.h"
#include "dtrain/dtype.h"

/* out[i] = f(in[i]); out == in (in place) or disjoint. dtype: DT_F32 or DT_BF16. */
void dt_activation_forward(const dt_activation *act, dt_dtype dtype, void *out, const void *in,
                           size_t count);
/* din[i] = f'(x[i]) * dout[i], or added to din (add = 1); x and y are what forward
 * read and wrote (sigmoid, tanh, clip, hardsigmoid and leaky_relu of a slope >= 0
 * take their derivative from y, the others from x). Arrays are disjoint, or in place
 * (dt_activation_runs_in_place): din == dout and x == y, add = 0. */
void dt_activation_backward(const dt_activation *act, dt_dtype dtype, void *din, const void *dout,
                            const void *x, const void *y, size_t count, int add);
/* FLOPs per element of forward and of backward (transcendentals counted as one). */
double dt_activation_forward_flops_per_element(dt_activation_fn fn);
double dt_activation_backward_flops_per_element(dt_activation_fn fn);

#endif
