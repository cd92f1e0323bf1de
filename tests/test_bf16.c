/* bf16 mixed precision (--precision bf16) against PyTorch's bf16 autocast: on the
 * first batch of a committed parity fixture, dtrain's bf16 loss and gradients must
 * be as close to the fixture's float64 reference as torch.autocast("cpu",
 * torch.bfloat16) is (its errors are in *_bf16.safetensors, made by
 * scripts/make_fixtures.py --bf16-only), within a factor of 2. They must also differ
 * from the float32 results by more than float32 rounding: proof that the bf16 path
 * ran. Finite differences cannot check bf16 (its rounding is 2^-8), hence no FD here;
 * the fp32 code under it is FD-checked in test_layers_grad. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/cpu_isa.h"
#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "exec/conv2d_dnnl.h"
#include "testutil.h"

typedef struct errors {
    double loss, grad; /* against the float64 reference: relative, worst tensor */
    double grad_whole; /* ... all gradients as one vector */
    double grad_vs_torch_bf16, grad_whole_vs_torch_bf16;
    double torch_grad; /* torch's bf16 autocast against float64, worst tensor (same floor) */
} errors;

static double meta_number(const dt_safetensors *st, const char *key) {
    const char *v = dt_safetensors_meta(st, key);
    if (!v) fail_msg("fixture metadata lacks %s", key);
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end) fail_msg("fixture metadata %s is not a number: '%s'", key, v);
    return x;
}

static void fixture_path(char *path, size_t size, const char *file) {
    const char *dir = getenv("DT_FIXTURES");
    snprintf(path, size, "%s/%s", dir ? dir : "tests/fixtures", file);
}

/* Worst per-tensor relative error of grads (laid out as m's) against "<prefix><name>"
 * in st; tensors holding less than floor_rel of the whole gradient's norm are compared
 * at that scale (1e-4 in fp32, as test_parity.c and make_fixtures.py do). *whole: the
 * error of all of them as one vector. */
static double worst_grad_error(const dt_model *m, const float *grads, const dt_safetensors *st,
                               const char *prefix, double floor_rel, double *whole) {
    float *ref = test_alloc(sizeof(float) * m->n_params);
    char key[200];
    dt_error err;
    double whole2 = 0.0, diff2 = 0.0, worst = 0.0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < m->n_tensors; i++) {
            const dt_tensor_entry *t = &m->tensors[i];
            if (!t->is_param) continue;
            snprintf(key, sizeof key, "%s%s", prefix, t->name);
            if (dt_safetensors_get_f32(st, key, t->ndim, t->shape, ref, &err))
                fail_msg("%s", err.msg);
            double norm2 = 0.0;
            for (size_t k = 0; k < t->numel; k++) norm2 += (double)ref[k] * ref[k];
            if (pass == 0) {
                whole2 += norm2;
                continue;
            }
            for (size_t k = 0; k < t->numel; k++) {
                double d = (double)grads[t->offset + k] - ref[k];
                diff2 += d * d;
            }
            double floor = floor_rel * sqrt(whole2);
            double e = rel_error(grads + t->offset, ref, t->numel) * sqrt(norm2) /
                       fmax(sqrt(norm2), floor);
            if (e > worst) worst = e;
        }
    free(ref);
    *whole = sqrt(diff2 / fmax(whole2, 1e-300));
    return worst;
}

/* Step 1 of the fixture at the given precision: loss and gradients. */
static errors run_step1(const char *file, const dt_safetensors *bf16_ref, dt_precision precision) {
    char path[512];
    fixture_path(path, sizeof path, file);
    dt_error err;
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, &err)) fail_msg("%s", err.msg);
    dt_model_spec spec;
    char onnx_path[600]; /* spec.name points into it */
    fixture_model_spec(&spec, path, dt_safetensors_meta(&st, "model"), onnx_path, sizeof onnx_path);
    int width = (int)meta_number(&st, "width"), batch = (int)meta_number(&st, "batch");
    if (width > 0) spec.width = width;
    spec.precision = precision;
    dt_model m;
    if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, batch, &err) ||
        dt_checkpoint_load(&m, NULL, path, &err))
        fail_msg("%s", err.msg);
    const dt_st_tensor *x = dt_safetensors_find(&st, "input1");
    assert_non_null(x);
    assert_int_equal(x->numel, dt_model_input_floats_per_sample(&m) * (size_t)batch);
    memcpy(dt_model_input_data(&m), x->data, x->bytes);
    int32_t *labels = test_alloc(sizeof(int32_t) * batch);
    if (dt_safetensors_get_i32(&st, "labels1", (size_t)batch, labels, &err))
        fail_msg("%s", err.msg);
    dt_model_zero_grad(&m);
    dt_model_forward(&m, batch);
    double loss = dt_model_loss(&m, labels, batch, NULL);
    dt_model_backward(&m, labels, batch);
    float ref_loss;
    int one[1] = {1};
    if (dt_safetensors_get_f32(&st, "loss1", 1, one, &ref_loss, &err)) fail_msg("%s", err.msg);
    errors e = {.loss = fabs(loss - ref_loss) / fabs(ref_loss)};
    /* In bf16 a tensor whose gradient is under bf16's resolution of the whole (2^-8)
     * is compared at that scale: its digits are rounding for dtrain and torch alike
     * (the separable fixture's bn0.weight holds 3e-6 of the whole gradient). */
    const double floor_rel = precision == DT_PRECISION_BF16 ? 1.0 / 256 : 1e-4;
    e.grad = worst_grad_error(&m, m.grads, &st, "grad.", floor_rel, &e.grad_whole);
    e.grad_vs_torch_bf16 = worst_grad_error(&m, m.grads, bf16_ref, "bf16.grad.", floor_rel,
                                            &e.grad_whole_vs_torch_bf16);
    /* torch's autocast gradients against the same float64 reference, the same way */
    float *torch_grads = test_alloc(sizeof(float) * m.n_params);
    char key[200];
    for (int i = 0; i < m.n_tensors; i++) {
        const dt_tensor_entry *t = &m.tensors[i];
        if (!t->is_param) continue;
        snprintf(key, sizeof key, "bf16.grad.%s", t->name);
        if (dt_safetensors_get_f32(bf16_ref, key, t->ndim, t->shape, torch_grads + t->offset, &err))
            fail_msg("%s", err.msg);
    }
    double torch_whole;
    e.torch_grad = worst_grad_error(&m, torch_grads, &st, "grad.", floor_rel, &torch_whole);
    free(torch_grads);
    free(labels);
    dt_model_free(&m);
    dt_safetensors_free(&st);
    return e;
}

static void check_bf16(const char *fixture, const char *bf16_file) {
    if (!dt_cpu_has_bf16()) {
        print_message("skipped: this CPU (%s, ONEDNN_MAX_CPU_ISA counted) has neither "
                      "AVX512-BF16 nor AMX-BF16\n",
                      dt_cpu_isa_name());
        skip();
    }
    char path[512];
    fixture_path(path, sizeof path, bf16_file);
    dt_error err;
    dt_safetensors ref;
    if (dt_safetensors_read(&ref, path, &err)) fail_msg("%s", err.msg);
    const double torch_loss = meta_number(&ref, "torch_bf16_loss_err"),
                 torch_whole = meta_number(&ref, "torch_bf16_grad_whole_err");
    errors f32 = run_step1(fixture, &ref, DT_PRECISION_FP32);
    errors b16 = run_step1(fixture, &ref, DT_PRECISION_BF16);
    const double torch_grad = b16.torch_grad;
    print_message("%s against float64: loss error fp32 %.2e, dtrain bf16 %.2e, torch bf16 "
                  "autocast %.2e; gradients (worst tensor / whole) fp32 %.2e / %.2e, dtrain "
                  "bf16 %.2e / %.2e, torch bf16 %.2e / %.2e; dtrain bf16 vs torch bf16 "
                  "%.2e / %.2e\n",
                  fixture, f32.loss, b16.loss, torch_loss, f32.grad, f32.grad_whole, b16.grad,
                  b16.grad_whole, torch_grad, torch_whole, b16.grad_vs_torch_bf16,
                  b16.grad_whole_vs_torch_bf16);
    /* bf16 ran: its gradients are off by bf16 rounding, far above fp32's. */
    assert_true(b16.grad > 10.0 * f32.grad);
    assert_true(b16.loss <= fmax(2.0 * torch_loss, 1e-3));
    assert_true(b16.grad <= 2.0 * torch_grad);
    assert_true(b16.grad_whole <= 2.0 * torch_whole);
    dt_safetensors_free(&ref);
}

static void test_lenet5_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("lenet5.safetensors", "lenet5_bf16.safetensors");
}

static void test_resnet18_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("resnet18_w4.safetensors", "resnet18_w4_bf16.safetensors");
}

static void test_resnet20_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("resnet20_w4.safetensors", "resnet20_w4_bf16.safetensors");
}

/* An imported CNN with depthwise, grouped and dilated convolutions. */
static void test_onnx_separable_dilated_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("onnx/separable_dilated.onnx.safetensors",
               "onnx/separable_dilated_bf16.safetensors");
}

/* Today's activations (the activation op's bf16 kernel, GELU and SiLU as one op each);
 * the autocast reference runs ReLU6 as torch.clamp (PyTorch 1.13 has no bf16
 * hardtanh_backward): the same but at exactly 0 and 6. */
static void test_onnx_activations_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("onnx/activations.onnx.safetensors", "onnx/activations_bf16.safetensors");
    /* and its activations ran on their bf16 kernel, none fell back to f32 */
    char path[512], onnx_path[600];
    fixture_path(path, sizeof path, "onnx/activations.onnx.safetensors");
    dt_model_spec spec;
    fixture_model_spec(&spec, path, "activations.onnx", onnx_path, sizeof onnx_path);
    spec.precision = DT_PRECISION_BF16;
    dt_model m;
    dt_error err;
    if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    int activations = 0;
    for (int i = 0; i < m.n_ops; i++)
        if (m.ops[i].kind == DT_OP_ACTIVATION) {
            assert_ptr_equal(m.ops[i].impl, &dt_activation_bf16_kernel);
            activations++;
        }
    assert_int_equal(activations, 9); /* clip hardswish silu gelu leaky tanh hsig sig gelu_tanh */
    dt_model_free(&m);
}

/* Issue 41's user CNN (LeakyReLU, padded average pools, GELU, a bias-free Linear). */
static void test_onnx_user_cnn_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("onnx/user_cnn.onnx.safetensors", "onnx/user_cnn_bf16.safetensors");
}

/* Issue 41's torchvision families that import today (families.txt's `parity` rows), each
 * against its bf16 autocast reference where it has one (make_onnx_fixtures.py: not the
 * ViT's, whose bf16 test_transformer.c holds to float64 instead; not mobilenet_v2's,
 * whose ReLU6 torch 1.13 cannot run backward in bf16).
 * resnext50_32x4d's is not compared: autocast's whole gradient is 132% off float64
 * (dtrain bf16's 136%), and dtrain's bf16 loss was 6.7e-3 off where autocast's is 5.7e-4. */
static void test_onnx_families_bf16_as_close_as_autocast(void **state) {
    (void)state;
    family_row rows[64];
    const int n = family_rows(rows, 64);
    for (int i = 0; i < n; i++) {
        if (!rows[i].parity) continue;
        char fixture[128], ref[128], path[640];
        snprintf(fixture, sizeof fixture, "onnx/%.63s.onnx.safetensors", rows[i].name);
        snprintf(ref, sizeof ref, "onnx/%.63s_bf16.safetensors", rows[i].name);
        fixture_path(path, sizeof path, ref);
        FILE *f = fopen(path, "rb");
        if (!f) {
            print_message("%s: no bf16 autocast reference\n", rows[i].name);
            continue;
        }
        fclose(f);
        /* A reference torch's own autocast misses by more than the gradient itself
         * (narrow BatchNorm nets in bf16) judges nothing: said, not compared. */
        dt_safetensors st;
        dt_error err;
        if (dt_safetensors_read(&st, path, &err)) fail_msg("%s", err.msg);
        const double torch_whole = meta_number(&st, "torch_bf16_grad_whole_err");
        dt_safetensors_free(&st);
        if (torch_whole >= 1.0) {
            print_message("%s: not compared: torch's bf16 autocast gradient is %.2f of the "
                          "gradient off float64\n",
                          rows[i].name, torch_whole);
            continue;
        }
        check_bf16(fixture, ref);
    }
}

/* The im2col backend has no bf16: building such a model fails with a message. */
/* The elementwise ops with broadcasting (position embedding, squeeze-and-excitation,
 * layer scale, a channel mean subtracted, a division by a constant, ReduceMean) on
 * their bf16 kernels. */
static void test_onnx_se_layer_scale_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("onnx/se_layer_scale.onnx.safetensors", "onnx/se_layer_scale_bf16.safetensors");
}

static void test_onnx_inception_like_bf16_as_close_as_autocast(void **state) {
    (void)state;
    check_bf16("onnx/inception_like.onnx.safetensors", "onnx/inception_like_bf16.safetensors");
}

static void test_bf16_needs_onednn(void **state) {
    (void)state;
    dt_model_spec spec;
    assert_int_equal(dt_zoo_default_spec(&spec, "lenet5"), 0);
    spec.precision = DT_PRECISION_BF16;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_build(&m, &spec, &err), 0);
    m.conv_backend = DT_CONV_IM2COL;
    assert_int_not_equal(dt_model_alloc(&m, 4, &err), 0);
    assert_non_null(strstr(err.msg, "oneDNN"));
    dt_model_free(&m);
}

/* bf16 end to end: with --precision bf16 every activation of these models but the
 * input (the loader's f32) and the logits (the loss's f32) is stored bf16, since the
 * CPU backend has a bf16 kernel for each of their ops; each BatchNorm followed by
 * the in-place ReLU of its output applies that ReLU itself. In fp32 all stay f32. */
static void check_dtypes(const char *name, int width, int in_hw) {
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        dt_model_spec spec;
        assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
        spec.width = width;
        if (in_hw) spec.in_h = spec.in_w = in_hw;
        spec.precision = bf16 ? DT_PRECISION_BF16 : DT_PRECISION_FP32;
        dt_model m;
        dt_error err;
        if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, 2, &err))
            fail_msg("%s: %s", name, err.msg);
        const int logits = m.values[m.n_values - 1].storage;
        for (int si = 0; si < m.n_storages; si++) {
            const dt_dtype want = bf16 && si != 0 && si != logits ? DT_BF16 : DT_F32;
            if (m.storages[si].dtype != want)
                fail_msg("%s %s: storage %d is %s, not %s", name, bf16 ? "bf16" : "fp32", si,
                         dt_dtype_name(m.storages[si].dtype), dt_dtype_name(want));
        }
        int fusable = 0, fused = 0;
        for (int i = 0; i < m.n_ops; i++) {
            const dt_op *op = &m.ops[i];
            fused += op->relu_fused;
            if (op->kind == DT_OP_BATCHNORM2D && i + 1 < m.n_ops &&
                m.ops[i + 1].kind == DT_OP_RELU &&
                m.values[m.ops[i + 1].in].storage == m.values[op->out].storage)
                fusable++;
        }
        assert_int_equal(fused, bf16 ? fusable : 0);
        dt_model_free(&m);
    }
}

static void test_bf16_activations_end_to_end(void **state) {
    (void)state;
    if (!dt_cpu_has_bf16()) skip();
    check_dtypes("logreg", 0, 0);
    check_dtypes("mlp", 0, 0);
    check_dtypes("lenet5", 0, 0);
    check_dtypes("lenet_cifar", 0, 0);
    check_dtypes("resnet20", 0, 0);
    check_dtypes("resnet18", 4, 0);
    check_dtypes("googlenet", 8, 32);
    check_dtypes("alexnet", 8, 64);
    check_dtypes("resnet50", 8, 32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet5_bf16_as_close_as_autocast),
        cmocka_unit_test(test_resnet18_bf16_as_close_as_autocast),
        cmocka_unit_test(test_resnet20_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_separable_dilated_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_se_layer_scale_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_activations_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_families_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_user_cnn_bf16_as_close_as_autocast),
        cmocka_unit_test(test_onnx_inception_like_bf16_as_close_as_autocast),
        cmocka_unit_test(test_bf16_needs_onednn),
        cmocka_unit_test(test_bf16_activations_end_to_end),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* cmocka (1.1.5) returns 0 when tests call skip(): without bf16 hardware the
     * comparisons with autocast did not run, which CTest reports as skipped only on
     * SKIP_RETURN_CODE 77 (tests/CMakeLists.txt) */
    if (failed == 0 && !dt_cpu_has_bf16()) {
        printf("skipped: no bf16 instructions (%s): the comparisons with autocast did not run\n",
               dt_cpu_isa_name());
        return 77;
    }
    return failed;
}
