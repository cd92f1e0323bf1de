/* The int8 units' instruction peak: AVX-512 VNNI vpdpbusd (64 u8 x s8 multiply-adds per
 * instruction) on 16 independent accumulators per thread, so only the units' throughput
 * limits it; best of 5. The upper bound for any int8 kernel here (dtrain's achieved
 * GOP/s, oneDNN's GEMM in bench_int8_peak).
 *   bench_vnni_peak [THREADS]  ->  {"vnni_gops": X, "threads": T} */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

enum { CHAINS = 16 };

/* 2 x n x CHAINS x 64 multiply-adds on one thread; returns a checksum so that the
 * compiler keeps the work. Named accumulators, not an array: the compiler keeps them
 * in registers without moves between the instructions. */
#define DP(x) x = _mm512_dpbusd_epi32(x, a, b)
static int dot_products(long n) {
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
            c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
    for (long i = 0; i < n; i++) {
        DP(c0), DP(c1), DP(c2), DP(c3), DP(c4), DP(c5), DP(c6), DP(c7);
        DP(c8), DP(c9), DP(c10), DP(c11), DP(c12), DP(c13), DP(c14), DP(c15);
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    s = _mm512_add_epi32(s,
                         _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15)));
    return _mm512_reduce_add_epi32(s);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1) threads = 1;
    const long n = 10000000; /* per thread and run: 1.6e8 instructions */
    double best = 0.0;
    int sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += dot_products(n);
        const double gops = 2.0 * threads * n * CHAINS * 64 / (omp_get_wtime() - t0) * 1e-9;
        best = gops > best ? gops : best;
    }
    printf("{\"vnni_gops\":%.1f,\"threads\":%d,\"checksum\":%d}\n", best, threads, sink);
    return 0;
}
