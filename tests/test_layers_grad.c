/* Every layer's backward against central finite differences of its forward.
 * The scalar checked is L = sum(out * r) for a fixed random r, so dL/dout = r. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "dtrain/activation.h"
#include "dtrain/backend.h"
#include "dtrain/model.h"
#include "nn/activation.h"
#include "nn/adaptive_avgpool2d.h"
#include "nn/batchnorm2d.h"
#include "nn/concat.h"
#include "nn/conv2d.h"
#include "nn/cross_entropy.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/pad2d.h"
#include "nn/pool2d.h"
#include "nn/relu.h"
#include "nn/residual.h"
#include "nn/shortcut_pad.h"
#include "testutil.h"

typedef struct checked {
    const char *name;
    float *data, *grad;
    size_t n;
} checked;

typedef struct layer_case {
    void *ctx;
    double (*forward)(void *ctx); /* returns L */
    void (*backward)(void *ctx);  /* accumulates dL/d(each checked) into its grad */
    checked vars[4];
    int n_vars;
    float eps;
} layer_case;

static double dot(const float *out, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * r[i];
    return s;
}

/* Checks every variable's analytic gradient against finite differences; at most
 * `max_points` evenly spaced elements per variable. */
static void check_case(layer_case *c, size_t max_points, double tol) {
    for (int v = 0; v < c->n_vars; v++) memset(c->vars[v].grad, 0, sizeof(float) * c->vars[v].n);
    c->forward(c->ctx);
    c->backward(c->ctx);
    for (int v = 0; v < c->n_vars; v++) {
        checked *x = &c->vars[v];
        size_t stride = x->n > max_points ? x->n / max_points : 1, k = 0;
        float *numeric = test_alloc(sizeof(float) * x->n),
              *analytic = test_alloc(sizeof(float) * x->n);
        for (size_t i = 0; i < x->n; i += stride, k++) {
            float saved = x->data[i];
            x->data[i] = saved + c->eps;
            double lp = c->forward(c->ctx);
            x->data[i] = saved - c->eps;
            double lm = c->forward(c->ctx);
            x->data[i] = saved;
            numeric[k] = (float)((lp - lm) / (2.0 * c->eps));
            analytic[k] = x->grad[i];
        }
        double err = rel_error(analytic, numeric, k);
        print_message("  %-8s %zu points, relative error %.2e\n", x->name, k, err);
        assert_true(err < tol);
        free(numeric);
        free(analytic);
    }
}

/* ---- linear ---- */
typedef struct {
    int n, in_f, out_f;
    float *x, *w, *b, *out, *r, *dx, *dw, *db, *scratch;
} linear_ctx;

static double linear_fwd(void *p) {
    linear_ctx *c = p;
    dt_linear_forward(c->out, c->x, c->w, c->b, c->n, c->in_f, c->out_f, c->scratch);
    return dot(c->out, c->r, (size_t)c->n * c->out_f);
}

static void linear_bwd(void *p) {
    linear_ctx *c = p;
    dt_linear_backward(c->dx, c->dw, c->db, c->r, c->x, c->w, c->n, c->in_f, c->out_f);
}

/* with_scratch: the forward gets the scratch it asks for (the transposed product of
 * classifier heads over many inputs) */
static void check_linear(int n, int in_f, int out_f, int with_scratch) {
    linear_ctx c = {.n = n, .in_f = in_f, .out_f = out_f};
    size_t nx = (size_t)c.n * c.in_f, nw = (size_t)c.out_f * c.in_f, no = (size_t)c.n * c.out_f;
    size_t ns = dt_linear_scratch_floats(n, in_f, out_f);
    c.x = test_alloc(4 * nx), c.dx = test_alloc(4 * nx), c.w = test_alloc(4 * nw);
    c.dw = test_alloc(4 * nw), c.b = test_alloc(4 * c.out_f), c.db = test_alloc(4 * c.out_f);
    c.out = test_alloc(4 * no), c.r = test_alloc(4 * no);
    c.scratch = with_scratch && ns ? test_alloc(4 * ns) : NULL;
    fill_uniform(c.x, nx, 1, -1, 1);
    fill_uniform(c.w, nw, 2, -1, 1);
    fill_uniform(c.b, c.out_f, 3, -1, 1);
    fill_uniform(c.r, no, 4, -1, 1);
    layer_case lc = {
        &c,
        linear_fwd,
        linear_bwd,
        {{"input", c.x, c.dx, nx}, {"weight", c.w, c.dw, nw}, {"bias", c.b, c.db, (size_t)c.out_f}},
        3,
        1e-2f};
    check_case(&lc, 1000, 1e-3);
    free(c.x), free(c.dx), free(c.w), free(c.dw), free(c.b), free(c.db), free(c.out), free(c.r);
    free(c.scratch);
}

static void test_linear_grad_matches_fd(void **state) {
    (void)state;
    check_linear(5, 7, 3, 0);
}

/* A head over many inputs: with its scratch (transposed product) and without, the
 * same gradients; and the two forwards agree. */
static void test_linear_head_grad_matches_fd(void **state) {
    (void)state;
    const int n = 6, in_f = 520, out_f = 10;
    assert_true(dt_linear_scratch_floats(n, in_f, out_f) == (size_t)n * out_f);
    assert_true(dt_linear_scratch_floats(n, 84, out_f) == 0);
    check_linear(n, in_f, out_f, 1);
    check_linear(n, in_f, out_f, 0);
    float *x = test_alloc(4 * (size_t)n * in_f), *w = test_alloc(4 * (size_t)out_f * in_f);
    float *b = test_alloc(4 * out_f), *a = test_alloc(4 * (size_t)n * out_f);
    float *t = test_alloc(4 * (size_t)n * out_f), *s = test_alloc(4 * (size_t)n * out_f);
    fill_uniform(x, (size_t)n * in_f, 5, -1, 1);
    fill_uniform(w, (size_t)out_f * in_f, 6, -1, 1);
    fill_uniform(b, out_f, 7, -1, 1);
    dt_linear_forward(a, x, w, b, n, in_f, out_f, s);
    dt_linear_forward(t, x, w, b, n, in_f, out_f, NULL);
    for (int i = 0; i < n * out_f; i++)
        assert_true(fabsf(a[i] - t[i]) <= 1e-4f * (1 + fabsf(t[i])));
    free(x), free(w), free(b), free(a), free(t), free(s);
}

/* ---- conv2d ---- */
typedef struct {
    dt_conv2d_shape s;
    float *x, *w, *b, *out, *r, *dx, *dw, *db, *ws;
} conv_ctx;

static double conv_fwd(void *p) {
    conv_ctx *c = p;
    dt_conv2d_forward(c->out, c->x, c->w, c->b, c->ws, &c->s);
    return dot(c->out, c->r, (size_t)c->s.n * c->s.c_out * c->s.h_out * c->s.w_out);
}

static void conv_bwd(void *p) {
    conv_ctx *c = p;
    dt_conv2d_backward(c->dx, c->dw, c->db, c->r, c->x, c->w, c->ws, &c->s);
}

static void check_conv_rect(int n, int c_in, int h, int w, int c_out, int kh, int kw, int sh,
                            int sw, const int pads[4], int dilation, int groups) {
    conv_ctx c;
    memset(&c, 0, sizeof c);
    assert_int_equal(dt_conv2d_shape_make_rect(&c.s, n, c_in, h, w, c_out, kh, kw, sh, sw, pads,
                                               dilation, groups),
                     0);
    print_message("conv2d n=%d c_in=%d %dx%d c_out=%d k=%dx%d stride=%dx%d pads=%d,%d,%d,%d "
                  "dilation=%d groups=%d\n",
                  n, c_in, h, w, c_out, kh, kw, sh, sw, pads[0], pads[1], pads[2], pads[3],
                  dilation, groups);
    size_t nx = (size_t)n * c_in * h * w, nw = (size_t)c_out * (c_in / groups) * kh * kw;
    size_t no = (size_t)n * c_out * c.s.h_out * c.s.w_out;
    c.x = test_alloc(4 * nx), c.dx = test_alloc(4 * nx), c.w = test_alloc(4 * nw);
    c.dw = test_alloc(4 * nw), c.b = test_alloc(4 * c_out), c.db = test_alloc(4 * c_out);
    c.out = test_alloc(4 * no), c.r = test_alloc(4 * no);
    c.ws = test_alloc(4 * dt_conv2d_workspace_floats(&c.s));
    fill_uniform(c.x, nx, 11, -1, 1);
    fill_uniform(c.w, nw, 12, -1, 1);
    fill_uniform(c.b, c_out, 13, -1, 1);
    fill_uniform(c.r, no, 14, -1, 1);
    layer_case lc = {
        &c,
        conv_fwd,
        conv_bwd,
        {{"input", c.x, c.dx, nx}, {"weight", c.w, c.dw, nw}, {"bias", c.b, c.db, (size_t)c_out}},
        3,
        1e-2f};
    check_case(&lc, 300, 1e-3);
    free(c.x), free(c.dx), free(c.w), free(c.dw), free(c.b), free(c.db), free(c.out), free(c.r);
    free(c.ws);
}

static void check_conv_grouped(int n, int c_in, int h, int w, int c_out, int k, int stride, int pad,
                               int dilation, int groups) {
    const int pads[4] = {pad, pad, pad, pad};
    check_conv_rect(n, c_in, h, w, c_out, k, k, stride, stride, pads, dilation, groups);
}

static void check_conv(int n, int c_in, int h, int w, int c_out, int k, int stride, int pad) {
    check_conv_grouped(n, c_in, h, w, c_out, k, stride, pad, 1, 1);
}

static void test_conv2d_grad_matches_fd(void **state) {
    (void)state;
    check_conv(2, 3, 7, 6, 4, 3, 1, 1);   /* 3x3 same padding, odd sizes */
    check_conv(3, 2, 9, 9, 3, 5, 2, 2);   /* 5x5 stride 2 */
    check_conv(2, 4, 5, 5, 3, 1, 1, 0);   /* pointwise, batched chunk */
    check_conv(2, 4, 6, 6, 5, 1, 2, 0);   /* 1x1 stride 2: the ResNet shortcut */
    check_conv(1, 2, 40, 40, 2, 3, 1, 0); /* wide map: one sample per GEMM */
    check_conv(1, 3, 4, 5, 2, 2, 3, 1);   /* stride larger than the kernel */
    /* ONNX imports: grouped, depthwise and dilated */
    check_conv_grouped(2, 4, 7, 6, 6, 3, 1, 1, 1, 2);   /* 2 groups */
    check_conv_grouped(2, 3, 6, 6, 3, 3, 2, 1, 1, 3);   /* depthwise, stride 2 */
    check_conv_grouped(3, 4, 5, 5, 4, 1, 1, 0, 1, 4);   /* depthwise pointwise, batched */
    check_conv_grouped(2, 2, 9, 8, 3, 3, 1, 2, 2, 1);   /* dilation 2 */
    check_conv_grouped(2, 4, 11, 11, 2, 3, 2, 3, 3, 2); /* dilated, strided and grouped */
    /* Inception v3's 1x7 and 7x1 with pads (0, 3) and (3, 0), a strided rectangle with
     * pads on one side only (ONNX's asymmetric padding), a grouped rectangle */
    const int p17[4] = {0, 3, 0, 3}, p71[4] = {3, 0, 3, 0}, asym[4] = {1, 0, 2, 1};
    check_conv_rect(2, 3, 8, 9, 4, 1, 7, 1, 1, p17, 1, 1);
    check_conv_rect(2, 3, 9, 8, 4, 7, 1, 1, 1, p71, 1, 1);
    check_conv_rect(2, 2, 7, 8, 3, 3, 2, 2, 3, asym, 1, 1);
    check_conv_rect(2, 4, 7, 6, 4, 2, 3, 1, 2, asym, 2, 2);
}

/* ---- pools over any window: kh x kw, strides per axis, pads per side, ceil_mode,
 * average pooling with count_include_pad both ways ---- */
typedef struct {
    int max, n, c, h, w, count_pad;
    dt_pool2d_geom g;
    float *x, *out, *r, *dx;
    int32_t *argmax;
    size_t nx, no;
} window_ctx;

static double window_fwd(void *p) {
    window_ctx *c = p;
    if (c->max) {
        dt_maxpool2d_forward_geom(c->out, c->argmax, c->x, c->n, c->c, c->h, c->w, &c->g, 0);
    } else {
        dt_pool_windows wy, wx;
        dt_avgpool2d_windows_of(&c->g, c->count_pad, c->h, c->w, &wy, &wx);
        dt_avgpool2d_windows_forward(c->out, c->x, c->n, c->c, &wy, &wx, 0);
    }
    return dot(c->out, c->r, c->no);
}

static void window_bwd(void *p) {
    window_ctx *c = p;
    if (c->max) {
        dt_maxpool2d_backward_geom(c->dx, c->r, c->argmax, c->n, c->c, c->h, c->w, &c->g, 0);
    } else {
        dt_pool_windows wy, wx;
        dt_avgpool2d_windows_of(&c->g, c->count_pad, c->h, c->w, &wy, &wx);
        dt_avgpool2d_windows_backward(c->dx, c->r, c->n, c->c, &wy, &wx, 0);
    }
}

static void check_window(int max, int h, int w, dt_pool2d_geom g, int count_pad) {
    window_ctx c = {.max = max, .n = 2, .c = 3, .h = h, .w = w, .count_pad = count_pad, .g = g};
    c.nx = (size_t)c.n * c.c * h * w;
    c.no = (size_t)c.n * c.c * dt_pool2d_geom_ho(&g, h) * dt_pool2d_geom_wo(&g, w);
    print_message("%s %dx%d on %dx%d stride %dx%d pads %d,%d,%d,%d ceil %d count_pad %d\n",
                  max ? "maxpool" : "avgpool", g.kh, g.kw, h, w, g.stride_h, g.stride_w, g.pad_top,
                  g.pad_left, g.pad_bottom, g.pad_right, g.ceil_mode, count_pad);
    c.x = test_alloc(4 * c.nx), c.dx = test_alloc(4 * c.nx), c.out = test_alloc(4 * c.no);
    c.r = test_alloc(4 * c.no), c.argmax = test_alloc(4 * c.no);
    for (size_t i = 0; i < c.nx; i++) /* distinct, 0.01 apart: argmaxes stay put */
        c.x[i] = (float)(((i * 37) % c.nx) + 1) * 0.01f * (i % 3 ? 1 : -1);
    fill_uniform(c.r, c.no, 33, -1, 1);
    layer_case lc = {&c, window_fwd, window_bwd, {{"input", c.x, c.dx, c.nx}}, 1, 1e-3f};
    check_case(&lc, 1000, 1e-3);
    free(c.x), free(c.dx), free(c.out), free(c.r), free(c.argmax);
}

static void test_pool_windows_grad_matches_fd(void **state) {
    (void)state;
    const dt_pool2d_geom avg331 = {3, 3, 1, 1, 1, 1, 1, 1, 0}, /* Inception's AvgPool(3,1,1) */
        rect = {2, 3, 2, 1, 1, 0, 0, 2, 0},                    /* a rectangle, pads one side */
        ceil = {3, 2, 2, 2, 1, 0, 1, 1, 1},                    /* ceil_mode, partial windows */
        plain = {3, 3, 2, 2, 0, 0, 0, 0, 1};                   /* ceil, no pads */
    for (int count_pad = 0; count_pad < 2; count_pad++) {
        check_window(0, 6, 7, avg331, count_pad);
        check_window(0, 7, 6, rect, count_pad);
        check_window(0, 8, 7, ceil, count_pad);
        check_window(0, 8, 8, plain, count_pad);
    }
    check_window(1, 7, 6, rect, 0);
    check_window(1, 8, 7, ceil, 0);
}

/* The average pool's divisor, by hand: 3x3 windows, stride 1, pads 1 on a 3x3 ones
 * input; the corner window holds 4 input cells of its 9. */
static void test_avgpool_count_include_pad_divides_as_pytorch(void **state) {
    (void)state;
    const dt_pool2d_geom g = {3, 3, 1, 1, 1, 1, 1, 1, 0};
    float x[9], y[9];
    for (int i = 0; i < 9; i++) x[i] = 1.0f;
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, 1, 3, 3, &wy, &wx);
    dt_avgpool2d_windows_forward(y, x, 1, 1, &wy, &wx, 0);
    assert_float_equal(y[0], 4.0f / 9.0f, 1e-7); /* corner: 4 of 9 */
    assert_float_equal(y[1], 6.0f / 9.0f, 1e-7); /* edge: 6 of 9 */
    assert_float_equal(y[4], 1.0f, 1e-7);
    dt_avgpool2d_windows_of(&g, 0, 3, 3, &wy, &wx);
    dt_avgpool2d_windows_forward(y, x, 1, 1, &wy, &wx, 0);
    for (int i = 0; i < 9; i++) assert_float_equal(y[i], 1.0f, 1e-7);
}

/* ---- pad2d: constant padding of H and W ---- */
typedef struct {
    int n, c, h, w, pads[4];
    float *x, *out, *r, *dx;
    size_t nx, no;
} pad2d_ctx;

static double pad2d_fwd(void *p) {
    pad2d_ctx *c = p;
    dt_pad2d_forward(c->out, c->x, c->n, c->c, c->h, c->w, c->pads, 1.25f);
    return dot(c->out, c->r, c->no);
}

static void pad2d_bwd(void *p) {
    pad2d_ctx *c = p;
    dt_pad2d_backward(c->dx, c->r, c->n, c->c, c->h, c->w, c->pads, 1);
}

static void test_pad2d_grad_matches_fd(void **state) {
    (void)state;
    pad2d_ctx c = {.n = 2, .c = 3, .h = 4, .w = 5, .pads = {1, 3, 2, 0}};
    c.nx = (size_t)c.n * c.c * c.h * c.w;
    c.no = (size_t)c.n * c.c * (c.h + 3) * (c.w + 3);
    c.x = test_alloc(4 * c.nx), c.dx = test_alloc(4 * c.nx), c.out = test_alloc(4 * c.no);
    c.r = test_alloc(4 * c.no);
    fill_uniform(c.x, c.nx, 41, -1, 1);
    fill_uniform(c.r, c.no, 42, -1, 1);
    layer_case lc = {&c, pad2d_fwd, pad2d_bwd, {{"input", c.x, c.dx, c.nx}}, 1, 1e-2f};
    check_case(&lc, 1000, 1e-3);
    /* the frame holds the value, the interior the input */
    assert_float_equal(c.out[0], 1.25f, 0);
    assert_float_equal(c.out[1 * (c.w + 3) + 3], c.x[0], 0);
    free(c.x), free(c.dx), free(c.out), free(c.r);
}

/* ---- batchnorm2d (training mode) ---- */
typedef struct {
    int n, c, hw;
    float eps;
    float *x, *g, *b, *out, *r, *dx, *dg, *db, *mean, *invstd, *rm, *rv;
} bn_ctx;

static double bn_fwd(void *p) {
    bn_ctx *c = p;
    dt_batchnorm2d_forward_train(c->out, c->mean, c->invstd, c->rm, c->rv, c->x, c->g, c->b, c->n,
                                 c->c, c->hw, 0.1f, c->eps);
    return dot(c->out, c->r, (size_t)c->n * c->c * c->hw);
}

static void bn_bwd(void *p) {
    bn_ctx *c = p;
    dt_batchnorm2d_backward(c->dx, c->dg, c->db, c->r, c->x, c->mean, c->invstd, c->g, c->n, c->c,
                            c->hw, 1);
}

static void check_batchnorm2d(float eps) {
    bn_ctx c = {.n = 4, .c = 3, .hw = 5, .eps = eps};
    size_t nx = (size_t)c.n * c.c * c.hw;
    c.x = test_alloc(4 * nx), c.dx = test_alloc(4 * nx), c.out = test_alloc(4 * nx);
    c.r = test_alloc(4 * nx);
    c.g = test_alloc(4 * c.c), c.b = test_alloc(4 * c.c), c.dg = test_alloc(4 * c.c);
    c.db = test_alloc(4 * c.c), c.mean = test_alloc(4 * c.c), c.invstd = test_alloc(4 * c.c);
    c.rm = test_alloc(4 * c.c), c.rv = test_alloc(4 * c.c);
    fill_uniform(c.x, nx, 21, -2, 2);
    fill_uniform(c.g, c.c, 22, 0.5f, 1.5f);
    fill_uniform(c.b, c.c, 23, -1, 1);
    fill_uniform(c.r, nx, 24, -1, 1);
    layer_case lc = {&c,
                     bn_fwd,
                     bn_bwd,
                     {{"input", c.x, c.dx, nx},
                      {"weight", c.g, c.dg, (size_t)c.c},
                      {"bias", c.b, c.db, (size_t)c.c}},
                     3,
                     1e-2f};
    check_case(&lc, 1000, 2e-3);
    free(c.x), free(c.dx), free(c.out), free(c.r), free(c.g), free(c.b), free(c.dg), free(c.db);
    free(c.mean), free(c.invstd), free(c.rm), free(c.rv);
}

static void test_batchnorm2d_grad_matches_fd(void **state) {
    (void)state;
    check_batchnorm2d(1e-5f);
    check_batchnorm2d(1e-3f); /* GoogLeNet's BasicConv2d */
}

/* Backward writing din (the model's choice where BatchNorm is its only writer) gives
 * the bits of adding into zeros, whatever din held, in both layouts. */
static void test_batchnorm2d_backward_writes_din(void **state) {
    (void)state;
    const int n = 3, c = 32, hw = 7;
    const size_t nx = (size_t)n * c * hw;
    float *x = test_alloc(4 * nx), *dy = test_alloc(4 * nx), *y = test_alloc(4 * nx);
    float *added = test_alloc(4 * nx), *written = test_alloc(4 * nx);
    float *g = test_alloc(4 * c), *b = test_alloc(4 * c), *mean = test_alloc(4 * c);
    float *invstd = test_alloc(4 * c), *rm = test_alloc(4 * c), *rv = test_alloc(4 * c);
    float *dg = test_alloc(4 * c), *db = test_alloc(4 * c);
    fill_uniform(x, nx, 31, -2, 2);
    fill_uniform(dy, nx, 32, -1, 1);
    fill_uniform(g, c, 33, 0.5f, 1.5f);
    fill_uniform(b, c, 34, -1, 1);
    for (int blocked = 0; blocked < 2; blocked++) {
        (blocked ? dt_batchnorm2d_forward_train_blocked : dt_batchnorm2d_forward_train)(
            y, mean, invstd, rm, rv, x, g, b, n, c, hw, 0.1f, 1e-5f);
        for (size_t i = 0; i < nx; i++) added[i] = 0.0f, written[i] = NAN;
        (blocked ? dt_batchnorm2d_backward_blocked
                 : dt_batchnorm2d_backward)(added, dg, db, dy, x, mean, invstd, g, n, c, hw, 1);
        (blocked ? dt_batchnorm2d_backward_blocked
                 : dt_batchnorm2d_backward)(written, dg, db, dy, x, mean, invstd, g, n, c, hw, 0);
        for (size_t i = 0; i < nx; i++)
            if (memcmp(&added[i], &written[i], sizeof(float)))
                fail_msg("%s layout: din[%zu] written %g, added to zero %g",
                         blocked ? "blocked" : "plain", i, written[i], added[i]);
    }
    free(x), free(dy), free(y), free(added), free(written), free(g), free(b), free(mean);
    free(invstd), free(rm), free(rv), free(dg), free(db);
}

/* The op normalises with its own eps: a batch of 2 x 2x2x2 whose channels have
 * variance 0.0025, where eps 1e-3 vs 1e-5 changes the output by a third. */
static void test_batchnorm2d_op_uses_its_eps(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "bn", 8);
    int x = dt_model_input(&m, 2, 2, 2);
    x = dt_model_flatten(&m, dt_model_batchnorm2d_eps(&m, "bn", x, 1e-3f));
    if (x < 0 || dt_model_alloc(&m, 2, &err)) fail_msg("%s", x < 0 ? m.build_error.msg : err.msg);
    dt_model_init_params(&m, 1);
    float *in = dt_model_input_data(&m);
    /* channel ch holds ch +- 0.05: mean ch, biased variance 0.0025 */
    for (int i = 0; i < 16; i++) in[i] = (float)((i / 4) % 2) + (i % 2 ? 0.05f : -0.05f);
    dt_model_forward(&m, 2);
    const float want = 0.05f / sqrtf(0.0025f + 1e-3f);
    for (int i = 0; i < 16; i++)
        assert_float_equal(dt_model_logits(&m)[i], (i % 2 ? want : -want), 1e-4);
    dt_model_free(&m);
}

/* Running statistics follow PyTorch: momentum 0.1, unbiased variance. */
static void test_batchnorm2d_running_stats_are_unbiased(void **state) {
    (void)state;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* n=2, c=1, hw=4 */
    float out[8], mean, invstd, rm = 0.0f, rv = 1.0f, g = 1.0f, b = 0.0f;
    dt_batchnorm2d_forward_train(out, &mean, &invstd, &rm, &rv, x, &g, &b, 2, 1, 4, 0.1f, 1e-5f);
    assert_float_equal(mean, 4.5f, 1e-6);
    assert_float_equal(invstd, 1.0f / sqrtf(5.25f + 1e-5f), 1e-6);
    assert_float_equal(rm, 0.45f, 1e-6);
    assert_float_equal(rv, 0.9f + 0.1f * 6.0f, 1e-6); /* unbiased var = 42/7 = 6 */
    float y[8];
    dt_batchnorm2d_forward_eval(y, x, &rm, &rv, &g, &b, 2, 1, 4, 1e-5f);
    assert_float_equal(y[0], (1.0f - 0.45f) / sqrtf(1.5f + 1e-5f), 1e-5);
}

/* ---- relu, pools, residual add ---- */
typedef struct {
    int kind; /* 0 relu, 1 maxpool, 2 avgpool, 3 add, 4 adaptive avgpool (k x s output) */
    int n, c, h, w, k, s, pad, ceil;
    float *x, *x2, *out, *r, *dx, *dx2;
    int32_t *argmax;
    size_t nx, no;
} simple_ctx;

static double simple_fwd(void *p) {
    simple_ctx *c = p;
    switch (c->kind) {
    case 0:
        dt_relu_forward(c->out, c->x, c->nx);
        break;
    case 1:
        dt_maxpool2d_forward(c->out, c->argmax, c->x, c->n, c->c, c->h, c->w, c->k, c->s, c->pad,
                             c->ceil);
        break;
    case 2:
        dt_avgpool2d_forward(c->out, c->x, c->n, c->c, c->h, c->w, c->k, c->s, 0);
        break;
    case 4:
        dt_adaptive_avgpool2d_forward(c->out, c->x, c->n, c->c, c->h, c->w, c->k, c->s, 0);
        break;
    default:
        dt_residual_add_forward(c->out, c->x, c->x2, c->nx);
        break;
    }
    return dot(c->out, c->r, c->no);
}

static void simple_bwd(void *p) {
    simple_ctx *c = p;
    switch (c->kind) {
    case 0: {
        float *tmp = test_alloc(4 * c->nx);
        dt_relu_backward(tmp, c->r, c->out, c->nx);
        for (size_t i = 0; i < c->nx; i++) c->dx[i] += tmp[i];
        free(tmp);
        break;
    }
    case 1:
        dt_maxpool2d_backward(c->dx, c->r, c->argmax, c->n, c->c, c->h, c->w, c->k, c->s, c->pad,
                              c->ceil);
        break;
    case 2:
        dt_avgpool2d_backward(c->dx, c->r, c->n, c->c, c->h, c->w, c->k, c->s, 0);
        break;
    case 4:
        dt_adaptive_avgpool2d_backward(c->dx, c->r, c->n, c->c, c->h, c->w, c->k, c->s, 0);
        break;
    default:
        dt_residual_add_backward(c->dx, c->dx2, c->r, c->nx);
        break;
    }
}

/* kind as simple_ctx; a h x w input (pad and ceil for max pooling). */
static void check_simple_at(int kind, int h, int w, int k, int s, int pad, int ceil) {
    simple_ctx c = {
        .kind = kind, .n = 2, .c = 3, .h = h, .w = w, .k = k, .s = s, .pad = pad, .ceil = ceil};
    c.nx = (size_t)c.n * c.c * c.h * c.w;
    switch (kind) {
    case 1:
        c.no = (size_t)c.n * c.c * dt_pool2d_out_size_padded(c.h, k, s, pad, ceil) *
               dt_pool2d_out_size_padded(c.w, k, s, pad, ceil);
        break;
    case 2:
        c.no = (size_t)c.n * c.c * dt_pool2d_out_size(c.h, k, s) * dt_pool2d_out_size(c.w, k, s);
        break;
    case 4:
        c.no = (size_t)c.n * c.c * k * s;
        break;
    default:
        c.no = c.nx;
    }
    c.x = test_alloc(4 * c.nx), c.x2 = test_alloc(4 * c.nx), c.dx = test_alloc(4 * c.nx);
    c.dx2 = test_alloc(4 * c.nx), c.out = test_alloc(4 * (c.nx > c.no ? c.nx : c.no));
    c.r = test_alloc(4 * c.no);
    c.argmax = test_alloc(4 * c.no);
    /* Distinct values at least 0.01 apart and away from 0, so the +-eps probes never
     * cross a ReLU kink or change a max-pool argmax. */
    for (size_t i = 0; i < c.nx; i++)
        c.x[i] = (float)(((i * 37) % c.nx) + 1) * 0.01f * (i % 3 ? 1 : -1);
    fill_uniform(c.x2, c.nx, 31, -1, 1);
    fill_uniform(c.r, c.no, 32, -1, 1);
    layer_case lc = {&c, simple_fwd, simple_bwd, {{"input", c.x, c.dx, c.nx}}, 1, 1e-3f};
    if (kind == 3) {
        lc.vars[1] = (checked){"input2", c.x2, c.dx2, c.nx};
        lc.n_vars = 2;
    }
    check_case(&lc, 1000, 1e-3);
    free(c.x), free(c.x2), free(c.dx), free(c.dx2), free(c.out), free(c.r), free(c.argmax);
}

static void check_simple(int kind, int k, int s) {
    check_simple_at(kind, 6, 7, k, s, 0, 0);
}

static void test_relu_grad_matches_fd(void **state) {
    (void)state;
    check_simple(0, 0, 0);
}

static void test_maxpool2d_grad_matches_fd(void **state) {
    (void)state;
    check_simple(1, 2, 2);
    check_simple(1, 3, 2); /* overlapping windows */
}

/* Max pooling's hard inputs: mostly ties (-1, 0, 1, as after ReLU), with NaNs and
 * infinities (one in 20 each). */
static void fill_ties_and_nan(float *x, size_t n, dt_rng *rng) {
    for (size_t i = 0; i < n; i++) {
        const unsigned pick = (unsigned)dt_rng_below(rng, 20);
        x[i] = pick == 0   ? NAN
               : pick == 1 ? INFINITY
               : pick == 2 ? -INFINITY
                           : (float)((int)(pick % 3) - 1);
    }
}

/* The 2x2 stride-2 path (vectorized, masked tails) against the plain scan written here:
 * the first maximum wins ties, a NaN wins and stays (PyTorch's rule); inputs full of
 * ties (values in {-1, 0, 1}, as after ReLU), NaNs and infinities, every width from 2
 * to 40 so that every tail length occurs. Values and argmax must match exactly. */
static void test_maxpool2d_2x2_ties_and_nan(void **state) {
    (void)state;
    dt_rng rng = dt_rng_make(7, 0);
    for (int w = 2; w <= 40; w++) {
        const int h = 2 + w % 5, n = 2, c = 3, ho = h / 2, wo = w / 2;
        const size_t in_count = (size_t)n * c * h * w, out_count = (size_t)n * c * ho * wo;
        float *x = test_alloc(sizeof(float) * in_count), *y = test_alloc(sizeof(float) * out_count);
        int32_t *am = test_alloc(sizeof(int32_t) * out_count);
        fill_ties_and_nan(x, in_count, &rng);
        dt_maxpool2d_forward(y, am, x, n, c, h, w, 2, 2, 0, 0);
        for (int plane = 0; plane < n * c; plane++) {
            const float *xp = x + (size_t)plane * h * w;
            for (int oy = 0; oy < ho; oy++)
                for (int ox = 0; ox < wo; ox++) {
                    int best = 2 * oy * w + 2 * ox;
                    for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 2; j++) {
                            const int at = (2 * oy + i) * w + 2 * ox + j;
                            const float v = xp[best], u = xp[at];
                            if (u > v || (isnan(u) && !isnan(v))) best = at;
                        }
                    const size_t o = ((size_t)plane * ho + oy) * wo + ox;
                    if (am[o] != best || memcmp(&y[o], &xp[best], sizeof(float)))
                        fail_msg("w=%d plane %d (%d,%d): argmax %d value %g, want %d (%g)", w,
                                 plane, oy, ox, am[o], y[o], best, xp[best]);
                }
        }
        free(x), free(y), free(am);
    }
}

/* The blocked (nChw16c) path against the plain one on the same tie-heavy inputs with
 * NaNs and infinities: 2x2 stride 2, and 3x3 stride 2 with padding and ceil_mode. The
 * argmax of both is the index within the plane. */
static void test_maxpool2d_blocked_ties_and_nan(void **state) {
    (void)state;
    enum { L = 16 };
    const int shapes[][4] = {{2, 2, 0, 0}, {3, 2, 1, 0}, {3, 2, 0, 1}, {3, 1, 1, 1}};
    dt_rng rng = dt_rng_make(8, 0);
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++)
        for (int w = 3; w <= 13; w += 5) {
            const int n = 2, c = 32, h = w + 1, kernel = shapes[k][0], stride = shapes[k][1],
                      pad = shapes[k][2], ceil_mode = shapes[k][3];
            const int ho = dt_pool2d_out_size_padded(h, kernel, stride, pad, ceil_mode),
                      wo = dt_pool2d_out_size_padded(w, kernel, stride, pad, ceil_mode);
            const size_t in_count = (size_t)n * c * h * w, out_count = (size_t)n * c * ho * wo;
            float *x = test_alloc(sizeof(float) * in_count),
                  *xb = test_alloc(sizeof(float) * in_count);
            float *y = test_alloc(sizeof(float) * out_count),
                  *yb = test_alloc(sizeof(float) * out_count);
            int32_t *am = test_alloc(sizeof(int32_t) * out_count),
                    *amb = test_alloc(sizeof(int32_t) * out_count);
            fill_ties_and_nan(x, in_count, &rng);
            /* nChw16c: [n][c / 16][h][w][16] */
            for (int b = 0; b < n; b++)
                for (int ch = 0; ch < c; ch++)
                    for (int p = 0; p < h * w; p++)
                        xb[(((size_t)b * (c / L) + ch / L) * h * w + p) * L + ch % L] =
                            x[((size_t)b * c + ch) * h * w + p];
            dt_maxpool2d_forward(y, am, x, n, c, h, w, kernel, stride, pad, ceil_mode);
            dt_maxpool2d_forward_blocked(yb, amb, xb, n, c, h, w, kernel, stride, pad, ceil_mode);
            for (int b = 0; b < n; b++)
                for (int ch = 0; ch < c; ch++)
                    for (int p = 0; p < ho * wo; p++) {
                        const size_t plain = ((size_t)b * c + ch) * ho * wo + p,
                                     blocked = (((size_t)b * (c / L) + ch / L) * ho * wo + p) * L +
                                               ch % L;
                        if (am[plain] != amb[blocked] || memcmp(&y[plain], &yb[blocked], 4))
                            fail_msg("kernel %d stride %d pad %d w=%d: channel %d at %d: blocked "
                                     "%g (%d), plain %g (%d)",
                                     kernel, stride, pad, w, ch, p, yb[blocked], amb[blocked],
                                     y[plain], am[plain]);
                    }
            free(x), free(xb), free(y), free(yb), free(am), free(amb);
        }
}

/* PyTorch's MaxPool2d padding and ceil_mode: GoogLeNet's (3, 2, ceil_mode=True) and
 * (3, 1, padding 1, ceil_mode=True), ResNet-50's (3, 2, padding 1). */
static void test_maxpool2d_padded_grad_matches_fd(void **state) {
    (void)state;
    check_simple_at(1, 8, 7, 3, 2, 0, 1); /* last windows hang over the edge */
    check_simple_at(1, 6, 7, 3, 1, 1, 1);
    check_simple_at(1, 7, 6, 3, 2, 1, 0);
    check_simple_at(1, 5, 5, 2, 2, 0, 1); /* 2x2 with a partial last window */
}

/* Output sizes as PyTorch's pooling_output_shape (values printed by torch 1.13). */
static void test_pool2d_out_size_follows_pytorch(void **state) {
    (void)state;
    assert_int_equal(dt_pool2d_out_size_padded(112, 3, 2, 0, 1), 56); /* googlenet maxpool1 */
    assert_int_equal(dt_pool2d_out_size_padded(56, 3, 2, 0, 1), 28);
    assert_int_equal(dt_pool2d_out_size_padded(14, 2, 2, 0, 1), 7);
    assert_int_equal(dt_pool2d_out_size_padded(112, 3, 2, 1, 0), 56); /* resnet50 maxpool */
    assert_int_equal(dt_pool2d_out_size_padded(8, 3, 2, 0, 1), 4);
    assert_int_equal(dt_pool2d_out_size_padded(8, 3, 2, 0, 0), 3);
    assert_int_equal(dt_pool2d_out_size_padded(5, 2, 2, 1, 1), 3); /* last starts at 4 < 5+1 */
    assert_int_equal(dt_pool2d_out_size_padded(4, 2, 2, 1, 1), 3); /* not counted: 6 >= 4+1 */
    assert_int_equal(dt_pool2d_out_size_padded(2, 3, 2, 0, 1), 1);
    assert_int_equal(dt_pool2d_out_size_padded(1, 3, 2, 0, 1), 0); /* too small */
    assert_int_equal(dt_pool2d_out_size_padded(6, 2, 2, 0, 0), dt_pool2d_out_size(6, 2, 2));
}

/* AdaptiveAvgPool2d: down (overlapping cells), up (repeated cells), global, identity. */
static void test_adaptive_avgpool2d_grad_matches_fd(void **state) {
    (void)state;
    check_simple_at(4, 6, 7, 4, 3, 0, 0);
    check_simple_at(4, 3, 2, 7, 7, 0, 0);
    check_simple_at(4, 6, 7, 1, 1, 0, 0);
    check_simple_at(4, 6, 7, 6, 7, 0, 0);
}

/* Cells of PyTorch's formula: 5 rows into 3 cells are rows 0-1, 1-3, 3-4. */
static void test_adaptive_avgpool2d_cells_follow_pytorch(void **state) {
    (void)state;
    const int want[3][2] = {{0, 2}, {1, 4}, {3, 5}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(dt_adaptive_start(i, 5, 3), want[i][0]);
        assert_int_equal(dt_adaptive_end(i, 5, 3), want[i][1]);
    }
    float x[5] = {1, 2, 3, 4, 5}, y[3];
    dt_adaptive_avgpool2d_forward(y, x, 1, 1, 5, 1, 3, 1, 0);
    assert_float_equal(y[0], 1.5f, 1e-6);
    assert_float_equal(y[1], 3.0f, 1e-6);
    assert_float_equal(y[2], 4.5f, 1e-6);
}

static void test_avgpool2d_grad_matches_fd(void **state) {
    (void)state;
    check_simple(2, 2, 2);
    check_simple(2, 3, 1);
}

static void test_residual_add_grad_matches_fd(void **state) {
    (void)state;
    check_simple(3, 0, 0);
}

/* ---- shortcut_pad (ResNet option A) ---- */
typedef struct {
    int n, c_in, h, w, c_out, pad_lo, stride;
    float *x, *dx, *out, *r;
    size_t nx, no;
} pad_ctx;

static double pad_fwd(void *p) {
    pad_ctx *c = p;
    dt_shortcut_pad_forward(c->out, c->x, c->n, c->c_in, c->h, c->w, c->c_out, c->pad_lo,
                            c->stride);
    return dot(c->out, c->r, c->no);
}

static void pad_bwd(void *p) {
    pad_ctx *c = p;
    dt_shortcut_pad_backward(c->dx, c->r, c->n, c->c_in, c->h, c->w, c->c_out, c->pad_lo,
                             c->stride);
}

static void check_shortcut_pad(int h, int w, int c_in, int c_out, int stride) {
    pad_ctx c = {.n = 2, .c_in = c_in, .h = h, .w = w, .c_out = c_out, .stride = stride};
    c.pad_lo = (c_out - c_in) / 2;
    const int ho = dt_shortcut_pad_out_size(h, stride), wo = dt_shortcut_pad_out_size(w, stride);
    c.nx = (size_t)c.n * c_in * h * w;
    c.no = (size_t)c.n * c_out * ho * wo;
    c.x = test_alloc(4 * c.nx), c.dx = test_alloc(4 * c.nx);
    c.out = test_alloc(4 * c.no), c.r = test_alloc(4 * c.no);
    fill_uniform(c.x, c.nx, 41, -1, 1);
    fill_uniform(c.r, c.no, 42, -1, 1);
    /* The padded channels are zero and the kept pixels are the input's, exactly. */
    pad_fwd(&c);
    for (int s = 0; s < c.n; s++)
        for (int ch = 0; ch < c_out; ch++)
            for (int y = 0; y < ho; y++)
                for (int x = 0; x < wo; x++) {
                    const int src = ch - c.pad_lo;
                    float want =
                        src >= 0 && src < c_in
                            ? c.x[(((size_t)s * c_in + src) * h + y * stride) * w + x * stride]
                            : 0.0f;
                    assert_true(c.out[(((size_t)s * c_out + ch) * ho + y) * wo + x] == want);
                }
    layer_case lc = {&c, pad_fwd, pad_bwd, {{"input", c.x, c.dx, c.nx}}, 1, 1e-2f};
    check_case(&lc, 1000, 1e-3);
    free(c.x), free(c.dx), free(c.out), free(c.r);
}

static void test_shortcut_pad_grad_matches_fd(void **state) {
    (void)state;
    check_shortcut_pad(8, 8, 4, 8, 2); /* the CIFAR ResNet case: channels double, 2x down */
    check_shortcut_pad(7, 5, 3, 6, 2); /* odd sides keep row and column 0, as x[::2] */
    check_shortcut_pad(4, 4, 2, 5, 1); /* uneven padding, no subsampling */
}

/* ---- concat (GoogLeNet's inception) ---- */
typedef struct {
    int n, hw, count;
    int channels[3];
    float *x[3], *dx[3], *out, *r;
    size_t no;
} concat_ctx;

static double concat_fwd(void *p) {
    concat_ctx *c = p;
    dt_concat_forward(c->out, (const float *const *)c->x, c->channels, c->count, c->n, c->hw);
    return dot(c->out, c->r, c->no);
}

static void concat_bwd(void *p) {
    concat_ctx *c = p;
    dt_concat_backward(c->dx, c->r, c->channels, c->count, c->n, c->hw);
}

static void test_concat_grad_matches_fd(void **state) {
    (void)state;
    concat_ctx c = {.n = 3, .hw = 6, .count = 3, .channels = {2, 1, 4}};
    layer_case lc = {&c, concat_fwd, concat_bwd, {{0}}, 3, 1e-2f};
    for (int k = 0; k < 3; k++) {
        size_t nk = (size_t)c.n * c.channels[k] * c.hw;
        c.x[k] = test_alloc(4 * nk), c.dx[k] = test_alloc(4 * nk);
        fill_uniform(c.x[k], nk, 50 + k, -1, 1);
        lc.vars[k] = (checked){"input", c.x[k], c.dx[k], nk};
        c.no += nk;
    }
    c.out = test_alloc(4 * c.no), c.r = test_alloc(4 * c.no);
    fill_uniform(c.r, c.no, 55, -1, 1);
    check_case(&lc, 1000, 1e-3);
    /* sample 1, channel 3 of the output is the third input's channel 0 */
    concat_fwd(&c);
    assert_true(c.out[(1 * 7 + 3) * 6 + 5] == c.x[2][(1 * 4 + 0) * 6 + 5]);
    for (int k = 0; k < 3; k++) free(c.x[k]), free(c.dx[k]);
    free(c.out), free(c.r);
}

/* ---- dropout ---- */
typedef struct {
    size_t count;
    float p;
    dt_dropout_key key;
    float *x, *dx, *out, *r;
} dropout_ctx;

static double dropout_fwd(void *p) {
    dropout_ctx *c = p;
    dt_dropout_forward(c->out, c->x, c->count, c->p, c->key);
    return dot(c->out, c->r, c->count);
}

static void dropout_bwd(void *p) {
    dropout_ctx *c = p;
    dt_dropout_backward(c->dx, c->r, c->count, c->p, c->key);
}

/* With its key fixed the mask is fixed, so backward must match FD exactly. */
static void test_dropout_grad_matches_fd(void **state) {
    (void)state;
    dropout_ctx c = {.count = 300, .p = 0.4f, .key = {5, 2, 7u << 20}};
    c.x = test_alloc(4 * c.count), c.dx = test_alloc(4 * c.count);
    c.out = test_alloc(4 * c.count), c.r = test_alloc(4 * c.count);
    fill_uniform(c.x, c.count, 61, -1, 1);
    fill_uniform(c.r, c.count, 62, -1, 1);
    layer_case lc = {&c, dropout_fwd, dropout_bwd, {{"input", c.x, c.dx, c.count}}, 1, 1e-2f};
    check_case(&lc, 1000, 1e-3);
    free(c.x), free(c.dx), free(c.out), free(c.r);
}

/* PyTorch's statistics: a fraction p zeroed, the rest scaled by exactly 1/(1-p); the
 * same key repeats, another counter gives another mask. */
static void test_dropout_zeroes_p_and_scales_the_rest(void **state) {
    (void)state;
    const size_t count = 200000;
    const float ps[3] = {0.5f, 0.2f, 0.9f};
    float *x = test_alloc(4 * count), *y = test_alloc(4 * count), *y2 = test_alloc(4 * count);
    for (size_t i = 0; i < count; i++) x[i] = 1.0f + (float)(i % 7);
    for (int k = 0; k < 3; k++) {
        const float p = ps[k], scale = 1.0f / (1.0f - p);
        dt_dropout_key key = {3, 1, 0};
        dt_dropout_forward(y, x, count, p, key);
        size_t zeros = 0, differ = 0;
        for (size_t i = 0; i < count; i++) {
            if (y[i] == 0.0f)
                zeros++;
            else
                assert_true(y[i] == x[i] * scale);
        }
        const double frac = (double)zeros / count, sd = sqrt(p * (1.0 - p) / count);
        print_message("dropout p=%.2f: %.4f zeroed (5 sd = %.4f)\n", p, frac, 5 * sd);
        assert_true(fabs(frac - p) < 5 * sd);
        dt_dropout_forward(y2, x, count, p, key);
        assert_memory_equal(y, y2, 4 * count);
        key.counter = (uint64_t)1 << 40; /* the next training step */
        dt_dropout_forward(y2, x, count, p, key);
        for (size_t i = 0; i < count; i++) differ += (y[i] == 0.0f) != (y2[i] == 0.0f);
        /* independent masks disagree with probability 2p(1-p) */
        assert_true(fabs((double)differ / count - 2 * p * (1 - p)) < 0.01);
    }
    free(x), free(y), free(y2);
}

/* The op: a training forward drops and the next one draws a new mask; eval is the
 * identity and so is p = 0. (That backward uses the forward's mask is checked through
 * whole models in test_model_grad.) */
static void test_dropout_op_trains_and_evaluates_as_pytorch(void **state) {
    (void)state;
    enum { N = 4, F = 4096 };
    const float ps[2] = {0.5f, 0.0f};
    for (int k = 0; k < 2; k++) {
        dt_model m;
        dt_error err;
        dt_model_init_empty(&m, "drop", F);
        int x = dt_model_input(&m, F, 1, 1);
        if (dt_model_dropout(&m, x, ps[k]) < 0 || dt_model_alloc(&m, N, &err))
            fail_msg("%s", m.build_failed ? m.build_error.msg : err.msg);
        m.dropout_seed = 11;
        float *in = dt_model_input_data(&m);
        fill_uniform(in, (size_t)N * F, 71, 0.5f, 1.5f);
        float *first = test_alloc(4 * N * F);
        dt_model_forward(&m, N);
        memcpy(first, dt_model_logits(&m), 4 * N * F);
        size_t zeros = 0;
        for (int i = 0; i < N * F; i++) zeros += first[i] == 0.0f;
        if (ps[k] == 0.0f)
            assert_memory_equal(first, in, 4 * N * F);
        else
            assert_true(zeros > N * F * 0.45 && zeros < N * F * 0.55);
        dt_model_forward(&m, N); /* the next step: another mask */
        if (ps[k] > 0.0f) assert_memory_not_equal(first, dt_model_logits(&m), 4 * N * F);
        m.training = 0;
        dt_model_forward(&m, N);
        assert_memory_equal(dt_model_logits(&m), in, 4 * N * F);
        free(first);
        dt_model_free(&m);
    }
}

/* ---- softmax cross-entropy ---- */
typedef struct {
    int n, classes;
    float *z, *dz, *probs;
    int32_t *labels;
} ce_ctx;

static double ce_fwd(void *p) {
    ce_ctx *c = p;
    return dt_cross_entropy_forward(c->probs, c->z, c->labels, c->n, c->classes, NULL);
}

static void ce_bwd(void *p) {
    ce_ctx *c = p;
    dt_cross_entropy_backward(c->dz, c->probs, c->labels, c->n, c->classes);
}

static void test_cross_entropy_grad_matches_fd(void **state) {
    (void)state;
    int32_t labels[4] = {0, 3, 9, 5};
    ce_ctx c = {.n = 4, .classes = 10, .labels = labels};
    size_t nz = 40;
    c.z = test_alloc(4 * nz), c.dz = test_alloc(4 * nz), c.probs = test_alloc(4 * nz);
    fill_uniform(c.z, nz, 41, -3, 3);
    layer_case lc = {&c, ce_fwd, ce_bwd, {{"logits", c.z, c.dz, nz}}, 1, 1e-2f};
    check_case(&lc, 1000, 1e-3);
    /* Known value: uniform logits give log(classes). */
    memset(c.z, 0, 4 * nz);
    assert_float_equal(ce_fwd(&c), log(10.0), 1e-6);
    free(c.z), free(c.dz), free(c.probs);
}

/* ---- the activations (activation.h) ---- */

/* Every function, with parameters as the ONNX importer gives them. */
static const dt_activation activations[] = {
    {DT_ACT_CLIP, 0.0f, 6.0f},
    {DT_ACT_CLIP, -1.5f, 2.0f},
    {DT_ACT_SIGMOID, 0, 0},
    {DT_ACT_HARDSIGMOID, 1.0f / 6.0f, 0.5f},
    {DT_ACT_HARDSIGMOID, 0.2f, 0.5f},
    {DT_ACT_HARDSWISH, 0, 0},
    {DT_ACT_TANH, 0, 0},
    {DT_ACT_LEAKY_RELU, 0.01f, 0},
    {DT_ACT_LEAKY_RELU, 0.3f, 0},
    {DT_ACT_GELU, 0, 0},
    {DT_ACT_GELU_TANH, 0, 0},
    {DT_ACT_SILU, 0, 0},
};
enum { N_ACTIVATIONS = sizeof activations / sizeof *activations };

typedef struct {
    dt_activation act;
    float *x, *out, *r, *dx;
    size_t count;
} activation_ctx;

static double activation_fwd(void *p) {
    activation_ctx *c = p;
    dt_activation_forward(&c->act, DT_F32, c->out, c->x, c->count);
    return dot(c->out, c->r, c->count);
}

static void activation_bwd(void *p) {
    activation_ctx *c = p;
    dt_activation_backward(&c->act, DT_F32, c->dx, c->r, c->x, c->out, c->count, 1);
}

/* The points where a function's derivative jumps (clip's bounds, hardswish's +-3,
 * hardsigmoid's ends, leaky_relu's 0): x lies at least `gap` away from them. */
static float away_from_kinks(const dt_activation *a, float x, float gap) {
    float kinks[2];
    int n = 0;
    if (a->fn == DT_ACT_CLIP) kinks[n++] = a->a, kinks[n++] = a->b;
    if (a->fn == DT_ACT_HARDSWISH) kinks[n++] = -3.0f, kinks[n++] = 3.0f;
    if (a->fn == DT_ACT_HARDSIGMOID) kinks[n++] = -a->b / a->a, kinks[n++] = (1.0f - a->b) / a->a;
    if (a->fn == DT_ACT_LEAKY_RELU) kinks[n++] = 0.0f;
    for (int k = 0; k < n; k++)
        if (fabsf(x - kinks[k]) < gap) x = kinks[k] + (x < kinks[k] ? -gap : gap);
    return x;
}

static void test_activation_grad_matches_fd(void **state) {
    (void)state;
    for (int f = 0; f < N_ACTIVATIONS; f++) {
        activation_ctx c = {.act = activations[f], .count = 600};
        c.x = test_alloc(4 * c.count), c.out = test_alloc(4 * c.count);
        c.r = test_alloc(4 * c.count), c.dx = test_alloc(4 * c.count);
        fill_uniform(c.x, c.count, 71 + (uint64_t)f, -6, 6);
        fill_uniform(c.r, c.count, 72, -1, 1);
        for (size_t i = 0; i < c.count; i++) c.x[i] = away_from_kinks(&c.act, c.x[i], 0.03f);
        print_message("%s(%g, %g)\n", dt_activation_name(c.act.fn), (double)c.act.a,
                      (double)c.act.b);
        layer_case lc = {&c, activation_fwd, activation_bwd, {{"input", c.x, c.dx, c.count}},
                         1,  1e-2f};
        check_case(&lc, 1000, 1e-3);
        free(c.x), free(c.out), free(c.r), free(c.dx);
    }
}

/* The forward against libm in double (exp, erf, tanh), over [-20, 20]: within 1e-6 of
 * max(|y|, 1) (the formulas' own float rounding, as PyTorch's: gelu_tanh's 1 + tanh
 * cancels left of -5 in float, whatever the tanh). */
static double reference_activation(const dt_activation *a, double x) {
    switch (a->fn) {
    case DT_ACT_CLIP:
        return x < a->a ? a->a : x > a->b ? a->b : x;
    case DT_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case DT_ACT_HARDSIGMOID:
        return fmin(1.0, fmax(0.0, (double)a->a * x + a->b));
    case DT_ACT_HARDSWISH:
        return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case DT_ACT_TANH:
        return tanh(x);
    case DT_ACT_LEAKY_RELU:
        return x > 0 ? x : x * a->a;
    case DT_ACT_GELU:
        return 0.5 * x * erfc(-x / sqrt(2.0));
    case DT_ACT_GELU_TANH:
        return 0.5 * x *
               (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case DT_ACT_SILU:
        return x / (1.0 + exp(-x));
    default:
        return NAN;
    }
}

static void test_activation_forward_matches_libm(void **state) {
    (void)state;
    enum { COUNT = 40001 };
    float *x = test_alloc(4 * COUNT), *y = test_alloc(4 * COUNT);
    for (int i = 0; i < COUNT; i++) x[i] = -20.0f + 40.0f * (float)i / (COUNT - 1);
    double worst_all = 0;
    for (int f = 0; f < N_ACTIVATIONS; f++) {
        const dt_activation *a = &activations[f];
        dt_activation_forward(a, DT_F32, y, x, COUNT);
        double worst = 0, where = 0;
        for (int i = 0; i < COUNT; i++) {
            const double want = reference_activation(a, x[i]);
            const double err = fabs(y[i] - want) / fmax(fabs(want), 1.0);
            if (err > worst) worst = err, where = x[i];
        }
        print_message("  %-12s worst error %.2e of max(|y|, 1) (at %g)\n",
                      dt_activation_name(a->fn), worst, where);
        worst_all = fmax(worst_all, worst);
    }
    assert_true(worst_all < 1e-6);
    /* NaN stays NaN through every function */
    x[0] = NAN;
    for (int f = 0; f < N_ACTIVATIONS; f++) {
        dt_activation_forward(&activations[f], DT_F32, y, x, 1);
        assert_true(isnan(y[0]));
    }
    free(x), free(y);
}

/* The derivatives at the kinks, as PyTorch 1.13 gives them (torch.autograd on
 * F.relu6 / hardtanh, hardswish, hardsigmoid, leaky_relu at these points). */
static void test_activation_kinks_follow_pytorch(void **state) {
    (void)state;
    const struct {
        dt_activation act;
        float x, grad;
    } cases[] = {
        {{DT_ACT_CLIP, 0, 6}, 0.0f, 0.0f},
        {{DT_ACT_CLIP, 0, 6}, 6.0f, 0.0f},
        {{DT_ACT_CLIP, 0, 6}, 3.0f, 1.0f},
        {{DT_ACT_HARDSWISH, 0, 0}, -3.0f, -0.5f},
        {{DT_ACT_HARDSWISH, 0, 0}, 3.0f, 1.5f},
        {{DT_ACT_HARDSWISH, 0, 0}, 6.0f, 1.0f},
        {{DT_ACT_HARDSWISH, 0, 0}, -4.0f, 0.0f},
        {{DT_ACT_HARDSIGMOID, 1.0f / 6, 0.5f}, 3.0f, 0},
        {{DT_ACT_HARDSIGMOID, 1.0f / 6, 0.5f}, -3.0f, 0},
        {{DT_ACT_LEAKY_RELU, 0.1f, 0}, 0.0f, 0.1f},
        /* a NaN input: hardtanh and hardswish pass the gradient, hardsigmoid does not,
         * leaky_relu scales it */
        {{DT_ACT_CLIP, 0, 6}, NAN, 1.0f},
        {{DT_ACT_HARDSWISH, 0, 0}, NAN, 1.0f},
        {{DT_ACT_HARDSIGMOID, 1.0f / 6, 0.5f}, NAN, 0},
        {{DT_ACT_LEAKY_RELU, 0.1f, 0}, NAN, 0.1f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        float y, g = 1.0f, dx = 0.0f;
        dt_activation_forward(&cases[k].act, DT_F32, &y, &cases[k].x, 1);
        dt_activation_backward(&cases[k].act, DT_F32, &dx, &g, &cases[k].x, &y, 1, 0);
        assert_float_equal(dx, cases[k].grad, 1e-7);
    }
}

/* bf16 runs the f32 body on the widened values and rounds once: on inputs that are
 * bf16 values, its results are the f32 results rounded, bit for bit (forward, and
 * backward written or added to), at sizes past the loops' threading threshold. */
static void test_activation_bf16_matches_f32(void **state) {
    (void)state;
    const size_t count = 40000 + 7;
    uint16_t *x16 = test_alloc(2 * count), *y16 = test_alloc(2 * count);
    uint16_t *g16 = test_alloc(2 * count), *dx16 = test_alloc(2 * count);
    float *x = test_alloc(4 * count), *y = test_alloc(4 * count), *g = test_alloc(4 * count);
    float *dx = test_alloc(4 * count);
    fill_uniform(x, count, 81, -7, 7);
    fill_uniform(g, count, 82, -1, 1);
    for (size_t i = 0; i < count; i++) {
        x16[i] = dt_bf16_from_f32(x[i]), x[i] = dt_bf16_to_f32(x16[i]);
        g16[i] = dt_bf16_from_f32(g[i]), g[i] = dt_bf16_to_f32(g16[i]);
    }
    for (int f = 0; f < N_ACTIVATIONS; f++) {
        const dt_activation *a = &activations[f];
        dt_activation_forward(a, DT_F32, y, x, count);
        dt_activation_forward(a, DT_BF16, y16, x16, count);
        size_t differ = 0;
        for (size_t i = 0; i < count; i++) differ += y16[i] != dt_bf16_from_f32(y[i]);
        /* backward reads y: both from the same bf16 values */
        for (size_t i = 0; i < count; i++) y[i] = dt_bf16_to_f32(y16[i]);
        for (int add = 0; add <= 1; add++) {
            for (size_t i = 0; i < count; i++)
                dx16[i] = g16[count - 1 - i], dx[i] = g[count - 1 - i];
            dt_activation_backward(a, DT_F32, dx, g, x, y, count, add);
            dt_activation_backward(a, DT_BF16, dx16, g16, x16, y16, count, add);
            for (size_t i = 0; i < count; i++) differ += dx16[i] != dt_bf16_from_f32(dx[i]);
        }
        print_message("  %-12s %zu of %zu bf16 results differ from f32's rounded\n",
                      dt_activation_name(a->fn), differ, 3 * count);
        assert_int_equal(differ, 0);
    }
    free(x16), free(y16), free(g16), free(dx16), free(x), free(y), free(g), free(dx);
}

/* In place (out == in, din == dout, x == y) a function that runs so gives the same bits
 * as out of place, in f32 and bf16; the others are refused by the builder. */
static void test_activation_in_place_matches_out_of_place(void **state) {
    (void)state;
    const size_t count = 40000 + 5;
    float *x = test_alloc(4 * count), *g = test_alloc(4 * count);
    fill_uniform(x, count, 85, -7, 7);
    fill_uniform(g, count, 86, -1, 1);
    for (int type = 0; type < 2; type++) {
        const dt_dtype dtype = type ? DT_BF16 : DT_F32;
        const size_t size = type ? 2 : 4;
        unsigned char *xs = test_alloc(size * count), *gs = test_alloc(size * count);
        unsigned char *y = test_alloc(size * count), *dx = test_alloc(size * count);
        unsigned char *io = test_alloc(size * count), *gio = test_alloc(size * count);
        for (size_t i = 0; i < count; i++)
            if (type)
                ((uint16_t *)xs)[i] = dt_bf16_from_f32(x[i]),
                           ((uint16_t *)gs)[i] = dt_bf16_from_f32(g[i]);
            else
                ((float *)xs)[i] = x[i], ((float *)gs)[i] = g[i];
        int in_place = 0;
        for (int f = 0; f < N_ACTIVATIONS; f++) {
            const dt_activation *a = &activations[f];
            if (!dt_activation_runs_in_place(*a)) continue;
            in_place++;
            dt_activation_forward(a, dtype, y, xs, count);
            dt_activation_backward(a, dtype, dx, gs, xs, y, count, 0);
            memcpy(io, xs, size * count);
            memcpy(gio, gs, size * count);
            dt_activation_forward(a, dtype, io, io, count);
            dt_activation_backward(a, dtype, gio, gio, io, io, count, 0);
            assert_memory_equal(io, y, size * count);
            assert_memory_equal(gio, dx, size * count);
        }
        assert_int_equal(in_place, 8); /* clip x2, sigmoid, hardsigmoid x2, tanh, leaky x2 */
        free(xs), free(gs), free(y), free(dx), free(io), free(gio);
    }
    free(x), free(g);
}

/* The op in a model, through its kernel: the conv's output read by two activations
 * (backward adds into its gradient) and a chain of them (each its input's sole
 * reader: backward writes); every parameter's gradient against the directional
 * difference of the loss. */
static double model_loss(dt_model *m, const float *x, const int32_t *labels, int n) {
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    dt_model_forward(m, n);
    return dt_model_loss(m, labels, n, NULL);
}

static void test_activation_op_grad_matches_fd(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "activations", 3);
    const int x = dt_model_input(&m, 2, 3, 4);
    const int c = dt_model_conv2d(&m, "conv", x, 4, 1, 1, 0, 1);
    int a = dt_model_activation(&m, c, (dt_activation){DT_ACT_GELU, 0, 0});
    for (int f = 0; f < N_ACTIVATIONS; f++) a = dt_model_activation(&m, a, activations[f]);
    for (int f = 0; f < N_ACTIVATIONS; f++) /* and those that can, in place */
        if (dt_activation_runs_in_place(activations[f]))
            a = dt_model_activation_in_place(&m, a, activations[f]);
    const int b = dt_model_activation(&m, c, (dt_activation){DT_ACT_SILU, 0, 0});
    const int y = dt_model_linear(&m, "fc", dt_model_flatten(&m, dt_model_add(&m, a, b)), 3);
    assert_true(y >= 0);
    assert_int_equal(m.values[a].rank, 3);
    assert_int_equal(m.values[a].h, 3);
    assert_int_equal(dt_model_activation(&m, y, (dt_activation){DT_ACT_LEAKY_RELU, NAN, 0}), -1);
    assert_non_null(strstr(m.build_error.msg, "leaky_relu with parameters nan"));
    m.build_failed = 0;
    assert_int_equal(dt_model_activation_in_place(&m, y, (dt_activation){DT_ACT_GELU, 0, 0}), -1);
    assert_non_null(strstr(m.build_error.msg, "gelu cannot run in place"));
    m.build_failed = 0;
    const int batch = 3;
    if (dt_model_alloc(&m, batch, &err)) fail_msg("%s", err.msg);
    assert_false(m.storages[m.values[c].storage].grad_written); /* two readers */
    assert_true(m.storages[m.values[m.ops[3].in].storage].grad_written);
    dt_model_init_params(&m, 7);
    float xs[2 * 3 * 4 * 3];
    fill_uniform(xs, sizeof xs / sizeof *xs, 91, -3, 3);
    const int32_t labels[3] = {0, 2, 1};
    dt_model_zero_grad(&m);
    model_loss(&m, xs, labels, batch);
    dt_model_backward(&m, labels, batch);
    float *dir = test_alloc(sizeof(float) * m.n_params),
          *saved = test_alloc(sizeof(float) * m.n_params);
    fill_uniform(dir, m.n_params, 92, -1, 1);
    memcpy(saved, m.params, sizeof(float) * m.n_params);
    double g_dot_d = 0;
    for (size_t i = 0; i < m.n_params; i++) g_dot_d += (double)m.grads[i] * dir[i];
    const float eps = 1e-3f;
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = saved[i] + eps * dir[i];
    const double lp = model_loss(&m, xs, labels, batch);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] = saved[i] - eps * dir[i];
    const double lm = model_loss(&m, xs, labels, batch);
    const double numeric = (lp - lm) / (2.0 * eps);
    print_message("  directional derivative %.6g, gradient's %.6g\n", numeric, g_dot_d);
    assert_true(fabs(numeric - g_dot_d) <= 2e-3 * fabs(g_dot_d));
    free(dir), free(saved);
    dt_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_grad_matches_fd),
        cmocka_unit_test(test_linear_head_grad_matches_fd),
        cmocka_unit_test(test_conv2d_grad_matches_fd),
        cmocka_unit_test(test_batchnorm2d_grad_matches_fd),
        cmocka_unit_test(test_batchnorm2d_running_stats_are_unbiased),
        cmocka_unit_test(test_batchnorm2d_op_uses_its_eps),
        cmocka_unit_test(test_relu_grad_matches_fd),
        cmocka_unit_test(test_maxpool2d_grad_matches_fd),
        cmocka_unit_test(test_pool_windows_grad_matches_fd),
        cmocka_unit_test(test_pad2d_grad_matches_fd),
        cmocka_unit_test(test_avgpool_count_include_pad_divides_as_pytorch),
        cmocka_unit_test(test_maxpool2d_padded_grad_matches_fd),
        cmocka_unit_test(test_maxpool2d_2x2_ties_and_nan),
        cmocka_unit_test(test_maxpool2d_blocked_ties_and_nan),
        cmocka_unit_test(test_batchnorm2d_backward_writes_din),
        cmocka_unit_test(test_pool2d_out_size_follows_pytorch),
        cmocka_unit_test(test_avgpool2d_grad_matches_fd),
        cmocka_unit_test(test_adaptive_avgpool2d_grad_matches_fd),
        cmocka_unit_test(test_adaptive_avgpool2d_cells_follow_pytorch),
        cmocka_unit_test(test_residual_add_grad_matches_fd),
        cmocka_unit_test(test_shortcut_pad_grad_matches_fd),
        cmocka_unit_test(test_concat_grad_matches_fd),
        cmocka_unit_test(test_dropout_grad_matches_fd),
        cmocka_unit_test(test_dropout_zeroes_p_and_scales_the_rest),
        cmocka_unit_test(test_dropout_op_trains_and_evaluates_as_pytorch),
        cmocka_unit_test(test_cross_entropy_grad_matches_fd),
        cmocka_unit_test(test_activation_grad_matches_fd),
        cmocka_unit_test(test_activation_forward_matches_libm),
        cmocka_unit_test(test_activation_kinks_follow_pytorch),
        cmocka_unit_test(test_activation_bf16_matches_f32),
        cmocka_unit_test(test_activation_in_place_matches_out_of_place),
        cmocka_unit_test(test_activation_op_grad_matches_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
