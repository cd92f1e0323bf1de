/* The machine's int8, bf16 and fp32 peaks as oneDNN reaches them: inner products of
 * n x n x n at the thread count given, best call of at least 10 (and at least 0.4 s of
 * calls); int8 is u8 x s8 -> s32 (the VNNI GEMM), bf16 is bf16 x bf16 -> f32
 * (AVX512-BF16 or AMX), f32 is f32 x f32 -> f32 (oneDNN's own JIT, AVX-512 where the
 * CPU has it, unlike OpenBLAS's kernels of bench_sgemm_peak). The yardsticks for
 * dtrain's achieved int8 GOP/s and bf16 / fp32 GFLOP/s of its oneDNN convolutions
 * (multiply-adds x 2).
 * Two figures: 2048^3, the yardstick the scripts have always quoted, and the best of
 * 256^3 .. 2048^3, the machine's limit as oneDNN reaches it. They differ: on the AMD
 * EPYC of docs/performance.md the bf16 GEMM ran at 695 GFLOP/s at 2048^3 and 866 at
 * 512^3 (its operands stay in cache), and resnet18's 4x4 bf16 convolutions at ~900.
 *   bench_dnnl_peak int8|bf16|f32 [THREADS]
 *     ->  {"int8_gops"|"bf16_gflops"|"f32_gflops": X, "threads": T, "n": 2048,
 *          "best": Y, "best_n": N, "impl": ...} */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "core/timer.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != dnnl_success) {                                                              \
            fprintf(stderr, "bench_dnnl_peak: %s failed\n", #call);                                \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* The best rate of n^3 products (multiply-adds x 2 per second, in G) of the given types;
 * impl receives oneDNN's kernel name. Returns < 0 on a oneDNN failure. */
static double gemm_rate(dnnl_engine_t engine, dnnl_stream_t stream, int n, dnnl_data_type_t ts,
                        dnnl_data_type_t tw, dnnl_data_type_t td, char *impl_name,
                        size_t impl_size) {
    dnnl_dims_t sd = {n, n}, wd = {n, n}, dd = {n, n};
    dnnl_memory_desc_t src, wei, dst;
    CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, ts, dnnl_nc));
    CHECK(dnnl_memory_desc_init_by_tag(&wei, 2, wd, tw, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, td, dnnl_nc));
    dnnl_inner_product_desc_t ipd;
    CHECK(
        dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_inference, &src, &wei, NULL, &dst));
    dnnl_primitive_desc_t pd;
    CHECK(dnnl_primitive_desc_create(&pd, &ipd, NULL, engine, NULL));
    const char *impl = "";
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    snprintf(impl_name, impl_size, "%s", impl);
    dnnl_primitive_t ip;
    CHECK(dnnl_primitive_create(&ip, pd));
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t ms, mw, md;
    CHECK(dnnl_memory_create(&ms, &src, engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&mw, wmd, engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&md, &dst, engine, DNNL_MEMORY_ALLOCATE));
    void *p;
    /* int8: 3s and 1s; bf16: the bit pattern 0x3f3f, about 0.75; f32: 0x3f3f3f3f, about
     * 0.75 (any finite value times the same speed) */
    const int is_float = ts != dnnl_u8;
    CHECK(dnnl_memory_get_data_handle(ms, &p));
    memset(p, is_float ? 0x3f : 3, dnnl_memory_desc_get_size(&src));
    CHECK(dnnl_memory_get_data_handle(mw, &p));
    memset(p, is_float ? 0x3f : 1, dnnl_memory_desc_get_size(wmd));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    double best = 1e30, spent = 0;
    for (int rep = 0; rep < 10 || spent < 0.4; rep++) {
        double t0 = dt_now();
        CHECK(dnnl_primitive_execute(ip, stream, 3, args));
        CHECK(dnnl_stream_wait(stream));
        double dt = dt_now() - t0;
        spent += dt;
        if (dt < best) best = dt;
    }
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_destroy(ip);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(md);
    return 2.0 * n * n * n / best * 1e-9;
}

int main(int argc, char **argv) {
    const int bf16 = argc > 1 && !strcmp(argv[1], "bf16");
    const int f32 = argc > 1 && !strcmp(argv[1], "f32");
    if (argc < 2 || (!bf16 && !f32 && strcmp(argv[1], "int8"))) {
        fprintf(stderr, "usage: bench_dnnl_peak int8|bf16|f32 [THREADS]\n");
        return 2;
    }
    /* source, weights, destination types */
    const dnnl_data_type_t ts = f32    ? dnnl_f32
                                : bf16 ? dnnl_bf16
                                       : dnnl_u8,
                           tw = f32    ? dnnl_f32
                                : bf16 ? dnnl_bf16
                                       : dnnl_s8,
                           td = f32 || bf16 ? dnnl_f32 : dnnl_s32;
    char *end = NULL;
    long threads = argc > 2 ? strtol(argv[2], &end, 10) : 2;
    if ((end && *end) || threads < 1 || threads > 1024) {
        fprintf(stderr, "bench_dnnl_peak: THREADS must be 1..1024\n");
        return 2;
    }
    dt_threads_set((int)threads);
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "bench_dnnl_peak: no oneDNN CPU engine\n");
        return 1;
    }
    const int sizes[] = {256, 512, 1024, 2048}, yardstick = 2048;
    double at_yardstick = 0, best = 0;
    int best_n = 0;
    char impl_name[64] = "", impl_n[64];
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double rate = gemm_rate(engine, stream, sizes[i], ts, tw, td, impl_n, sizeof impl_n);
        if (rate < 0) return 1;
        if (sizes[i] == yardstick) {
            at_yardstick = rate;
            memcpy(impl_name, impl_n, sizeof impl_name);
        }
        if (rate > best) best = rate, best_n = sizes[i];
    }
    printf("{\"%s\":%.1f,\"threads\":%ld,\"n\":%d,\"best\":%.1f,\"best_n\":%d,\"impl\":\"%s\"}\n",
           f32    ? "f32_gflops"
           : bf16 ? "bf16_gflops"
                  : "int8_gops",
           at_yardstick, threads, yardstick, best, best_n, impl_name);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
