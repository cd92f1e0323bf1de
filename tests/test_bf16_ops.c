/* The bf16 kernels (bf16_ops.h) against their fp32 twins in src/nn on the same
 * inputs: every input is rounded to bf16 first, so the fp32 kernel sees exactly the
 * values the bf16 one reads, and the two differ only by the rounding of what the bf16
 * kernel stores and by the order of its sums.
 *
 * Bounds: bf16 keeps 8 significant bits, so one rounding to nearest moves a value by
 * at most 2^-8 of itself (half an ulp, the ulp being 2^-7 of the leading power of two).
 * - One fp32 operation then one rounding, in the fp32 kernel's order (ReLU, add,
 *   conversions, copies, dropout, max and average pooling, the written gradients):
 *   the bf16 result must be the fp32 result rounded, bit for bit.
 * - The same with a different order of fp32 sums, or an accumulation into a stored
 *   bf16 gradient (din = bf16(din + g) against din + g in fp32): within one rounding
 *   plus fp32 noise, |got - ref| <= 2^-8 |ref| + 1e-5 max|ref| (the fp32 noise of a sum
 *   of tens to hundreds of terms is < 1e-5 of the largest value here).
 * - BatchNorm's statistics and parameter gradients are fp32/double sums of the same
 *   values in another order: 1e-5 relative (running statistics 1e-6 elementwise).
 * - The oneDNN layers accumulate exact bf16 products in fp32 in their own order: fp32
 *   results within 1e-5 norm-wise, bf16 results within the elementwise bound above. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu_isa.h"
#include "core/rng.h"
#include "exec/bf16_ops.h"
#include "exec/conv2d_dnnl.h"
#include "nn/adaptive_avgpool2d.h"
#include "nn/batchnorm2d.h"
#include "nn/concat.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/pad2d.h"
#include "nn/pool2d.h"
#include "nn/relu.h"
#include "nn/residual.h"
#include "nn/shortcut_pad.h"
#include "testutil.h"

static const double ONE_ROUNDING = 1.0 / 256.0, FP32_NOISE = 1e-5;

/* n floats uniform in [lo, hi), each rounded to a bf16 value. */
static float *bf16_valued(size_t n, uint64_t seed, float lo, float hi) {
    float *x = test_alloc(sizeof(float) * n);
    fill_uniform(x, n, seed, lo, hi);
    for (size_t i = 0; i < n; i++) x[i] = dt_bf16_to_f32(dt_bf16_from_f32(x[i]));
    return x;
}

static uint16_t *to_bf16(const float *x, size_t n) {
    uint16_t *h = test_alloc(sizeof(uint16_t) * n);
    for (size_t i = 0; i < n; i++) h[i] = dt_bf16_from_f32(x[i]);
    return h;
}

static float *copy_f32(const float *x, size_t n) {
    float *y = test_alloc(sizeof(float) * n);
    memcpy(y, x, sizeof(float) * n);
    return y;
}

/* got == bf16(ref), bit for bit (any NaN for a NaN). */
static void expect_rounded(const uint16_t *got, const float *ref, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        const uint16_t want = dt_bf16_from_f32(ref[i]);
        if (ref[i] != ref[i] && dt_bf16_to_f32(got[i]) != dt_bf16_to_f32(got[i])) continue;
        if (got[i] != want)
            fail_msg("%s[%zu]: got %a (0x%04x), want bf16(%a) = 0x%04x", what, i,
                     dt_bf16_to_f32(got[i]), got[i], ref[i], want);
    }
}

/* |got - ref| <= 2^-8 |ref| + 1e-5 scale everywhere, scale: the largest term the
 * results were computed from (at least max|ref|): where the terms cancel (a
 * BatchNorm gradient over two values is zero up to rounding) fp32 noise is relative
 * to the terms, not to the result. */
static void expect_close_to_terms(const uint16_t *got, const float *ref, size_t n, double terms,
                                  const char *what) {
    double scale = terms;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)dt_bf16_to_f32(got[i]) - ref[i]);
        if (!(d <= ONE_ROUNDING * fabs(ref[i]) + FP32_NOISE * scale))
            fail_msg("%s[%zu]: got %.9g, fp32 %.9g (scale %.3g)", what, i, dt_bf16_to_f32(got[i]),
                     ref[i], scale);
    }
}

static void expect_close(const uint16_t *got, const float *ref, size_t n, const char *what) {
    expect_close_to_terms(got, ref, n, 0.0, what);
}

static void expect_rel(const float *got, const float *ref, size_t n, double tol, const char *what) {
    const double e = rel_error(got, ref, n);
    if (!(e <= tol)) fail_msg("%s: relative error %.3g > %.3g", what, e, tol);
}

static void expect_elementwise(const float *got, const float *ref, size_t n, double tol,
                               const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= tol * fabs(ref[i])))
            fail_msg("%s[%zu]: %.9g against %.9g", what, i, got[i], ref[i]);
}

/* nChw16c from NCHW (c a multiple of 16), for float and bf16. */
static float *blocked_f32(const float *x, int n, int c, int hw) {
    float *y = test_alloc(sizeof(float) * n * c * hw);
    for (int m = 0; m < n; m++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++)
                y[(((size_t)m * (c / 16) + ch / 16) * hw + p) * 16 + ch % 16] =
                    x[((size_t)m * c + ch) * hw + p];
    return y;
}

/* ---- conversions, ReLU, add ---- */

static void test_conversions_match_dtype_h(void **state) {
    (void)state;
    /* random bit patterns: NaNs, infinities, denormals, ties included */
    const size_t n = 100003; /* the threaded path and an odd tail */
    float *x = test_alloc(sizeof(float) * n), *back = test_alloc(sizeof(float) * n);
    dt_rng rng = dt_rng_make(5, 0);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)dt_rng_next_u64(&rng);
        if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u; /* an exact tie */
        memcpy(&x[i], &u, sizeof u);
    }
    uint16_t *h = test_alloc(sizeof(uint16_t) * n);
    dt_bf16_from_f32_n(h, x, n);
    /* bit for bit; a denormal may also flush to a signed zero (AVX512-BF16's
     * vcvtneps2bf16 does, as in oneDNN's kernels) */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        const int denormal = (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0;
        if (h[i] != dt_bf16_from_f32(x[i]) && !(denormal && h[i] == (u >> 16 & 0x8000u)))
            fail_msg("element %zu: 0x%08x gave 0x%04x", i, u, h[i]);
    }
    dt_bf16_to_f32_n(back, h, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &back[i], sizeof u);
        assert_int_equal(u, (uint32_t)h[i] << 16);
    }
    /* the accumulating forms: acc = bf16(acc + x), acc += f32(x) */
    float *a = bf16_valued(n, 6, -2, 2), *b = bf16_valued(n, 7, -2, 2);
    uint16_t *ah = to_bf16(a, n), *bh = to_bf16(b, n);
    float *sum = test_alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) sum[i] = a[i] + b[i];
    dt_bf16_add_f32_n(ah, b, n);
    expect_rounded(ah, sum, n, "bf16 += f32");
    dt_f32_add_bf16_n(a, bh, n);
    for (size_t i = 0; i < n; i++) assert_true(a[i] == sum[i]);
    free(x), free(back), free(h), free(a), free(b), free(ah), free(bh), free(sum);
}

static void test_relu_matches_f32(void **state) {
    (void)state;
    const size_t n = 40001;
    float *x = bf16_valued(n, 1, -1, 1), *y = test_alloc(sizeof(float) * n);
    x[3] = NAN, x[4] = -0.0f, x[5] = INFINITY, x[6] = -INFINITY;
    uint16_t *xh = to_bf16(x, n), *yh = test_alloc(sizeof(uint16_t) * n);
    dt_relu_forward(y, x, n);
    dt_bf16_relu_forward(yh, xh, n);
    expect_rounded(yh, y, n, "relu forward");
    dt_bf16_relu_forward(xh, xh, n); /* in place */
    assert_memory_equal(xh, yh, sizeof(uint16_t) * n);
    /* backward, masked by the output: written in place (din == dout), and added */
    float *g = bf16_valued(n, 2, -1, 1), *d0 = bf16_valued(n, 3, -1, 1);
    uint16_t *gh = to_bf16(g, n), *dh = to_bf16(d0, n);
    float *ref = copy_f32(g, n);
    dt_relu_backward(ref, ref, y, n);
    dt_bf16_relu_backward(gh, gh, yh, n, 0);
    expect_rounded(gh, ref, n, "relu backward (write, in place)");
    for (size_t i = 0; i < n; i++) ref[i] = y[i] > 0 ? d0[i] + g[i] : d0[i];
    uint16_t *g2 = to_bf16(g, n);
    dt_bf16_relu_backward(dh, g2, yh, n, 1);
    expect_rounded(dh, ref, n, "relu backward (add)");
    free(x), free(y), free(xh), free(yh), free(g), free(d0), free(gh), free(dh), free(ref);
    free(g2);
}

static void test_add_matches_f32(void **state) {
    (void)state;
    const size_t n = 30007;
    float *a = bf16_valued(n, 4, -3, 3), *b = bf16_valued(n, 5, -3, 3);
    float *out = test_alloc(sizeof(float) * n);
    uint16_t *ah = to_bf16(a, n), *bh = to_bf16(b, n), *oh = test_alloc(sizeof(uint16_t) * n);
    dt_residual_add_forward(out, a, b, n);
    dt_bf16_add_forward(oh, ah, bh, n);
    expect_rounded(oh, out, n, "add forward");
    /* backward: each of da, db written or added, or absent */
    float *g = bf16_valued(n, 6, -1, 1);
    uint16_t *gh = to_bf16(g, n);
    for (int mode = 0; mode < 4; mode++) {
        const int add_a = mode & 1, add_b = mode >> 1;
        float *ra = copy_f32(a, n), *rb = copy_f32(b, n);
        if (!add_a) memset(ra, 0, sizeof(float) * n);
        if (!add_b) memset(rb, 0, sizeof(float) * n);
        dt_residual_add_backward(ra, rb, g, n);
        uint16_t *da = to_bf16(a, n), *db = to_bf16(b, n);
        dt_bf16_add_backward(da, db, gh, n, add_a, add_b);
        expect_rounded(da, ra, n, "add backward a");
        expect_rounded(db, rb, n, "add backward b");
        uint16_t *keep = to_bf16(b, n);
        dt_bf16_add_backward(da, NULL, gh, n, 0, 1); /* db absent: untouched */
        expect_rounded(da, g, n, "add backward a alone");
        free(ra), free(rb), free(da), free(db), free(keep);
    }
    free(a), free(b), free(out), free(ah), free(bh), free(oh), free(g), free(gh);
}

/* ---- BatchNorm ---- */

typedef struct bn_case {
    int n, c, hw, blocked, relu, add;
    float mean_offset; /* inputs around this value: the statistics must not cancel */
} bn_case;

/* bn NULL: the loops; else the plan (oneDNN on nChw16c). */
static void check_bn(const bn_case *k, dt_dnnl *ctx) {
    const int n = k->n, c = k->c, hw = k->hw;
    const size_t count = (size_t)n * c * hw;
    const float eps = 1e-5f;
    dt_bf16_batchnorm *bn = NULL;
    dt_error err;
    if (ctx && dt_bf16_batchnorm_create(&bn, ctx, n + 2, c, hw, k->blocked, k->relu, eps, &err))
        fail_msg("%s", err.msg);
    float *x = bf16_valued(count, 10 + c, k->mean_offset - 2, k->mean_offset + 3);
    float *w = bf16_valued(c, 11, 0.5f, 1.5f), *b = bf16_valued(c, 12, -0.5f, 0.5f);
    float *rm = bf16_valued(c, 13, -0.1f, 0.1f), *rv = bf16_valued(c, 14, 0.5f, 1.5f);
    float *rm2 = copy_f32(rm, c), *rv2 = copy_f32(rv, c);
    float *dy = bf16_valued(count, 15, -1, 1), *d0 = bf16_valued(count, 16, -1, 1);
    if (k->blocked) { /* the fp32 reference on blocked data too */
        float *t = blocked_f32(x, n, c, hw);
        free(x), x = t;
    }
    float *y = test_alloc(sizeof(float) * count), *mean = test_alloc(sizeof(float) * c),
          *invstd = test_alloc(sizeof(float) * c);
    (k->blocked ? dt_batchnorm2d_forward_train_blocked : dt_batchnorm2d_forward_train)(
        y, mean, invstd, rm, rv, x, w, b, n, c, hw, 0.1f, eps);
    if (k->relu) dt_relu_forward(y, y, count);
    uint16_t *xh = to_bf16(x, count), *yh = test_alloc(sizeof(uint16_t) * count);
    float *mean2 = test_alloc(sizeof(float) * c), *invstd2 = test_alloc(sizeof(float) * c);
    if (bn)
        dt_bf16_batchnorm_forward_train(bn, n, yh, mean2, invstd2, rm2, rv2, xh, w, b, 0.1f);
    else
        dt_bf16_batchnorm2d_forward_train(yh, mean2, invstd2, rm2, rv2, xh, w, b, n, c, hw, 0.1f,
                                          eps, k->blocked, k->relu);
    expect_close(yh, y, count, "batchnorm forward (train)");
    expect_elementwise(mean2, mean, c, 1e-6, "batch mean");
    expect_elementwise(invstd2, invstd, c, 1e-5, "batch invstd");
    expect_elementwise(rm2, rm, c, 1e-6, "running mean");
    expect_elementwise(rv2, rv, c, 1e-6, "running var");

    /* eval, from the updated running statistics */
    float *ye = test_alloc(sizeof(float) * count);
    uint16_t *yeh = test_alloc(sizeof(uint16_t) * count);
    (k->blocked ? dt_batchnorm2d_forward_eval_blocked
                : dt_batchnorm2d_forward_eval)(ye, x, rm, rv, w, b, n, c, hw, eps);
    if (k->relu) dt_relu_forward(ye, ye, count);
    if (bn)
        dt_bf16_batchnorm_forward_eval(bn, n, yeh, xh, rm, rv, w, b);
    else
        dt_bf16_batchnorm2d_forward_eval(yeh, xh, rm, rv, w, b, n, c, hw, eps, k->blocked, k->relu);
    if (bn) /* oneDNN: its own order of the same operations */
        expect_close(yeh, ye, count, "batchnorm forward (eval)");
    else
        expect_rounded(yeh, ye, count, "batchnorm forward (eval)");

    /* backward from the same statistics; with the fused ReLU, the reference masks dy by
     * relu's output first, as the graph's ReLU backward does */
    float *dyr = copy_f32(dy, count);
    if (k->relu) {
        float *yr = test_alloc(sizeof(float) * count);
        for (size_t i = 0; i < count; i++) yr[i] = dt_bf16_to_f32(yh[i]);
        dt_relu_backward(dyr, dyr, yr, count);
        free(yr);
    }
    float *dx = k->add ? copy_f32(d0, count) : test_alloc(sizeof(float) * count);
    float *dw = bf16_valued(c, 17, -1, 1), *db = bf16_valued(c, 18, -1, 1);
    float *dw2 = copy_f32(dw, c), *db2 = copy_f32(db, c);
    (k->blocked ? dt_batchnorm2d_backward_blocked
                : dt_batchnorm2d_backward)(dx, dw, db, dyr, x, mean2, invstd2, w, n, c, hw, 1);
    uint16_t *dyh = to_bf16(dy, count), *dxh = to_bf16(d0, count);
    if (bn)
        dt_bf16_batchnorm_backward(bn, n, dxh, dw2, db2, dyh, xh, yh, mean2, invstd2, w, k->add);
    else
        dt_bf16_batchnorm2d_backward(dxh, dw2, db2, dyh, xh, mean2, invstd2, w, k->relu ? yh : NULL,
                                     n, c, hw, k->blocked, k->add);
    double terms = 0.0; /* din = weight * invstd * (dy - mean(dy) - xhat * mean(dy xhat)) */
    for (int ch = 0; ch < c; ch++) terms = fmax(terms, fabs(w[ch] * invstd2[ch]));
    expect_close_to_terms(dxh, dx, count, terms, "batchnorm backward din"); /* |dy| <= 1 */
    expect_rel(dw2, dw, c, FP32_NOISE, "batchnorm dweight");
    expect_rel(db2, db, c, FP32_NOISE, "batchnorm dbias");
    /* din NULL: only the parameter gradients */
    if (bn)
        dt_bf16_batchnorm_backward(bn, n, NULL, dw2, db2, dyh, xh, yh, mean2, invstd2, w, k->add);
    else
        dt_bf16_batchnorm2d_backward(NULL, dw2, db2, dyh, xh, mean2, invstd2, w,
                                     k->relu ? yh : NULL, n, c, hw, k->blocked, k->add);
    dt_bf16_batchnorm_destroy(bn);
    free(x), free(w), free(b), free(rm), free(rv), free(rm2), free(rv2), free(dy), free(d0);
    free(y), free(mean), free(invstd), free(xh), free(yh), free(mean2), free(invstd2);
    free(ye), free(yeh), free(dyr), free(dx), free(dw), free(db), free(dw2), free(db2), free(dyh);
    free(dxh);
}

static const bn_case bn_cases[] = {
    {3, 5, 37, 0, 0, 0, 0.0f},  {3, 5, 37, 0, 1, 1, 0.5f},  {2, 3, 1, 0, 0, 1, 0.0f},
    {4, 7, 70, 0, 0, 0, 60.0f}, {3, 32, 37, 1, 0, 0, 0.0f}, {3, 32, 37, 1, 1, 1, 0.5f},
    {2, 16, 5, 1, 1, 0, 60.0f}, {5, 16, 64, 1, 0, 1, 0.0f}, {4, 48, 9, 1, 1, 0, 0.0f},
    {3, 32, 37, 1, 0, 0, 0.5f},
};

static void test_batchnorm_matches_f32(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bn_cases / sizeof *bn_cases; i++) check_bn(&bn_cases[i], NULL);
}

/* The plan: oneDNN on nChw16c (ReLU fused through its mask; an added din through the
 * loops), the loops on NCHW; the same bounds. */
static void test_batchnorm_plan_matches_f32(void **state) {
    for (size_t i = 0; i < sizeof bn_cases / sizeof *bn_cases; i++) check_bn(&bn_cases[i], *state);
}

/* ---- pooling ---- */

/* Inputs with many ties (few distinct values), a NaN and infinities. */
static float *pool_input(size_t count, uint64_t seed) {
    float *x = bf16_valued(count, seed, -2, 2);
    for (size_t i = 0; i < count; i++) x[i] = floorf(x[i] * 2) / 2;
    x[count / 3] = NAN;
    x[count / 2] = INFINITY;
    x[count / 5] = -INFINITY;
    return x;
}

static void check_maxpool(int n, int c, int h, int w, int kernel, int stride, int pad, int ceil,
                          int blocked, int add) {
    const int ho = dt_pool2d_out_size_padded(h, kernel, stride, pad, ceil),
              wo = dt_pool2d_out_size_padded(w, kernel, stride, pad, ceil);
    const size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * ho * wo;
    float *x = pool_input(in_n, 20 + h), *y = test_alloc(sizeof(float) * out_n);
    if (blocked) {
        float *t = blocked_f32(x, n, c, h * w);
        free(x), x = t;
    }
    int32_t *am = test_alloc(sizeof(int32_t) * out_n), *am2 = test_alloc(sizeof(int32_t) * out_n);
    (blocked ? dt_maxpool2d_forward_blocked : dt_maxpool2d_forward)(y, am, x, n, c, h, w, kernel,
                                                                    stride, pad, ceil);
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_bf16_maxpool2d_forward(yh, am2, xh, n, c, h, w, kernel, stride, pad, ceil, blocked);
    expect_rounded(yh, y, out_n, "maxpool forward");
    assert_memory_equal(am, am2, sizeof(int32_t) * out_n);
    float *dy = bf16_valued(out_n, 21, -1, 1), *dx = bf16_valued(in_n, 22, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n), *dxh = to_bf16(dx, in_n);
    if (!add) memset(dx, 0, sizeof(float) * in_n);
    (blocked ? dt_maxpool2d_backward_blocked : dt_maxpool2d_backward)(dx, dy, am, n, c, h, w,
                                                                      kernel, stride, pad, ceil);
    dt_bf16_maxpool2d_backward(dxh, dyh, am2, n, c, h, w, kernel, stride, pad, ceil, blocked, add);
    /* written: the same sums in the same order, rounded once; added: one more term */
    if (add)
        expect_close(dxh, dx, in_n, "maxpool backward (add)");
    else
        expect_rounded(dxh, dx, in_n, "maxpool backward (write)");
    free(x), free(y), free(am), free(am2), free(xh), free(yh), free(dy), free(dx), free(dyh);
    free(dxh);
}

static void test_maxpool_matches_f32(void **state) {
    (void)state;
    for (int add = 0; add < 2; add++)
        for (int blocked = 0; blocked < 2; blocked++) {
            const int c = blocked ? 32 : 3;
            check_maxpool(2, c, 8, 8, 2, 2, 0, 0, blocked, add);
            check_maxpool(2, c, 7, 9, 2, 2, 0, 0, blocked, add);
            check_maxpool(2, c, 11, 10, 3, 2, 1, 1, blocked, add); /* overlapping, padded */
            check_maxpool(3, c, 6, 7, 3, 2, 0, 1, blocked, add);   /* ceil mode */
            check_maxpool(1, c, 5, 5, 3, 1, 1, 0, blocked, add);
            /* rows of more than one vector of outputs (and a tail), odd widths, the
             * models' shapes: lenet5, resnet50's stem, alexnet, googlenet */
            check_maxpool(2, c, 6, 70, 2, 2, 0, 0, blocked, add);
            check_maxpool(1, c, 7, 67, 2, 2, 0, 1, blocked, add);
            check_maxpool(1, c, 9, 75, 3, 2, 1, 1, blocked, add);
            check_maxpool(1, c, 8, 66, 3, 2, 1, 0, blocked, add);
            check_maxpool(1, c, 11, 55, 3, 2, 0, 0, blocked, add);
            check_maxpool(1, c, 10, 28, 3, 2, 0, 1, blocked, add);
            check_maxpool(2, c, 10, 10, 2, 2, 0, 0, blocked, add);
            check_maxpool(1, c, 13, 40, 4, 3, 1, 1, blocked, add); /* wider than the stride */
            check_maxpool(1, c, 9, 40, 1, 2, 0, 0, blocked, add);  /* gaps between windows */
        }
}

/* blocked: the input (and its gradient) nChw16c, also checked bit for bit against the
 * f32 pool of the same data in NCHW (the same sums in the same order). */
static void check_avgpool(int n, int c, int h, int w, int kernel, int stride, int blocked,
                          int add) {
    const int ho = dt_pool2d_out_size(h, kernel, stride),
              wo = dt_pool2d_out_size(w, kernel, stride);
    const size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * ho * wo;
    float *x_plain = bf16_valued(in_n, 30, -2, 2), *y = test_alloc(sizeof(float) * out_n);
    float *x = blocked ? blocked_f32(x_plain, n, c, h * w) : copy_f32(x_plain, in_n);
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_avgpool2d_forward(y, x, n, c, h, w, kernel, stride, blocked);
    dt_bf16_avgpool2d_forward(yh, xh, n, c, h, w, kernel, stride, blocked);
    expect_rounded(yh, y, out_n, "avgpool forward");
    float *dy = bf16_valued(out_n, 31, -1, 1), *dx = bf16_valued(in_n, 32, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n), *dxh = to_bf16(dx, in_n);
    if (!add) memset(dx, 0, sizeof(float) * in_n);
    float *dx_plain = copy_f32(dx, in_n); /* blocked or not, zeros stay zeros */
    dt_avgpool2d_backward(dx, dy, n, c, h, w, kernel, stride, blocked);
    dt_bf16_avgpool2d_backward(dxh, dyh, n, c, h, w, kernel, stride, blocked, add);
    if (add)
        expect_close(dxh, dx, in_n, "avgpool backward (add)");
    else
        expect_rounded(dxh, dx, in_n, "avgpool backward (write)");
    if (blocked && !add) {
        float *y_plain = test_alloc(sizeof(float) * out_n);
        dt_avgpool2d_forward(y_plain, x_plain, n, c, h, w, kernel, stride, 0);
        assert_memory_equal(y_plain, y, sizeof(float) * out_n);
        dt_avgpool2d_backward(dx_plain, dy, n, c, h, w, kernel, stride, 0);
        float *dx_reblocked = blocked_f32(dx_plain, n, c, h * w);
        assert_memory_equal(dx_reblocked, dx, sizeof(float) * in_n);
        free(y_plain), free(dx_reblocked);
    }
    free(x_plain), free(x), free(y), free(xh), free(yh), free(dy), free(dx), free(dyh), free(dxh);
    free(dx_plain);
}

/* Any windows: pads, count_include_pad both ways, ceil_mode, rectangles. */
static void check_avgpool_geom(int n, int c, int h, int w, dt_pool2d_geom g, int count_pad,
                               int blocked, int add) {
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, count_pad, h, w, &wy, &wx);
    const size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * wy.out * wx.out;
    float *x_plain = bf16_valued(in_n, 34, -2, 2), *y = test_alloc(sizeof(float) * out_n);
    float *x = blocked ? blocked_f32(x_plain, n, c, h * w) : copy_f32(x_plain, in_n);
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_avgpool2d_windows_forward(y, x, n, c, &wy, &wx, blocked);
    dt_bf16_avgpool2d_windows_forward(yh, xh, n, c, &wy, &wx, blocked);
    expect_rounded(yh, y, out_n, "avgpool (windows) forward");
    float *dy = bf16_valued(out_n, 35, -1, 1), *dx = bf16_valued(in_n, 36, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n), *dxh = to_bf16(dx, in_n);
    if (!add) memset(dx, 0, sizeof(float) * in_n);
    dt_avgpool2d_windows_backward(dx, dy, n, c, &wy, &wx, blocked);
    dt_bf16_avgpool2d_windows_backward(dxh, dyh, n, c, &wy, &wx, blocked, add);
    /* the f32 loop scatters each output's share, the bf16 one gathers them per cell: the
     * same terms in another order */
    expect_close(dxh, dx, in_n, "avgpool (windows) backward");
    free(x_plain), free(x), free(y), free(xh), free(yh), free(dy), free(dx), free(dyh), free(dxh);
}

static void test_avgpool_windows_match_f32(void **state) {
    (void)state;
    const dt_pool2d_geom avg331 = {3, 3, 1, 1, 1, 1, 1, 1, 0}, rect = {2, 3, 2, 1, 1, 0, 0, 2, 0},
                         ceil = {3, 2, 2, 2, 1, 0, 1, 1, 1};
    for (int add = 0; add < 2; add++)
        for (int blocked = 0; blocked < 2; blocked++)
            for (int count_pad = 0; count_pad < 2; count_pad++) {
                const int c = blocked ? 32 : 3;
                check_avgpool_geom(2, c, 6, 7, avg331, count_pad, blocked, add);
                check_avgpool_geom(2, c, 7, 6, rect, count_pad, blocked, add);
                check_avgpool_geom(2, c, 8, 7, ceil, count_pad, blocked, add);
            }
}

static void test_avgpool_matches_f32(void **state) {
    (void)state;
    for (int add = 0; add < 2; add++)
        for (int blocked = 0; blocked < 2; blocked++) {
            const int c = blocked ? 32 : 3;
            check_avgpool(2, c, 8, 8, 2, 2, blocked, add);
            check_avgpool(2, c, 9, 11, 3, 2, blocked, add); /* overlapping windows */
            check_avgpool(1, c, 4, 4, 4, 4, blocked, add);  /* resnet18's global 4x4 */
        }
}

static void check_adaptive(int n, int c, int h, int w, int ho, int wo, int blocked, int add) {
    const size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * ho * wo;
    float *x = bf16_valued(in_n, 40, -2, 2), *y = test_alloc(sizeof(float) * out_n);
    if (blocked) {
        float *t = blocked_f32(x, n, c, h * w);
        free(x), x = t;
    }
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_adaptive_avgpool2d_forward(y, x, n, c, h, w, ho, wo, blocked);
    dt_bf16_adaptive_avgpool2d_forward(yh, xh, n, c, h, w, ho, wo, blocked);
    expect_rounded(yh, y, out_n, "adaptive avgpool forward");
    float *dy = bf16_valued(out_n, 41, -1, 1), *dx = bf16_valued(in_n, 42, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n), *dxh = to_bf16(dx, in_n);
    if (!add) memset(dx, 0, sizeof(float) * in_n);
    dt_adaptive_avgpool2d_backward(dx, dy, n, c, h, w, ho, wo, blocked);
    dt_bf16_adaptive_avgpool2d_backward(dxh, dyh, n, c, h, w, ho, wo, blocked, add);
    if (add)
        expect_close(dxh, dx, in_n, "adaptive avgpool backward (add)");
    else
        expect_rounded(dxh, dx, in_n, "adaptive avgpool backward (write)");
    free(x), free(y), free(xh), free(yh), free(dy), free(dx), free(dyh), free(dxh);
}

static void test_adaptive_avgpool_matches_f32(void **state) {
    (void)state;
    for (int add = 0; add < 2; add++)
        for (int blocked = 0; blocked < 2; blocked++) {
            const int c = blocked ? 32 : 3;
            check_adaptive(2, c, 4, 4, 1, 1, blocked, add); /* the global pool */
            check_adaptive(2, c, 5, 7, 3, 2, blocked, add); /* overlapping cells */
            check_adaptive(1, c, 2, 3, 4, 5, blocked, add); /* more cells than pixels */
        }
}

/* ---- dropout, concat, shortcut_pad ---- */

static void test_dropout_drops_what_f32_drops(void **state) {
    (void)state;
    const size_t n = 50001;
    const dt_dropout_key key = {9, 3, 1ull << 40};
    float *x = bf16_valued(n, 50, -2, 2), *y = test_alloc(sizeof(float) * n);
    uint16_t *xh = to_bf16(x, n), *yh = test_alloc(sizeof(uint16_t) * n);
    dt_dropout_forward(y, x, n, 0.3f, key);
    dt_bf16_dropout_forward(yh, xh, n, 0.3f, key);
    expect_rounded(yh, y, n, "dropout forward");
    size_t dropped = 0;
    for (size_t i = 0; i < n; i++) dropped += yh[i] == 0 && x[i] != 0;
    assert_true(dropped > n / 4 && dropped < n * 35 / 100); /* the mask is really there */
    float *g = bf16_valued(n, 51, -1, 1), *d0 = bf16_valued(n, 52, -1, 1);
    uint16_t *gh = to_bf16(g, n);
    for (int add = 0; add < 2; add++) {
        float *ref = add ? copy_f32(d0, n) : test_alloc(sizeof(float) * n);
        uint16_t *dh = to_bf16(d0, n);
        dt_dropout_backward(ref, g, n, 0.3f, key);
        dt_bf16_dropout_backward(dh, gh, n, 0.3f, key, add);
        expect_rounded(dh, ref, n, add ? "dropout backward (add)" : "dropout backward (write)");
        free(ref), free(dh);
    }
    free(x), free(y), free(xh), free(yh), free(g), free(d0), free(gh);
}

static void test_concat_matches_f32(void **state) {
    (void)state;
    const int n = 3, hw = 13, channels[3] = {2, 5, 1}, total = 8;
    float *xs[3], *dxs[3];
    uint16_t *xhs[3], *dxhs[3];
    for (int k = 0; k < 3; k++) {
        xs[k] = bf16_valued((size_t)n * channels[k] * hw, 60 + k, -1, 1);
        xhs[k] = to_bf16(xs[k], (size_t)n * channels[k] * hw);
        dxs[k] = bf16_valued((size_t)n * channels[k] * hw, 70 + k, -1, 1);
        dxhs[k] = to_bf16(dxs[k], (size_t)n * channels[k] * hw);
    }
    const size_t out_n = (size_t)n * total * hw;
    float *y = test_alloc(sizeof(float) * out_n);
    uint16_t *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_concat_forward(y, (const float *const *)xs, channels, 3, n, hw);
    dt_bf16_concat_forward(yh, (const uint16_t *const *)xhs, channels, 3, n, hw);
    expect_rounded(yh, y, out_n, "concat forward");
    const int add[3] = {1, 0, 1};
    for (int k = 0; k < 3; k++)
        if (!add[k]) memset(dxs[k], 0, sizeof(float) * n * channels[k] * hw);
    dt_concat_backward(dxs, y, channels, 3, n, hw);
    dt_bf16_concat_backward(dxhs, yh, channels, 3, n, hw, add);
    for (int k = 0; k < 3; k++) {
        expect_rounded(dxhs[k], dxs[k], (size_t)n * channels[k] * hw, "concat backward");
        free(xs[k]), free(xhs[k]), free(dxs[k]), free(dxhs[k]);
    }
    free(y), free(yh);
}

/* One input's part of a concat along an inner axis (outer 6, the axis 7 long, the input
 * rows 2..4 of it, inner 4), as the op runs any axis and any count of inputs. */
static void test_concat_part_matches_f32(void **state) {
    (void)state;
    const size_t outer = 6, inner = 4;
    const int total = 7, offset = 2, size = 3;
    const size_t in_n = outer * size * inner, out_n = outer * total * inner;
    float *x = bf16_valued(in_n, 90, -1, 1), *y = bf16_valued(out_n, 91, -1, 1);
    uint16_t *xh = to_bf16(x, in_n), *yh = to_bf16(y, out_n);
    dt_concat_part_forward(y, x, outer, total, offset, size, inner);
    dt_bf16_concat_part_forward(yh, xh, outer, total, offset, size, inner);
    expect_rounded(yh, y, out_n, "concat part forward"); /* the other rows untouched alike */
    for (int add = 0; add < 2; add++) {
        float *dx = bf16_valued(in_n, 92, -1, 1);
        uint16_t *dxh = to_bf16(dx, in_n);
        if (!add) memset(dx, 0, sizeof(float) * in_n);
        dt_concat_part_backward(dx, y, outer, total, offset, size, inner);
        dt_bf16_concat_part_backward(dxh, yh, outer, total, offset, size, inner, add);
        expect_rounded(dxh, dx, in_n, "concat part backward");
        free(dx), free(dxh);
    }
    free(x), free(y), free(xh), free(yh);
}

/* Constant padding: copies and a constant, so the bf16 result is the fp32 one rounded;
 * the gradient's interior likewise (written), or within one rounding (added). */
static void test_pad2d_matches_f32(void **state) {
    (void)state;
    const int n = 2, c = 3, h = 5, w = 4, pads[4] = {2, 0, 1, 3};
    const size_t in_n = (size_t)n * c * h * w, out_n = (size_t)n * c * (h + 3) * (w + 3);
    float *x = bf16_valued(in_n, 95, -1, 1), *y = test_alloc(sizeof(float) * out_n);
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    dt_pad2d_forward(y, x, n, c, h, w, pads, 0.5f);
    dt_bf16_pad2d_forward(yh, xh, n, c, h, w, pads, 0.5f);
    expect_rounded(yh, y, out_n, "pad2d forward");
    float *dy = bf16_valued(out_n, 96, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n);
    for (int add = 0; add < 2; add++) {
        float *dx = bf16_valued(in_n, 97, -1, 1);
        uint16_t *dxh = to_bf16(dx, in_n);
        dt_pad2d_backward(dx, dy, n, c, h, w, pads, add);
        dt_bf16_pad2d_backward(dxh, dyh, n, c, h, w, pads, add);
        expect_rounded(dxh, dx, in_n, "pad2d backward");
        free(dx), free(dxh);
    }
    free(x), free(y), free(xh), free(yh), free(dy), free(dyh);
}

static void test_shortcut_pad_matches_f32(void **state) {
    (void)state;
    const int n = 2, c_in = 3, h = 7, w = 6, c_out = 8, pad_lo = 2, stride = 2;
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    const size_t in_n = (size_t)n * c_in * h * w, out_n = (size_t)n * c_out * ho * wo;
    float *x = bf16_valued(in_n, 80, -1, 1), *y = test_alloc(sizeof(float) * out_n);
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    memset(yh, 0xff, sizeof(uint16_t) * out_n); /* the zero channels must be written */
    dt_shortcut_pad_forward(y, x, n, c_in, h, w, c_out, pad_lo, stride);
    dt_bf16_shortcut_pad_forward(yh, xh, n, c_in, h, w, c_out, pad_lo, stride);
    expect_rounded(yh, y, out_n, "shortcut_pad forward");
    float *dy = bf16_valued(out_n, 81, -1, 1);
    uint16_t *dyh = to_bf16(dy, out_n);
    for (int add = 0; add < 2; add++) {
        float *dx = bf16_valued(in_n, 82, -1, 1);
        uint16_t *dxh = to_bf16(dx, in_n);
        if (!add) memset(dx, 0, sizeof(float) * in_n);
        dt_shortcut_pad_backward(dx, dy, n, c_in, h, w, c_out, pad_lo, stride);
        dt_bf16_shortcut_pad_backward(dxh, dyh, n, c_in, h, w, c_out, pad_lo, stride, add);
        expect_rounded(dxh, dx, in_n, "shortcut_pad backward");
        free(dx), free(dxh);
    }
    free(x), free(y), free(xh), free(yh), free(dy), free(dyh);
}

/* ---- oneDNN: linear and conv2d ---- */

/* A buffer of dtype t holding the bf16-valued floats x. */
static void *as_dtype(const float *x, size_t n, dt_dtype t) {
    return t == DT_BF16 ? (void *)to_bf16(x, n) : (void *)copy_f32(x, n);
}

/* The bf16 result against the fp32 one: rounded-result bound for bf16, fp32 noise for
 * f32 (the same exact products summed in another order). */
static void expect_result(const void *got, dt_dtype t, const float *ref, size_t n,
                          const char *what) {
    if (t == DT_BF16) {
        expect_close(got, ref, n, what);
        return;
    }
    expect_rel(got, ref, n, FP32_NOISE, what);
}

static void check_linear(dt_dnnl *ctx, int in_f, int out_f, dt_dtype in_t, dt_dtype out_t) {
    const int max_batch = 9;
    dt_bf16_linear *lin;
    dt_error err;
    if (dt_bf16_linear_create(&lin, ctx, max_batch, in_f, out_f, 1, in_t, out_t, &err))
        fail_msg("%s", err.msg);
    assert_true(dt_bf16_linear_own_bytes(lin) >= sizeof(uint16_t) * in_f * out_f);
    for (int n = max_batch; n >= 4; n -= 5) { /* the planned batch, then a smaller one */
        const size_t in_n = (size_t)n * in_f, out_n = (size_t)n * out_f;
        float *x = bf16_valued(in_n, 90, -1, 1), *wt = bf16_valued((size_t)in_f * out_f, 91, -1, 1);
        float *b = bf16_valued(out_f, 92, -1, 1), *y = test_alloc(sizeof(float) * out_n);
        dt_linear_forward(y, x, wt, b, n, in_f, out_f, NULL);
        void *xd = as_dtype(x, in_n, in_t), *yd = as_dtype(y, out_n, out_t);
        /* the master weight need not be bf16-valued: forward rounds it */
        float *master = copy_f32(wt, (size_t)in_f * out_f);
        for (size_t i = 0; i < (size_t)in_f * out_f; i += 3) master[i] *= 1.0f + 1.0f / 1024;
        for (size_t i = 0; i < (size_t)in_f * out_f; i += 3)
            assert_true(dt_bf16_from_f32(master[i]) == dt_bf16_from_f32(wt[i]));
        dt_bf16_linear_forward(lin, n, yd, xd, master, b);
        expect_result(yd, out_t, y, out_n, "linear forward");
        float *dy = bf16_valued(out_n, 93, -1, 1), *d0 = bf16_valued(in_n, 94, -1, 1);
        void *dyd = as_dtype(dy, out_n, out_t);
        for (int add = 0; add < 2; add++) {
            float *dx = add ? copy_f32(d0, in_n) : test_alloc(sizeof(float) * in_n);
            float *dw = bf16_valued((size_t)in_f * out_f, 95, -1, 1),
                  *db = bf16_valued(out_f, 96, -1, 1);
            float *dw2 = copy_f32(dw, (size_t)in_f * out_f), *db2 = copy_f32(db, out_f);
            void *dxd = as_dtype(d0, in_n, in_t);
            dt_linear_backward(dx, dw, db, dy, x, wt, n, in_f, out_f);
            dt_bf16_linear_backward(lin, n, dxd, dw2, db2, dyd, xd, add);
            expect_result(dxd, in_t, dx, in_n, "linear din");
            expect_rel(dw2, dw, (size_t)in_f * out_f, FP32_NOISE, "linear dweight");
            expect_rel(db2, db, out_f, FP32_NOISE, "linear dbias");
            free(dx), free(dw), free(db), free(dw2), free(db2), free(dxd);
        }
        free(x), free(wt), free(b), free(y), free(xd), free(yd), free(master), free(dy), free(d0);
        free(dyd);
    }
    dt_bf16_linear_destroy(lin);
}

static void test_linear_matches_f32(void **state) {
    dt_dnnl *ctx = *state;
    check_linear(ctx, 37, 10, DT_BF16, DT_F32); /* a classifier head: logits in f32 */
    check_linear(ctx, 64, 33, DT_BF16, DT_BF16);
    check_linear(ctx, 29, 16, DT_F32, DT_BF16);
    check_linear(ctx, 48, 7, DT_F32, DT_F32);
}

/* A conv with bf16 activations against the same conv (bf16 multiplications) with f32
 * ones on the same bf16-valued data: the products and sums are the same primitives'
 * (or equal), so outputs differ by the final rounding only. Output planes of up to 16
 * positions with a blocked bf16 input take the weight gradient as a matmul of the
 * unfolded input (conv2d_dnnl.c): the same products summed in another order. */
typedef struct conv_case {
    int h, w, kh, kw, stride, pad, dilation;
} conv_case;

static void check_conv(dt_dnnl *ctx, const conv_case *k, int in_blocked, int out_blocked,
                       int sole_writer) {
    const int n = 3, c_in = 32, c_out = 32; /* two channel blocks */
    dt_conv2d_shape s;
    assert_int_equal(dt_conv2d_shape_make_grouped(&s, n, c_in, k->h, k->w, c_out, k->kh, k->kw,
                                                  k->stride, k->pad, k->dilation, 1),
                     0);
    const int h = k->h, w = k->w;
    const size_t in_n = (size_t)n * c_in * h * w, out_n = (size_t)n * c_out * s.h_out * s.w_out,
                 wei_n = (size_t)c_out * c_in * k->kh * k->kw;
    dt_conv2d_plan *plans[2];
    dt_dnnl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    dt_error err;
    for (int j = 0; j < 2; j++) {
        const dt_dtype t = j ? DT_BF16 : DT_F32;
        dt_exec_conv2d_io io = {in_blocked, out_blocked, sole_writer, t, t};
        if (dt_conv2d_plan_create(&plans[j], ctx, &s, 1, &io, 1, &scratch, &err) ||
            dt_conv2d_plan_alloc(plans[j], &err))
            fail_msg("%s", err.msg);
    }
    /* the bf16 plan's weight gradient is the matmul exactly where the rule says */
    assert_int_equal(dt_conv2d_plan_wgrad_is_matmul(plans[0]), 0);
    assert_int_equal(dt_conv2d_plan_wgrad_is_matmul(plans[1]),
                     in_blocked && s.h_out * s.w_out <= 16);
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) scratch.act[i] = test_alloc(scratch.act_bytes[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++)
        scratch.weight[i] = test_alloc(scratch.weight_bytes[i]);
    float *x = bf16_valued(in_n, 100, -1, 1), *wt = bf16_valued(wei_n, 101, -0.3f, 0.3f);
    float *b = bf16_valued(c_out, 102, -1, 1), *dy = bf16_valued(out_n, 103, -1, 1);
    float *d0 = bf16_valued(in_n, 104, -1, 1);
    float *y = test_alloc(sizeof(float) * out_n), *dx = copy_f32(d0, in_n);
    float *dw = test_alloc(sizeof(float) * wei_n), *db = test_alloc(sizeof(float) * c_out);
    float *dw2 = test_alloc(sizeof(float) * wei_n), *db2 = test_alloc(sizeof(float) * c_out);
    if (sole_writer) memset(dx, 0, sizeof(float) * in_n); /* the graph's zeroed gradient */
    /* layouts are the plans' business: both see the same (blocked or not) bytes */
    uint16_t *xh = to_bf16(x, in_n), *yh = test_alloc(sizeof(uint16_t) * out_n);
    uint16_t *dyh = to_bf16(dy, out_n), *dxh = to_bf16(dx, in_n);
    /* the planned batch, then a smaller one (a last partial batch: its own primitives) */
    for (int m = n; m >= n - 1; m--) {
        const size_t in_m = in_n / n * m, out_m = out_n / n * m;
        if (m < n) { /* input gradients from their start again: one rounding each */
            if (sole_writer)
                memset(dx, 0, sizeof(float) * in_n);
            else
                memcpy(dx, d0, sizeof(float) * in_n);
            free(dxh);
            dxh = to_bf16(dx, in_n);
        }
        dt_conv2d_plan_forward(plans[0], &scratch, m, y, x, wt, b);
        dt_conv2d_plan_forward(plans[1], &scratch, m, yh, xh, wt, b);
        expect_close(yh, y, out_m, "conv forward");
        dt_conv2d_plan_backward(plans[0], &scratch, m, dx, dw, db, dy, x, wt);
        dt_conv2d_plan_backward(plans[1], &scratch, m, dxh, dw2, db2, dyh, xh, wt);
        expect_close(dxh, dx, in_m, "conv din");
        expect_rel(dw2, dw, wei_n, FP32_NOISE, "conv dweight");
        expect_rel(db2, db, c_out, FP32_NOISE, "conv dbias");
    }
    for (int j = 0; j < 2; j++) dt_conv2d_plan_destroy(plans[j]);
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) free(scratch.act[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++) free(scratch.weight[i]);
    free(x), free(wt), free(b), free(dy), free(d0), free(y), free(dx), free(dw), free(db);
    free(dw2), free(db2), free(xh), free(yh), free(dyh), free(dxh);
}

static const conv_case conv_cases[] = {
    {9, 7, 3, 3, 1, 1, 1}, /* 63 positions: oneDNN's weight gradient */
    {4, 4, 3, 3, 1, 1, 1}, /* 16 positions: the matmul of the unfolded input */
    {8, 7, 3, 3, 2, 1, 1}, /* 4x4, strided */
    {8, 8, 1, 1, 2, 0, 1}, /* resnet18's 1x1 stride-2 shortcut to 4x4 */
    {5, 5, 3, 3, 1, 1, 2}, /* dilated: 3x3 out */
    {2, 4, 3, 1, 1, 1, 1}, /* a 3x1 kernel: 2x6 out */
};

static void test_conv_bf16_activations_match_f32(void **state) {
    dt_dnnl *ctx = *state;
    for (int in_blocked = 0; in_blocked < 2; in_blocked++)
        for (int out_blocked = 0; out_blocked < 2; out_blocked++)
            for (int sole = 0; sole < 2; sole++)
                for (size_t k = 0; k < sizeof conv_cases / sizeof *conv_cases; k++)
                    check_conv(ctx, &conv_cases[k], in_blocked, out_blocked, sole);
}

static int dnnl_setup(void **state) {
    dt_dnnl *ctx;
    dt_error err;
    if (dt_dnnl_create(&ctx, &err)) return -1;
    *state = ctx;
    return 0;
}

static int dnnl_teardown(void **state) {
    dt_dnnl_destroy(*state);
    return 0;
}

int main(void) {
    const struct CMUnitTest loops[] = {
        cmocka_unit_test(test_conversions_match_dtype_h),
        cmocka_unit_test(test_relu_matches_f32),
        cmocka_unit_test(test_add_matches_f32),
        cmocka_unit_test(test_batchnorm_matches_f32),
        cmocka_unit_test(test_maxpool_matches_f32),
        cmocka_unit_test(test_avgpool_matches_f32),
        cmocka_unit_test(test_avgpool_windows_match_f32),
        cmocka_unit_test(test_adaptive_avgpool_matches_f32),
        cmocka_unit_test(test_dropout_drops_what_f32_drops),
        cmocka_unit_test(test_concat_matches_f32),
        cmocka_unit_test(test_concat_part_matches_f32),
        cmocka_unit_test(test_pad2d_matches_f32),
        cmocka_unit_test(test_shortcut_pad_matches_f32),
    };
    const struct CMUnitTest dnnl[] = {
        cmocka_unit_test(test_batchnorm_plan_matches_f32),
        cmocka_unit_test(test_linear_matches_f32),
        cmocka_unit_test(test_conv_bf16_activations_match_f32),
    };
    int failed = cmocka_run_group_tests_name("bf16 loops", loops, NULL, NULL);
    if (!dt_cpu_has_bf16()) { /* oneDNN would emulate bf16: nothing worth checking */
        printf("skipped: no AVX512-BF16 or AMX (%s, ONEDNN_MAX_CPU_ISA counted): the oneDNN "
               "bf16 layers are not tested\n",
               dt_cpu_isa_name());
        return failed ? failed : 77;
    }
    return failed + cmocka_run_group_tests_name("bf16 on oneDNN", dnnl, dnnl_setup, dnnl_teardown);
}
