/* ReduceMean: the mean of a value over some of its per-sample axes (dt_op.axes), kept
 * as extent 1 or dropped (the memory is the same). Its loops are written once over an
 * element load and store (broadcast.h) for f32 and bf16 activations; the f32 kernel is
 * reduce_mean.c's, the bf16 one (bf16_kernels.c) runs the same functions. */
#ifndef DTRAIN_REDUCE_MEAN_H
#define DTRAIN_REDUCE_MEAN_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/model.h"

int dt_reduce_mean_kernel_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err);
void dt_reduce_mean_kernel_free(dt_model *m, dt_op *op);
/* out = the means (written); backward adds dout / count into the input's gradient. */
void dt_reduce_mean_kernel_forward(dt_model *m, dt_op *op, int n);
void dt_reduce_mean_kernel_backward(dt_model *m, dt_op *op, int n);

#endif
