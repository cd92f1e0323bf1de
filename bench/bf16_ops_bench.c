/* The bf16 kernels of exec/bf16_ops against their fp32 twins (and BatchNorm against
 * oneDNN's bf16 batch normalization) at resnet18-CIFAR's shapes, with the machine's
 * memcpy bandwidth measured in the same run as the limit of these memory-bound loops.
 * Each row alternates its two sides REPEATS times (blocks of calls of about 10 ms) and
 * reports medians and minima; GB/s counts one read of every input tensor and one write of every
 * output tensor of the operation (the least traffic it can have), as a share of memcpy's
 * (bytes read + written).
 * Max pooling runs also at the pooling layers of lenet5 (batch 128) and of alexnet,
 * googlenet, resnet50 and vgg (batch 32), in each layout the graph can give them.
 *   bench_bf16_ops [THREADS] [BATCH] [REPEATS] [ROWS]   (defaults 2 128 7, all rows) */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu_isa.h"
#include "core/threads.h"
#include "core/timer.h"
#include "exec/bf16_ops.h"
#include "exec/conv2d_dnnl.h"
#include "nn/adaptive_avgpool2d.h"
#include "nn/batchnorm2d.h"
#include "nn/linear.h"
#include "nn/pool2d.h"
#include "nn/relu.h"
#include "nn/residual.h"

enum { MAX_REPEATS = 64 };

/* Everything a row's functions read: one shape at a time, buffers for the largest. */
typedef struct env {
    int n, c, h, w;
    size_t count;                        /* n * c * h * w */
    float *x, *y, *dy, *dx, *b2;         /* fp32 activations */
    uint16_t *hx, *hy, *hdy, *hdx, *hb2; /* bf16 ones */
    float *wt, *bias, *rm, *rv, *mean, *invstd, *dw, *db, *var;
    int32_t *argmax;
    int pk, ps, ppad, pceil, pblocked; /* max pooling's kernel, stride, pad, ceil mode, layout */
    /* bf16 BatchNorm plans for this shape: nChw16c (oneDNN) without and with the
     * fused ReLU, NCHW (the loops) */
    dt_bf16_batchnorm *bn, *bn_relu, *bn_nchw;
    /* linear and conv plans */
    dt_dnnl *ctx;
    dt_bf16_linear *lin;
    dt_conv2d_plan *conv_f32io, *conv_bf16io;
    dt_dnnl_scratch scratch;
    float *cw, *cb, *cdw, *cdb;
} env;

static void *alloc_or_die(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_bf16_ops: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

static void fill(env *e, size_t max_count) {
    for (size_t i = 0; i < max_count; i++) {
        const float v = (float)((int)(i * 2654435761u % 2001) - 1000) / 500.0f;
        e->x[i] = v, e->dy[i] = -v * 0.5f, e->b2[i] = v * 0.25f;
    }
    dt_bf16_from_f32_n(e->hx, e->x, max_count);
    dt_bf16_from_f32_n(e->hdy, e->dy, max_count);
    dt_bf16_from_f32_n(e->hb2, e->b2, max_count);
    for (int i = 0; i < 512; i++) {
        e->wt[i] = 1.0f;
        e->rv[i] = 1.0f;
    }
}

/* ---- the two sides of each row ---- */

/* each thread copies its share, as the kernels' threads each stream theirs */
static void memcpy_f32(env *e) {
#pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
        const size_t lo = e->count * t / nt, hi = e->count * (t + 1) / nt;
        memcpy(e->y + lo, e->x + lo, sizeof(float) * (hi - lo));
    }
}

/* the same as a plain vectorised loop (glibc's memcpy streams large copies past the
 * cache with non-temporal stores, which on this host ran slower than our loops) */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void copy_loop_f32(env *e) {
    float *restrict y = e->y;
    const float *restrict x = e->x;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < e->count; i++) y[i] = x[i];
}

static void relu_f32(env *e) {
    dt_relu_forward(e->y, e->y, e->count);
}
static void relu_bf16(env *e) {
    dt_bf16_relu_forward(e->hy, e->hy, e->count);
}
static void relu_bwd_f32(env *e) {
    dt_relu_backward(e->dy, e->dy, e->x, e->count);
}
static void relu_bwd_bf16(env *e) {
    dt_bf16_relu_backward(e->hdy, e->hdy, e->hx, e->count, 0);
}
static void add_f32(env *e) {
    dt_residual_add_forward(e->y, e->x, e->b2, e->count);
}
static void add_bf16(env *e) {
    dt_bf16_add_forward(e->hy, e->hx, e->hb2, e->count);
}
static void add_bwd_f32(env *e) {
    dt_residual_add_backward(e->dx, e->b2, e->dy, e->count);
}
static void add_bwd_bf16(env *e) {
    dt_bf16_add_backward(e->hdx, e->hb2, e->hdy, e->count, 1, 1);
}

static void bn_f32(env *e) {
    dt_batchnorm2d_forward_train_blocked(e->y, e->mean, e->invstd, e->rm, e->rv, e->x, e->wt,
                                         e->bias, e->n, e->c, e->h * e->w, 0.1f, 1e-5f);
}
static void bn_bf16(env *e) {
    dt_bf16_batchnorm_forward_train(e->bn, e->n, e->hy, e->mean, e->invstd, e->rm, e->rv, e->hx,
                                    e->wt, e->bias, 0.1f);
}
static void bn_nchw_f32(env *e) {
    dt_batchnorm2d_forward_train(e->y, e->mean, e->invstd, e->rm, e->rv, e->x, e->wt, e->bias, e->n,
                                 e->c, e->h * e->w, 0.1f, 1e-5f);
}
static void bn_nchw_bf16(env *e) {
    dt_bf16_batchnorm_forward_train(e->bn_nchw, e->n, e->hy, e->mean, e->invstd, e->rm, e->rv,
                                    e->hx, e->wt, e->bias, 0.1f);
}
/* the graph's BatchNorm then in-place ReLU, against the fused kernel */
static void bn_relu_f32(env *e) {
    bn_f32(e);
    dt_relu_forward(e->y, e->y, e->count);
}
static void bn_relu_bf16(env *e) {
    dt_bf16_batchnorm_forward_train(e->bn_relu, e->n, e->hy, e->mean, e->invstd, e->rm, e->rv,
                                    e->hx, e->wt, e->bias, 0.1f);
}
static void bn_relu_bwd_f32(env *e) {
    dt_relu_backward(e->dy, e->dy, e->y, e->count);
    dt_batchnorm2d_backward_blocked(e->dx, e->dw, e->db, e->dy, e->x, e->mean, e->invstd, e->wt,
                                    e->n, e->c, e->h * e->w, 0);
}
static void bn_relu_bwd_bf16(env *e) {
    dt_bf16_batchnorm_backward(e->bn_relu, e->n, e->hdx, e->dw, e->db, e->hdy, e->hx, e->hy,
                               e->mean, e->invstd, e->wt, 0);
}
/* the loops on nChw16c, which the plan does not use there */
static void bn_relu_loop(env *e) {
    dt_bf16_batchnorm2d_forward_train(e->hy, e->mean, e->invstd, e->rm, e->rv, e->hx, e->wt,
                                      e->bias, e->n, e->c, e->h * e->w, 0.1f, 1e-5f, 1, 1);
}
static void bn_relu_bwd_loop(env *e) {
    dt_bf16_batchnorm2d_backward(e->hdx, e->dw, e->db, e->hdy, e->hx, e->mean, e->invstd, e->wt,
                                 e->hy, e->n, e->c, e->h * e->w, 1, 0);
}

static void maxpool_f32(env *e) {
    (e->pblocked ? dt_maxpool2d_forward_blocked : dt_maxpool2d_forward)(
        e->y, e->argmax, e->x, e->n, e->c, e->h, e->w, e->pk, e->ps, e->ppad, e->pceil);
}
static void maxpool_bf16(env *e) {
    dt_bf16_maxpool2d_forward(e->hy, e->argmax, e->hx, e->n, e->c, e->h, e->w, e->pk, e->ps,
                              e->ppad, e->pceil, e->pblocked);
}
/* the fp32 scatter adds into a gradient the graph zeroed; the bf16 kernel writes it */
static void maxpool_bwd_f32(env *e) {
    (e->pblocked ? dt_maxpool2d_backward_blocked : dt_maxpool2d_backward)(
        e->dx, e->dy, e->argmax, e->n, e->c, e->h, e->w, e->pk, e->ps, e->ppad, e->pceil);
}
static void maxpool_bwd_bf16(env *e) {
    dt_bf16_maxpool2d_backward(e->hdx, e->hdy, e->argmax, e->n, e->c, e->h, e->w, e->pk, e->ps,
                               e->ppad, e->pceil, e->pblocked, 0);
}
static void gap_f32(env *e) {
    dt_adaptive_avgpool2d_forward(e->y, e->x, e->n, e->c, e->h, e->w, 1, 1, 1);
}
static void gap_bf16(env *e) {
    dt_bf16_adaptive_avgpool2d_forward(e->hy, e->hx, e->n, e->c, e->h, e->w, 1, 1, 1);
}
static void gap_bwd_f32(env *e) {
    dt_adaptive_avgpool2d_backward(e->dx, e->dy, e->n, e->c, e->h, e->w, 1, 1, 1);
}
static void gap_bwd_bf16(env *e) {
    dt_bf16_adaptive_avgpool2d_backward(e->hdx, e->hdy, e->n, e->c, e->h, e->w, 1, 1, 1, 0);
}
static void to_bf16(env *e) {
    dt_bf16_from_f32_n(e->hy, e->x, e->count);
}
static void to_f32(env *e) {
    dt_bf16_to_f32_n(e->y, e->hx, e->count);
}

/* linear 512 -> 10 (resnet18's head), forward + backward */
static void linear_f32(env *e) {
    dt_linear_forward(e->y, e->x, e->wt, e->bias, e->n, 512, 10, NULL);
    dt_linear_backward(e->dx, e->dw, e->db, e->dy, e->x, e->wt, e->n, 512, 10);
}
static void linear_bf16(env *e) {
    dt_bf16_linear_forward(e->lin, e->n, e->y, e->hx, e->wt, e->bias);
    dt_bf16_linear_backward(e->lin, e->n, e->hdx, e->dw, e->db, e->dy, e->hx, 0);
}

/* a 3x3 conv, bf16 multiplications, fp32 activations (converted at the conv) against
 * bf16 ones: forward + backward, input gradient written */
static void conv_f32io(env *e) {
    dt_conv2d_plan_forward(e->conv_f32io, &e->scratch, e->n, e->y, e->x, e->cw, e->cb);
    dt_conv2d_plan_backward(e->conv_f32io, &e->scratch, e->n, e->dx, e->cdw, e->cdb, e->dy, e->x,
                            e->cw);
}
static void conv_bf16io(env *e) {
    dt_conv2d_plan_forward(e->conv_bf16io, &e->scratch, e->n, e->hy, e->hx, e->cw, e->cb);
    dt_conv2d_plan_backward(e->conv_bf16io, &e->scratch, e->n, e->hdx, e->cdw, e->cdb, e->hdy,
                            e->hx, e->cw);
}

/* ---- timing ---- */

typedef void (*run_fn)(env *);

static double block_time(run_fn f, env *e, int calls) {
    const double t0 = dt_now();
    for (int i = 0; i < calls; i++) f(e);
    return (dt_now() - t0) / calls;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Medians (and minima) of a and b, alternated `repeats` times in blocks of ~10 ms. On
 * a shared machine a block may lose its core for a scheduler slice (4 ms): the median
 * says what a run gets, the minimum what the kernel does when it has the cores. */
typedef struct timing {
    double a, b, a_min, b_min;
} timing;

static timing time_pair(run_fn a, run_fn b, env *e, int repeats) {
    double va[MAX_REPEATS], vb[MAX_REPEATS];
    const double one_a = block_time(a, e, 1), one_b = block_time(b, e, 1); /* also warms up */
    const int ca = one_a > 0.01 ? 1 : (int)(0.01 / (one_a + 1e-9)) + 1,
              cb = one_b > 0.01 ? 1 : (int)(0.01 / (one_b + 1e-9)) + 1;
    timing t = {0, 0, 1e30, 1e30};
    for (int r = 0; r < repeats; r++) {
        va[r] = block_time(a, e, ca);
        vb[r] = block_time(b, e, cb);
        if (va[r] < t.a_min) t.a_min = va[r];
        if (vb[r] < t.b_min) t.b_min = vb[r];
    }
    t.a = median(va, repeats);
    t.b = median(vb, repeats);
    return t;
}

/* GB/s (read + written) of memcpy and of the copy loop over max_count floats, from
 * the minimum times (the bandwidth the cores can have). */
static void copy_gbs(env *e, size_t max_count, int repeats, double *by_memcpy, double *by_loop) {
    e->count = max_count;
    const timing t = time_pair(memcpy_f32, copy_loop_f32, e, repeats);
    *by_memcpy = 2.0 * sizeof(float) * max_count / t.a_min / 1e9;
    *by_loop = 2.0 * sizeof(float) * max_count / t.b_min / 1e9;
}

/* One row: its two sides, the tensors an operation reads and writes (in elements of
 * the activation, counted once each), and the bytes per element of each side. */
/* Rows whose name holds this (argv[4]) run, all rows without it. */
static const char *row_filter;

static void row(const char *what, run_fn a, const char *a_name, int a_bytes, run_fn b,
                const char *b_name, int b_bytes, double tensors, env *e, int repeats, double bw) {
    if (row_filter && !strstr(what, row_filter)) return;
    const timing t = time_pair(a, b, e, repeats);
    /* GB/s from the minimum, like the copy's */
    const double ga = tensors * e->count * a_bytes / t.a_min / 1e9,
                 gb = tensors * e->count * b_bytes / t.b_min / 1e9;
    printf("%-26s %4dx%2dx%-2d %-6s %7.3f %7.3f %5.1f %4.0f%% | %-6s %7.3f %7.3f %5.1f %4.0f%% | "
           "%5.2fx %5.2fx\n",
           what, e->c, e->h, e->w, a_name, t.a * 1e3, t.a_min * 1e3, ga, 100 * ga / bw, b_name,
           t.b * 1e3, t.b_min * 1e3, gb, 100 * gb / bw, t.a / t.b, t.a_min / t.b_min);
    fflush(stdout);
}

static void bn_plans(env *e, int create) {
    dt_error err;
    const int hw = e->h * e->w;
    if (!create) {
        dt_bf16_batchnorm_destroy(e->bn);
        dt_bf16_batchnorm_destroy(e->bn_relu);
        dt_bf16_batchnorm_destroy(e->bn_nchw);
        return;
    }
    if (dt_bf16_batchnorm_create(&e->bn, e->ctx, e->n, e->c, hw, 1, 0, 1e-5f, &err) ||
        dt_bf16_batchnorm_create(&e->bn_relu, e->ctx, e->n, e->c, hw, 1, 1, 1e-5f, &err) ||
        dt_bf16_batchnorm_create(&e->bn_nchw, e->ctx, e->n, e->c, hw, 0, 0, 1e-5f, &err)) {
        fprintf(stderr, "bench_bf16_ops: %s\n", err.msg);
        exit(1);
    }
}

static long arg(int argc, char **argv, int i, long def, long lo, long hi) {
    if (argc <= i) return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (end == argv[i] || *end || v < lo || v > hi) {
        fprintf(stderr,
                "usage: bench_bf16_ops [THREADS 1..256] [BATCH 1..1024] [REPEATS 1..%d] "
                "[ROWS: only rows whose name holds this]\n",
                MAX_REPEATS);
        exit(2);
    }
    return v;
}

static void set_shape(env *e, int c, int h, int w) {
    e->c = c, e->h = h, e->w = w;
    e->count = (size_t)e->n * c * h * w;
}

int main(int argc, char **argv) {
    const int threads = (int)arg(argc, argv, 1, 2, 1, 256),
              batch = (int)arg(argc, argv, 2, 128, 1, 1024),
              repeats = (int)arg(argc, argv, 3, 7, 1, MAX_REPEATS);
    if (argc > 5) arg(argc, argv, 0, 0, 1, 0); /* prints the usage */
    row_filter = argc > 4 ? argv[4] : NULL;
    dt_threads_set(threads);
    if (!dt_cpu_has_bf16()) {
        fprintf(stderr, "bench_bf16_ops: this CPU has no AVX512-BF16 or AMX\n");
        return 77;
    }
    env e;
    memset(&e, 0, sizeof e);
    e.n = batch;
    /* the largest pooling input below: 32 x 64x112x112 */
    const size_t resnet_count = (size_t)batch * 64 * 32 * 32,
                 pool_count = (size_t)32 * 64 * 112 * 112;
    const size_t max_count = resnet_count > pool_count ? resnet_count : pool_count;
    float **fs[] = {&e.x, &e.y, &e.dy, &e.dx, &e.b2};
    for (size_t i = 0; i < 5; i++) *fs[i] = alloc_or_die(sizeof(float) * max_count);
    uint16_t **hs[] = {&e.hx, &e.hy, &e.hdy, &e.hdx, &e.hb2};
    for (size_t i = 0; i < 5; i++) *hs[i] = alloc_or_die(sizeof(uint16_t) * max_count);
    float **ps[] = {&e.wt, &e.bias, &e.rm, &e.rv, &e.mean, &e.invstd, &e.dw, &e.db, &e.var};
    for (size_t i = 0; i < 9; i++) *ps[i] = alloc_or_die(sizeof(float) * 512 * 10);
    e.argmax = alloc_or_die(sizeof(int32_t) * max_count / 4);
    fill(&e, max_count);
    dt_error err;
    if (dt_dnnl_create(&e.ctx, &err)) {
        fprintf(stderr, "bench_bf16_ops: %s\n", err.msg);
        return 1;
    }

    double bw_memcpy, bw_loop;
    copy_gbs(&e, max_count, repeats, &bw_memcpy, &bw_loop);
    const double bw0 = bw_memcpy > bw_loop ? bw_memcpy : bw_loop;
    printf("bench_bf16_ops: %d threads, batch %d, medians of %d alternated repeats\n", threads,
           batch, repeats);
    printf("copy of %.0f MB on %d threads: memcpy %.1f GB/s, a copy loop %.1f GB/s (read + "
           "written); the limit below (100%%) is the faster, %.1f\n\n",
           sizeof(float) * max_count / 1e6, threads, bw_memcpy, bw_loop, bw0);
    printf("times in ms: median, minimum; GB/s (and %% of the copy limit) from the minimum; "
           "ratios a/b of medians, of minima\n");
    printf("%-26s %-11s %-6s %7s %7s %5s %5s | %-6s %7s %7s %5s %5s | %6s %6s\n", "operation",
           "CxHxW", "a", "median", "min", "GB/s", "%", "b", "median", "min", "GB/s", "%", "med",
           "min");
    const int shapes[4][3] = {{64, 32, 32}, {128, 16, 16}, {256, 8, 8}, {512, 4, 4}};
    for (int s = 0; s < 4; s++) {
        set_shape(&e, shapes[s][0], shapes[s][1], shapes[s][2]);
        row("relu fwd (in place)", relu_f32, "f32", 4, relu_bf16, "bf16", 2, 2, &e, repeats, bw0);
        row("relu bwd (in place)", relu_bwd_f32, "f32", 4, relu_bwd_bf16, "bf16", 2, 3, &e, repeats,
            bw0);
        row("add fwd", add_f32, "f32", 4, add_bf16, "bf16", 2, 3, &e, repeats, bw0);
        row("add bwd (both +=)", add_bwd_f32, "f32", 4, add_bwd_bf16, "bf16", 2, 5, &e, repeats,
            bw0);
        bn_plans(&e, 1);
        row("bn fwd train", bn_f32, "f32", 4, bn_bf16, "bf16", 2, 2, &e, repeats, bw0);
        row("bn fwd train NCHW", bn_nchw_f32, "f32", 4, bn_nchw_bf16, "bf16", 2, 2, &e, repeats,
            bw0);
        row("bn+relu fwd train", bn_relu_f32, "f32", 4, bn_relu_bf16, "bf16", 2, 2, &e, repeats,
            bw0);
        row("bn+relu bwd", bn_relu_bwd_f32, "f32", 4, bn_relu_bwd_bf16, "bf16", 2, 3, &e, repeats,
            bw0);
        row("bn+relu fwd: loop|oneDNN", bn_relu_loop, "loop", 2, bn_relu_bf16, "oneDNN", 2, 2, &e,
            repeats, bw0);
        row("bn+relu bwd: loop|oneDNN", bn_relu_bwd_loop, "loop", 2, bn_relu_bwd_bf16, "oneDNN", 2,
            3, &e, repeats, bw0);
        bn_plans(&e, 0);
    }
    set_shape(&e, 64, 32, 32);
    e.pk = 2, e.ps = 2, e.ppad = 0, e.pceil = 0, e.pblocked = 1;
    row("maxpool 2x2 fwd", maxpool_f32, "f32", 4, maxpool_bf16, "bf16", 2, 1.25, &e, repeats, bw0);
    row("maxpool 2x2 bwd (write)", maxpool_bwd_f32, "f32", 4, maxpool_bwd_bf16, "bf16", 2, 1.25, &e,
        repeats, bw0);
    row("f32->bf16 | bf16->f32", to_f32, "to f32", 3, to_bf16, "to bf16", 3, 2, &e, repeats, bw0);
    /* the models' pooling layers: batch, c, h, w, kernel, stride, pad, ceil mode */
    const struct {
        const char *name;
        int n, c, h, w, k, s, pad, ceil;
    } pools[] = {
        {"lenet5 pool1", 128, 6, 28, 28, 2, 2, 0, 0},
        {"lenet5 pool2", 128, 16, 10, 10, 2, 2, 0, 0},
        {"resnet50 pool", 32, 64, 112, 112, 3, 2, 1, 1},
        {"alexnet pool1", 32, 64, 55, 55, 3, 2, 0, 0},
        {"alexnet pool2", 32, 192, 27, 27, 3, 2, 0, 0},
        {"googlenet pool", 32, 480, 28, 28, 3, 2, 0, 1},
        {"vgg pool5", 32, 512, 14, 14, 2, 2, 0, 0},
    };
    for (size_t p = 0; p < sizeof pools / sizeof pools[0]; p++) {
        e.n = pools[p].n;
        set_shape(&e, pools[p].c, pools[p].h, pools[p].w);
        e.pk = pools[p].k, e.ps = pools[p].s, e.ppad = pools[p].pad, e.pceil = pools[p].ceil;
        const int ho = dt_pool2d_out_size_padded(e.h, e.pk, e.ps, e.ppad, e.pceil),
                  wo = dt_pool2d_out_size_padded(e.w, e.pk, e.ps, e.ppad, e.pceil);
        /* the input read and the output written (argmax not counted) */
        const double tensors = 1.0 + (double)(ho * wo) / (e.h * e.w);
        for (e.pblocked = 0; e.pblocked < (e.c % 16 == 0 ? 2 : 1); e.pblocked++) {
            char what[64];
            snprintf(what, sizeof what, "mp %s %s fwd", pools[p].name, e.pblocked ? "16c" : "nchw");
            row(what, maxpool_f32, "f32", 4, maxpool_bf16, "bf16", 2, tensors, &e, repeats, bw0);
            snprintf(what, sizeof what, "mp %s %s bwd", pools[p].name, e.pblocked ? "16c" : "nchw");
            row(what, maxpool_bwd_f32, "f32", 4, maxpool_bwd_bf16, "bf16", 2, tensors, &e, repeats,
                bw0);
        }
    }
    e.n = batch;
    set_shape(&e, 3, 32, 32);
    row("f32->bf16 | bf16->f32", to_f32, "to f32", 3, to_bf16, "to bf16", 3, 2, &e, repeats, bw0);
    set_shape(&e, 512, 4, 4);
    row("global avgpool fwd", gap_f32, "f32", 4, gap_bf16, "bf16", 2, 1, &e, repeats, bw0);
    row("global avgpool bwd", gap_bwd_f32, "f32", 4, gap_bwd_bf16, "bf16", 2, 1, &e, repeats, bw0);

    /* oneDNN layers: times only (compute, not bytes, is their limit) */
    if (dt_bf16_linear_create(&e.lin, e.ctx, batch, 512, 10, 1, DT_BF16, DT_F32, &err)) {
        fprintf(stderr, "bench_bf16_ops: %s\n", err.msg);
        return 1;
    }
    set_shape(&e, 512, 1, 1);
    row("linear 512->10 fwd+bwd", linear_f32, "f32", 4, linear_bf16, "bf16", 2, 0, &e, repeats,
        bw0);
    dt_bf16_linear_destroy(e.lin);
    dt_conv2d_shape cs;
    dt_conv2d_shape_make(&cs, batch, 64, 32, 32, 64, 3, 3, 1, 1);
    dt_exec_conv2d_io io_f32 = {1, 1, 1, DT_F32, DT_F32}, io_bf16 = {1, 1, 1, DT_BF16, DT_BF16};
    if (dt_conv2d_plan_create(&e.conv_f32io, e.ctx, &cs, 1, &io_f32, 1, &e.scratch, &err) ||
        dt_conv2d_plan_create(&e.conv_bf16io, e.ctx, &cs, 1, &io_bf16, 1, &e.scratch, &err) ||
        dt_conv2d_plan_alloc(e.conv_f32io, &err) || dt_conv2d_plan_alloc(e.conv_bf16io, &err)) {
        fprintf(stderr, "bench_bf16_ops: %s\n", err.msg);
        return 1;
    }
    for (int k = 0; k < DT_DNNL_ACT_SLOTS; k++)
        e.scratch.act[k] = alloc_or_die(e.scratch.act_bytes[k]);
    for (int k = 0; k < DT_DNNL_WEIGHT_SLOTS; k++)
        e.scratch.weight[k] = alloc_or_die(e.scratch.weight_bytes[k]);
    e.cw = alloc_or_die(sizeof(float) * 64 * 64 * 9),
    e.cdw = alloc_or_die(sizeof(float) * 64 * 64 * 9);
    e.cb = alloc_or_die(sizeof(float) * 64), e.cdb = alloc_or_die(sizeof(float) * 64);
    for (int i = 0; i < 64 * 64 * 9; i++) e.cw[i] = (float)(i % 17 - 8) / 64.0f;
    set_shape(&e, 64, 32, 32);
    row("conv3x3 bf16 fwd+bwd", conv_f32io, "f32 io", 4, conv_bf16io, "bf16io", 2, 0, &e, repeats,
        bw0);
    dt_conv2d_plan_destroy(e.conv_f32io);
    dt_conv2d_plan_destroy(e.conv_bf16io);

    copy_gbs(&e, max_count, repeats, &bw_memcpy, &bw_loop);
    printf("\ncopy again at the end: memcpy %.1f GB/s, copy loop %.1f GB/s (percentages above "
           "are of %.1f)\n",
           bw_memcpy, bw_loop, bw0);
    dt_dnnl_destroy(e.ctx);
    return 0;
}
