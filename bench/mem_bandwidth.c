/* The machine's memory bandwidth as a memcpy reaches it: each of THREADS OpenMP threads
 * copies its slice of a MIB-MiB buffer (default 256: far beyond the caches) into another,
 * best pass of at least 10 (and at least 0.4 s of passes). Bytes moved count the read and
 * the write (2 x the buffer per pass), as a layer's traffic is counted (what it reads plus
 * what it writes). The yardstick for memory-bound layers (depthwise convolutions,
 * elementwise ops) in bench/onnx_models.sh.
 *   bench_mem_bandwidth [THREADS] [MIB]
 *     ->  {"memcpy_gbs": X, "threads": T, "mib": M, "passes": P} */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"
#include "core/timer.h"

int main(int argc, char **argv) {
    long threads = 2, mib = 256;
    dt_error err = {0};
    if (argc > 3) {
        fprintf(stderr, "dtrain bench_mem_bandwidth: usage: bench_mem_bandwidth [THREADS] [MIB]\n");
        return 2;
    }
    if ((argc > 1 && dt_parse_long("THREADS", argv[1], 1, 1024, &threads, &err) != 0) ||
        (argc > 2 && dt_parse_long("MIB", argv[2], 1, 65536, &mib, &err) != 0)) {
        fprintf(stderr, "dtrain bench_mem_bandwidth: %s\n", err.msg);
        return 2;
    }
    size_t bytes = (size_t)mib << 20;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        fprintf(stderr, "dtrain bench_mem_bandwidth: cannot allocate 2 x %ld MiB\n", mib);
        free(src);
        free(dst);
        return 1;
    }
    omp_set_num_threads((int)threads);
    /* First touch by the copying threads, so each slice's pages are where it is copied. */
#pragma omp parallel
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        size_t lo = bytes / (size_t)n * (size_t)t,
               hi = t == n - 1 ? bytes : bytes / (size_t)n * (size_t)(t + 1);
        memset(src + lo, 1, hi - lo);
        memset(dst + lo, 0, hi - lo);
    }
    double best = 1e30, spent = 0;
    int passes = 0;
    while (passes < 10 || spent < 0.4) {
        double t0 = dt_now();
#pragma omp parallel
        {
            int t = omp_get_thread_num(), n = omp_get_num_threads();
            size_t lo = bytes / (size_t)n * (size_t)t,
                   hi = t == n - 1 ? bytes : bytes / (size_t)n * (size_t)(t + 1);
            memcpy(dst + lo, src + lo, hi - lo);
        }
        double dt = dt_now() - t0;
        spent += dt;
        if (dt < best) best = dt;
        passes++;
    }
    /* Read the copy so the compiler keeps it. */
    if (dst[bytes - 1] != 1) {
        fprintf(stderr, "dtrain bench_mem_bandwidth: the copy did not arrive\n");
        free(src);
        free(dst);
        return 1;
    }
    printf("{\"memcpy_gbs\": %.2f, \"threads\": %ld, \"mib\": %ld, \"passes\": %d}\n",
           2.0 * (double)bytes / best / 1e9, threads, mib, passes);
    free(src);
    free(dst);
    return 0;
}
