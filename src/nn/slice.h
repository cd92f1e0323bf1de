/* Copies along one axis of a value of any rank, whose samples are rows of
 * [len, inner] around the axis: a slice takes elements start, start + step, ...
 * (count of them) of the axis (ONNX's Slice and Split; a Gather of one index is a slice
 * of one that drops the axis); concat.h joins values along an axis. f32 or bf16 activations
 * (elem_size 4 or 2: copies, no arithmetic but the backward's sums). */
#ifndef DTRAIN_SLICE_H
#define DTRAIN_SLICE_H

#include <stddef.h>

#include "dtrain/dtype.h"

/* y [rows, count, inner] = x [rows, len, inner] at start + i * step. */
void dt_slice_forward(void *y, const void *x, dt_dtype dtype, size_t rows, int len, int inner,
                      int start, int count, int step);
/* dx += dy at the elements forward took. */
void dt_slice_backward(void *dx, const void *dy, dt_dtype dtype, size_t rows, int len, int inner,
                       int start, int count, int step);

#endif
