#include "core/gemm.h"

#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

void dt_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta,
                   c, ldc) == dnnl_success)
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
