/* The oneDNN conv2d backend against the im2col reference (itself checked against
 * finite differences): forward, weight/bias/input gradients, accumulation into
 * existing gradients, and a second batch size on the same plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu_isa.h"
#include "dtrain/error.h"
#include "exec/conv2d_dnnl.h"
#include "nn/conv2d.h"
#include "testutil.h"

static void check_rect(dt_dnnl *ctx, int n, int c_in, int h, int w, int c_out, int kh, int kw,
                       int sh, int sw, const int pads[4], int dilation, int groups, int bias) {
    dt_conv2d_shape s;
    assert_int_equal(
        dt_conv2d_shape_make_rect(&s, n, c_in, h, w, c_out, kh, kw, sh, sw, pads, dilation, groups),
        0);
    size_t nx = (size_t)n * c_in * h * w, nw = (size_t)c_out * (c_in / groups) * kh * kw;
    size_t no = (size_t)n * c_out * s.h_out * s.w_out;
    float *x = test_alloc(4 * nx), *wt = test_alloc(4 * nw), *b = test_alloc(4 * c_out);
    float *dy = test_alloc(4 * no), *ws = test_alloc(4 * dt_conv2d_workspace_floats(&s));
    float *y_ref = test_alloc(4 * no), *y = test_alloc(4 * no);
    float *dx_ref = test_alloc(4 * nx), *dx = test_alloc(4 * nx);
    float *dw_ref = test_alloc(4 * nw), *dw = test_alloc(4 * nw);
    float *db_ref = test_alloc(4 * c_out), *db = test_alloc(4 * c_out);
    fill_uniform(x, nx, 1, -1, 1);
    fill_uniform(wt, nw, 2, -1, 1);
    fill_uniform(b, c_out, 3, -1, 1);
    fill_uniform(dy, no, 4, -1, 1);
    /* Start the gradients non-zero: backward must accumulate. */
    fill_uniform(dx_ref, nx, 5, -1, 1);
    memcpy(dx, dx_ref, 4 * nx);
    fill_uniform(dw_ref, nw, 6, -1, 1);
    memcpy(dw, dw_ref, 4 * nw);
    fill_uniform(db_ref, c_out, 7, -1, 1);
    memcpy(db, db_ref, 4 * c_out);

    float *dw_start = test_alloc(4 * nw);
    memcpy(dw_start, dw, 4 * nw);
    dt_dnnl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    dt_conv2d_plan *plan;
    dt_error err;
    /* allocated: NCHW inputs are reordered once, in forward, and kept for backward */
    if (dt_conv2d_plan_create(&plan, ctx, &s, bias, NULL, 0, &scratch, &err) ||
        dt_conv2d_plan_alloc(plan, &err))
        fail_msg("%s", err.msg);
    print_message("kept input: %zu bytes\n", dt_conv2d_plan_own_bytes(plan));
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) scratch.act[i] = test_alloc(scratch.act_bytes[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++)
        scratch.weight[i] = test_alloc(scratch.weight_bytes[i]);

    /* Full batch, then a smaller one on the same plan (a last partial batch). */
    for (int m = n; m >= n - 1 && m >= 1; m--) {
        s.n = m;
        size_t mo = (size_t)m * c_out * s.h_out * s.w_out;
        dt_conv2d_forward(y_ref, x, wt, bias ? b : NULL, ws, &s);
        dt_conv2d_plan_forward(plan, &scratch, m, y, x, wt, bias ? b : NULL);
        double ef = rel_error(y, y_ref, mo);
        dt_conv2d_backward(dx_ref, dw_ref, bias ? db_ref : NULL, dy, x, wt, ws, &s);
        dt_conv2d_plan_backward(plan, &scratch, m, dx, dw, bias ? db : NULL, dy, x, wt);
        double ex = rel_error(dx, dx_ref, (size_t)m * c_in * h * w);
        double ew = rel_error(dw, dw_ref, nw), eb = rel_error(db, db_ref, c_out);
        print_message("n=%d c_in=%d %dx%d c_out=%d k=%dx%d s=%dx%d p=%d,%d,%d,%d d=%d g=%d: out "
                      "%.1e din %.1e dw %.1e db %.1e\n",
                      m, c_in, h, w, c_out, kh, kw, sh, sw, pads[0], pads[1], pads[2], pads[3],
                      dilation, groups, ef, ex, ew, eb);
        assert_true(ef < 1e-5 && ex < 1e-5 && ew < 1e-5 && eb < 1e-5);
        assert_true(rel_error(dw, dw_start, nw) > 1e-3); /* the gradient was added */
        memcpy(dw_start, dw, 4 * nw);
    }
    dt_conv2d_plan_destroy(plan);
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) free(scratch.act[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++) free(scratch.weight[i]);
    free(x), free(wt), free(b), free(dy), free(ws), free(y_ref), free(y), free(dx_ref), free(dx);
    free(dw_ref), free(dw), free(db_ref), free(db), free(dw_start);
}

/* NCHW -> nChw16c (c a multiple of 16). */
static void to_blocked(float *dst, const float *src, int n, int c, int h, int w) {
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < h * w; p++)
                dst[(((size_t)b * (c / 16) + ch / 16) * h * w + p) * 16 + ch % 16] =
                    src[((size_t)b * c + ch) * h * w + p];
}

/* A depthwise weight gradient (and bias gradient) from activations a model keeps in
 * nChw16c, against im2col's from the same values in NCHW: dw_backward_weights's
 * blocked indexing, where oneDNN's jit_dw refuses the plane (2x2, 1x1). */
static void check_depthwise_blocked(dt_dnnl *ctx, int n, int c, int h, int stride) {
    dt_conv2d_shape s;
    assert_int_equal(dt_conv2d_shape_make_grouped(&s, n, c, h, h, c, 3, 3, stride, 1, 1, c), 0);
    const dt_exec_conv2d_io io = {.in_blocked = 1, .out_blocked = 1};
    size_t nx = (size_t)n * c * h * h, nw = (size_t)c * 9, no = (size_t)n * c * s.h_out * s.w_out;
    float *x = test_alloc(4 * nx), *xb = test_alloc(4 * nx), *wt = test_alloc(4 * nw);
    float *dy = test_alloc(4 * no), *dyb = test_alloc(4 * no), *y = test_alloc(4 * no);
    float *ws = test_alloc(4 * dt_conv2d_workspace_floats(&s)), *dx_ref = test_alloc(4 * nx);
    float *dw_ref = test_alloc(4 * nw), *dw = test_alloc(4 * nw);
    float *db_ref = test_alloc(4 * c), *db = test_alloc(4 * c);
    fill_uniform(x, nx, 1, -1, 1);
    fill_uniform(wt, nw, 2, -1, 1);
    fill_uniform(dy, no, 4, -1, 1);
    fill_uniform(dw_ref, nw, 6, -1, 1);
    memcpy(dw, dw_ref, 4 * nw);
    memset(db_ref, 0, 4 * (size_t)c);
    memset(db, 0, 4 * (size_t)c);
    to_blocked(xb, x, n, c, h, h);
    to_blocked(dyb, dy, n, c, s.h_out, s.w_out);
    dt_conv2d_backward(dx_ref, dw_ref, db_ref, dy, x, wt, ws, &s);
    dt_dnnl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    dt_conv2d_plan *plan;
    dt_error err;
    if (dt_conv2d_plan_create(&plan, ctx, &s, 1, &io, 0, &scratch, &err) ||
        dt_conv2d_plan_alloc(plan, &err))
        fail_msg("%s", err.msg);
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) scratch.act[i] = test_alloc(scratch.act_bytes[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++)
        scratch.weight[i] = test_alloc(scratch.weight_bytes[i]);
    dt_conv2d_plan_forward(plan, &scratch, n, y, xb, wt, db_ref); /* any bias */
    dt_conv2d_plan_backward(plan, &scratch, n, NULL, dw, db, dyb, xb, wt);
    const double ew = rel_error(dw, dw_ref, nw), eb = rel_error(db, db_ref, (size_t)c);
    print_message(
        "blocked depthwise %d ch %dx%d stride %d, weight gradient on %s: dw %.1e db %.1e\n", c, h,
        h, stride, dt_conv2d_plan_impl(plan, 2), ew, eb);
    assert_string_equal(dt_conv2d_plan_impl(plan, 2), "dtrain depthwise");
    assert_true(ew < 1e-5 && eb < 1e-5);
    dt_conv2d_plan_destroy(plan);
    for (int i = 0; i < DT_DNNL_ACT_SLOTS; i++) free(scratch.act[i]);
    for (int i = 0; i < DT_DNNL_WEIGHT_SLOTS; i++) free(scratch.weight[i]);
    free(x), free(xb), free(wt), free(dy), free(dyb), free(y), free(ws), free(dx_ref);
    free(dw_ref), free(dw), free(db_ref), free(db);
}

static void check_grouped(dt_dnnl *ctx, int n, int c_in, int h, int w, int c_out, int k, int stride,
                          int pad, int dilation, int groups, int bias) {
    const int pads[4] = {pad, pad, pad, pad};
    check_rect(ctx, n, c_in, h, w, c_out, k, k, stride, stride, pads, dilation, groups, bias);
}

static void check_shape(dt_dnnl *ctx, int n, int c_in, int h, int w, int c_out, int k, int stride,
                        int pad, int bias) {
    check_grouped(ctx, n, c_in, h, w, c_out, k, stride, pad, 1, 1, bias);
}

static void test_dnnl_conv2d_matches_im2col(void **state) {
    (void)state;
    dt_dnnl *ctx;
    dt_error err;
    if (dt_dnnl_create(&ctx, &err)) fail_msg("%s", err.msg);
    check_shape(ctx, 4, 16, 8, 8, 32, 3, 1, 1, 0);  /* resnet 3x3, blocked channels */
    check_shape(ctx, 3, 16, 8, 8, 32, 3, 2, 1, 0);  /* downsampling 3x3 */
    check_shape(ctx, 3, 16, 8, 8, 32, 1, 2, 0, 0);  /* 1x1 stride-2 shortcut (floor) */
    check_shape(ctx, 5, 1, 28, 28, 6, 5, 1, 2, 1);  /* lenet5 conv1, bias */
    check_shape(ctx, 5, 6, 14, 14, 16, 5, 1, 0, 1); /* lenet5 conv2 */
    check_shape(ctx, 2, 3, 9, 7, 5, 3, 2, 0, 1);    /* odd sizes, floor on both axes */
    check_shape(ctx, 1, 3, 32, 32, 8, 3, 1, 1, 0);  /* batch of one */
    /* ImageNet sizes, few channels (the im2col reference stays cheap under ASan) */
    check_shape(ctx, 2, 3, 224, 224, 4, 7, 2, 3, 0);  /* resnet50 / googlenet conv1 */
    check_shape(ctx, 2, 3, 224, 224, 4, 11, 4, 2, 1); /* alexnet features.0 */
    check_shape(ctx, 2, 16, 56, 56, 8, 1, 1, 0, 0);   /* bottleneck 1x1 */
    check_shape(ctx, 2, 16, 56, 56, 32, 1, 2, 0, 0);  /* downsample.0: 1x1 stride 2 */
    check_shape(ctx, 2, 8, 56, 56, 8, 3, 2, 1, 0);    /* v1.5's strided 3x3 */
    /* ONNX imports: grouped (goihw weights), depthwise, dilated */
    check_grouped(ctx, 3, 16, 8, 8, 32, 3, 1, 1, 1, 4, 1);  /* 4 groups, bias */
    check_grouped(ctx, 3, 32, 9, 9, 32, 3, 2, 1, 1, 32, 0); /* depthwise, stride 2 */
    check_grouped(ctx, 2, 6, 10, 10, 6, 3, 1, 1, 1, 6, 1);  /* depthwise, few channels */
    /* depthwise weight gradients oneDNN's jit_dw refuses, taken by dw_backward_weights:
     * mobilenet_v2's small planes (2x2, 1x1, 2x2 at stride 2), a 5x5 kernel, channels
     * not a multiple of 16, a bias */
    check_grouped(ctx, 3, 32, 2, 2, 32, 3, 1, 1, 1, 32, 0);
    check_grouped(ctx, 3, 48, 1, 1, 48, 3, 1, 1, 1, 48, 1);
    check_grouped(ctx, 3, 32, 2, 2, 32, 3, 2, 1, 1, 32, 0);
    check_grouped(ctx, 2, 20, 6, 7, 20, 5, 1, 2, 1, 20, 1);
    check_depthwise_blocked(ctx, 3, 32, 2, 1);
    check_depthwise_blocked(ctx, 3, 48, 1, 1);
    check_depthwise_blocked(ctx, 3, 32, 2, 2);
    check_grouped(ctx, 2, 16, 12, 12, 16, 3, 1, 2, 2, 1, 0); /* dilation 2, same size */
    check_grouped(ctx, 2, 8, 13, 11, 4, 3, 2, 3, 3, 2, 1);   /* dilated, strided, grouped */
    /* Inception v3's 1x7 / 7x1 (pads (0, 3), (3, 0)), ONNX's asymmetric pads (oneDNN's
     * padding_l and padding_r), strides per axis, a grouped rectangle */
    const int p17[4] = {0, 3, 0, 3}, p71[4] = {3, 0, 3, 0}, asym[4] = {1, 0, 2, 1};
    check_rect(ctx, 2, 16, 17, 17, 16, 1, 7, 1, 1, p17, 1, 1, 0);
    check_rect(ctx, 2, 16, 17, 17, 32, 7, 1, 1, 1, p71, 1, 1, 1);
    check_rect(ctx, 2, 3, 9, 10, 5, 3, 2, 2, 3, asym, 1, 1, 1);
    check_rect(ctx, 2, 8, 9, 10, 8, 2, 3, 1, 2, asym, 2, 4, 0);
    dt_dnnl_destroy(ctx);
}

/* MobileNet's and EfficientNet's depthwise (groups = channels) and pointwise (1x1)
 * convolutions, as a model lays them out (nChw16c), run on oneDNN's JIT or brgemm
 * kernels in every pass, in fp32 and, where the CPU has it, bf16: not on its GEMM-based
 * (im2col) or reference ones, which are many times slower (dt_dnnl_fast_impl). */
static void check_fast(dt_dnnl *ctx, int c_in, int c_out, int k, int stride, int groups, int bf16,
                       int wgrad_may_be_gemm) {
    dt_conv2d_shape s;
    assert_int_equal(
        dt_conv2d_shape_make_grouped(&s, 8, c_in, 16, 16, c_out, k, k, stride, k / 2, 1, groups),
        0);
    const dt_exec_conv2d_io io = {.in_blocked = 1,
                                  .out_blocked = 1,
                                  .in_dtype = bf16 ? DT_BF16 : DT_F32,
                                  .out_dtype = bf16 ? DT_BF16 : DT_F32};
    dt_dnnl_scratch scratch;
    memset(&scratch, 0, sizeof scratch);
    dt_conv2d_plan *plan;
    dt_error err;
    if (dt_conv2d_plan_create(&plan, ctx, &s, 0, &io, bf16, &scratch, &err))
        fail_msg("%s", err.msg);
    for (int pass = 0; pass < 3; pass++) {
        const char *impl = dt_conv2d_plan_impl(plan, pass);
        print_message("%s %dx%d %d->%d groups %d stride %d, %s: %s\n", bf16 ? "bf16" : "fp32", k, k,
                      c_in, c_out, groups, stride,
                      pass == 0   ? "forward"
                      : pass == 1 ? "input gradient"
                                  : "weight gradient",
                      impl);
        const int fast = !strncmp(impl, "jit", 3) || !strncmp(impl, "brg", 3) ||
                         !strcmp(impl, "matmul") || !strcmp(impl, "dtrain depthwise");
        if ((!fast || strstr(impl, "gemm")) && !(pass == 2 && wgrad_may_be_gemm))
            fail_msg("not a JIT kernel: %s", impl);
    }
    dt_conv2d_plan_destroy(plan);
}

static void test_depthwise_and_pointwise_run_on_jit_kernels(void **state) {
    (void)state;
    dt_dnnl *ctx;
    dt_error err;
    if (dt_dnnl_create(&ctx, &err)) fail_msg("%s", err.msg);
    for (int bf16 = 0; bf16 <= dt_cpu_has_bf16(); bf16++) {
        check_fast(ctx, 32, 32, 3, 1, 32, bf16, 0); /* depthwise 3x3 */
        check_fast(ctx, 96, 96, 3, 2, 96, bf16, 0); /* depthwise, strided */
        check_fast(ctx, 32, 96, 1, 1, 1, bf16, 0);  /* pointwise expansion */
        check_fast(ctx, 96, 16, 1, 1, 1, bf16, 0);  /* pointwise projection */
        /* EfficientNet's 5x5 depthwise: forward and input gradient on jit_dw, but Debian's
         * oneDNN 2.6.3 gives its weight gradient to x64:gemm:jit in fp32 and bf16 alike;
         * fp32's is dtrain's own loop instead (dw_backward_weights), bf16's stays there
         * (printed above, a gap of oneDNN's to measure, not hidden) */
        check_fast(ctx, 96, 96, 5, 1, 96, bf16, bf16);
    }
    if (!dt_cpu_has_bf16()) print_message("bf16 not checked: no AVX512-BF16 or AMX here\n");
    dt_dnnl_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dnnl_conv2d_matches_im2col),
        cmocka_unit_test(test_depthwise_and_pointwise_run_on_jit_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
