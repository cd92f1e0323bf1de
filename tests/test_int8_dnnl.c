/* The int8 engine computes the float emulation's integers: every layer's output of
 * lenet5 (symmetric), lenet_cifar (the lab's scheme, its clip post-op) and resnet18
 * (BatchNorm folded, residual adds fused into a sum post-op, per-channel and per-tensor
 * weights), mlp (a linear layer on the signed input), imported CNNs (grouped, depthwise
 * and dilated convolutions, concats, global pooling) and resnet20 (ops kept float
 * between int8 ones), compared value by value for the
 * full batch and a partial one; the logits within one step of the last layer's output.
 * In the range quantize chooses on this CPU (7-bit activations without VNNI), and in
 * both ranges: a reduced one exact everywhere, a full one refused without VNNI (the
 * suite also runs this under ONEDNN_MAX_CPU_ISA=AVX2: int8_dnnl_avx2). */
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
#include "dtrain/zoo.h"
#include "quant/int8_dnnl.h"
#include "quant/qemu.h"
#include "quant/quant.h"
#include "testutil.h"

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

/* Quantizes model `name` (random weights, BatchNorm statistics away from (0, 1)) on
 * random images, runs both engines on other random images and compares every value. */
static void compare_engines_to(const char *name, int width, dt_quant_scheme scheme, int per_channel,
                               int n, int reduce_range, double float_tol);

static void compare_engines(const char *name, int width, dt_quant_scheme scheme, int per_channel,
                            int n, int reduce_range) {
    compare_engines_to(name, width, scheme, per_channel, n, reduce_range, 0.0);
}

/* float_tol > 0: the emulation's logits also within float_tol x the largest float logit
 * of the float model's on the same images. */
static void compare_engines_to(const char *name, int width, dt_quant_scheme scheme, int per_channel,
                               int n, int reduce_range, double float_tol) {
    dt_model m;
    dt_model_spec spec;
    dt_error err;
    char path[600];
    if (strstr(name, ".onnx")) { /* a fixture's imported graph */
        const char *dir = getenv("DT_FIXTURES");
        snprintf(path, sizeof path, "%s/onnx/%s", dir ? dir : "tests/fixtures", name);
        if (dt_zoo_spec_of(&spec, path, &err)) fail_msg("%s", err.msg);
    } else {
        assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
        spec.width = width;
    }
    if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, n, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 9);
    dt_rng rng = dt_rng_make(4, 4);
    for (int i = 0; i < m.n_tensors; i++) {
        const char *t = m.tensors[i].name;
        float *d = dt_model_tensor_data(&m, i);
        for (size_t k = 0; k < m.tensors[i].numel; k++) {
            if (strstr(t, "running_mean")) d[k] = 0.3f * dt_rng_normal(&rng);
            if (strstr(t, "running_var")) d[k] = 0.3f + dt_rng_uniform(&rng);
        }
    }
    const size_t sample = dt_model_input_floats_per_sample(&m);
    float *x = test_alloc(sizeof(float) * sample * (size_t)n * 2);
    for (size_t i = 0; i < sample * (size_t)n * 2; i++) x[i] = dt_rng_normal(&rng);
    array_feed feed = {x, n, sample};
    dt_qnet q;
    dt_quant_config cfg = {.scheme = scheme,
                           .per_channel = per_channel,
                           .calib = {.method = DT_CALIB_PERCENTILE, .percentile = 99.9},
                           .reduce_range = reduce_range};
    if (dt_qnet_build(&q, &m, &spec, scheme, &err) ||
        dt_quantize(&q, &m, &cfg, feed_array, &feed, &err))
        fail_msg("%s", err.msg);
    dt_qemu *emu;
    dt_int8_dnnl *eng;
    if (dt_qemu_create(&emu, &q, n, &err)) fail_msg("%s", err.msg);
    char why[160];
    if (!dt_int8_dnnl_exact_here(&q, why, sizeof why)) {
        /* without VNNI, a full range: the engine is refused in one line, saying why */
        assert_int_equal(dt_int8_dnnl_create(&eng, &q, n, &err), -1);
        if (!strstr(err.msg, "not exact on this CPU") || !strstr(err.msg, why))
            fail_msg("%s: unexpected refusal: %s", name, err.msg);
        print_message("%s (%s, %s range): refused as expected: %s\n", name,
                      dt_quant_scheme_name(scheme), reduce_range ? "reduced" : "full", err.msg);
        dt_qemu_destroy(emu);
        dt_qnet_free(&q);
        free(x);
        dt_model_free(&m);
        return;
    }
    if (dt_int8_dnnl_create(&eng, &q, n, &err)) fail_msg("%s", err.msg);
    /* twice: the full batch, then a smaller one (the engine's second set of primitives) */
    for (int pass = 0; pass < 2; pass++) {
        const int b = pass ? n / 2 + 1 : n;
        const float *xs = x + sample * (size_t)n;
        dt_qemu_forward(emu, xs, b);
        dt_int8_dnnl_forward(eng, xs, b);
        long total = 0;
        for (int v = 0; v < q.n_values; v++) {
            const dt_qvalue *val = &q.values[v];
            if (val->is_float) continue;
            const int16_t *a = dt_qemu_value(emu, v);
            const void *raw = dt_int8_dnnl_value(eng, v);
            if (!raw) continue; /* overwritten in place by a block's output */
            const int hw = val->h * val->w;
            long bad = 0, worst = 0;
            for (int s = 0; s < b; s++)
                for (int c = 0; c < val->c; c++)
                    for (int p = 0; p < hw; p++) {
                        const size_t nhwc = ((size_t)s * hw + p) * val->c + c;
                        const int got = val->lo < 0 ? ((const int8_t *)raw)[nhwc]
                                                    : ((const uint8_t *)raw)[nhwc];
                        const int want = a[((size_t)s * val->c + c) * hw + p];
                        const long d = labs((long)got - want);
                        bad += d != 0;
                        worst = d > worst ? d : worst;
                    }
            /* oneDNN computes what the emulation computes, to the integer */
            if (bad)
                fail_msg("%s %s batch %d: %ld of %ld integers differ, by up to %ld", name,
                         val->name, b, bad, (long)b * val->c * hw, worst);
            total += (long)b * val->c * hw;
        }
        /* the logits: within one step of the last layer's output */
        const dt_qvalue *last = &q.values[q.ops[q.n_ops - 1].out];
        const float *la = dt_qemu_logits(emu), *lb = dt_int8_dnnl_logits(eng);
        for (int k = 0; k < b * last->c; k++) {
            const dt_qop *o = &q.ops[q.n_ops - 1];
            /* a final pooling's float logits: the same arithmetic, exactly */
            const float step = !dt_qop_class_of(o->kind)->weight_dims ? 0.0f
                               : last->is_float ? o->output_scale[o->n_scales > 1 ? k % last->c : 0]
                                                : 1.0f / last->scale;
            if (!(fabsf(la[k] - lb[k]) <= step * 1.0001f))
                fail_msg("%s logit %d: emulation %g, engine %g (step %g)", name, k, la[k], lb[k],
                         step);
        }
        assert_true(total > 0);
        if (float_tol > 0.0) { /* int8 computes what the float model does, roughly */
            memcpy(dt_model_input_data(&m), xs, sizeof(float) * sample * (size_t)b);
            m.training = 0;
            dt_model_forward(&m, b);
            const float *lf = dt_model_logits(&m);
            double worst = 0.0, largest = 0.0;
            for (int k = 0; k < b * last->c; k++) {
                worst = fmax(worst, fabs((double)la[k] - lf[k]));
                largest = fmax(largest, fabs((double)lf[k]));
            }
            print_message("%s: int8 logits within %.3g of float32's (largest %.3g)\n", name, worst,
                          largest);
            if (!(worst <= float_tol * largest))
                fail_msg("%s: int8 logits %g from float32's (largest %g)", name, worst, largest);
        }
    }
    dt_int8_dnnl_destroy(eng);
    dt_qemu_destroy(emu);
    dt_qnet_free(&q);
    free(x);
    dt_model_free(&m);
}

/* The range quantize would choose on this CPU: full with VNNI, reduced without. */
static int here(dt_quant_scheme scheme) {
    return dt_quant_reduce_range_here(scheme);
}

static void test_lenet5_symmetric(void **state) {
    (void)state;
    compare_engines("lenet5", 0, DT_QUANT_SYMMETRIC, 1, 16, here(DT_QUANT_SYMMETRIC));
}

static void test_lenet_cifar_lab(void **state) {
    (void)state;
    compare_engines("lenet_cifar", 0, DT_QUANT_LAB, 0, 16, here(DT_QUANT_LAB));
}

static void test_mlp_symmetric(void **state) {
    (void)state;
    compare_engines("mlp", 0, DT_QUANT_SYMMETRIC, 1, 16, here(DT_QUANT_SYMMETRIC));
}

static void test_resnet18_symmetric(void **state) {
    (void)state;
    compare_engines("resnet18", 4, DT_QUANT_SYMMETRIC, 1, 6, here(DT_QUANT_SYMMETRIC));
    compare_engines("resnet18", 4, DT_QUANT_SYMMETRIC, 0, 6, here(DT_QUANT_SYMMETRIC));
}

/* Imported CNNs: depthwise, grouped and dilated convolutions (separable_dilated);
 * concat, dropout and global average pooling (residual_concat); squeezenet's Fire
 * concats, a ceil_mode max pooling, resnext's grouped bottleneck, a depthwise pair and
 * int8 logits after the final ReLU and pooling (squeeze_grouped_1ch); both weight
 * modes, both ranges. */
static void test_imported_cnns(void **state) {
    (void)state;
    const char *models[] = {"separable_dilated.onnx", "residual_concat.onnx",
                            "squeeze_grouped_1ch.onnx"};
    for (int k = 0; k < 3; k++) {
        compare_engines(models[k], 0, DT_QUANT_SYMMETRIC, 1, 6, here(DT_QUANT_SYMMETRIC));
        compare_engines(models[k], 0, DT_QUANT_SYMMETRIC, 0, 6, here(DT_QUANT_SYMMETRIC));
        compare_engines(models[k], 0, DT_QUANT_SYMMETRIC, 1, 6, 1);
    }
}

/* Ops kept float (resnet20's option-A shortcuts) between int8 ones: the same float
 * kernel and conversions in both engines, so the same integers after them. */
static void test_kept_float_ops(void **state) {
    (void)state;
    compare_engines("resnet20", 4, DT_QUANT_SYMMETRIC, 1, 6, here(DT_QUANT_SYMMETRIC));
    compare_engines("resnet20", 4, DT_QUANT_SYMMETRIC, 0, 6, 1);
}

/* kept_float: a ReLU after a pooling and a BatchNorm reading it through a dropout, kept
 * float between int8 layers: the engines agree, and the int8 network computes what the
 * float model does (the BatchNorm reads the ReLU's values, not a dropout copy the float
 * model never made): its logits within 5.7% of the largest float one, where reading the
 * stale copy put them 100% off; the bar 20%. */
static void test_kept_float_through_dropout(void **state) {
    (void)state;
    compare_engines_to("kept_float.onnx", 0, DT_QUANT_SYMMETRIC, 1, 6, here(DT_QUANT_SYMMETRIC),
                       0.2);
}

/* A reduced range is exact everywhere (a file made on an AVX2 host runs on any), and a
 * full one is refused where it would not be (one made with VNNI, run without). */
static void test_both_ranges(void **state) {
    (void)state;
    compare_engines("lenet5", 0, DT_QUANT_SYMMETRIC, 1, 16, 1);
    compare_engines("resnet18", 4, DT_QUANT_SYMMETRIC, 0, 6, 1);
    compare_engines("lenet5", 0, DT_QUANT_SYMMETRIC, 1, 16, 0);
}

static int lists(const char *const *avoid, const char *name) {
    for (int i = 0; avoid && avoid[i]; i++)
        if (!strcmp(avoid[i], name)) return 1;
    return 0;
}

/* Without VNNI, a strided 1x1 convolution on a signed input avoids both the GEMM
 * convolutions and the 1x1 kernel (it avoided only the GEMMs); with VNNI nothing. */
static void test_signed_strided_1x1_avoids_both(void **state) {
    (void)state;
    dt_qvalue values[2] = {{.lo = -128, .hi = 127}, {.lo = 0, .hi = 255}};
    dt_qnet q = {.values = values, .n_values = 2};
    dt_qop o = {.kind = DT_QOP_CONV, .kernel = 1, .stride = 2, .in = 0, .out = 1};
    const char *const *avoid = dt_int8_dnnl_avoided(&q, &o);
    if (dt_cpu_has_int8_vnni()) {
        assert_null(avoid);
        return;
    }
    assert_true(lists(avoid, "ip:") && lists(avoid, "gemm") && lists(avoid, "1x1"));
    values[0].lo = 0; /* unsigned: the 1x1 kernel only */
    avoid = dt_int8_dnnl_avoided(&q, &o);
    assert_true(!lists(avoid, "gemm") && lists(avoid, "1x1"));
    values[0].lo = -128;
    o.stride = 1; /* signed, not strided: the GEMMs only */
    avoid = dt_int8_dnnl_avoided(&q, &o);
    assert_true(lists(avoid, "gemm") && !lists(avoid, "1x1"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet5_symmetric),
        cmocka_unit_test(test_lenet_cifar_lab),
        cmocka_unit_test(test_mlp_symmetric),
        cmocka_unit_test(test_resnet18_symmetric),
        cmocka_unit_test(test_both_ranges),
        cmocka_unit_test(test_imported_cnns),
        cmocka_unit_test(test_kept_float_ops),
        cmocka_unit_test(test_kept_float_through_dropout),
        cmocka_unit_test(test_signed_strided_1x1_avoids_both),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
