/* Parity with PyTorch: fixtures made by scripts/make_fixtures.py hold initial weights,
 * two batches, the losses, step-1 gradients and the state after two SGD steps.
 * dtrain must reproduce loss and parameters within 1e-4 relative error, gradients
 * within 1e-2 (where the fixture carries PyTorch's own float32 errors, badly
 * conditioned nets, a multiple of those).
 *
 *   test_parity                 runs the committed fixtures ($DT_FIXTURES)
 *   test_parity FILE            runs one fixture (used for full-width resnet18) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "dtrain/sgd.h"
#include "dtrain/zoo.h"
#include "testutil.h"

static const char *single_fixture;

static double read_scalar(const dt_safetensors *st, const char *name) {
    float v;
    int shape[1] = {1};
    dt_error err;
    if (dt_safetensors_get_f32(st, name, 1, shape, &v, &err)) fail_msg("%s", err.msg);
    return v;
}

static void load_batch(const dt_safetensors *st, dt_model *m, int step, int batch,
                       int32_t *labels) {
    char name[32];
    dt_error err;
    snprintf(name, sizeof name, "input%d", step);
    const dt_st_tensor *t = dt_safetensors_find(st, name);
    assert_non_null(t);
    assert_int_equal(t->numel, dt_model_input_floats_per_sample(m) * (size_t)batch);
    memcpy(dt_model_input_data(m), t->data, t->bytes);
    snprintf(name, sizeof name, "labels%d", step);
    if (dt_safetensors_get_i32(st, name, (size_t)batch, labels, &err)) fail_msg("%s", err.msg);
}

static void run_fixture_with(const char *path, dt_conv_backend backend) {
    dt_error err;
    dt_safetensors st;
    if (dt_safetensors_read(&st, path, &err)) fail_msg("%s", err.msg);
    const char *name = dt_safetensors_meta(&st, "model");
    const char *width = dt_safetensors_meta(&st, "width");
    const char *batch_s = dt_safetensors_meta(&st, "batch");
    assert_non_null(name);
    assert_non_null(batch_s);
    int batch = atoi(batch_s);
    const char *lr_s = dt_safetensors_meta(&st, "lr");
    float lr = lr_s ? (float)atof(lr_s) : 0.1f;
    /* Full-width fixtures carry PyTorch's own float32 error against the float64
     * reference: a few ReLU units within rounding of zero flip in any float32
     * implementation, so gradients may differ by twice what torch itself shows. */
    const char *torch_grad = dt_safetensors_meta(&st, "torch_f32_grad_err");
    const char *torch_state = dt_safetensors_meta(&st, "torch_f32_state_err");
    const char *torch_loss = dt_safetensors_meta(&st, "torch_f32_loss_err");
    double grad_tol = torch_grad ? fmax(1e-2, 2.0 * atof(torch_grad)) : 1e-2;
    /* The narrow BatchNorm ImageNet fixtures: torch's own float32 losses are up to 4e-4
     * off after two steps (make_fixtures.py); allow 5x that, as for the state below. */
    const double param_tol = 1e-4,
                 loss_tol = torch_loss ? fmax(1e-4, 5.0 * atof(torch_loss)) : 1e-4;
    dt_model_spec spec;
    /* an ONNX fixture (scripts/make_onnx_fixtures.py) names its .onnx, beside it */
    char onnx_path[600];
    fixture_model_spec(&spec, path, name, onnx_path, sizeof onnx_path);
    const size_t name_len = strlen(name);
    const int onnx = name_len > 5 && !strcmp(name + name_len - 5, ".onnx");
    if (width && atoi(width) > 0) spec.width = atoi(width);
    /* The ImageNet fixtures: a small input and 10 classes, dropout off on both sides
     * (PyTorch's dropout masks come from its own RNG). */
    const char *input = dt_safetensors_meta(&st, "input");
    const char *classes = dt_safetensors_meta(&st, "classes");
    const char *no_dropout = dt_safetensors_meta(&st, "no_dropout");
    if (input) assert_int_equal(sscanf(input, "%dx%dx%d", &spec.in_c, &spec.in_h, &spec.in_w), 3);
    if (classes) spec.classes = atoi(classes);
    if (no_dropout) spec.no_dropout = atoi(no_dropout);
    dt_model m;
    dt_sgd opt;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    if (onnx) {
        /* the importer's starting weights are the exported state, bit for bit (buffers
         * aside: the export's own forward pass moved its running statistics) */
        assert_non_null(m.imported);
        for (int i = 0; i < m.n_tensors; i++) {
            const dt_tensor_entry *t = &m.tensors[i];
            if (!t->is_param) continue;
            const dt_st_tensor *want = dt_safetensors_find(&st, t->name);
            if (!want) fail_msg("%s: no %s in the fixture", path, t->name);
            assert_int_equal(want->numel, t->numel);
            assert_memory_equal(m.imported + t->offset, want->data, t->numel * sizeof(float));
        }
    }
    m.conv_backend = backend;
    print_message("%s with conv2d on %s\n", path, backend == DT_CONV_DNNL ? "oneDNN" : "im2col");
    if (dt_model_alloc(&m, batch, &err) || dt_checkpoint_load(&m, NULL, path, &err) ||
        dt_sgd_init(&opt, m.n_params, lr, 0.9f, 5e-4f, &err))
        fail_msg("%s", err.msg);
    int32_t *labels = test_alloc(sizeof(int32_t) * batch);
    float *ref = test_alloc(sizeof(float) * m.n_params);
    double worst_grad = 0.0, worst_after = 0.0;
    for (int step = 1; step <= 2; step++) {
        load_batch(&st, &m, step, batch, labels);
        dt_model_zero_grad(&m);
        dt_model_forward(&m, batch);
        double loss = dt_model_loss(&m, labels, batch, NULL);
        char key[160];
        snprintf(key, sizeof key, "loss%d", step);
        double want = read_scalar(&st, key);
        double loss_err = fabs(loss - want) / fabs(want);
        print_message("%s: step %d loss %.7f (torch %.7f), relative error %.2e\n", path, step, loss,
                      want, loss_err);
        assert_true(loss_err <= loss_tol);
        dt_model_backward(&m, labels, batch);
        if (step == 1) {
            /* A tensor holding less than 1e-4 of the whole gradient's norm is compared at
             * that scale (as make_fixtures.py measures torch): a conv bias in front of
             * BatchNorm (vgg16_bn) has a zero gradient in exact arithmetic, and float32
             * gives rounding, relatively huge. Larger tensors: plain relative error. */
            double whole2 = 0.0;
            for (int i = 0; i < m.n_tensors; i++) {
                const dt_tensor_entry *t = &m.tensors[i];
                if (!t->is_param) continue;
                snprintf(key, sizeof key, "grad.%s", t->name);
                if (dt_safetensors_get_f32(&st, key, t->ndim, t->shape, ref, &err))
                    fail_msg("%s", err.msg);
                for (size_t k = 0; k < t->numel; k++) whole2 += (double)ref[k] * ref[k];
            }
            const double floor = 1e-4 * sqrt(whole2);
            for (int i = 0; i < m.n_tensors; i++) {
                const dt_tensor_entry *t = &m.tensors[i];
                if (!t->is_param) continue;
                snprintf(key, sizeof key, "grad.%s", t->name);
                if (dt_safetensors_get_f32(&st, key, t->ndim, t->shape, ref, &err))
                    fail_msg("%s", err.msg);
                double norm2 = 0.0;
                for (size_t k = 0; k < t->numel; k++) norm2 += (double)ref[k] * ref[k];
                double e = rel_error(m.grads + t->offset, ref, t->numel) * sqrt(norm2) /
                           fmax(sqrt(norm2), floor);
                if (e > worst_grad) worst_grad = e;
                /* Gradients are compared looser than parameters: a bias gradient is a
                 * sum over a channel that BatchNorm makes nearly cancel. */
                if (e > grad_tol)
                    print_message("  gradient of %s: relative error %.2e\n", t->name, e);
                assert_true(e <= grad_tol);
            }
        }
        dt_sgd_step(&opt, m.params, m.grads);
    }
    /* Per tensor for the committed fixtures. At full width a tensor that starts at
     * zero (BatchNorm biases) is tiny after two steps, so its relative error measures
     * ReLU flips, not arithmetic: there the bound is on the whole state. */
    double diff2 = 0.0, ref2 = 0.0;
    for (int i = 0; i < m.n_tensors; i++) {
        const dt_tensor_entry *t = &m.tensors[i];
        char key[160];
        snprintf(key, sizeof key, "after.%s", t->name);
        if (dt_safetensors_get_f32(&st, key, t->ndim, t->shape, ref, &err)) fail_msg("%s", err.msg);
        const float *mine = dt_model_tensor_data(&m, i);
        for (size_t k = 0; k < t->numel; k++) {
            diff2 += ((double)mine[k] - ref[k]) * ((double)mine[k] - ref[k]);
            ref2 += (double)ref[k] * ref[k];
        }
        double e = rel_error(mine, ref, t->numel);
        if (e > worst_after) worst_after = e;
        if (!torch_state) {
            if (e > param_tol)
                print_message("  %s after 2 steps: relative error %.2e\n", t->name, e);
            assert_true(e <= param_tol);
        }
    }
    double whole = sqrt(diff2 / ref2);
    double whole_tol = torch_state ? fmax(1e-4, 5.0 * atof(torch_state)) : 1e-4;
    print_message("%s: whole state after 2 steps: relative error %.2e (PyTorch float32: %s)\n",
                  path, whole, torch_state ? torch_state : "not measured");
    assert_true(whole <= whole_tol);
    print_message("%s: worst gradient error %.2e, worst parameter/buffer error after 2 steps "
                  "%.2e (%d tensors)\n",
                  path, worst_grad, worst_after, m.n_tensors);
    if (torch_grad)
        print_message("%s: PyTorch float32 worst gradient error %s\n", path, torch_grad);
    free(labels);
    free(ref);
    dt_sgd_free(&opt);
    dt_model_free(&m);
    dt_safetensors_free(&st);
}

static void run_fixture(const char *path) {
    run_fixture_with(path, DT_CONV_DNNL);
    run_fixture_with(path, DT_CONV_IM2COL);
}

static void run_committed(const char *file) {
    const char *dir = getenv("DT_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", file);
    run_fixture(path);
}

static void test_lenet5_matches_pytorch(void **state) {
    (void)state;
    run_committed("lenet5.safetensors");
}

static void test_resnet18_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("resnet18_w4.safetensors");
}

static void test_lenet_cifar_matches_pytorch(void **state) {
    (void)state;
    run_committed("lenet_cifar.safetensors");
}

/* Width 4 keeps the file small; the option-A shortcuts and global pooling are all there. */
static void test_resnet20_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("resnet20_w4.safetensors");
}

/* torchvision's ImageNet models, narrow, at their smallest inputs (alexnet 63x63, the
 * others 32x32: vgg's adaptive pool then repeats a 1x1 map to 7x7, googlenet's
 * ceil-mode pools keep partial windows), 10 classes. */
static void test_alexnet_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("alexnet_w1.safetensors");
}

static void test_vgg16_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("vgg16_w1.safetensors");
}

static void test_vgg16_bn_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("vgg16_bn_w1.safetensors");
}

static void test_resnet50_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("resnet50_w4.safetensors");
}

static void test_googlenet_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("googlenet_w4.safetensors");
}

/* Values of any rank and a dynamic batch's folded shapes: torchvision's channel_shuffle
 * twice, a channels-last permute and x.reshape(x.size(0), -1) (issue 41). */
static void test_onnx_channel_shuffle_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/channel_shuffle.onnx.safetensors");
}

/* Models exported by torch.onnx.export in training mode, imported (docs/onnx.md). */
static void test_onnx_residual_concat_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/residual_concat.onnx.safetensors");
}

static void test_onnx_lenet5_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/lenet5.onnx.safetensors");
}

static void test_onnx_resnet18_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/resnet18_w4.onnx.safetensors");
}

static void test_onnx_googlenet_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/googlenet_w4.onnx.safetensors");
}

/* Depthwise, grouped and dilated convolutions in a user's CNN. */
static void test_onnx_separable_dilated_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/separable_dilated.onnx.safetensors");
}

/* Today's elementwise ops: a position embedding and a layer scale (parameters that
 * broadcast), squeeze-and-excitation's product, a channel mean subtracted, a division
 * by a constant, the head's mean over the map (Add, Mul, Sub, Div, ReduceMean). */
static void test_onnx_se_layer_scale_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/se_layer_scale.onnx.safetensors");
}

/* ReLU6, Hardswish, SiLU, GELU (both forms), LeakyReLU, Tanh, Hardsigmoid, Sigmoid
 * (opset 17): the activation op, and torch.onnx's GELU and SiLU subgraphs as one op. */
static void test_onnx_activations_match_pytorch(void **state) {
    (void)state;
    run_committed("onnx/activations.onnx.safetensors");
}

/* Issue 41's CNN generalisations: 1x7 and 7x1 convolutions, AvgPool2d(3, 1, 1) with
 * count_include_pad both ways (one a Pad of zeros folded into it), a ten-input concat,
 * BatchNorm momentum 0.01, a rectangular max pool in ceil mode. */
static void test_onnx_inception_like_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/inception_like.onnx.safetensors");
}

/* torchvision's own structures (and, for resnet18 and vgg11, its classes) at a small
 * width: make_onnx_fixtures.py --torchvision checks the full-width ones by hand. */
static void test_onnx_tv_resnet18_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/tv_resnet18_w4.onnx.safetensors");
}

static void test_onnx_tv_alexnet_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/tv_alexnet_w2.onnx.safetensors");
}

static void test_onnx_tv_vgg11_narrow_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/tv_vgg11_w2.onnx.safetensors");
}

/* The operators a refusal names, comma-separated into out: the list of "dtrain lacks N
 * operators this graph needs: A (3 nodes, first 'x'), B (2)", or the one node's "(Op)"
 * of "node 'name' (Op): why". */
static void refused_ops(const char *msg, char *out, size_t size) {
    out[0] = '\0';
    size_t used = 0;
    const char *p = strstr(msg, "this graph needs: ");
    if (p) {
        p += strlen("this graph needs: ");
        while (*p) {
            const char *end = strstr(p, " (");
            if (!end || !strncmp(p, "and ", 4)) fail_msg("cannot read the operators of: %s", msg);
            used += (size_t)snprintf(out + used, size - used, "%s%.*s", used ? "," : "",
                                     (int)(end - p), p);
            p = strstr(end, "), ");
            if (!p) break;
            p += 3;
        }
        return;
    }
    p = strstr(msg, ": node '");
    const char *op = p ? strstr(p, "' (") : NULL;
    const char *end = op ? strstr(op, "): ") : NULL;
    if (!end) fail_msg("the refusal names no node and operator: %s", msg);
    snprintf(out, size, "%.*s", (int)(end - op - 3), op + 3);
}

/* Whether comma-separated lists a and b hold the same names (each once). */
static int same_names(const char *a, const char *b) {
    int count_a = 0, count_b = 0;
    for (const char *p = a; *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p)) {
        count_a++;
        const size_t len = strcspn(p, ",");
        int found = 0;
        for (const char *q = b; *q; q = strchr(q, ',') ? strchr(q, ',') + 1 : q + strlen(q))
            found |= strcspn(q, ",") == len && !strncmp(p, q, len);
        if (!found) return 0;
    }
    for (const char *q = b; *q; q = strchr(q, ',') ? strchr(q, ',') + 1 : q + strlen(q)) count_b++;
    return count_a == count_b;
}

/* Issue 41's torchvision families (tests/fixtures/onnx/families.txt, made by
 * make_onnx_fixtures.py): a `parity` row imports and matches PyTorch's float64 on both
 * conv paths, as every fixture above; a `refused` row is refused in one line naming
 * exactly the operators it lists, so the list stays true as operators land (the row
 * then fails until it is flipped). */
static void test_onnx_families_as_listed(void **state) {
    (void)state;
    family_row rows[64];
    const int n = family_rows(rows, 64);
    assert_true(n > 0);
    const char *dir = getenv("DT_FIXTURES");
    for (int i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/onnx/%s.onnx", dir ? dir : "tests/fixtures", rows[i].name);
        if (rows[i].parity) {
            char fixture[600];
            snprintf(fixture, sizeof fixture, "%s.safetensors", path);
            run_fixture(fixture);
            continue;
        }
        dt_model_spec spec;
        dt_model m;
        dt_error err;
        int refused = dt_zoo_spec_of(&spec, path, &err) != 0;
        if (!refused) {
            refused = dt_zoo_build(&m, &spec, &err) != 0;
            if (!refused) dt_model_free(&m);
        }
        if (!refused) fail_msg("%s imports: families.txt says refused %s", path, rows[i].ops);
        char named[512];
        refused_ops(err.msg, named, sizeof named);
        print_message("%s: refused naming %s: %s\n", rows[i].name, named, err.msg);
        assert_null(strchr(err.msg, '\n'));
        if (!same_names(named, rows[i].ops))
            fail_msg("%s is refused naming %s, where families.txt says %s", path, named,
                     rows[i].ops);
    }
}

/* The transformer's ops (issue 41) in a user's model without reshapes (an image read as
 * [heads, tokens, features]): exported at PyTorch 1.13's default opset 14, where its
 * LayerNorm is ReduceMean/Sub/Pow/Sqrt/Div (recognised as one op), and at opset 17
 * (LayerNormalization). */
static void test_onnx_attention_tokens_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/attention_tokens.onnx.safetensors");
}

static void test_onnx_attention_tokens_opset17_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/attention_tokens_op17.onnx.safetensors");
    /* the same at CIFAR's 3x32x32 (32 tokens of 32 features): test_transformer_cli.sh's */
    run_committed("onnx/attention_tokens_32.onnx.safetensors");
}

/* The imported CNNs issue 41's int8 tests quantize (docs/quantization.md). */
static void test_onnx_squeeze_grouped_1ch_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/squeeze_grouped_1ch.onnx.safetensors");
}

static void test_onnx_kept_float_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/kept_float.onnx.safetensors");
}

/* Issue 41's user CNN: LeakyReLU, padded AvgPool2d (counting the padding and not),
 * GELU, x.view(x.size(0), -1) around a dynamic batch and a Linear without bias (a
 * MatMul read by no Add: refused before, "no Add of a bias follows it"). */
static void test_onnx_user_cnn_matches_pytorch(void **state) {
    (void)state;
    run_committed("onnx/user_cnn.onnx.safetensors");
}

static void test_given_fixture_matches_pytorch(void **state) {
    (void)state;
    run_fixture(single_fixture);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        single_fixture = argv[1];
        const struct CMUnitTest one[] = {cmocka_unit_test(test_given_fixture_matches_pytorch)};
        return cmocka_run_group_tests(one, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet5_matches_pytorch),
        cmocka_unit_test(test_resnet18_narrow_matches_pytorch),
        cmocka_unit_test(test_lenet_cifar_matches_pytorch),
        cmocka_unit_test(test_resnet20_narrow_matches_pytorch),
        cmocka_unit_test(test_alexnet_narrow_matches_pytorch),
        cmocka_unit_test(test_vgg16_narrow_matches_pytorch),
        cmocka_unit_test(test_vgg16_bn_narrow_matches_pytorch),
        cmocka_unit_test(test_resnet50_narrow_matches_pytorch),
        cmocka_unit_test(test_googlenet_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_residual_concat_matches_pytorch),
        cmocka_unit_test(test_onnx_lenet5_matches_pytorch),
        cmocka_unit_test(test_onnx_resnet18_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_googlenet_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_separable_dilated_matches_pytorch),
        cmocka_unit_test(test_onnx_channel_shuffle_matches_pytorch),
        cmocka_unit_test(test_onnx_se_layer_scale_matches_pytorch),
        cmocka_unit_test(test_onnx_activations_match_pytorch),
        cmocka_unit_test(test_onnx_inception_like_matches_pytorch),
        cmocka_unit_test(test_onnx_tv_resnet18_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_tv_alexnet_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_squeeze_grouped_1ch_matches_pytorch),
        cmocka_unit_test(test_onnx_kept_float_matches_pytorch),
        cmocka_unit_test(test_onnx_user_cnn_matches_pytorch),
        cmocka_unit_test(test_onnx_tv_vgg11_narrow_matches_pytorch),
        cmocka_unit_test(test_onnx_families_as_listed),
        cmocka_unit_test(test_onnx_attention_tokens_matches_pytorch),
        cmocka_unit_test(test_onnx_attention_tokens_opset17_matches_pytorch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
