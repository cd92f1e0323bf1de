/* Whole-model gradients (the graph's wiring, in-place ReLU, pooled gradient buffers,
 * residual joins) against central finite differences of the loss. */
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
#include "dtrain/dtype.h"
#include "dtrain/zoo.h"
#include "testutil.h"

/* Every probe sees the same dropout masks: the training-forward count, their RNG
 * counter, is set back before each forward (so backward's masks are the probes' too). */
static double loss_at(dt_model *m, const float *x, const int32_t *labels, int n) {
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    m->dropout_calls = 0;
    dt_model_forward(m, n);
    return dt_model_loss(m, labels, n, NULL);
}

/* Probes a built model (10 classes or fewer) on `batch` random samples, then frees it. */
static void check_built(dt_model *m_, const char *name, int width, int batch, float eps,
                        double tol) {
    dt_model m = *m_;
    dt_error err;
    if (dt_model_alloc(&m, batch, &err)) fail_msg("%s", err.msg);
    m.dropout_seed = 5;
    dt_model_init_params(&m, 7);
    size_t nx = dt_model_input_floats_per_sample(&m) * batch;
    float *x = test_alloc(sizeof(float) * nx);
    int32_t labels[16];
    dt_rng rng = dt_rng_make(3, 3);
    for (size_t i = 0; i < nx; i++) x[i] = dt_rng_normal(&rng);
    for (int i = 0; i < batch; i++) labels[i] = (int32_t)dt_rng_below(&rng, m.classes);

    dt_model_zero_grad(&m);
    loss_at(&m, x, labels, batch);
    dt_model_backward(&m, labels, batch);
    /* Per parameter tensor, the directional derivative along a random direction d:
     * (L(p + eps d) - L(p - eps d)) / 2 eps against grad . d. Probing whole tensors
     * keeps the signal far above float rounding, which single-element probes of a
     * deep float32 network do not. The step must stay small: a ReLU kink crossed
     * inside +-eps biases the difference quotient, and a deep BatchNorm network
     * crosses many (measured for resnet18 width 2: error 5e-3 at eps 1e-4, 6e-2 at
     * 1e-3), while float rounding of the loss grows as eps shrinks. */
    float *analytic = test_alloc(sizeof(float) * m.n_tensors);
    float *numeric = test_alloc(sizeof(float) * m.n_tensors);
    float *saved = test_alloc(sizeof(float) * m.n_params);
    float *dir = test_alloc(sizeof(float) * m.n_params);
    memcpy(saved, m.params, sizeof(float) * m.n_params);
    fill_uniform(dir, m.n_params, 99, -1, 1);
    size_t k = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const dt_tensor_entry *te = &m.tensors[t];
        if (!te->is_param) continue;
        float *p = m.params + te->offset, *d = dir + te->offset;
        double norm = 0.0, g_dot_d = 0.0;
        for (size_t i = 0; i < te->numel; i++) norm += (double)d[i] * d[i];
        for (size_t i = 0; i < te->numel; i++) d[i] = (float)(d[i] / sqrt(norm));
        for (size_t i = 0; i < te->numel; i++) g_dot_d += (double)m.grads[te->offset + i] * d[i];
        for (size_t i = 0; i < te->numel; i++) p[i] = saved[te->offset + i] + eps * d[i];
        double lp = loss_at(&m, x, labels, batch);
        for (size_t i = 0; i < te->numel; i++) p[i] = saved[te->offset + i] - eps * d[i];
        double lm = loss_at(&m, x, labels, batch);
        memcpy(p, saved + te->offset, sizeof(float) * te->numel);
        numeric[k] = (float)((lp - lm) / (2.0 * eps));
        analytic[k++] = (float)g_dot_d;
    }
    double e = rel_error(analytic, numeric, k);
    print_message("%s (width %d, batch %d): %zu parameter tensors probed, relative error %.2e\n",
                  name, width, batch, k, e);
    assert_true(e < tol);
    free(saved);
    free(dir);
    free(x);
    free(analytic);
    free(numeric);
    dt_model_free(&m);
}

/* side > 0: a side x side input (10 classes) instead of the model's default. */
static void check_model_at(const char *name, int width, int side, int batch, float eps,
                           double tol) {
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
    if (width) spec.width = width;
    if (side) spec.in_h = spec.in_w = side, spec.classes = 10;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    check_built(&m, name, width, batch, eps, tol);
}

static void check_model(const char *name, int width, int batch, float eps, double tol) {
    check_model_at(name, width, 0, batch, eps, tol);
}

static void test_logreg_grad_matches_fd(void **state) {
    (void)state;
    check_model("logreg", 0, 4, 1e-3f, 2e-3);
}

static void test_mlp_grad_matches_fd(void **state) {
    (void)state;
    check_model("mlp", 0, 4, 1e-3f, 2e-3);
}

static void test_lenet5_grad_matches_fd(void **state) {
    (void)state;
    check_model("lenet5", 0, 3, 1e-3f, 2e-3);
}

static void test_resnet18_grad_matches_fd(void **state) {
    (void)state;
    /* Looser: see above. The exact check of resnet18 is the PyTorch parity test. */
    check_model("resnet18", 2, 4, 1e-4f, 1.5e-2);
}

static void test_lenet_cifar_grad_matches_fd(void **state) {
    (void)state;
    check_model("lenet_cifar", 0, 3, 1e-3f, 2e-3);
}

static void test_resnet20_grad_matches_fd(void **state) {
    (void)state;
    /* Narrow, as resnet18 above; 20 layers cross more ReLU kinks within +-eps
     * (measured: width 2 batch 4 2.3e-2, width 4 batch 8 7e-3). The option-A shortcut
     * joins stages of 4, 8 and 16 channels; the exact check is the parity test. */
    check_model("resnet20", 4, 8, 1e-4f, 1.5e-2);
}

/* alexnet, narrow at its smallest input, with dropout on: its classifier drops half
 * its units, and backward must reuse the forward's masks. eps 1e-4: at 1e-3 a probe
 * of features.10.bias moves zeros of the ReLU before a max pool past each other
 * (error 9e-2; 1.0e-3 at 1e-4). The BatchNorm ImageNet models are not probed here:
 * so narrow they are too badly conditioned for finite differences (gradients of 1e3,
 * float32 PyTorch itself 1e-3 off float64); test_parity checks them. */
static void test_alexnet_grad_matches_fd(void **state) {
    (void)state;
    check_model_at("alexnet", 2, 63, 4, 1e-4f, 5e-3);
}

/* The graph hash names what the graph computes, not the memory plan: values moved to
 * storages of their own and tensors moved in the parameter buffer hash alike (a
 * checkpoint stays readable when a build aliases differently), while an attribute
 * (a BatchNorm's epsilon) or a tensor's name changes it. */
static void test_graph_hash_ignores_memory_plan(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "resnet18"), 0);
    spec.width = 4;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    const uint64_t built = dt_model_graph_hash(&m);
    /* another memory plan: every value in storage 0 (never allocated here), every
     * tensor's offset shifted */
    for (int v = 0; v < m.n_values; v++) m.values[v].storage = 0;
    for (int t = 0; t < m.n_tensors; t++) m.tensors[t].offset += 64;
    assert_true(dt_model_graph_hash(&m) == built);
    int bn = -1;
    for (int i = 0; i < m.n_ops && bn < 0; i++)
        if (m.ops[i].eps > 0) bn = i;
    assert_true(bn >= 0);
    m.ops[bn].eps *= 2;
    assert_true(dt_model_graph_hash(&m) != built);
    m.ops[bn].eps /= 2;
    assert_true(dt_model_graph_hash(&m) == built);
    m.tensors[0].name[0] ^= 1;
    assert_true(dt_model_graph_hash(&m) != built);
    m.tensors[0].name[0] ^= 1;
    dt_model_free(&m);
}

/* Concat of many inputs and along every axis of an image (DenseNet joins up to 49,
 * Inception's branches 4; a concat along H or W is any axis of a rank-3 value): ten
 * 1x1 convolutions joined on channels, one of them twice (its gradient sums both
 * slices), then three joined along H and two along W. */
static void test_concat_many_inputs_any_axis_grad_matches_fd(void **state) {
    (void)state;
    dt_model m;
    dt_model_init_empty(&m, "concat_axes", 4);
    const int x = dt_model_input(&m, 3, 6, 5);
    int branch[11];
    char name[32];
    for (int k = 0; k < 10; k++) {
        snprintf(name, sizeof name, "branch%d", k);
        branch[k] = dt_model_conv2d(&m, name, x, 1 + k % 3, 1, 1, 0, 1);
    }
    branch[10] = branch[3];
    const int channels = dt_model_concat(&m, branch, 11);
    const int a = dt_model_conv2d(&m, "a", channels, 2, 3, 1, 1, 1);
    const int b = dt_model_conv2d(&m, "b", channels, 2, 3, 1, 1, 1);
    const int c = dt_model_conv2d(&m, "c", channels, 2, 1, 1, 0, 1);
    const int rows[3] = {a, b, c};
    const int tall = dt_model_concat_axis(&m, rows, 3, 1); /* 2 x (6+6+6) x 5: H */
    assert_int_equal(m.values[tall].h, 18);
    const int wide_in[2] = {tall, dt_model_relu(&m, dt_model_conv2d(&m, "d", tall, 2, 1, 1, 0, 1))};
    const int wide = dt_model_concat_axis(&m, wide_in, 2, 2); /* 2 x 18 x 10: W */
    assert_int_equal(m.values[wide].w, 10);
    assert_true(dt_model_linear(&m, "fc", dt_model_flatten(&m, wide), 4) >= 0);
    check_built(&m, "concat_axes", 0, 3, 1e-3f, 2e-3);
}

/* A constant pad (an ONNX Pad of 0.3, or of zeros before a max pool) in the graph: its
 * gradient reaches the convolution before it; under bf16 it runs its bf16 kernel. */
static void build_padded(dt_model *m) {
    dt_model_init_empty(m, "padded", 4);
    const int pads[4] = {1, 2, 0, 1};
    int x = dt_model_conv2d(m, "conv", dt_model_input(m, 3, 5, 4), 16, 3, 1, 1, 1);
    x = dt_model_maxpool2d(m, dt_model_pad2d(m, x, pads, 0.3f), 2, 2);
    assert_true(dt_model_linear(m, "fc", dt_model_flatten(m, x), 4) >= 0);
}

static void test_pad2d_in_a_model_grad_matches_fd(void **state) {
    (void)state;
    dt_model m;
    build_padded(&m);
    /* eps 3e-4: at 1e-4 the float loss's rounding dominated the difference quotient,
     * 2.09e-3 with oneDNN held to AVX2 (9.9e-4 on AVX-512); now 8.9e-4 and 3.9e-4 */
    check_built(&m, "padded", 0, 3, 3e-4f, 2e-3);
    if (!dt_cpu_has_bf16()) return;
    dt_error err;
    build_padded(&m);
    m.precision = DT_PRECISION_BF16;
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    assert_string_equal(m.ops[1].impl->name, "pad2d.bf16");
    dt_model_init_params(&m, 3);
    fill_uniform(dt_model_input_data(&m), 2 * 3 * 5 * 4, 4, -1, 1);
    dt_model_forward(&m, 2);
    const int32_t labels[2] = {1, 3};
    assert_true(isfinite(dt_model_loss(&m, labels, 2, NULL)));
    dt_model_zero_grad(&m);
    dt_model_backward(&m, labels, 2);
    double norm = 0;
    for (size_t i = 0; i < m.tensors[0].numel; i++) norm += fabs(m.grads[m.tensors[0].offset + i]);
    assert_true(norm > 0); /* the conv before the pad got its gradient */
    dt_model_free(&m);
}

/* Every zoo model's graph hash as it was before issue 41 generalised the ops (kernel
 * shapes, pads, BatchNorm's momentum, concat's inputs): checkpoints of these models
 * written before still resume. Measured at commit dbf2eee. */
static void test_graph_hash_of_zoo_models_unchanged(void **state) {
    (void)state;
    static const struct {
        const char *name;
        uint64_t hash;
    } pinned[] = {
        {"logreg", 0x2b010b01e9dae212ULL},      {"mlp", 0xb474b4eafb715682ULL},
        {"lenet5", 0xff0908f5cd63fe70ULL},      {"resnet18", 0xa6daa9e66c6013c0ULL},
        {"lenet_cifar", 0xdb80bfcbd3cb73baULL}, {"resnet20", 0x5069eebe629a1526ULL},
        {"resnet32", 0x2761d8aa80535d89ULL},    {"resnet44", 0x5fc707b52aaa696aULL},
        {"resnet56", 0xd860ab8861cb8127ULL},    {"alexnet", 0x21aa113b53bdd614ULL},
        {"vgg16", 0xbf2ff07adc8493aaULL},       {"vgg16_bn", 0x74e542163606d80cULL},
        {"resnet50", 0xfb10051f7f4e9428ULL},    {"googlenet", 0x7beceffaf5930da6ULL},
    };
    for (size_t i = 0; i < sizeof pinned / sizeof *pinned; i++) {
        dt_model_spec spec;
        dt_model m;
        dt_error err;
        assert_int_equal(dt_zoo_default_spec(&spec, pinned[i].name), 0);
        if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
        if (dt_model_graph_hash(&m) != pinned[i].hash)
            fail_msg("%s: graph hash %016llx, was %016llx", pinned[i].name,
                     (unsigned long long)dt_model_graph_hash(&m),
                     (unsigned long long)pinned[i].hash);
        dt_model_free(&m);
    }
}

/* BatchNorm with PyTorch's momentum 0.01 (MobileNetV3, MNASNet): one training forward
 * moves the running statistics 1% of the way to the batch's (the unbiased variance), in
 * fp32 and in bf16; a momentum other than 0.1 changes the graph hash. */
static void check_bn_momentum(dt_precision precision) {
    enum { N = 4, C = 16, H = 5, W = 2 };
    const float momentum = 0.01f;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "bn_momentum", 2);
    int x = dt_model_input(&m, C, H, W);
    const int conv = dt_model_conv2d(&m, "conv", x, C, 1, 1, 0, 0); /* bf16 out under bf16 */
    x = dt_model_batchnorm2d_momentum(&m, "bn", conv, 1e-5f, momentum);
    x = dt_model_linear(&m, "fc", dt_model_flatten(&m, x), 2);
    assert_true(x >= 0);
    m.precision = precision;
    m.plain_layouts = 1;
    if (dt_model_alloc(&m, N, &err)) fail_msg("%s", err.msg);
    assert_int_equal(dt_model_value_dtype(&m, conv),
                     precision == DT_PRECISION_BF16 ? DT_BF16 : DT_F32);
    dt_model_init_params(&m, 1);
    fill_uniform(dt_model_input_data(&m), (size_t)N * C * H * W, 5, -2, 3);
    dt_model_forward(&m, N);
    double want_mean[C], want_var[C];
    const void *bn_in = dt_model_value_ptr(&m, conv);
    for (int c = 0; c < C; c++) {
        double s = 0, s2 = 0, v[N * H * W];
        for (int n = 0; n < N; n++)
            for (int p = 0; p < H * W; p++) {
                const size_t i = ((size_t)n * C + c) * H * W + p;
                v[n * H * W + p] = precision == DT_PRECISION_BF16
                                       ? dt_bf16_to_f32(((const uint16_t *)bn_in)[i])
                                       : ((const float *)bn_in)[i];
                s += v[n * H * W + p];
            }
        const double mean = s / (N * H * W);
        for (int i = 0; i < N * H * W; i++) s2 += (v[i] - mean) * (v[i] - mean);
        want_mean[c] = momentum * mean;                                         /* from 0 */
        want_var[c] = (1.0 - momentum) * 1.0 + momentum * s2 / (N * H * W - 1); /* from 1 */
    }
    const float *rm = dt_model_tensor_data(&m, dt_model_find_tensor(&m, "bn.running_mean"));
    const float *rv = dt_model_tensor_data(&m, dt_model_find_tensor(&m, "bn.running_var"));
    for (int c = 0; c < C; c++) {
        assert_float_equal(rm[c], want_mean[c], 1e-6);
        assert_float_equal(rv[c], want_var[c], 1e-6);
    }
    const uint64_t h = dt_model_graph_hash(&m);
    m.ops[1].momentum = 0.1f;
    assert_true(dt_model_graph_hash(&m) != h);
    dt_model_free(&m);
}

static void test_batchnorm_momentum_updates_running_stats(void **state) {
    (void)state;
    check_bn_momentum(DT_PRECISION_FP32);
    if (dt_cpu_has_bf16())
        check_bn_momentum(DT_PRECISION_BF16);
    else
        print_message("bf16 not checked: no AVX512-BF16 or AMX here\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logreg_grad_matches_fd),
        cmocka_unit_test(test_mlp_grad_matches_fd),
        cmocka_unit_test(test_lenet5_grad_matches_fd),
        cmocka_unit_test(test_resnet18_grad_matches_fd),
        cmocka_unit_test(test_lenet_cifar_grad_matches_fd),
        cmocka_unit_test(test_resnet20_grad_matches_fd),
        cmocka_unit_test(test_alexnet_grad_matches_fd),
        cmocka_unit_test(test_graph_hash_ignores_memory_plan),
        cmocka_unit_test(test_graph_hash_of_zoo_models_unchanged),
        cmocka_unit_test(test_concat_many_inputs_any_axis_grad_matches_fd),
        cmocka_unit_test(test_pad2d_in_a_model_grad_matches_fd),
        cmocka_unit_test(test_batchnorm_momentum_updates_running_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
