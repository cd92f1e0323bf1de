/* The machine's int8 peak as oneDNN reaches it: u8 x s8 -> s32 inner products of
 * 2048 x 2048 x 2048 (oneDNN's VNNI GEMM), best of 10, at the thread count given. The
 * yardstick for dtrain's achieved int8 GOP/s (multiply-adds x 2).
 *   bench_int8_peak [THREADS]  ->  {"int8_gops": X, "threads": T, "n": 2048, "impl": ...} */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/threads.h"
#include "dtrain/timer.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != dnnl_success) {                                                              \
            fprintf(stderr, "bench_int8_peak: %s failed\n", #call);                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    const int n = 2048;
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1) threads = 1;
    dt_threads_set(threads);
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    dnnl_dims_t sd = {n, n}, wd = {n, n}, dd = {n, n};
    dnnl_memory_desc_t src, wei, dst;
    CHECK(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_u8, dnnl_nc));
    CHECK(dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_s8, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_s32, dnnl_nc));
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
    memset(p, 3, (size_t)n * n);
    CHECK(dnnl_memory_get_data_handle(mw, &p));
    memset(p, 1,
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
    printf("{\"int8_gops\":%.1f,\"threads\":%d,\"n\":%d,\"impl\":\"%s\"}\n",
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
