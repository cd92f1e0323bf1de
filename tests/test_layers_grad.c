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

#include "dtrain/batchnorm2d.h"
#include "dtrain/conv2d.h"
#include "dtrain/cross_entropy.h"
#include "dtrain/linear.h"
#include "dtrain/pool2d.h"
#include "dtrain/relu.h"
#include "dtrain/residual.h"
#include "dtrain/shortcut_pad.h"
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
    float *x, *w, *b, *out, *r, *dx, *dw, *db;
} linear_ctx;

static double linear_fwd(void *p) {
    linear_ctx *c = p;
    dt_linear_forward(c->out, c->x, c->w, c->b, c->n, c->in_f, c->out_f);
    return dot(c->out, c->r, (size_t)c->n * c->out_f);
}

static void linear_bwd(void *p) {
    linear_ctx *c = p;
    dt_linear_backward(c->dx, c->dw, c->db, c->r, c->x, c->w, c->n, c->in_f, c->out_f);
}

static void test_linear_grad_matches_fd(void **state) {
    (void)state;
    linear_ctx c = {.n = 5, .in_f = 7, .out_f = 3};
    size_t nx = (size_t)c.n * c.in_f, nw = (size_t)c.out_f * c.in_f, no = (size_t)c.n * c.out_f;
    c.x = test_alloc(4 * nx), c.dx = test_alloc(4 * nx), c.w = test_alloc(4 * nw);
    c.dw = test_alloc(4 * nw), c.b = test_alloc(4 * c.out_f), c.db = test_alloc(4 * c.out_f);
    c.out = test_alloc(4 * no), c.r = test_alloc(4 * no);
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

static void check_conv(int n, int c_in, int h, int w, int c_out, int k, int stride, int pad) {
    conv_ctx c;
    memset(&c, 0, sizeof c);
    assert_int_equal(dt_conv2d_shape_make(&c.s, n, c_in, h, w, c_out, k, k, stride, pad), 0);
    print_message("conv2d n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d\n", n, c_in, h, w,
                  c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h * w, nw = (size_t)c_out * c_in * k * k;
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

static void test_conv2d_grad_matches_fd(void **state) {
    (void)state;
    check_conv(2, 3, 7, 6, 4, 3, 1, 1);   /* 3x3 same padding, odd sizes */
    check_conv(3, 2, 9, 9, 3, 5, 2, 2);   /* 5x5 stride 2 */
    check_conv(2, 4, 5, 5, 3, 1, 1, 0);   /* pointwise, batched chunk */
    check_conv(2, 4, 6, 6, 5, 1, 2, 0);   /* 1x1 stride 2: the ResNet shortcut */
    check_conv(1, 2, 40, 40, 2, 3, 1, 0); /* wide map: one sample per GEMM */
    check_conv(1, 3, 4, 5, 2, 2, 3, 1);   /* stride larger than the kernel */
}

/* ---- batchnorm2d (training mode) ---- */
typedef struct {
    int n, c, hw;
    float *x, *g, *b, *out, *r, *dx, *dg, *db, *mean, *invstd, *rm, *rv;
} bn_ctx;

static double bn_fwd(void *p) {
    bn_ctx *c = p;
    dt_batchnorm2d_forward_train(c->out, c->mean, c->invstd, c->rm, c->rv, c->x, c->g, c->b, c->n,
                                 c->c, c->hw, 0.1f, 1e-5f);
    return dot(c->out, c->r, (size_t)c->n * c->c * c->hw);
}

static void bn_bwd(void *p) {
    bn_ctx *c = p;
    dt_batchnorm2d_backward(c->dx, c->dg, c->db, c->r, c->x, c->mean, c->invstd, c->g, c->n, c->c,
                            c->hw);
}

static void test_batchnorm2d_grad_matches_fd(void **state) {
    (void)state;
    bn_ctx c = {.n = 4, .c = 3, .hw = 5};
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
    int kind; /* 0 relu, 1 maxpool, 2 avgpool, 3 add */
    int n, c, h, w, k, s;
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
        dt_maxpool2d_forward(c->out, c->argmax, c->x, c->n, c->c, c->h, c->w, c->k, c->s);
        break;
    case 2:
        dt_avgpool2d_forward(c->out, c->x, c->n, c->c, c->h, c->w, c->k, c->s);
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
        dt_maxpool2d_backward(c->dx, c->r, c->argmax, c->n, c->c, c->h, c->w, c->k, c->s);
        break;
    case 2:
        dt_avgpool2d_backward(c->dx, c->r, c->n, c->c, c->h, c->w, c->k, c->s);
        break;
    default:
        dt_residual_add_backward(c->dx, c->dx2, c->r, c->nx);
        break;
    }
}

static void check_simple(int kind, int k, int s) {
    simple_ctx c = {.kind = kind, .n = 2, .c = 3, .h = 6, .w = 7, .k = k, .s = s};
    c.nx = (size_t)c.n * c.c * c.h * c.w;
    c.no = kind == 1 || kind == 2
               ? (size_t)c.n * c.c * dt_pool2d_out_size(c.h, k, s) * dt_pool2d_out_size(c.w, k, s)
               : c.nx;
    c.x = test_alloc(4 * c.nx), c.x2 = test_alloc(4 * c.nx), c.dx = test_alloc(4 * c.nx);
    c.dx2 = test_alloc(4 * c.nx), c.out = test_alloc(4 * c.nx), c.r = test_alloc(4 * c.no);
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

static void test_relu_grad_matches_fd(void **state) {
    (void)state;
    check_simple(0, 0, 0);
}

static void test_maxpool2d_grad_matches_fd(void **state) {
    (void)state;
    check_simple(1, 2, 2);
    check_simple(1, 3, 2); /* overlapping windows */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_grad_matches_fd),
        cmocka_unit_test(test_conv2d_grad_matches_fd),
        cmocka_unit_test(test_batchnorm2d_grad_matches_fd),
        cmocka_unit_test(test_batchnorm2d_running_stats_are_unbiased),
        cmocka_unit_test(test_relu_grad_matches_fd),
        cmocka_unit_test(test_maxpool2d_grad_matches_fd),
        cmocka_unit_test(test_avgpool2d_grad_matches_fd),
        cmocka_unit_test(test_residual_add_grad_matches_fd),
        cmocka_unit_test(test_shortcut_pad_grad_matches_fd),
        cmocka_unit_test(test_cross_entropy_grad_matches_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
