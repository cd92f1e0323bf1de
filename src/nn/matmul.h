/* Batched matrix product of two activations (attention's q k^T and p v):
 * c[t] = a[t] b[t] for t < batches, a [M, K], b [K, N], c [M, N] row-major, each a
 * GEMM (core/gemm), the batches spread over the threads (one GEMM each, so the result
 * does not depend on the thread count). f32 or bf16 activations (dtype): bf16 operands
 * are widened into the thread's scratch, multiplied in f32 and rounded once on store,
 * as a bf16 matmul with f32 accumulation does. */
#ifndef DTRAIN_MATMUL_H
#define DTRAIN_MATMUL_H

#include <stddef.h>

#include "dtrain/dtype.h"

/* Floats of scratch each thread needs for these shapes (0 for f32). */
size_t dt_matmul_scratch_floats(dt_dtype dtype, int m, int k, int n);

/* scratch: threads * dt_matmul_scratch_floats(...) floats; at most `threads` threads run. */
void dt_matmul_forward(void *c, const void *a, const void *b, dt_dtype dtype, size_t batches, int m,
                       int k, int n, float *scratch, int threads);

/* da += dc b^T, db += a^T dc (either may be NULL). */
void dt_matmul_backward(void *da, void *db, const void *dc, const void *a, const void *b,
                        dt_dtype dtype, size_t batches, int m, int k, int n, float *scratch,
                        int threads);

#endif
