/* The machine's sgemm peak as OpenBLAS reaches it: square 2048 GEMMs, best of 10,
 * at the thread count given. The yardstick for dtrain's achieved GFLOP/s.
 *   bench_sgemm_peak [THREADS]  ->  {"sgemm_gflops": X, "threads": T, "n": 2048} */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/blas_core.h"
#include "core/threads.h"
#include "core/timer.h"
#include "dtrain/error.h"

int main(int argc, char **argv) {
    dt_blas_core_fix(argv); /* the same kernels as dtrain gets */
    const int n = 2048;
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    dt_threads_set(threads);
    dt_error err;
    float *a = dt_alloc(sizeof(float) * n * n, "A", &err);
    float *b = dt_alloc(sizeof(float) * n * n, "B", &err);
    float *c = dt_alloc(sizeof(float) * n * n, "C", &err);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_sgemm_peak: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = (float)(i % 7) * 1e-3f;
        b[i] = (float)(i % 5) * 1e-3f;
    }
    double best = 1e30;
    for (int rep = 0; rep < 10; rep++) {
        double t0 = dt_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                    n);
        double dt = dt_now() - t0;
        if (dt < best) best = dt;
    }
    printf("{\"sgemm_gflops\":%.1f,\"threads\":%d,\"n\":%d,\"blas_core\":\"%s\"}\n",
           2.0 * n * n * n / best * 1e-9, threads, n, dt_blas_core_loaded());
    dt_free(a);
    dt_free(b);
    dt_free(c);
    return 0;
}
