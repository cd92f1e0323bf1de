/* The elementwise binary op (add, sub, mul, div with NumPy broadcasting) and ReduceMean:
 * their gradients against central finite differences of a small graph's loss, for
 * broadcasting along each axis, both operand orders, tensor operands (trainable and
 * constant scalars, the batch axis broadcast), ranks 2 and 3; large shapes (the threaded walks)
 * by directional differences and the same results on 1 and 2 threads; bf16 against f32. */
#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu_isa.h"
#include "core/rng.h"
#include "dtrain/backend.h"
#include "dtrain/model.h"
#include "testutil.h"

/* One graph: the input x, the branches a and b (x averaged where their shape has 1,
 * then scaled by a parameter of their shape: its gradient is the branch's), and
 * y = a OP b, or a OP t for a parameter t (t_ndim >= 0, trainable) or the constant
 * 0.75 (t_ndim >= 0, not trainable). y is the logits. */
typedef struct bin_case {
    const char *what;
    dt_binary_func func;
    int x[3], a[3], b[3];
    int swap; /* y = b OP a */
    int t_ndim, t[4], trainable;
} bin_case;

static int branch(dt_model *m, int x, const int *xs, const int *shape, const char *name) {
    unsigned axes = 0;
    for (int d = 0; d < 3; d++)
        if (shape[d] == 1 && xs[d] != 1) axes |= 1u << d;
    const int v = axes ? dt_model_reduce_mean(m, x, axes, 1) : x;
    return dt_model_binary_param(m, name, DT_BINARY_MUL, v, 3, shape);
}

static void build_case(dt_model *m, const bin_case *c) {
    dt_model_init_empty(m, c->what, 1);
    const int x = dt_model_input(m, c->x[0], c->x[1], c->x[2]);
    const int a = branch(m, x, c->x, c->a, "scale_a");
    int y;
    if (c->t_ndim >= 0 && c->trainable) {
        y = dt_model_binary_param(m, "t", c->func, a, c->t_ndim, c->t);
    } else if (c->t_ndim >= 0) {
        y = dt_model_binary_scalar(m, c->func, a, 0.75f);
    } else {
        const int b = branch(m, x, c->x, c->b, "scale_b");
        y = c->swap ? dt_model_binary(m, c->func, b, a) : dt_model_binary(m, c->func, a, b);
    }
    assert_true(y >= 0);
    m->classes = (int)m->storages[m->values[y].storage].per_sample;
}

static double loss_at(dt_model *m, const float *x, const int32_t *labels, int n) {
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    dt_model_forward(m, n);
    return dt_model_loss(m, labels, n, NULL);
}

/* Inputs, parameters and constants in [0.5, 1.5]: divisors stay away from 0. */
static void fill_model(dt_model *m, int n, float **x, int32_t *labels) {
    const size_t nx = dt_model_input_floats_per_sample(m) * (size_t)n;
    *x = test_alloc(sizeof(float) * nx);
    fill_uniform(*x, nx, 1, 0.5f, 1.5f);
    fill_uniform(m->params, m->n_params, 2, 0.5f, 1.5f);
    fill_uniform(m->buffers, m->n_buffers, 3, 0.5f, 1.5f);
    dt_rng rng = dt_rng_make(4, 4);
    for (int i = 0; i < n; i++) labels[i] = (int32_t)dt_rng_below(&rng, (uint64_t)m->classes);
}

/* Every parameter element's gradient against central differences of the loss. */
static void check_per_element(dt_model *m, int n, double tol) {
    float *x;
    int32_t labels[8];
    fill_model(m, n, &x, labels);
    dt_model_zero_grad(m);
    loss_at(m, x, labels, n);
    dt_model_backward(m, labels, n);
    const float eps = 1e-2f;
    for (int t = 0; t < m->n_tensors; t++) {
        const dt_tensor_entry *te = &m->tensors[t];
        if (!te->is_param) continue;
        float *numeric = test_alloc(sizeof(float) * te->numel);
        for (size_t i = 0; i < te->numel; i++) {
            float *p = m->params + te->offset + i;
            const float saved = *p;
            *p = saved + eps;
            const double lp = loss_at(m, x, labels, n);
            *p = saved - eps;
            const double lm = loss_at(m, x, labels, n);
            *p = saved;
            numeric[i] = (float)((lp - lm) / (2.0 * eps));
        }
        const double e = rel_error(m->grads + te->offset, numeric, te->numel);
        print_message("  %-8s %zu elements, relative error %.2e\n", te->name, te->numel, e);
        assert_true(e < tol);
        free(numeric);
    }
    free(x);
}

static void check_case(const bin_case *c, int n) {
    dt_model m;
    dt_error err;
    build_case(&m, c);
    if (dt_model_alloc(&m, n, &err)) fail_msg("%s: %s", c->what, err.msg);
    print_message("%s (batch %d, %s)\n", c->what, n, m.ops[m.n_ops - 1].impl->name);
    check_per_element(&m, n, 2e-3);
    dt_model_free(&m);
}

#define NO_T .t_ndim = -1

static void test_binary_activations_grad_matches_fd(void **state) {
    (void)state;
    const bin_case cases[] = {
        {"se_mul", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {4, 1, 1}, 0, NO_T},
        {"se_mul_scale_first", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {4, 1, 1}, 1, NO_T},
        {"mul_channels", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {1, 3, 5}, 0, NO_T},
        {"sub_rows", DT_BINARY_SUB, {4, 3, 5}, {4, 3, 5}, {4, 1, 5}, 0, NO_T},
        {"sub_rows_swapped", DT_BINARY_SUB, {4, 3, 5}, {4, 3, 5}, {4, 1, 5}, 1, NO_T},
        {"div_columns", DT_BINARY_DIV, {4, 3, 5}, {4, 3, 5}, {4, 3, 1}, 0, NO_T},
        {"div_columns_swapped", DT_BINARY_DIV, {4, 3, 5}, {4, 3, 5}, {4, 3, 1}, 1, NO_T},
        {"add_both_broadcast", DT_BINARY_ADD, {4, 3, 5}, {4, 1, 5}, {1, 3, 1}, 0, NO_T},
        {"div_both_broadcast", DT_BINARY_DIV, {4, 3, 5}, {1, 3, 1}, {4, 1, 5}, 0, NO_T},
        {"mul_same_shape", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {4, 3, 5}, 0, NO_T},
        {"div_same_shape", DT_BINARY_DIV, {4, 3, 5}, {4, 3, 5}, {4, 3, 5}, 0, NO_T},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], 3);
}

static void test_binary_tensor_grad_matches_fd(void **state) {
    (void)state;
    const bin_case cases[] = {
        /* layer scale gamma [C,1,1]; a position embedding [1,H,W] with ONNX's batch axis */
        {"layer_scale", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {0}, 0, 3, {4, 1, 1}, 1},
        {"position_embedding", DT_BINARY_ADD, {4, 3, 5}, {4, 3, 5}, {0}, 0, 4, {1, 1, 3, 5}, 1},
        {"bias_last_axis", DT_BINARY_ADD, {4, 3, 5}, {4, 3, 5}, {0}, 0, 1, {5}, 1},
        {"sub_full", DT_BINARY_SUB, {4, 3, 5}, {4, 3, 5}, {0}, 0, 3, {4, 3, 5}, 1},
        {"tensor_minus_x", DT_BINARY_SUB_REVERSED, {4, 3, 5}, {4, 3, 5}, {0}, 0, 2, {3, 1}, 1},
        {"tensor_over_x", DT_BINARY_DIV_REVERSED, {4, 3, 5}, {4, 3, 5}, {0}, 0, 2, {3, 5}, 1},
        {"div_by_tensor", DT_BINARY_DIV, {4, 3, 5}, {4, 3, 5}, {0}, 0, 3, {1, 3, 1}, 1},
        {"div_by_constant", DT_BINARY_DIV, {4, 3, 5}, {4, 3, 5}, {0}, 0, 0, {0}, 0},
        {"constant_over_x", DT_BINARY_DIV_REVERSED, {4, 3, 5}, {4, 3, 5}, {0}, 0, 0, {0}, 0},
        {"constant_minus_x", DT_BINARY_SUB_REVERSED, {4, 3, 5}, {4, 3, 5}, {0}, 0, 0, {0}, 0},
        {"scalar_parameter", DT_BINARY_MUL, {4, 3, 5}, {4, 3, 5}, {0}, 0, 0, {0}, 1},
        /* the tensor larger than the activation along an axis */
        {"tensor_widens", DT_BINARY_MUL, {4, 3, 1}, {4, 3, 1}, {0}, 0, 3, {4, 1, 5}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], 3);
}

/* Rank 2: x [4,3,5] averaged over its last axis to [4,3] (keepdims 0), a tensor [3]
 * and an activation [4,1] (a mean over that) against it. */
static void test_rank2_grad_matches_fd(void **state) {
    (void)state;
    for (int func = DT_BINARY_ADD; func <= DT_BINARY_DIV; func++) {
        dt_model m;
        dt_error err;
        dt_model_init_empty(&m, "rank2", 1);
        const int x = dt_model_input(&m, 4, 3, 5);
        const int r = dt_model_reduce_mean(&m, x, 1u << 2, 0);
        const int shape[2] = {4, 3};
        const int a = dt_model_binary_param(&m, "scale_a", DT_BINARY_MUL, r, 2, shape);
        const int b = dt_model_reduce_mean(&m, a, 1u << 1, 1); /* [4, 1] */
        const int ab = dt_model_binary(&m, (dt_binary_func)func, a, b);
        const int three[1] = {3};
        const int y = dt_model_binary_param(&m, "t", (dt_binary_func)func, ab, 1, three);
        assert_int_equal(m.values[b].rank, 2);
        assert_int_equal(m.values[y].rank, 2);
        m.classes = 12;
        if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
        print_message("rank 2, function %d\n", func);
        check_per_element(&m, 2, 2e-3);
        dt_model_free(&m);
    }
}

/* Shapes the builders refuse, each in one line. */
static void test_builders_refuse_what_does_not_broadcast(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "bad", 1);
    const int x = dt_model_input(&m, 4, 3, 5);
    const int r = dt_model_reduce_mean(&m, x, 1u << 2, 0); /* [4, 3] */
    assert_int_equal(dt_model_binary(&m, DT_BINARY_MUL, x, r), -1);
    assert_non_null(strstr(m.build_error.msg, "do not broadcast"));
    dt_model_free(&m);
    dt_model_init_empty(&m, "bad", 1);
    const int x2 = dt_model_input(&m, 4, 3, 5);
    const int t[3] = {2, 3, 5};
    assert_int_equal(dt_model_binary_param(&m, "t", DT_BINARY_ADD, x2, 3, t), -1);
    assert_int_equal(dt_model_alloc(&m, 2, &err), -1);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "tensor t of 2x3x5 does not broadcast with values of 4x3x5"));
    dt_model_free(&m);
    dt_model_init_empty(&m, "bad", 1);
    const int x3 = dt_model_input(&m, 4, 3, 5);
    assert_int_equal(dt_model_reduce_mean(&m, x3, 7u, 0), -1);
    assert_non_null(strstr(m.build_error.msg, "leaves none"));
    dt_model_free(&m);
}

/* Large shapes, so that the walks run threaded: the directional derivative of the loss
 * along a random direction per parameter tensor, and 1 and 2 threads bit for bit. */
static void run_large(const bin_case *c, int n, int threads, float *logits, float *grads) {
    dt_model m;
    dt_error err;
    build_case(&m, c);
    if (dt_model_alloc(&m, n, &err)) fail_msg("%s", err.msg);
    float *x;
    int32_t labels[8];
    fill_model(&m, n, &x, labels);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    dt_model_zero_grad(&m);
    loss_at(&m, x, labels, n);
    dt_model_backward(&m, labels, n);
    omp_set_num_threads(saved);
    memcpy(logits, dt_model_logits(&m), sizeof(float) * (size_t)n * m.classes);
    memcpy(grads, m.grads, sizeof(float) * m.n_params);
    /* directional differences, on the threads given */
    float *dir = test_alloc(sizeof(float) * m.n_params);
    float *start = test_alloc(sizeof(float) * m.n_params);
    fill_uniform(dir, m.n_params, 9, -1, 1);
    memcpy(start, m.params, sizeof(float) * m.n_params);
    const float eps = 1e-2f;
    for (int t = 0; t < m.n_tensors; t++) {
        const dt_tensor_entry *te = &m.tensors[t];
        if (!te->is_param) continue;
        double g_dot_d = 0.0;
        for (size_t i = 0; i < te->numel; i++)
            g_dot_d += (double)grads[te->offset + i] * dir[te->offset + i];
        for (size_t i = 0; i < te->numel; i++)
            m.params[te->offset + i] = start[te->offset + i] + eps * dir[te->offset + i];
        const double lp = loss_at(&m, x, labels, n);
        for (size_t i = 0; i < te->numel; i++)
            m.params[te->offset + i] = start[te->offset + i] - eps * dir[te->offset + i];
        const double lm = loss_at(&m, x, labels, n);
        memcpy(m.params + te->offset, start + te->offset, sizeof(float) * te->numel);
        const float numeric = (float)((lp - lm) / (2.0 * eps)), analytic = (float)g_dot_d;
        const double e = rel_error(&analytic, &numeric, 1);
        print_message("  %-8s %zu elements, directional relative error %.2e\n", te->name, te->numel,
                      e);
        assert_true(e < 1e-2);
    }
    free(dir);
    free(start);
    free(x);
    dt_model_free(&m);
}

static void test_large_shapes_threaded(void **state) {
    (void)state;
    const bin_case cases[] = {
        {"se_large", DT_BINARY_MUL, {48, 23, 23}, {48, 23, 23}, {48, 1, 1}, 0, NO_T},
        {"rows_large", DT_BINARY_DIV, {48, 23, 23}, {48, 23, 23}, {1, 23, 23}, 0, NO_T},
        {"position_embedding_large",
         DT_BINARY_ADD,
         {48, 23, 23},
         {48, 23, 23},
         {0},
         0,
         4,
         {1, 48, 23, 23},
         1},
        {"bias_large", DT_BINARY_SUB, {48, 23, 23}, {48, 23, 23}, {0}, 0, 1, {23}, 1},
    };
    const int n = 4; /* 2 threads split the output mid-row: 4 x 48 x 529 / 2 */
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const size_t out = (size_t)n * 48 * 23 * 23;
        float *l1 = test_alloc(sizeof(float) * out), *l2 = test_alloc(sizeof(float) * out);
        float *g1 = test_alloc(sizeof(float) * 3 * out), *g2 = test_alloc(sizeof(float) * 3 * out);
        print_message("%s, 2 threads\n", cases[i].what);
        run_large(&cases[i], n, 2, l2, g2);
        print_message("%s, 1 thread\n", cases[i].what);
        run_large(&cases[i], n, 1, l1, g1);
        assert_memory_equal(l1, l2, sizeof(float) * out);
        assert_memory_equal(g1, g2, sizeof(float) * 3 * out);
        free(l1), free(l2), free(g1), free(g2);
    }
}

/* bf16 activations against f32 on the same weights: a conv (the f32 input's edge), a
 * squeeze-and-excitation scale, a layer scale, a subtraction of a channel mean and a
 * division by a constant, then a linear head. bf16 rounds to 2^-8: the logits and the
 * gradients agree to a few of those, and the binary ops ran on their bf16 kernels. */
static void run_precision(dt_precision precision, float *logits, float *grads, size_t *n_params) {
    /* grads: room for 20000 (the model has 10,714) */
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "se", 10);
    m.precision = precision;
    const int x = dt_model_input(&m, 3, 8, 8);
    const int a = dt_model_conv2d(&m, "conv", x, 16, 3, 1, 1, 1);
    const int s = dt_model_reduce_mean(&m, a, 6u, 1);
    const int y = dt_model_binary(&m, DT_BINARY_MUL, a, s);
    const int gamma[3] = {16, 1, 1};
    const int z = dt_model_binary_param(&m, "gamma", DT_BINARY_MUL, y, 3, gamma);
    const int c = dt_model_reduce_mean(&m, z, 1u, 1); /* [1, 8, 8] */
    const int d = dt_model_binary(&m, DT_BINARY_SUB, z, c);
    const int e = dt_model_binary_scalar(&m, DT_BINARY_DIV, d, 2.0f);
    dt_model_linear(&m, "fc", e, 10);
    const int n = 4;
    if (dt_model_alloc(&m, n, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 5);
    float *in = test_alloc(sizeof(float) * 3 * 64 * n);
    fill_uniform(in, 3 * 64 * n, 1, -1, 1);
    int32_t labels[4] = {1, 3, 5, 7};
    dt_model_zero_grad(&m);
    loss_at(&m, in, labels, n);
    dt_model_backward(&m, labels, n);
    for (int i = 0; i < m.n_ops; i++)
        if (m.ops[i].kind == DT_OP_BINARY || m.ops[i].kind == DT_OP_REDUCE_MEAN) {
            print_message("  op %d: %s\n", i, m.ops[i].impl->name);
            if (precision == DT_PRECISION_BF16)
                assert_non_null(strstr(m.ops[i].impl->name, "bf16"));
        }
    memcpy(logits, dt_model_logits(&m), sizeof(float) * 10 * n);
    assert_true(m.n_params <= 20000);
    memcpy(grads, m.grads, sizeof(float) * m.n_params);
    *n_params = m.n_params;
    free(in);
    dt_model_free(&m);
}

static void test_bf16_matches_f32(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) skip(); /* no bf16 instructions here: nothing to compare */
    float l32[40], l16[40];
    float *g32 = test_alloc(sizeof(float) * 20000), *g16 = test_alloc(sizeof(float) * 20000);
    size_t np32, np16;
    run_precision(DT_PRECISION_FP32, l32, g32, &np32);
    run_precision(DT_PRECISION_BF16, l16, g16, &np16);
    assert_int_equal(np32, np16);
    assert_true(np32 <= 20000);
    const double el = rel_error(l16, l32, 40), eg = rel_error(g16, g32, np32);
    print_message("bf16 against f32: logits %.2e, gradients %.2e\n", el, eg);
    assert_true(el < 2e-2);
    assert_true(eg < 5e-2);
    assert_true(eg > 1e-6); /* bf16 ran: its rounding shows */
    free(g32);
    free(g16);
}

/* Squeeze-and-excitation between convolutions keeps oneDNN's nChw16c: conv -> global
 * average pool -> 1x1 conv (the scale s) -> s * x -> x * gamma [C,1,1] -> conv -> head.
 * The product and the layer scale run blocked, and give what the plain layout gives
 * (the sums of the scale's gradient in another order: float rounding apart). */
static void run_se(dt_precision precision, int plain, float *logits, float *grads,
                   size_t *n_params) {
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "se_blocked", 10);
    m.precision = precision;
    m.plain_layouts = plain;
    const int x = dt_model_input(&m, 3, 8, 8);
    const int a = dt_model_conv2d(&m, "conv1", x, 32, 3, 1, 1, 1);
    const int p = dt_model_adaptive_avgpool2d(&m, a, 1, 1);
    const int s = dt_model_conv2d(&m, "fc", p, 32, 1, 1, 0, 1);
    const int y = dt_model_binary(&m, DT_BINARY_MUL, s, a);
    const int gamma[3] = {32, 1, 1};
    const int z = dt_model_binary_param(&m, "gamma", DT_BINARY_MUL, y, 3, gamma);
    const int c = dt_model_conv2d(&m, "conv2", z, 16, 3, 1, 1, 1);
    dt_model_linear(&m, "head", dt_model_flatten(&m, dt_model_adaptive_avgpool2d(&m, c, 1, 1)), 10);
    const int n = 4;
    if (dt_model_alloc(&m, n, &err)) fail_msg("%s", err.msg);
    for (int v = 0; v < m.n_values; v++)
        if (v == y || v == z || v == s) assert_int_equal(dt_model_value_blocked(&m, v), !plain);
    for (int i = 0; i < m.n_ops; i++)
        if (m.ops[i].kind == DT_OP_BINARY)
            print_message("  %s, %s\n", m.ops[i].impl->name, plain ? "NCHW" : "nChw16c");
    dt_model_init_params(&m, 5);
    float *in = test_alloc(sizeof(float) * 3 * 64 * n);
    fill_uniform(in, 3 * 64 * n, 1, -1, 1);
    int32_t labels[4] = {1, 3, 5, 7};
    dt_model_zero_grad(&m);
    loss_at(&m, in, labels, n);
    dt_model_backward(&m, labels, n);
    assert_true(m.n_params <= 20000);
    memcpy(logits, dt_model_logits(&m), sizeof(float) * 10 * n);
    memcpy(grads, m.grads, sizeof(float) * m.n_params);
    *n_params = m.n_params;
    free(in);
    dt_model_free(&m);
}

static void test_se_blocked_matches_plain(void **state) {
    (void)state;
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        if (bf16 && !dt_cpu_has_bf16()) break; /* the fp32 half ran */
        const dt_precision pr = bf16 ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
        float lb[40], lp[40];
        float *gb = test_alloc(sizeof(float) * 20000), *gp = test_alloc(sizeof(float) * 20000);
        size_t nb, np;
        run_se(pr, 0, lb, gb, &nb);
        run_se(pr, 1, lp, gp, &np);
        assert_int_equal(nb, np);
        const double el = rel_error(lb, lp, 40), eg = rel_error(gb, gp, nb);
        print_message("%s: nChw16c against NCHW: logits %.2e, gradients %.2e\n",
                      bf16 ? "bf16" : "fp32", el, eg);
        assert_true(el < (bf16 ? 2e-2 : 1e-5));
        assert_true(eg < (bf16 ? 3e-2 : 1e-4));
        free(gb);
        free(gp);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_activations_grad_matches_fd),
        cmocka_unit_test(test_binary_tensor_grad_matches_fd),
        cmocka_unit_test(test_rank2_grad_matches_fd),
        cmocka_unit_test(test_builders_refuse_what_does_not_broadcast),
        cmocka_unit_test(test_large_shapes_threaded),
        cmocka_unit_test(test_bf16_matches_f32),
        cmocka_unit_test(test_se_blocked_matches_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
