/* Transpose: numpy.transpose of each sample of a value of any rank (the batch axis
 * stays first): output axis d is input axis perm[d]. Backward moves the gradient
 * back through the inverse permutation. One loop for f32 and bf16 (it moves
 * elements; bf16 rounds only where a gradient is added), blocked on the two axes
 * that trade places innermost. Memory: plain (NCHW-like) row-major in and out. */
#ifndef DTRAIN_TRANSPOSE_H
#define DTRAIN_TRANSPOSE_H

#include <stddef.h>

#include "dtrain/kernel.h"

/* out[n, ...] = in[n, ...] permuted: in has dims[0..rank) a sample, n samples;
 * add = 1 adds into out instead of writing it. elem_bytes 4 (f32) or 2 (bf16). */
void dt_transpose_run(void *out, const void *in, int n, int rank, const int *dims, const int *perm,
                      int add, size_t elem_bytes);

extern const dt_kernel dt_transpose_f32_kernel, dt_transpose_bf16_kernel;

#endif
