/* The batched matrix product of two bf16 activations (attention's q k^T and p v) on
 * oneDNN's bf16 matmul with batch dimensions: c[t] = a[t] b[t], a [M, K], b [K, N],
 * bf16 operands, f32 accumulation, one rounding on store; backward adds
 * (da += dc b^T, db += a^T dc) through the matmul's sum post-op, the transposes as
 * strided views (no copies). The graph's side is its kernel row, dt_matmul_bf16_kernel. */
#ifndef DTRAIN_BF16_MATMUL_H
#define DTRAIN_BF16_MATMUL_H

#include <stddef.h>

#include "dtrain/error.h"

typedef struct dt_dnnl dt_dnnl;
typedef struct dt_bf16_bmm dt_bf16_bmm;

/* Primitives for up to max_batches matrices (and one other count, made on first use). */
int dt_bf16_bmm_create(dt_bf16_bmm **bmm, dt_dnnl *ctx, int max_batches, int m, int k, int n,
                       dt_error *err);
void dt_bf16_bmm_destroy(dt_bf16_bmm *bmm);
void dt_bf16_bmm_forward(dt_bf16_bmm *bmm, int batches, void *c, const void *a, const void *b);
/* da, db: either may be NULL. */
void dt_bf16_bmm_backward(dt_bf16_bmm *bmm, int batches, void *da, void *db, const void *dc,
                          const void *a, const void *b);

#endif
