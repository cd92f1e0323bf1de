/* The zoo's architectures: parameter counts and state_dict names of the PyTorch
 * references, and bad model requests rejected with a clear error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dtrain/backend.h"
#include "dtrain/op.h"
#include "dtrain/zoo.h"

static size_t count_params(const char *name, int width) {
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
    if (width) spec.width = width;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    size_t n = m.n_params;
    dt_model_free(&m);
    return n;
}

static void test_parameter_counts_match_pytorch(void **state) {
    (void)state;
    assert_int_equal(count_params("logreg", 0), 7850);
    assert_int_equal(count_params("mlp", 0), 269322);
    assert_int_equal(count_params("lenet5", 0), 61706);
    assert_int_equal(count_params("resnet18", 0), 11173962);
    assert_int_equal(count_params("resnet18", 4), 44622); /* torch, width 4 */
    assert_int_equal(count_params("lenet_cifar", 0), 62006);
    /* He et al.'s 0.27 M ... 0.85 M with the parameter-free option-A shortcut, as
     * akamaster's resnet_cifar (scripts/torch_models.py) counts them. Projection
     * shortcuts (option B) would add 2,752: 272,474 ... 855,770. */
    assert_int_equal(count_params("resnet20", 0), 269722);
    assert_int_equal(count_params("resnet32", 0), 464154);
    assert_int_equal(count_params("resnet44", 0), 658586);
    assert_int_equal(count_params("resnet56", 0), 853018);
    /* any other depth 6n+2 by name: the same builder (torch_models.CifarResNet(n, 16)
     * counts 366,938 and 1,727,962; the paper's resnet110 has 1.7 M) */
    assert_int_equal(count_params("resnet26", 0), 366938);
    assert_int_equal(count_params("resnet110", 0), 1727962);
    /* torchvision.models at 1000 classes (googlenet without its auxiliary heads) */
    assert_int_equal(count_params("alexnet", 0), 61100840);
    assert_int_equal(count_params("vgg16", 0), 138357544);
    assert_int_equal(count_params("vgg16_bn", 0), 138365992);
    assert_int_equal(count_params("resnet50", 0), 25557032);
    assert_int_equal(count_params("googlenet", 0), 6624904);
}

/* torchvision's module names, in its state_dict order (the classifier's bias last). */
static void check_names(const char *model, const char *const *names, size_t count, const char *last,
                        const char *absent) {
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, model), 0);
    spec.width = 8; /* names do not depend on the width; the graph builds faster */
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    for (size_t i = 0; i < count; i++)
        if (dt_model_find_tensor(&m, names[i]) < 0) fail_msg("%s has no %s", model, names[i]);
    const dt_tensor_entry *t = &m.tensors[dt_model_find_tensor(&m, last)];
    assert_int_equal(t->offset + t->numel, m.n_params);
    assert_int_equal(dt_model_find_tensor(&m, absent), -1);
    dt_model_free(&m);
}

static void test_imagenet_state_dict_names(void **state) {
    (void)state;
    const char *alexnet[] = {"features.0.weight",   "features.3.bias",    "features.6.weight",
                             "features.8.weight",   "features.10.bias",   "classifier.1.weight",
                             "classifier.4.weight", "classifier.6.weight"};
    check_names("alexnet", alexnet, 8, "classifier.6.bias", "classifier.0.weight");
    const char *vgg[] = {"features.0.weight", "features.2.weight",   "features.5.weight",
                         "features.28.bias",  "classifier.0.weight", "classifier.3.weight"};
    check_names("vgg16", vgg, 6, "classifier.6.bias", "features.1.weight");
    const char *vgg_bn[] = {
        "features.0.weight",  "features.1.running_var",   "features.3.weight",  "features.7.weight",
        "features.40.weight", "features.41.running_mean", "classifier.0.weight"};
    check_names("vgg16_bn", vgg_bn, 7, "classifier.6.bias", "features.2.weight");
    const char *resnet[] = {"conv1.weight",
                            "bn1.running_mean",
                            "layer1.0.conv3.weight",
                            "layer1.0.downsample.0.weight",
                            "layer1.0.downsample.1.running_var",
                            "layer2.3.bn3.bias",
                            "layer3.5.conv2.weight",
                            "layer4.2.conv3.weight",
                            "fc.weight"};
    check_names("resnet50", resnet, 9, "fc.bias", "layer1.1.downsample.0.weight");
    const char *googlenet[] = {"conv1.conv.weight",
                               "conv1.bn.running_var",
                               "conv3.bn.bias",
                               "inception3a.branch1.conv.weight",
                               "inception3a.branch2.1.bn.weight",
                               "inception4e.branch3.1.conv.weight",
                               "inception5b.branch4.1.bn.running_mean",
                               "fc.weight"};
    check_names("googlenet", googlenet, 8, "fc.bias", "aux1.conv.conv.weight");
}

/* googlenet's "5x5" branch is a 3x3 conv in torchvision, and so here; its BasicConv2d
 * has no conv bias. */
static void test_googlenet_follows_torchvision(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "googlenet"), 0);
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    const dt_tensor_entry *t =
        &m.tensors[dt_model_find_tensor(&m, "inception3a.branch3.1.conv.weight")];
    assert_int_equal(t->shape[0] * 1000 + t->shape[1] * 10 + t->shape[2], 32 * 1000 + 160 + 3);
    assert_int_equal(dt_model_find_tensor(&m, "conv1.conv.bias"), -1);
    dt_model_free(&m);
}

static void test_resnet18_state_dict_names(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "resnet18"), 0);
    assert_int_equal(dt_zoo_build(&m, &spec, &err), 0);
    const char *names[] = {"conv1.weight",
                           "bn1.running_var",
                           "layer1.0.conv1.weight",
                           "layer2.0.shortcut.0.weight",
                           "layer2.0.shortcut.1.running_mean",
                           "layer4.1.bn2.bias",
                           "linear.weight",
                           "linear.bias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        assert_true(dt_model_find_tensor(&m, names[i]) >= 0);
    assert_int_equal(dt_model_find_tensor(&m, "layer1.0.shortcut.0.weight"), -1);
    /* The parameter buffer follows state_dict order: linear.bias is last. */
    const dt_tensor_entry *last = &m.tensors[dt_model_find_tensor(&m, "linear.bias")];
    assert_int_equal(last->offset + last->numel, m.n_params);
    dt_model_free(&m);
}

/* akamaster's resnet_cifar names; the option-A shortcut adds no tensors. */
static void test_cifar_resnet_state_dict_names(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "resnet20"), 0);
    assert_int_equal(dt_zoo_build(&m, &spec, &err), 0);
    const char *names[] = {"conv1.weight",          "bn1.running_var",
                           "layer1.0.conv1.weight", "layer2.0.bn2.running_mean",
                           "layer3.2.conv2.weight", "linear.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        assert_true(dt_model_find_tensor(&m, names[i]) >= 0);
    assert_int_equal(dt_model_find_tensor(&m, "layer2.0.shortcut.0.weight"), -1);
    assert_int_equal(dt_model_find_tensor(&m, "layer3.3.conv1.weight"), -1); /* n = 3 */
    const dt_tensor_entry *last = &m.tensors[dt_model_find_tensor(&m, "linear.bias")];
    assert_int_equal(last->offset + last->numel, m.n_params);
    dt_model_free(&m);
}

/* Input shape from the data: global pooling lets a CIFAR ResNet take Fashion-MNIST;
 * a linear layer sized for one input does not, and the error says why. */
static void test_models_take_the_data_shape_where_they_can(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_spec_for_data(&spec, "resnet20", 1, 28, 28, 10, "d", &err), 0);
    assert_int_equal(spec.in_c * 10000 + spec.in_h * 100 + spec.in_w, 12828);
    assert_int_equal(dt_zoo_build(&m, &spec, &err), 0);
    const dt_tensor_entry *conv1 = &m.tensors[dt_model_find_tensor(&m, "conv1.weight")];
    assert_int_equal(conv1->shape[1], 1); /* one input channel */
    assert_int_equal(m.n_params, 269722 - 16 * 2 * 9);
    dt_model_free(&m);
    assert_null(dt_zoo_fixed_input("resnet56"));

    assert_int_equal(dt_zoo_spec_for_data(&spec, "lenet_cifar", 1, 28, 28, 10, "d", &err), -1);
    assert_non_null(strstr(err.msg, "model lenet_cifar takes 3x32x32 inputs but d has 1x28x28"));
    assert_non_null(strstr(err.msg, "fc1 is sized"));
    assert_int_equal(dt_zoo_spec_for_data(&spec, "lenet5", 3, 32, 32, 10, "d", &err), -1);
    assert_non_null(strstr(err.msg, "model lenet5 takes 1x28x28 inputs"));
    /* The builder decides what fits: non-square maps do not pool globally. */
    assert_int_equal(dt_zoo_spec_for_data(&spec, "resnet20", 3, 32, 16, 10, "d", &err), -1);
    assert_non_null(strstr(err.msg, "cannot take the 3x32x16 images of d"));
    assert_non_null(strstr(err.msg, "square"));
    /* The default shape always passes; the classes follow the data. */
    assert_int_equal(dt_zoo_spec_for_data(&spec, "lenet5", 1, 28, 28, 1000, "d", &err), 0);
    assert_int_equal(spec.classes, 1000);
}

/* torchvision's initialisation: vgg's convs kaiming-normal (fan out) with zero biases
 * and its linears N(0, 0.01); resnet50's convs kaiming-normal, its fc PyTorch's
 * default; googlenet's convs and fc N(0, 0.01); BatchNorm ones and zeros. */
static double std_of(dt_model *m, const char *name, double *mean) {
    const int i = dt_model_find_tensor(m, name);
    assert_true(i >= 0);
    const float *x = dt_model_tensor_data(m, i);
    const size_t n = m->tensors[i].numel;
    double s = 0.0, s2 = 0.0;
    for (size_t k = 0; k < n; k++) s += x[k], s2 += (double)x[k] * x[k];
    *mean = s / n;
    return sqrt(s2 / n - *mean * *mean);
}

static void test_imagenet_models_initialise_as_torchvision(void **state) {
    (void)state;
    static const struct {
        const char *model, *tensor;
        double std; /* 0: all zero; < 0: uniform(+-1/sqrt(-std)), PyTorch's default */
    } rows[] = {
        {"vgg16", "features.28.weight", 0.05893}, /* sqrt(2 / (64 * 9)) at width 8 */
        {"vgg16", "features.28.bias", 0.0},
        {"vgg16", "classifier.3.weight", 0.01},
        {"vgg16", "classifier.6.bias", 0.0},
        {"resnet50", "layer4.2.conv3.weight", 0.08839}, /* sqrt(2 / 256) */
        {"resnet50", "fc.weight", -256.0},
        {"googlenet", "inception4a.branch2.1.conv.weight", 0.01},
        {"googlenet", "fc.weight", 0.01},
        {"alexnet", "features.3.weight", -200.0}, /* torchvision leaves alexnet default */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        dt_model_spec spec;
        dt_model m;
        dt_error err;
        assert_int_equal(dt_zoo_default_spec(&spec, rows[i].model), 0);
        spec.width = 8;
        spec.in_h = spec.in_w = 64;
        spec.classes = 10;
        if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, 1, &err)) fail_msg("%s", err.msg);
        dt_model_init_params(&m, 3);
        double mean, sd = std_of(&m, rows[i].tensor, &mean);
        double want = rows[i].std < 0 ? 1.0 / sqrt(-rows[i].std) / sqrt(3.0) : rows[i].std;
        print_message("%s %s: mean %.4f std %.4f (want %.4f)\n", rows[i].model, rows[i].tensor,
                      mean, sd, want);
        if (want == 0.0)
            assert_true(sd == 0.0 && mean == 0.0);
        else
            assert_true(fabs(sd / want - 1.0) < 0.05 && fabs(mean) < 0.1 * want);
        dt_model_free(&m);
    }
}

/* The ImageNet models take 1000 classes by default and, through adaptive pooling, any
 * input down to their minimum, which is refused below with the reason. */
static void test_imagenet_models_take_smaller_inputs_down_to_their_minimum(void **state) {
    (void)state;
    static const struct {
        const char *name;
        int min;
    } rows[] = {
        {"alexnet", 63}, {"vgg16", 32}, {"vgg16_bn", 32}, {"googlenet", 15}, {"resnet50", 1}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        dt_model_spec spec;
        dt_model m;
        dt_error err;
        assert_int_equal(dt_zoo_default_spec(&spec, rows[i].name), 0);
        assert_int_equal(spec.classes, 1000);
        assert_null(dt_zoo_fixed_input(rows[i].name));
        int min = rows[i].min;
        if (dt_zoo_spec_for_data(&spec, rows[i].name, 3, min, min + 5, 10, "d", &err))
            fail_msg("%s", err.msg);
        assert_int_equal(spec.classes, 10);
        spec.width = 8;
        if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
        dt_model_free(&m);
        if (min == 1) continue;
        assert_int_equal(
            dt_zoo_spec_for_data(&spec, rows[i].name, 3, min + 5, min - 1, 10, "d", &err), -1);
        print_message("%s\n", err.msg);
        char want[64];
        snprintf(want, sizeof want, "needs inputs of at least %dx%d", min, min);
        assert_non_null(strstr(err.msg, want));
    }
}

static void test_unknown_model_is_rejected(void **state) {
    (void)state;
    dt_model_spec spec = {.name = "vgg19", .in_c = 3, .in_h = 32, .in_w = 32, .classes = 10};
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_build(&m, &spec, &err), -1);
    assert_non_null(strstr(err.msg, "unknown model 'vgg19'"));
    /* resnetN only for N = 6n+2 from 8 to 1202, digits alone */
    const char *const not_cifar[] = {"resnet27",   "resnet2",   "resnet08",
                                     "resnet1208", "resnet26x", "resnet"};
    for (size_t i = 0; i < sizeof not_cifar / sizeof *not_cifar; i++) {
        dt_model_spec other;
        assert_int_equal(dt_zoo_spec_of(&other, not_cifar[i], &err), -1);
        assert_non_null(strstr(err.msg, "resnetN for any CIFAR depth N = 6n+2"));
    }
}

static void test_batch_too_large_for_memory_is_refused(void **state) {
    (void)state;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "resnet18"), 0);
    assert_int_equal(dt_zoo_build(&m, &spec, &err), 0);
    assert_int_equal(dt_model_alloc(&m, 1 << 20, &err), -1);
    assert_non_null(strstr(err.msg, "does not fit in memory"));
    dt_model_free(&m);
}

static void test_kernel_larger_than_input_is_rejected(void **state) {
    (void)state;
    dt_model m;
    dt_error err;
    dt_model_init_empty(&m, "tiny", 10);
    int x = dt_model_input(&m, 1, 4, 4);
    x = dt_model_conv2d(&m, "conv", x, 2, 7, 1, 0, 1);
    assert_int_equal(x, -1);
    assert_int_equal(dt_model_alloc(&m, 1, &err), -1);
    assert_non_null(strstr(err.msg, "conv2d conv"));
    dt_model_free(&m);
}

/* dt_zoo_names (help texts, errors) lists exactly the table's models, in order. */
static void test_zoo_names_list_every_model(void **state) {
    (void)state;
    char joined[512] = "";
    for (int i = 0; i < dt_zoo_count(); i++) {
        dt_model_spec spec;
        assert_int_equal(dt_zoo_default_spec(&spec, dt_zoo_name(i)), 0);
        if (i) strcat(joined, ", ");
        strcat(joined, dt_zoo_name(i));
    }
    assert_string_equal(joined, dt_zoo_names());
    assert_null(dt_zoo_name(dt_zoo_count()));
}

/* The op table has a complete row for every kind (a missing one would be NULL). */
static void test_every_op_kind_has_a_row(void **state) {
    (void)state;
    for (int k = 0; k < DT_OP_COUNT; k++) {
        const dt_op_class *row = dt_op_class_of((dt_op_kind)k);
        assert_non_null(row);
        assert_non_null(row->name);
        for (int j = 0; j < k; j++)
            assert_string_not_equal(row->name, dt_op_kind_name((dt_op_kind)j));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameter_counts_match_pytorch),
        cmocka_unit_test(test_resnet18_state_dict_names),
        cmocka_unit_test(test_cifar_resnet_state_dict_names),
        cmocka_unit_test(test_imagenet_state_dict_names),
        cmocka_unit_test(test_googlenet_follows_torchvision),
        cmocka_unit_test(test_imagenet_models_initialise_as_torchvision),
        cmocka_unit_test(test_models_take_the_data_shape_where_they_can),
        cmocka_unit_test(test_imagenet_models_take_smaller_inputs_down_to_their_minimum),
        cmocka_unit_test(test_unknown_model_is_rejected),
        cmocka_unit_test(test_batch_too_large_for_memory_is_refused),
        cmocka_unit_test(test_kernel_larger_than_input_is_rejected),
        cmocka_unit_test(test_zoo_names_list_every_model),
        cmocka_unit_test(test_every_op_kind_has_a_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
