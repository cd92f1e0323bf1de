/* The machine's int8, bf16 and fp32 peaks as oneDNN reaches them: inner products of
 * 2048 x 2048 x 2048, best of 10, at the thread count given; int8 is u8 x s8 -> s32
 * (the VNNI GEMM), bf16 is bf16 x bf16 -> f32 (AVX512-BF16 or AMX), f32 is f32 x f32 ->
 * f32 (oneDNN's own JIT, AVX-512 where the CPU has it, unlike OpenBLAS's kernels of
 * bench_sgemm_peak). The yardsticks for dtrain's achieved int8 GOP/s and bf16 / fp32
 * GFLOP/s of its oneDNN convolutions (multiply-adds x 2).
 *   bench_dnnl_peak int8|bf16|f32 [THREADS]
 *     ->  {"int8_gops"|"bf16_gflops"|"f32_gflops": X, "threads": T, "n": 2048, "impl": ...} */
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
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    const int n = 2048;
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
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
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
    char impl_name[64];
    snprintf(impl_name, sizeof impl_name, "%s", impl);
    dnnl_primitive_t ip;
    CHECK(dnnl_primitive_create(&ip, pd));
    dnnl_memory_t ms, mw, md;
    CHECK(dnnl_memory_create(&ms, &src, engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&mw, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                             engine, DNNL_MEMORY_ALLOCATE));
    CHECK(dnnl_memory_create(&md, &dst, engine, DNNL_MEMORY_ALLOCATE));
    void *p;
    CHECK(dnnl_memory_get_data_handle(ms, &p));
    /* int8: 3s and 1s; bf16: the bit pattern 0x3f3f, about 0.75; f32: 0x3f3f3f3f, about
     * 0.75 (any finite value times the same speed) */
    memset(p, bf16 || f32 ? 0x3f : 3, dnnl_memory_desc_get_size(&src));
    CHECK(dnnl_memory_get_data_handle(mw, &p));
    memset(p, bf16 || f32 ? 0x3f : 1,
           dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0)));
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}};
    double best = 1e30;
    for (int rep = 0; rep < 10; rep++) {
        double t0 = dt_now();
        CHECK(dnnl_primitive_execute(ip, stream, 3, args));
        CHECK(dnnl_stream_wait(stream));
        double dt = dt_now() - t0;
        if (dt < best) best = dt;
    }
    printf("{\"%s\":%.1f,\"threads\":%ld,\"n\":%d,\"impl\":\"%s\"}\n",
           f32    ? "f32_gflops"
           : bf16 ? "bf16_gflops"
                  : "int8_gops",
           2.0 * n * n * n / best * 1e-9, threads, n, impl_name);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_destroy(ip);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(md);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
