/* The transformer's ops (issue 41) in one small attention-shaped graph built from the
 * builders: a linear over the last axis, a class token (a parameter broadcast over the
 * batch) joined on axis 1, LayerNorm over one and over two axes, softmax on the last
 * axis and over a coerced tail, log-softmax on axis 0 (a strided axis), a batched
 * matmul of two activations, slices with a step, gathers that drop an axis. Its
 * gradients against central finite differences, its bf16 run against its f32 one, and
 * the batched matmul against the plain triple loop. */
#include <math.h>
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
#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "exec/bf16_matmul.h"
#include "exec/exec.h"
#include "nn/matmul.h"
#include "testutil.h"

enum { HEADS = 2, TOKENS = 5, FEATURES = 4, WIDTH = 8, CLASSES = 10, BATCH = 3 };

/* [HEADS, TOKENS, FEATURES] -> logits [CLASSES] */
static void build(dt_model *m, dt_precision precision) {
    dt_model_init_empty(m, "attention", CLASSES);
    m->precision = precision;
    const int in_dims[3] = {HEADS, TOKENS, FEATURES};
    const int x0 = dt_model_input_shape(m, 3, in_dims);
    const int e = dt_model_linear_last_axis(m, "embed", x0, WIDTH, 1); /* [2, 5, 8] */
    const int e1 = dt_model_layernorm(m, "ln0", e, 1, 1e-5f, 1);       /* over [5, 8] */
    const int cls_dims[3] = {HEADS, 1, WIDTH};
    const int cls = dt_model_expand_param(m, "class_token", 3, cls_dims);
    const int joined[2] = {cls, e1};
    const int x = dt_model_concat_axis(m, joined, 2, 1);             /* [2, 6, 8] */
    const int ln = dt_model_layernorm(m, "ln1", x, -1, 1e-5f, 1);    /* over [8] */
    const int res = dt_model_add(m, x, ln);                          /* a residual join */
    const int qkv = dt_model_linear_last_axis(m, "qkv", res, 16, 1); /* [2, 6, 16] */
    const int q = dt_model_slice(m, qkv, -1, 0, 6, 1, 1);            /* [2, 6, 6] */
    const int v = dt_model_slice(m, qkv, 2, 6, 5, 2, 1);             /* [2, 6, 5] */
    const int p = dt_model_softmax(m, q, -1, 0, 0);
    const int o = dt_model_matmul(m, p, v);             /* [2, 6, 5] */
    const int o1 = dt_model_softmax(m, o, 0, 1, 0);     /* log-softmax over the heads */
    const int o2 = dt_model_softmax(m, o1, 1, 0, 1);    /* softmax over [6, 5] as one */
    const int g = dt_model_slice(m, o2, 1, 0, 1, 1, 0); /* [2, 5] */
    const int g2 = dt_model_slice(m, g, 0, 1, 1, 1, 0); /* [5] */
    const int both[2] = {g2, dt_model_slice(m, g, 0, 0, 1, 1, 0)};
    const int h = dt_model_concat_axis(m, both, 2, 0); /* [10] */
    dt_model_linear(m, "head", h, CLASSES);
}

static double loss_at(dt_model *m, const float *x, const int32_t *labels, int n) {
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    dt_model_forward(m, n);
    return dt_model_loss(m, labels, n, NULL);
}

static void setup(dt_model *m, dt_precision precision, float **x, int32_t *labels) {
    dt_error err;
    build(m, precision);
    if (dt_model_alloc(m, BATCH, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(m, 7);
    /* the class token starts at zeros (torchvision's): give it values so its
     * gradient is probed away from a symmetric point */
    fill_uniform(dt_model_tensor_data(m, dt_model_find_tensor(m, "class_token")), HEADS * WIDTH, 5,
                 -1, 1);
    const size_t nx = dt_model_input_floats_per_sample(m) * BATCH;
    *x = test_alloc(sizeof(float) * nx);
    dt_rng rng = dt_rng_make(3, 3);
    for (size_t i = 0; i < nx; i++) (*x)[i] = dt_rng_normal(&rng);
    for (int i = 0; i < BATCH; i++) labels[i] = (int32_t)dt_rng_below(&rng, CLASSES);
}

static void test_transformer_ops_grad_matches_fd(void **state) {
    (void)state;
    dt_model m;
    float *x;
    int32_t labels[BATCH];
    setup(&m, DT_PRECISION_FP32, &x, labels);
    assert_int_equal(m.values[m.n_values - 1].c, CLASSES);
    dt_model_zero_grad(&m);
    loss_at(&m, x, labels, BATCH);
    dt_model_backward(&m, labels, BATCH);
    /* each element of every parameter tensor: the graph is small */
    float *analytic = test_alloc(sizeof(float) * m.n_params);
    float *numeric = test_alloc(sizeof(float) * m.n_params);
    /* the graph is smooth (no ReLU kinks): a wide step keeps float rounding of the loss
     * small against the difference, its truncation error is O(eps^2) */
    const float eps = 1e-2f;
    for (size_t i = 0; i < m.n_params; i++) {
        const float saved = m.params[i];
        m.params[i] = saved + eps;
        const double lp = loss_at(&m, x, labels, BATCH);
        m.params[i] = saved - eps;
        const double lm = loss_at(&m, x, labels, BATCH);
        m.params[i] = saved;
        numeric[i] = (float)((lp - lm) / (2.0 * eps));
        analytic[i] = m.grads[i];
    }
    for (int t = 0; t < m.n_tensors; t++) {
        const dt_tensor_entry *te = &m.tensors[t];
        const double e = rel_error(analytic + te->offset, numeric + te->offset, te->numel);
        print_message("%-16s %4zu values: relative error %.2e\n", te->name, te->numel, e);
        assert_true(e < 5e-3);
    }
    free(analytic);
    free(numeric);
    free(x);
    dt_model_free(&m);
}

/* bf16 activations (between the f32 input and logits) against the f32 run: the same
 * weights, the logits and every parameter gradient within bf16's rounding. */
static void test_transformer_ops_bf16_close_to_f32(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) {
        print_message("skipped: this CPU (%s) has no bf16 instructions\n", dt_cpu_isa_name());
        skip();
    }
    dt_model a, b;
    float *x, *xb;
    int32_t labels[BATCH], lb[BATCH];
    setup(&a, DT_PRECISION_FP32, &x, labels);
    setup(&b, DT_PRECISION_BF16, &xb, lb);
    int bf16_ops = 0;
    for (int i = 0; i < b.n_ops; i++) bf16_ops += strstr(b.ops[i].impl->name, ".bf16") != NULL;
    print_message("%d of %d ops run bf16 kernels\n", bf16_ops, b.n_ops);
    assert_true(bf16_ops >= b.n_ops - 2); /* all but the head's f32 side, at most */
    dt_model_zero_grad(&a);
    dt_model_zero_grad(&b);
    loss_at(&a, x, labels, BATCH);
    loss_at(&b, xb, lb, BATCH);
    const double el = rel_error(dt_model_logits(&a), dt_model_logits(&b), BATCH * CLASSES);
    dt_model_backward(&a, labels, BATCH);
    dt_model_backward(&b, lb, BATCH);
    print_message("logits: relative error %.2e\n", el);
    assert_true(el < 2e-2);
    for (int t = 0; t < a.n_tensors; t++) {
        const dt_tensor_entry *te = &a.tensors[t];
        const double e = rel_error(a.grads + te->offset, b.grads + te->offset, te->numel);
        print_message("%-16s gradient: relative error %.2e\n", te->name, e);
        assert_true(e < 6e-2);
    }
    free(x);
    free(xb);
    dt_model_free(&a);
    dt_model_free(&b);
}

/* The batched GEMMs against the triple loop, forward and both gradients, at 1 and 2
 * threads alike. */
static void test_matmul_matches_loops(void **state) {
    (void)state;
    enum { T = 7, M = 5, K = 6, N = 4 };
    float *a = test_alloc(sizeof(float) * T * M * K), *b = test_alloc(sizeof(float) * T * K * N);
    float *dc = test_alloc(sizeof(float) * T * M * N);
    fill_uniform(a, T * M * K, 1, -1, 1);
    fill_uniform(b, T * K * N, 2, -1, 1);
    fill_uniform(dc, T * M * N, 3, -1, 1);
    float c[2][T * M * N], da[2][T * M * K], db[2][T * K * N];
    for (int threads = 1; threads <= 2; threads++) {
        const int s = threads - 1;
        memset(da[s], 0, sizeof da[s]);
        memset(db[s], 0, sizeof db[s]);
        dt_matmul_forward(c[s], a, b, DT_F32, T, M, K, N, NULL, threads);
        dt_matmul_backward(da[s], db[s], dc, a, b, DT_F32, T, M, K, N, NULL, threads);
    }
    assert_memory_equal(c[0], c[1], sizeof c[0]);
    assert_memory_equal(da[0], da[1], sizeof da[0]);
    assert_memory_equal(db[0], db[1], sizeof db[0]);
    double worst = 0.0;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double want = 0.0;
                for (int k = 0; k < K; k++)
                    want += (double)a[(t * M + i) * K + k] * b[(t * K + k) * N + j];
                worst = fmax(worst, fabs(want - c[0][(t * M + i) * N + j]));
            }
    for (int t = 0; t < T; t++)
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++) {
                double want_a = 0.0;
                for (int j = 0; j < N; j++)
                    want_a += (double)dc[(t * M + i) * N + j] * b[(t * K + k) * N + j];
                worst = fmax(worst, fabs(want_a - da[0][(t * M + i) * K + k]));
            }
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) {
                double want_b = 0.0;
                for (int i = 0; i < M; i++)
                    want_b += (double)a[(t * M + i) * K + k] * dc[(t * M + i) * N + j];
                worst = fmax(worst, fabs(want_b - db[0][(t * K + k) * N + j]));
            }
    print_message("batched matmul: worst absolute error %.2e\n", worst);
    assert_true(worst < 1e-5);
    free(a);
    free(b);
    free(dc);
}

/* The attention_tokens export (opset 17: LayerNormalization, softmax, batched matmuls,
 * split, slice, log-softmax, gathers) in fp32 and in bf16 against PyTorch's float64
 * first step (tests/fixtures/onnx). PyTorch 1.13's CPU autocast cannot run this model
 * (its layer_norm refuses bf16 input with float weights), so there is no autocast
 * reference to hold bf16 to; the bounds are bf16's own resolution: a stored value
 * carries a relative error up to 2^-9, and a step of a dozen ops compounds it. */
/* The first step of fixture tests/fixtures/onnx/NAME.onnx in fp32 and in bf16 against
 * PyTorch's float64: the loss's relative error and the whole gradient's, [0] fp32. */
static void export_step_errors(const char *name, int n, double loss_err[2], double grad_err[2]) {
    const char *dir = getenv("DT_FIXTURES");
    char onnx[512], fixture[600];
    snprintf(onnx, sizeof onnx, "%s/onnx/%s.onnx", dir ? dir : "tests/fixtures", name);
    snprintf(fixture, sizeof fixture, "%s.safetensors", onnx);
    dt_error err;
    dt_safetensors st;
    if (dt_safetensors_read(&st, fixture, &err)) fail_msg("%s", err.msg);
    int32_t *labels = test_alloc(sizeof(int32_t) * (size_t)n);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        dt_model_spec spec;
        dt_model m;
        if (dt_zoo_spec_of(&spec, onnx, &err) || dt_zoo_build(&m, &spec, &err))
            fail_msg("%s", err.msg);
        m.precision = bf16 ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
        if (dt_model_alloc(&m, n, &err)) fail_msg("%s", err.msg);
        dt_model_init_params(&m, 0); /* the export's weights: the fixture's initial state */
        const dt_st_tensor *x = dt_safetensors_find(&st, "input1");
        assert_non_null(x);
        assert_int_equal(x->numel, dt_model_input_floats_per_sample(&m) * (size_t)n);
        memcpy(dt_model_input_data(&m), x->data, x->bytes);
        if (dt_safetensors_get_i32(&st, "labels1", n, labels, &err)) fail_msg("%s", err.msg);
        dt_model_zero_grad(&m);
        dt_model_forward(&m, n);
        const double loss = dt_model_loss(&m, labels, n, NULL);
        dt_model_backward(&m, labels, n);
        float want_loss;
        const int one[1] = {1};
        if (dt_safetensors_get_f32(&st, "loss1", 1, one, &want_loss, &err)) fail_msg("%s", err.msg);
        loss_err[bf16] = fabs(loss - want_loss) / fabs(want_loss);
        float *want = test_alloc(sizeof(float) * m.n_params);
        for (int t = 0; t < m.n_tensors; t++) {
            const dt_tensor_entry *te = &m.tensors[t];
            char key[160];
            snprintf(key, sizeof key, "grad.%s", te->name);
            if (dt_safetensors_get_f32(&st, key, te->ndim, te->shape, want + te->offset, &err))
                fail_msg("%s", err.msg);
        }
        grad_err[bf16] = rel_error(m.grads, want, m.n_params); /* the whole gradient */
        free(want);
        dt_model_free(&m);
    }
    free(labels);
    dt_safetensors_free(&st);
    print_message("%s against float64: loss error fp32 %.2e, bf16 %.2e; whole gradient fp32 "
                  "%.2e, bf16 %.2e\n",
                  name, loss_err[0], loss_err[1], grad_err[0], grad_err[1]);
}

static void test_attention_export_bf16_within_bf16_resolution(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) {
        print_message("skipped: this CPU (%s) has no bf16 instructions\n", dt_cpu_isa_name());
        skip();
    }
    double loss_err[2], grad_err[2];
    export_step_errors("attention_tokens_op17", 4, loss_err, grad_err);
    assert_true(loss_err[0] < 1e-6 && grad_err[0] < 1e-4);
    assert_true(grad_err[1] > 10.0 * grad_err[0]); /* bf16 ran */
    assert_true(loss_err[1] < 1e-2);
    assert_true(grad_err[1] < 5e-2);
}

/* torchvision's VisionTransformer (the vit fixture: 4 encoder layers of
 * nn.MultiheadAttention, LayerNorm, GELU) the same way: no autocast reference exists
 * for it either (PyTorch 1.13's CPU autocast fails on its LayerNorm); the bounds are
 * bf16's resolution compounded over its 4 layers. */
static void test_vit_export_bf16_within_bf16_resolution(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) {
        print_message("skipped: this CPU (%s) has no bf16 instructions\n", dt_cpu_isa_name());
        skip();
    }
    double loss_err[2], grad_err[2];
    export_step_errors("vit", 4, loss_err, grad_err);
    assert_true(loss_err[0] < 1e-6 && grad_err[0] < 1e-4);
    assert_true(grad_err[1] > 10.0 * grad_err[0]); /* bf16 ran */
    assert_true(loss_err[1] < 1e-2);
    assert_true(grad_err[1] < 1e-1);
}

/* The bf16 kernel's oneDNN batched matmul against the loop (bf16 operands widened, an
 * f32 GEMM, one rounding), forward and both gradients added into given values: within
 * a bf16 rounding or two of each other (f32 sums in another order). */
static void test_bf16_batched_matmul_matches_the_loop(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) {
        print_message("skipped: this CPU (%s) has no bf16 instructions\n", dt_cpu_isa_name());
        skip();
    }
    enum { T = 6, M = 13, K = 40, N = 11 };
    dt_error err;
    dt_exec *exec = NULL;
    if (dt_exec_create(&exec, DT_CONV_DNNL, DT_PRECISION_BF16, &err)) fail_msg("%s", err.msg);
    dt_bf16_bmm *bmm;
    if (dt_bf16_bmm_create(&bmm, dt_exec_dnnl(exec), T, M, K, N, &err)) fail_msg("%s", err.msg);
    static uint16_t a[T * M * K], b[T * K * N], dc[T * M * N];
    static uint16_t c[2][T * M * N], da[2][T * M * K], db[2][T * K * N];
    float *f = test_alloc(sizeof(float) * T * M * K);
    const struct {
        uint16_t *x;
        size_t count;
    } fills[] = {
        {a, T * M * K}, {b, T * K * N}, {dc, T * M * N}, {da[0], T * M * K}, {db[0], T * K * N}};
    for (size_t q = 0; q < sizeof fills / sizeof *fills; q++) {
        fill_uniform(f, fills[q].count, 10 + q, -1, 1);
        for (size_t i = 0; i < fills[q].count; i++) fills[q].x[i] = dt_bf16_from_f32(f[i]);
    }
    memcpy(da[1], da[0], sizeof da[0]);
    memcpy(db[1], db[0], sizeof db[0]);
    float *scratch = test_alloc(sizeof(float) * 2 * dt_matmul_scratch_floats(DT_BF16, M, K, N));
    dt_matmul_forward(c[0], a, b, DT_BF16, T, M, K, N, scratch, 2);
    dt_matmul_backward(da[0], db[0], dc, a, b, DT_BF16, T, M, K, N, scratch, 2);
    dt_bf16_bmm_forward(bmm, T, c[1], a, b);
    dt_bf16_bmm_backward(bmm, T, da[1], db[1], dc, a, b);
    const struct {
        const uint16_t *x, *y;
        size_t count;
        const char *what;
    } pairs[] = {{c[0], c[1], T * M * N, "forward"},
                 {da[0], da[1], T * M * K, "da"},
                 {db[0], db[1], T * K * N, "db"}};
    for (size_t q = 0; q < sizeof pairs / sizeof *pairs; q++) {
        double worst = 0.0;
        for (size_t i = 0; i < pairs[q].count; i++) {
            const double u = dt_bf16_to_f32(pairs[q].x[i]), v = dt_bf16_to_f32(pairs[q].y[i]);
            worst = fmax(worst, fabs(u - v) / fmax(fabs(u), 1.0));
        }
        print_message("oneDNN bf16 against the loop, %s: worst relative error %.2e\n",
                      pairs[q].what, worst);
        assert_true(worst <= 2.0 / 256); /* two bf16 roundings */
    }
    free(f);
    free(scratch);
    dt_bf16_bmm_destroy(bmm);
    dt_exec_destroy(exec);
}

/* The older ops that a transformer's values pass through keep their shape: ReLU (in
 * place), dropout and the residual add of values of rank 2; adds of different shapes
 * are refused. */
static void test_relu_dropout_add_keep_any_rank(void **state) {
    (void)state;
    dt_model m;
    dt_model_init_empty(&m, "ranks", 4);
    const int dims[2] = {5, 4}, other[2] = {4, 5};
    const int x = dt_model_input_shape(&m, 2, dims);
    const int r = dt_model_relu(&m, dt_model_dropout(&m, x, 0.0f));
    const int a = dt_model_add(&m, r, x);
    assert_true(a >= 0);
    for (int v = 1; v < m.n_values; v++) {
        assert_int_equal(m.values[v].rank, 2);
        assert_int_equal(m.values[v].dims[0], 5);
        assert_int_equal(m.values[v].dims[1], 4);
        assert_int_equal(dt_model_value_floats(&m, v, 1), 20);
    }
    const int y = dt_model_slice(&m, a, 0, 0, 4, 1, 1); /* [4, 4]: not [5, 4] */
    assert_true(y >= 0);
    const int z = dt_model_input_shape(&m, 2, other); /* refused: a second input */
    assert_true(z < 0);
    dt_model_free(&m);
    dt_model_init_empty(&m, "ranks", 4);
    const int p = dt_model_input_shape(&m, 2, dims);
    const int q = dt_model_slice(&m, p, 0, 0, 4, 1, 1);
    assert_true(dt_model_add(&m, p, q) < 0);
    assert_non_null(strstr(m.build_error.msg, "residual add of different shapes"));
    dt_model_free(&m);
    /* the ops of images refuse other ranks; flatten and the flat linear read any */
    dt_model_init_empty(&m, "ranks", 4);
    const int t = dt_model_input_shape(&m, 2, dims);
    assert_true(dt_model_conv2d(&m, "conv", t, 4, 1, 1, 0, 1) < 0);
    assert_non_null(
        strstr(m.build_error.msg, "conv2d takes an image [C, H, W], not a value of rank 2"));
    dt_model_free(&m);
    dt_model_init_empty(&m, "ranks", 4);
    const int u = dt_model_input_shape(&m, 2, dims);
    const int f = dt_model_flatten(&m, u);
    assert_int_equal(m.values[f].c, 20);
    assert_true(dt_model_linear(&m, "fc", u, 4) >= 0);
    assert_int_equal(m.tensors[0].shape[1], 20);
    dt_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transformer_ops_grad_matches_fd),
        cmocka_unit_test(test_transformer_ops_bf16_close_to_f32),
        cmocka_unit_test(test_matmul_matches_loops),
        cmocka_unit_test(test_bf16_batched_matmul_matches_the_loop),
        cmocka_unit_test(test_relu_dropout_add_keep_any_rank),
        cmocka_unit_test(test_attention_export_bf16_within_bf16_resolution),
        cmocka_unit_test(test_vit_export_bf16_within_bf16_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
