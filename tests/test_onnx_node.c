/* ONNX's own conformance cases (Debian's libonnx-testdata, data/node/test_*): every
 * case of an operator the importer takes either runs forward to ONNX's expected
 * output (1e-5 relative) or is refused with a message, never a wrong result; and
 * the cases of the variants docs/onnx.md lists must run. A view's one-node graph
 * (Reshape, Flatten, Squeeze, Unsqueeze, Identity; Transpose, a view when its perm
 * keeps the order) gets a Dropout after it, the identity in eval mode, so that it
 * computes something to compare.
 *
 * A case is one node whose weights are graph inputs with data files; dtrain trains
 * weights it holds, so they become initializers here; the data input keeps its own
 * rank (a vector [K] is given as [K, 1], and a broadcasting op's 1-D operand [K] then
 * as [K, 1] too, so that it still meets the data element by element).
 *   test_onnx_node [DATA_DIR]   (default /usr/share/libonnx-testdata/data/node;
 *                                 77 if it is absent) */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/backend.h"
#include "dtrain/zoo.h"
#include "nn/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "testutil.h"

static const char *data_dir = "/usr/share/libonnx-testdata/data/node";
static char scratch[256];

/* The operators imported (docs/onnx.md), by the cases' name prefixes. */
static const char *const families[] = {"test_conv_",        "test_basic_conv_",
                                       "test_relu",         "test_maxpool_",
                                       "test_averagepool_", "test_globalaveragepool",
                                       "test_gemm_",        "test_matmul_",
                                       "test_add",          "test_concat_",
                                       "test_flatten_",     "test_reshape_",
                                       "test_dropout_",     "test_batchnorm_",
                                       "test_constant_pad", "test_squeeze",
                                       "test_unsqueeze",    "test_transpose_",
                                       "test_shape",        "test_constantofshape_",
                                       "test_range_",       "test_identity",
                                       "test_sub",          "test_mul",
                                       "test_div",          "test_reduce_mean",
                                       "test_clip",         "test_sigmoid",
                                       "test_hardsigmoid",  "test_hardswish",
                                       "test_tanh",         "test_leakyrelu",
                                       "test_erf",          "test_softmax_",
                                       "test_logsoftmax_",  "test_layer_normalization_",
                                       "test_gather_",      "test_split_",
                                       "test_slice",        "test_expand_"};

/* The cases that must run (the variants dtrain imports; from test_softmax_axis_1 on,
 * issue 41's transformer ops and nn.Linear(bias=False)'s MatMul and Gemm). */
static const char *const must_run[] = {"test_conv_with_strides_padding",
                                       "test_basic_conv_with_padding",
                                       "test_basic_conv_without_padding",
                                       "test_conv_with_strides_no_padding",
                                       "test_relu",
                                       "test_maxpool_2d_default",
                                       "test_maxpool_2d_strides",
                                       "test_maxpool_2d_ceil",
                                       "test_maxpool_2d_precomputed_pads",
                                       "test_maxpool_2d_pads",
                                       "test_conv_with_strides_and_asymmetric_padding",
                                       "test_averagepool_2d_pads",
                                       "test_averagepool_2d_pads_count_include_pad",
                                       "test_averagepool_2d_precomputed_pads",
                                       "test_averagepool_2d_precomputed_pads_count_include_pad",
                                       "test_averagepool_2d_ceil",
                                       "test_constant_pad",
                                       "test_averagepool_2d_default",
                                       "test_averagepool_2d_strides",
                                       "test_globalaveragepool",
                                       "test_globalaveragepool_precomputed",
                                       "test_gemm_transposeB",
                                       "test_dropout_default",
                                       "test_batchnorm_example",
                                       "test_batchnorm_epsilon",
                                       "test_batchnorm_example_training_mode",
                                       "test_batchnorm_epsilon_training_mode",
                                       "test_flatten_axis1",
                                       "test_flatten_default_axis",
                                       "test_squeeze_negative_axes",
                                       "test_unsqueeze_axis_1",
                                       "test_unsqueeze_two_axes",
                                       "test_unsqueeze_unsorted_axes",
                                       "test_transpose_all_permutations_1",
                                       "test_add_bcast",
                                       "test_sub_bcast",
                                       "test_mul_bcast",
                                       "test_div_bcast",
                                       "test_reduce_mean_keepdims_example",
                                       "test_reduce_mean_do_not_keepdims_example",
                                       "test_reduce_mean_negative_axes_keepdims_example",
                                       "test_clip",
                                       "test_clip_default_inbounds",
                                       "test_clip_default_min",
                                       "test_clip_default_max",
                                       "test_clip_splitbounds",
                                       "test_sigmoid",
                                       "test_hardsigmoid",
                                       "test_hardsigmoid_default",
                                       "test_hardswish",
                                       "test_hardswish_expanded",
                                       "test_tanh",
                                       "test_leakyrelu",
                                       "test_leakyrelu_default",
                                       "test_softmax_axis_1",
                                       "test_softmax_default_axis",
                                       "test_logsoftmax_axis_1",
                                       "test_logsoftmax_default_axis",
                                       "test_layer_normalization_2d_axis1",
                                       "test_layer_normalization_4d_axis_negative_1",
                                       "test_layer_normalization_default_axis",
                                       "test_slice_neg",
                                       "test_identity",
                                       "test_flatten_negative_axis3",
                                       "test_unsqueeze_three_axes",
                                       "test_matmul_2d",
                                       "test_gemm_default_no_bias"};

static Onnx__TensorProto *read_tensor(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static uint8_t buf[1 << 22];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return onnx__tensor_proto__unpack(NULL, len, buf);
}

static const float *floats_of(const Onnx__TensorProto *t, size_t *count) {
    size_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) n *= (size_t)t->dims[i];
    *count = n;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) return NULL;
    if (t->has_raw_data && t->raw_data.len == n * sizeof(float))
        return (const float *)t->raw_data.data;
    return t->n_float_data == n ? t->float_data : NULL;
}

static int in_list(const char *name, const char *const *list, size_t count, int prefix);

typedef enum outcome { RAN, REFUSED, SKIPPED } outcome;

/* One case: 0 when it ran right or was refused; the outcome in *out. */
static int run_case(const char *name, outcome *out, char *why, size_t why_size) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s/model.onnx", data_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        *out = SKIPPED;
        snprintf(why, why_size, "no model.onnx");
        return 0;
    }
    static uint8_t buf[1 << 22];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, buf);
    assert_non_null(model);
    Onnx__GraphProto *g = model->graph;
    /* inputs 1.. become initializers (their data files), input 0 is the data */
    Onnx__TensorProto *ins[8] = {0};
    char *own_names[8] = {0}; /* the data files' own tensor names, put back before freeing */
    int renamed[8] = {0};
    const size_t n_in = g->n_input < 8 ? g->n_input : 8;
    for (size_t i = 0; i < n_in; i++) {
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%zu.pb", data_dir, name, i);
        ins[i] = read_tensor(path);
    }
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", data_dir, name);
    Onnx__TensorProto *want = read_tensor(path);
    int rc = 0;
    Onnx__TensorProto **inits = NULL, **old_inits = g->initializer;
    const size_t old_n_inits = g->n_initializer;
    size_t x_count = 0;
    const float *x = ins[0] ? floats_of(ins[0], &x_count) : NULL;
    *out = SKIPPED;
    if (!x || !want || n_in < 1 || ins[0]->n_dims > 7) {
        snprintf(why, why_size, "not a float case of at most 7 dimensions");
        goto done;
    }
    inits = calloc(old_n_inits + n_in, sizeof *inits);
    assert_non_null(inits);
    for (size_t i = 0; i < old_n_inits; i++) inits[i] = old_inits[i];
    size_t n_inits = old_n_inits;
    for (size_t i = 1; i < n_in; i++)
        if (ins[i]) {
            own_names[i] = ins[i]->name;
            renamed[i] = 1;
            ins[i]->name = g->input[i]->name;
            inits[n_inits++] = ins[i];
        }
    g->initializer = inits;
    g->n_initializer = n_inits;
    /* the data input: its own shape (values of any rank), a vector [K] as [K, 1]; its
     * other inputs' entries stay (they name the initializers, which the importer then
     * reads as weights) */
    Onnx__TensorShapeProto *shape = g->input[0]->type->tensor_type->shape;
    Onnx__TensorShapeProto__Dimension dims[7], *dim_ptrs[7];
    Onnx__TensorShapeProto__Dimension **old_dims = shape->dim;
    const size_t old_n_dim = shape->n_dim;
    const int x_rank = ins[0]->n_dims < 2 ? 2 : (int)ins[0]->n_dims;
    for (int i = 0; i < x_rank; i++) {
        onnx__tensor_shape_proto__dimension__init(&dims[i]);
        dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[i].dim_value = i < (int)ins[0]->n_dims ? ins[0]->dims[i] : 1;
        dim_ptrs[i] = &dims[i];
    }
    shape->dim = dim_ptrs;
    shape->n_dim = (size_t)x_rank;
    /* a vector [K] given as [K, 1]: a broadcasting op's 1-D operand [K] then becomes
     * [K, 1] as well, so that it still meets the data element by element */
    const char *node_op = g->n_node == 1 && g->node[0]->op_type ? g->node[0]->op_type : "";
    const int broadcasts = !strcmp(node_op, "Add") || !strcmp(node_op, "Sub") ||
                           !strcmp(node_op, "Mul") || !strcmp(node_op, "Div");
    int64_t column_dims[8][2], *own_dims[8] = {0};
    for (size_t i = 1; broadcasts && ins[0]->n_dims == 1 && i < n_in && i < 8; i++)
        if (ins[i] && ins[i]->n_dims == 1) {
            column_dims[i][0] = ins[i]->dims[0];
            column_dims[i][1] = 1;
            own_dims[i] = ins[i]->dims;
            ins[i]->dims = column_dims[i];
            ins[i]->n_dims = 2;
        }
    /* a view (Reshape, Flatten, Squeeze, Unsqueeze, Identity) alone computes nothing:
     * a Dropout after it (the identity in eval mode, a copy) lets its values be checked */
    Onnx__NodeProto copy = ONNX__NODE_PROTO__INIT, **old_nodes = g->node;
    Onnx__NodeProto *nodes[2] = {g->n_node ? g->node[0] : NULL, &copy};
    const size_t old_n_node = g->n_node;
    char *copy_in[1] = {NULL}, *copy_out[1] = {"dtrain_copy"}, *old_out = g->output[0]->name;
    const char *op = g->n_node == 1 ? g->node[0]->op_type : "";
    if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") ||
        !strcmp(op, "Unsqueeze") || !strcmp(op, "Identity") || !strcmp(op, "Transpose")) {
        copy_in[0] = old_out;
        copy.op_type = "Dropout";
        copy.name = "copy";
        copy.n_input = 1, copy.input = copy_in;
        copy.n_output = 1, copy.output = copy_out;
        g->node = nodes;
        g->n_node = 2;
        g->output[0]->name = copy_out[0];
    }
    snprintf(path, sizeof path, "%s/%s.onnx", scratch, name);
    const size_t packed_len = onnx__model_proto__get_packed_size(model);
    uint8_t *packed = test_alloc(packed_len + 1);
    onnx__model_proto__pack(model, packed);
    g->node = old_nodes;
    g->n_node = old_n_node;
    g->output[0]->name = old_out;
    shape->dim = old_dims;
    shape->n_dim = old_n_dim;
    g->initializer = old_inits;
    g->n_initializer = old_n_inits;
    for (size_t i = 1; i < n_in && i < 8; i++)
        if (own_dims[i]) ins[i]->dims = own_dims[i], ins[i]->n_dims = 1;
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(packed, 1, packed_len, f), packed_len);
    assert_int_equal(fclose(f), 0);
    free(packed);

    dt_model_spec spec = {.name = path};
    dt_model m;
    dt_error err;
    if (dt_onnx_build_any(&m, &spec, &err)) {
        *out = REFUSED;
        snprintf(why, why_size, "%s", err.msg);
        unlink(path);
        goto done;
    }
    unlink(path);
    const int n = (int)ins[0]->dims[0];
    m.plain_layouts = 1;
    m.training = strstr(name, "training_mode") != NULL; /* BatchNorm's batch statistics */
    if (dt_model_alloc(&m, n, &err)) fail_msg("%s: %s", name, err.msg);
    dt_model_init_params(&m, 0);
    memcpy(dt_model_input_data(&m), x, x_count * sizeof(float));
    dt_model_forward(&m, n);
    size_t want_count = 0;
    const float *expect = floats_of(want, &want_count);
    const size_t got_count = dt_model_value_floats(&m, m.n_values - 1, n);
    const float *got = dt_model_value_data(&m, m.n_values - 1);
    *out = RAN;
    if (!expect || want_count != got_count) {
        snprintf(why, why_size, "%zu values out, ONNX expects %zu", got_count, want_count);
        rc = -1;
    } else {
        double worst = 0;
        for (size_t i = 0; i < want_count; i++) {
            const double e = fabs((double)got[i] - expect[i]) / fmax(1.0, fabs(expect[i]));
            if (e > worst) worst = e;
        }
        snprintf(why, why_size, "worst relative error %.2e", worst);
        rc = worst <= 1e-5 ? 0 : -1;
    }
    dt_model_free(&m);
done:
    free(inits);
    for (size_t i = 1; i < n_in; i++)
        if (renamed[i]) ins[i]->name = own_names[i]; /* not the graph's */
    for (size_t i = 0; i < n_in; i++)
        if (ins[i]) onnx__tensor_proto__free_unpacked(ins[i], NULL);
    if (want) onnx__tensor_proto__free_unpacked(want, NULL);
    onnx__model_proto__free_unpacked(model, NULL);
    return rc;
}

static int in_list(const char *name, const char *const *list, size_t count, int prefix) {
    for (size_t i = 0; i < count; i++)
        if (prefix ? !strncmp(name, list[i], strlen(list[i])) : !strcmp(name, list[i])) return 1;
    return 0;
}

static char *test_strdup(const char *text) {
    char *copy = test_alloc(strlen(text) + 1);
    memcpy(copy, text, strlen(text) + 1);
    return copy;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_every_case_runs_right_or_is_refused(void **state) {
    (void)state;
    /* the case folders, sorted */
    const char *names[2048];
    int count = 0;
    DIR *dir = opendir(data_dir);
    assert_non_null(dir);
    for (struct dirent *e; (e = readdir(dir)) && count < 2048;)
        if (e->d_name[0] != '.') names[count++] = test_strdup(e->d_name);
    closedir(dir);
    qsort(names, (size_t)count, sizeof *names, cmp_names);
    int ran = 0, refused = 0, wrong = 0, must = 0;
    for (int i = 0; i < count; i++) {
        if (!in_list(names[i], families, sizeof families / sizeof *families, 1)) continue;
        outcome out;
        char why[600];
        const int rc = run_case(names[i], &out, why, sizeof why);
        const int required = in_list(names[i], must_run, sizeof must_run / sizeof *must_run, 0);
        print_message("%-48s %s: %s\n", names[i],
                      out == RAN       ? (rc ? "WRONG" : "ran")
                      : out == REFUSED ? "refused"
                                       : "skipped",
                      why);
        if (out == RAN && rc) wrong++;
        if (out == RAN && !rc) ran++;
        if (out == REFUSED) refused++;
        if (required && !(out == RAN && !rc)) {
            print_message("  ^ a variant dtrain imports: it must run\n");
            wrong++;
        }
        must += required && out == RAN && !rc;
    }
    print_message("%d cases ran right, %d refused, %d wrong; %d of the %zu required ran\n", ran,
                  refused, wrong, must, sizeof must_run / sizeof *must_run);
    for (int i = 0; i < count; i++) free((void *)names[i]);
    assert_int_equal(wrong, 0);
    assert_int_equal(must, (int)(sizeof must_run / sizeof *must_run));
}

int main(int argc, char **argv) {
    if (argc > 1) data_dir = argv[1];
    if (access(data_dir, R_OK)) {
        printf("skipped: %s is absent (Debian's libonnx-testdata)\n", data_dir);
        return 77;
    }
    snprintf(scratch, sizeof scratch, "/tmp/dtrain_test_onnx_node_XXXXXX");
    if (!mkdtemp(scratch)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_case_runs_right_or_is_refused),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(scratch);
    return failed;
}
