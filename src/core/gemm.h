/* The library's matrix product for the linear layers: oneDNN's sgemm. Its JIT kernels
 * use the widest vectors this CPU has, whichever kernels OpenBLAS loaded: on this AMD
 * EPYC (AVX-512) they ran the linear layers' shapes 1.7-2.2x faster than OpenBLAS's
 * Haswell kernels (the ones 0.3.21 loads on AMD CPUs) and 1.05-1.3x faster than its
 * SkylakeX kernels (docs/performance.md). It threads through OpenMP, so dt_threads_set
 * governs it as it does our loops. */
#ifndef DTRAIN_GEMM_H
#define DTRAIN_GEMM_H

/* Row-major C[m, n] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T as trans_a /
 * trans_b are 0 or 1; lda, ldb, ldc are the row strides of A, B, C as stored. Falls back
 * to OpenBLAS's cblas_sgemm if oneDNN refuses the call (it checks only the arguments),
 * so the product is always computed. */
void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);

#endif
