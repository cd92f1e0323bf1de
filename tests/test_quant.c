/* int8 quantization: the lab scheme against the PyTorch lab (fixture made by
 * scripts/quant_lab.py), the calibration methods on known distributions, the file's
 * round trip, BatchNorm folding and residual fusion (resnet18), and the errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "dtrain/backend.h"
#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "quant/calib.h"
#include "quant/qemu.h"
#include "quant/quant.h"
#include "testutil.h"

/* Calibration images from an array: batches of max_n. */
typedef struct array_feed {
    const float *x;
    int n;
    size_t sample;
} array_feed;

static int feed_array(void *ctx, int index, float *x, int max_n, dt_error *err) {
    (void)err;
    const array_feed *f = ctx;
    const long start = (long)index * max_n;
    if (start >= f->n) return 0;
    const int n = f->n - start < max_n ? (int)(f->n - start) : max_n;
    memcpy(x, f->x + (size_t)start * f->sample, sizeof(float) * f->sample * (size_t)n);
    return n;
}

static void build(dt_model *m, dt_model_spec *spec, const char *name, int width, int batch) {
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(spec, name), 0);
    spec->width = width;
    if (dt_zoo_build(m, spec, &err) || dt_model_alloc(m, batch, &err)) fail_msg("%s", err.msg);
}

static const dt_st_tensor *need(const dt_safetensors *st, const char *name) {
    const dt_st_tensor *t = dt_safetensors_find(st, name);
    if (!t) fail_msg("fixture lacks %s", name);
    return t;
}

static float scalar(const dt_safetensors *st, const char *name) {
    float v;
    memcpy(&v, need(st, name)->data, sizeof v);
    return v;
}

static void assert_close_rel(double got, double want, double rel, const char *what) {
    if (!(fabs(got / want - 1.0) <= rel))
        fail_msg("%s: dtrain %.9g, PyTorch %.9g", what, got, want);
}

/* lenet5 (batch 48) with the lab fixture's float weights; st keeps the fixture's other
 * tensors (calibration and test images, the lab's results). */
static void lab_fixture(dt_safetensors *st, dt_model *m, dt_model_spec *spec) {
    char path[512];
    snprintf(path, sizeof path, "%s/quant_lab_lenet5.safetensors", getenv("DT_FIXTURES"));
    dt_error err;
    if (dt_safetensors_read(st, path, &err)) fail_msg("%s", err.msg);
    build(m, spec, "lenet5", 0, 48);
    for (int i = 0; i < m->n_tensors; i++) {
        char name[160];
        snprintf(name, sizeof name, "float.%s", m->tensors[i].name);
        if (dt_safetensors_get_f32(st, name, m->tensors[i].ndim, m->tensors[i].shape,
                                   dt_model_tensor_data(m, i), &err))
            fail_msg("%s", err.msg);
    }
}

/* The lab scheme on the fixture's float weights and calibration images gives the
 * PyTorch lab's integers and scales, and its int8 logits on the test images. */
static void test_lab_matches_the_pytorch_lab(void **state) {
    (void)state;
    dt_safetensors st;
    dt_model m;
    dt_model_spec spec;
    lab_fixture(&st, &m, &spec);
    dt_error err;
    const dt_st_tensor *calib = need(&st, "calib_inputs"), *test = need(&st, "test_inputs");
    array_feed feed = {(const float *)calib->data, (int)calib->shape[0], 784};
    dt_qnet q;
    dt_quant_config cfg = {.scheme = DT_QUANT_LAB, .calib = {.method = DT_CALIB_MINMAX}};
    if (dt_qnet_build(&q, &m, &spec, DT_QUANT_LAB, &err) ||
        dt_quantize(&q, &m, &cfg, feed_array, &feed, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(q.calib_samples, 48);
    /* activation scales come from float forward passes rounding differently in the
     * last bits (dtrain's sums, PyTorch's): a few ulps */
    assert_close_rel(q.values[0].scale, scalar(&st, "lab.input.act_scale"), 1e-6, "input scale");
    int layers = 0;
    for (int i = 0; i < q.n_ops; i++) {
        const dt_qop *o = &q.ops[i];
        if (o->kind != DT_QOP_CONV && o->kind != DT_QOP_LINEAR) continue;
        layers++;
        char name[160];
        snprintf(name, sizeof name, "lab.%s.weight_scale", o->name);
        assert_int_equal(o->n_scales, 1);
        assert_true(o->weight_scale[0] == scalar(&st, name)); /* same weights: exact */
        snprintf(name, sizeof name, "lab.%s.output_scale", o->name);
        assert_close_rel(o->output_scale[0], scalar(&st, name), 1e-6, name);
        snprintf(name, sizeof name, "lab.%s.act_scale", o->name);
        assert_close_rel(q.values[o->out].scale, scalar(&st, name), 1e-6, name);
        snprintf(name, sizeof name, "lab.%s.weight", o->name);
        const dt_st_tensor *w = need(&st, name);
        assert_int_equal(w->numel, (size_t)o->c_out * o->c_in * o->kernel * o->kernel);
        assert_memory_equal(o->weight, w->data, w->numel);
        snprintf(name, sizeof name, "lab.%s.bias", o->name);
        const dt_st_tensor *b = need(&st, name);
        for (int c = 0; c < o->c_out; c++) {
            int32_t want;
            memcpy(&want, b->data + 4 * c, 4);
            assert_true(abs(o->bias[c] - want) <= 1);
        }
        assert_true(q.values[o->out].lo == (i == q.n_ops - 1 ? -128 : 0));
        assert_int_equal(q.values[o->out].hi, 127);
    }
    assert_int_equal(layers, 5);

    dt_qemu *e;
    const int n = (int)test->shape[0];
    if (dt_qemu_create(&e, &q, n, &err)) fail_msg("%s", err.msg);
    dt_qemu_forward(e, (const float *)test->data, n);
    const dt_st_tensor *want = need(&st, "lab.logits_q");
    const float last_scale = q.values[q.ops[q.n_ops - 1].out].scale;
    int exact = 0;
    for (int k = 0; k < n * 10; k++) {
        int32_t w;
        memcpy(&w, want->data + 4 * (size_t)k, 4);
        const float got = rintf(dt_qemu_logits(e)[k] * last_scale);
        assert_true(fabsf(got - (float)w) <= 1.0f);
        exact += got == (float)w;
    }
    assert_true(exact >= n * 10 - 3); /* one-step differences are rare */
    dt_qemu_destroy(e);
    dt_qnet_free(&q);
    dt_model_free(&m);
    dt_safetensors_free(&st);
}

static void fill_stats(dt_calib_stats *s, const float *x, size_t n) {
    dt_calib_init(s);
    dt_calib_observe_range(s, x, n);
    dt_calib_observe_hist(s, x, n);
}

/* Each method on distributions whose answer is known. */
static void test_calibration_methods(void **state) {
    (void)state;
    enum { N = 200000 };
    float *x = test_alloc(sizeof(float) * N);
    dt_calib_stats *s = test_alloc(sizeof *s);
    dt_calib_choice minmax = {DT_CALIB_MINMAX, 0}, pct = {DT_CALIB_PERCENTILE, 99.0};
    dt_calib_choice sigma = {DT_CALIB_3SIGMA, 0}, kl = {DT_CALIB_ENTROPY, 0};
    /* uniform on [-1, 1]: minmax 1, the 99th percentile of |x| 0.99, 3 sigma = sqrt(3) is
     * cut to the range, and entropy keeps (nearly) everything: clipping a flat
     * distribution only loses */
    dt_rng rng = dt_rng_make(7, 1);
    for (int i = 0; i < N; i++) x[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
    fill_stats(s, x, N);
    assert_true(fabs(dt_calib_threshold(s, &minmax, 128) - s->abs_max) < 1e-12);
    assert_true(fabs(dt_calib_threshold(s, &pct, 128) - 0.99) < 0.003);
    assert_true(fabs(dt_calib_threshold(s, &sigma, 128) - s->abs_max) < 1e-12);
    assert_true(dt_calib_threshold(s, &kl, 128) > 0.95);
    double lo, hi;
    dt_calib_range(s, &pct, 128, &lo, &hi);
    assert_true(fabs(lo + 0.98) < 0.005 && fabs(hi - 0.98) < 0.005);
    assert_true(fabs(dt_calib_std(s) - 1.0 / sqrt(3.0)) < 0.005);
    /* a normal distribution with 20 far outliers at +-50: minmax takes them, 3 sigma is
     * about 3, entropy and the 99.99th percentile cut them off */
    for (int i = 0; i < N; i++) x[i] = dt_rng_normal(&rng);
    for (int i = 0; i < 20; i++) x[i * 997] = i % 2 ? 50.0f : -50.0f;
    fill_stats(s, x, N);
    assert_true(dt_calib_threshold(s, &minmax, 128) == 50.0);
    const double t3 = dt_calib_threshold(s, &sigma, 128);
    assert_true(t3 > 2.9 && t3 < 3.6);
    const double tk = dt_calib_threshold(s, &kl, 128);
    dt_calib_choice p4 = {DT_CALIB_PERCENTILE, 99.99};
    const double tp = dt_calib_threshold(s, &p4, 128);
    assert_true(tk > 2.0 && tk < 10.0);
    assert_true(tp > 3.0 && tp < 5.0);
    /* the search alone: a histogram whose mass sits in its first 128 bins keeps them */
    uint64_t hist[DT_CALIB_BINS] = {0};
    for (int b = 0; b < 128; b++) hist[b] = 1000;
    hist[DT_CALIB_BINS - 1] = 1;
    assert_true(dt_calib_kl_threshold(hist, DT_CALIB_BINS, 1.0, 128) < 200.0);
    /* all zeros: threshold 0, which dt_quantize turns into its error */
    memset(x, 0, sizeof(float) * 1000);
    fill_stats(s, x, 1000);
    assert_true(dt_calib_threshold(s, &minmax, 128) == 0.0);
    dt_calib_choice parsed;
    dt_error err;
    assert_int_equal(dt_calib_parse("percentile:99.9", &parsed, &err), 0);
    assert_true(parsed.method == DT_CALIB_PERCENTILE && parsed.percentile == 99.9);
    assert_int_equal(dt_calib_parse("percentile:40", &parsed, &err), -1);
    assert_int_equal(dt_calib_parse("kl", &parsed, &err), -1);
    assert_non_null(strstr(err.msg, "--calib-method must be minmax, percentile:P, 3sigma or"));
    free(x);
    free(s);
}

/* Random images of the model's input shape (standard normal). */
static float *random_images(int n, size_t sample, uint64_t seed) {
    float *x = test_alloc(sizeof(float) * sample * (size_t)n);
    dt_rng rng = dt_rng_make(seed, 3);
    for (size_t i = 0; i < sample * (size_t)n; i++) x[i] = dt_rng_normal(&rng);
    return x;
}

/* Gives BatchNorm running statistics far from (0, 1) so folding them matters. */
static void perturb_batchnorm(dt_model *m) {
    dt_rng rng = dt_rng_make(11, 2);
    for (int i = 0; i < m->n_tensors; i++) {
        const char *name = m->tensors[i].name;
        float *d = dt_model_tensor_data(m, i);
        const size_t len = strlen(name);
        for (size_t k = 0; k < m->tensors[i].numel; k++) {
            if (len > 13 && !strcmp(name + len - 13, ".running_mean"))
                d[k] = 0.2f * dt_rng_normal(&rng);
            else if (len > 12 && !strcmp(name + len - 12, ".running_var"))
                d[k] = 0.5f + dt_rng_uniform(&rng);
            else if (strstr(name, "bn") && len > 7 && !strcmp(name + len - 7, ".weight"))
                d[k] = 0.5f + dt_rng_uniform(&rng);
        }
    }
}

/* resnet18 (width 4): BatchNorm folded, residual adds fused into conv2 (moved after
 * the shortcut), the int8 logits close to the float ones; the file round trip keeps
 * every number, and the emulation of the loaded network computes the same logits. */
static void test_resnet18_folds_fuses_and_round_trips(void **state) {
    (void)state;
    dt_model m;
    dt_model_spec spec;
    dt_error err;
    enum { N = 16 };
    build(&m, &spec, "resnet18", 4, N);
    dt_model_init_params(&m, 3);
    perturb_batchnorm(&m);
    const size_t sample = dt_model_input_floats_per_sample(&m);
    float *x = random_images(N, sample, 5);
    array_feed feed = {x, N, sample};
    dt_qnet q;
    dt_quant_config cfg = {
        .scheme = DT_QUANT_SYMMETRIC, .per_channel = 1, .calib = {.method = DT_CALIB_MINMAX}};
    if (dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err) ||
        dt_quantize(&q, &m, &cfg, feed_array, &feed, &err))
        fail_msg("%s", err.msg);
    int convs = 0, fused = 0, pools = 0;
    for (int i = 0; i < q.n_ops; i++) {
        const dt_qop *o = &q.ops[i];
        convs += o->kind == DT_QOP_CONV;
        pools += o->kind == DT_QOP_AVGPOOL;
        if (o->residual >= 0) {
            fused++;
            /* conv2 of a block, after whatever wrote its shortcut, output u8 after ReLU */
            assert_non_null(strstr(o->name, ".conv2"));
            for (int j = i + 1; j < q.n_ops; j++) assert_true(q.ops[j].out != o->residual);
            assert_int_equal(q.values[o->out].lo, 0);
            assert_int_equal(q.values[o->out].hi, 255);
        }
    }
    assert_int_equal(convs, 20); /* 1 + 8 blocks x 2 + 3 projection shortcuts */
    assert_int_equal(fused, 8);
    assert_int_equal(pools, 1);
    assert_true(q.values[q.ops[q.n_ops - 1].out].is_float);

    /* float model in inference mode vs its int8 emulation */
    m.training = 0;
    memcpy(dt_model_input_data(&m), x, sizeof(float) * sample * N);
    dt_model_forward(&m, N);
    dt_qemu *e;
    if (dt_qemu_create(&e, &q, N, &err)) fail_msg("%s", err.msg);
    dt_qemu_forward(e, x, N);
    const double rel = rel_error(dt_qemu_logits(e), dt_model_logits(&m), (size_t)N * 10);
    assert_true(rel < 0.1);

    char path[256];
    snprintf(path, sizeof path, "/tmp/dtrain_test_quant_%ld.safetensors", (long)getpid());
    if (dt_qnet_save(&q, path, NULL, 0, &err)) fail_msg("%s", err.msg);
    dt_safetensors st;
    dt_qnet back;
    if (dt_safetensors_read(&st, path, &err) || dt_qnet_load(&back, &st, &spec, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(back.n_ops, q.n_ops);
    for (int i = 0; i < q.n_ops; i++) {
        const dt_qop *a = &q.ops[i], *b = &back.ops[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->residual, b->residual);
        if (a->kind != DT_QOP_CONV && a->kind != DT_QOP_LINEAR) continue;
        assert_int_equal(a->n_scales, b->n_scales);
        assert_memory_equal(a->weight, b->weight,
                            (size_t)a->c_out * a->c_in * a->kernel * a->kernel);
        assert_memory_equal(a->bias, b->bias, sizeof(int32_t) * a->c_out);
        assert_memory_equal(a->output_scale, b->output_scale, sizeof(float) * a->n_scales);
        assert_true(a->residual_scale == b->residual_scale);
    }
    for (int v = 0; v < q.n_values; v++) assert_true(q.values[v].scale == back.values[v].scale);
    dt_qemu *e2;
    if (dt_qemu_create(&e2, &back, N, &err)) fail_msg("%s", err.msg);
    dt_qemu_forward(e2, x, N);
    assert_memory_equal(dt_qemu_logits(e), dt_qemu_logits(e2), sizeof(float) * N * 10);
    dt_qemu_destroy(e2);
    dt_qnet_free(&back);

    /* another model's name, or a scheme the structure contradicts, is refused */
    dt_model_spec other;
    dt_zoo_default_spec(&other, "lenet5");
    assert_int_equal(dt_qnet_load(&back, &st, &other, &err), -1);
    assert_non_null(strstr(err.msg, "holds a quantized resnet18, not lenet5"));

    dt_qemu_destroy(e);
    dt_safetensors_free(&st);
    unlink(path);
    dt_qnet_free(&q);
    free(x);
    dt_model_free(&m);
}

/* A layer whose activations are all 0 has no scale: the error names it. So does a lab
 * scheme on a model with residual adds. */
static void test_errors_name_the_layer(void **state) {
    (void)state;
    dt_model m;
    dt_model_spec spec;
    dt_error err;
    build(&m, &spec, "lenet5", 0, 8);
    dt_model_init_params(&m, 1);
    for (int i = 0; i < m.n_tensors; i++)
        if (!strncmp(m.tensors[i].name, "conv1.", 6))
            memset(dt_model_tensor_data(&m, i), 0, sizeof(float) * m.tensors[i].numel);
    float *x = random_images(8, 784, 2);
    array_feed feed = {x, 8, 784};
    dt_qnet q;
    dt_quant_config cfg = {.scheme = DT_QUANT_SYMMETRIC, .calib = {.method = DT_CALIB_ENTROPY}};
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
    assert_int_equal(dt_quantize(&q, &m, &cfg, feed_array, &feed, &err), -1);
    assert_non_null(
        strstr(err.msg, "activations of conv1 are all 0 over the 8 calibration images"));
    dt_qnet_free(&q);
    feed.n = 0;
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
    assert_int_equal(dt_quantize(&q, &m, &cfg, feed_array, &feed, &err), -1);
    assert_non_null(strstr(err.msg, "no calibration images"));
    dt_qnet_free(&q);
    dt_model_free(&m);

    build(&m, &spec, "resnet18", 2, 2);
    cfg.scheme = DT_QUANT_LAB;
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_LAB, &err), 0);
    assert_int_equal(dt_quantize(&q, &m, &cfg, feed_array, &feed, &err), -1);
    assert_non_null(strstr(err.msg, "has residual adds"));
    dt_qnet_free(&q);
    dt_model_free(&m);

    /* the option-A shortcut has no int8 form: kept float, and listed */
    build(&m, &spec, "resnet20", 2, 2);
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
    char kept[256];
    assert_int_equal(dt_qnet_float_summary(&q, kept, sizeof kept), 2);
    assert_string_equal(kept, "2 ops (shortcut_pad x2)");
    dt_qnet_free(&q);
    dt_model_free(&m);

    /* an imported depthwise, grouped and dilated convolution: all int8 */
    const char *dir = getenv("DT_FIXTURES");
    char path[600];
    snprintf(path, sizeof path, "%s/onnx/separable_dilated.onnx", dir ? dir : "tests/fixtures");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err) ||
        dt_model_alloc(&m, 2, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
    assert_int_equal(dt_qnet_float_summary(&q, kept, sizeof kept), 0);
    dt_qnet_free(&q);
    dt_model_free(&m);

    /* a 1x7 convolution (Inception's) is refused by name: the int8 loops take square
     * kernels; a padded max pool (torchvision's resnets') quantizes */
    snprintf(path, sizeof path, "%s/onnx/inception_like.onnx", dir ? dir : "tests/fixtures");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err) ||
        dt_model_alloc(&m, 2, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), -1);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "has a 1x7 kernel"));
    dt_model_free(&m);
    dt_model_init_empty(&m, "padded_pool", 2);
    int v =
        dt_model_relu(&m, dt_model_conv2d(&m, "conv", dt_model_input(&m, 1, 8, 8), 4, 3, 1, 1, 1));
    v = dt_model_maxpool2d_padded(&m, v, 3, 2, 1, 0);
    assert_true(dt_model_linear(&m, "fc", dt_model_flatten(&m, v), 2) >= 0);
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    /* a square padded max pool has its int8 form (the padding clipped, as qemu.c's) */
    if (dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err)) fail_msg("%s", err.msg);
    dt_qnet_free(&q);
    dt_model_free(&m);

    /* a ReLU after a pooling, a BatchNorm not after a convolution: kept float */
    snprintf(path, sizeof path, "%s/onnx/kept_float.onnx", dir ? dir : "tests/fixtures");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
    assert_int_equal(dt_qnet_float_summary(&q, kept, sizeof kept), 2);
    assert_string_equal(kept, "2 ops (relu x1, batchnorm2d x1)");
    dt_qnet_free(&q);
    dt_model_free(&m);
    free(x);
}

/* The lab scheme's post-ReLU values [0, 127] search over 256 levels, as 4701151 did:
 * the reduced range (128 levels for a 7-bit u8) is the symmetric scheme's, and the
 * lab's arithmetic never reduces (its entropy scales changed once through hi + 1). */
static void test_lab_entropy_searches_256_levels(void **state) {
    (void)state;
    dt_safetensors st;
    dt_model m;
    dt_model_spec spec;
    lab_fixture(&st, &m, &spec);
    dt_error err;
    const dt_st_tensor *calib = need(&st, "calib_inputs");
    array_feed feed = {(const float *)calib->data, (int)calib->shape[0], 784};
    dt_qnet q;
    dt_quant_config cfg = {.scheme = DT_QUANT_LAB, .calib = {.method = DT_CALIB_ENTROPY}};
    if (dt_qnet_build(&q, &m, &spec, DT_QUANT_LAB, &err) ||
        dt_quantize(&q, &m, &cfg, feed_array, &feed, &err))
        fail_msg("%s", err.msg);
    /* each layer's target scale (before the lab's chain replaces it) is its output
     * scale times the accumulator's */
    int post_relu = 0, differs = 0;
    for (int i = 0; i < q.n_ops; i++) {
        const dt_qop *o = &q.ops[i];
        if ((o->kind != DT_QOP_CONV && o->kind != DT_QOP_LINEAR) || q.values[o->out].lo != 0)
            continue;
        assert_int_equal(q.values[o->out].hi, 127);
        post_relu++;
        const dt_calib_stats *c = &q.vstats[o->out].calib;
        double lo, hi, lo7, hi7;
        dt_calib_range(c, &cfg.calib, 256, &lo, &hi);
        dt_calib_range(c, &cfg.calib, 128, &lo7, &hi7);
        const float acc_scale = o->weight_scale[0] * q.values[o->in].scale;
        const float target = 127.0f / ((float)hi - (float)lo);
        const float target7 = 127.0f / ((float)hi7 - (float)lo7);
        assert_true(o->output_scale[0] == target / acc_scale);
        differs += target7 / acc_scale != o->output_scale[0];
    }
    assert_int_equal(post_relu, 4);
    assert_true(differs > 0); /* else the check could not tell 256 from 128 */
    dt_qnet_free(&q);
    dt_model_free(&m);
    dt_safetensors_free(&st);
}

/* A concat's inputs share its scale and range: a concat of ReLU'd (u8) inputs stays u8
 * [0, 255] (squeeze_grouped_1ch's Fire modules); one with a signed input is s8 and its
 * u8 inputs keep [0, 127] (residual_concat: relu(x) beside a branch conv without ReLU). */
static void test_concat_ranges(void **state) {
    (void)state;
    const char *dir = getenv("DT_FIXTURES");
    const char *names[2] = {"squeeze_grouped_1ch.onnx", "residual_concat.onnx"};
    for (int f = 0; f < 2; f++) {
        char path[600];
        dt_model m;
        dt_model_spec spec;
        dt_error err;
        dt_qnet q;
        snprintf(path, sizeof path, "%s/onnx/%s", dir ? dir : "tests/fixtures", names[f]);
        if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(dt_qnet_build(&q, &m, &spec, DT_QUANT_SYMMETRIC, &err), 0);
        int concats = 0;
        for (int i = 0; i < q.n_ops; i++) {
            const dt_qop *o = &q.ops[i];
            if (o->kind != DT_QOP_CONCAT) continue;
            concats++;
            const dt_qvalue *y = &q.values[o->out];
            for (int k = 0; k < o->n_ins; k++) {
                const dt_qvalue *x = &q.values[o->ins[k]];
                if (f == 0) { /* all u8 */
                    assert_int_equal(x->lo, 0);
                    assert_int_equal(x->hi, 255);
                } else { /* s8, its u8 input 7-bit */
                    assert_true(x->hi == 127 && (x->lo == 0 || x->lo == -128));
                }
            }
            assert_int_equal(y->lo, f == 0 ? 0 : -128);
            assert_int_equal(y->hi, f == 0 ? 255 : 127);
        }
        assert_int_equal(concats, f == 0 ? 2 : 1);
        dt_qnet_free(&q);
        dt_model_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lab_matches_the_pytorch_lab),
        cmocka_unit_test(test_lab_entropy_searches_256_levels),
        cmocka_unit_test(test_calibration_methods),
        cmocka_unit_test(test_resnet18_folds_fuses_and_round_trips),
        cmocka_unit_test(test_errors_name_the_layer),
        cmocka_unit_test(test_concat_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
