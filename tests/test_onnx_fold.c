/* The import-time evaluator of shape arithmetic (nn/onnx_fold.h): a dynamic-batch
 * export's chains by hand, with the batch N symbolic (k*N + c), what is not linear in
 * N refused; and ONNX's own node conformance cases (Debian's libonnx-testdata) of
 * every operator it folds, each either right or refused, never wrong.
 *   test_onnx_fold [DATA_DIR]   (default /usr/share/libonnx-testdata/data/node; the
 *                                 conformance part is skipped if it is absent) */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn/onnx_fold.h"
#include "onnx/onnx.pb-c.h"
#include "testutil.h"

static const char *data_dir = "/usr/share/libonnx-testdata/data/node";

/* ------------------------------------------------------------------ by hand */

/* A node of op with up to two attributes (an int or a list of ints). */
typedef struct node_maker {
    Onnx__NodeProto node;
    Onnx__AttributeProto attrs[2], *attr_ptrs[2];
    int64_t ints[2][8];
} node_maker;

static Onnx__NodeProto *make_node(node_maker *nm, const char *op) {
    memset(nm, 0, sizeof *nm);
    onnx__node_proto__init(&nm->node);
    nm->node.op_type = (char *)op;
    nm->node.attribute = nm->attr_ptrs;
    return &nm->node;
}

static void add_int(node_maker *nm, const char *name, int64_t v) {
    Onnx__AttributeProto *a = &nm->attrs[nm->node.n_attribute];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_i = 1;
    a->i = v;
    nm->attr_ptrs[nm->node.n_attribute++] = a;
}

static void add_ints(node_maker *nm, const char *name, const int64_t *v, size_t count) {
    const size_t k = nm->node.n_attribute;
    Onnx__AttributeProto *a = &nm->attrs[k];
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    memcpy(nm->ints[k], v, count * sizeof *v);
    a->ints = nm->ints[k];
    a->n_ints = count;
    nm->attr_ptrs[nm->node.n_attribute++] = a;
}

/* A 1-D int64 tensor of forms k*N + c. */
static dt_fold_tensor ints(size_t count, const int64_t *k, const int64_t *c) {
    dt_fold_tensor t = {.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64, .rank = 1};
    t.dims[0] = (int64_t)count;
    t.count = count;
    t.k = test_alloc((count + 1) * sizeof *t.k);
    t.c = test_alloc((count + 1) * sizeof *t.c);
    for (size_t i = 0; i < count; i++) t.k[i] = k ? k[i] : 0, t.c[i] = c[i];
    return t;
}

static dt_fold_tensor scalar(int64_t c) {
    dt_fold_tensor t = ints(1, NULL, &c);
    t.rank = 0;
    return t;
}

static void assert_forms(const dt_fold_tensor *t, size_t count, const int64_t *k,
                         const int64_t *c) {
    assert_int_equal(t->count, count);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(t->k[i], k[i]);
        assert_int_equal(t->c[i], c[i]);
    }
}

static int fold1(const char *op, node_maker *nm, const dt_fold_tensor *a, const dt_fold_tensor *b,
                 dt_fold_tensor *out, char *why) {
    const dt_fold_tensor *ins[2] = {a, b};
    (void)op;
    return dt_fold_node(&nm->node, 17, ins, b ? 2 : 1, out, why, 300);
}

/* ShuffleNetV2's channel shuffle as torch.onnx.export writes it with a dynamic batch:
 * Shape(x) -> Gather(0) -> Unsqueeze(0) -> Concat with [2, 32, 8, 8] -> Reshape's
 * shape [N, 2, 32, 8, 8]; and Slice(shape, 2, INT64_MAX) = [8, 8]. */
static void test_shuffle_reshape_shape_keeps_the_batch_symbolic(void **state) {
    (void)state;
    char why[300];
    node_maker nm;
    const int64_t xk[4] = {1, 0, 0, 0}, xc[4] = {0, 64, 8, 8};
    dt_fold_tensor shape, n, n1, rest, cat, tail;
    assert_int_equal(dt_fold_shape(make_node(&nm, "Shape"), 4, xk, xc, &shape, why, sizeof why), 0);
    assert_forms(&shape, 4, xk, xc);
    dt_fold_tensor zero = scalar(0);
    make_node(&nm, "Gather");
    add_int(&nm, "axis", 0);
    assert_int_equal(fold1("Gather", &nm, &shape, &zero, &n, why), 0);
    assert_int_equal(n.rank, 0);
    assert_forms(&n, 1, (int64_t[]){1}, (int64_t[]){0});
    dt_fold_tensor axes = ints(1, NULL, (int64_t[]){0});
    make_node(&nm, "Unsqueeze");
    assert_int_equal(fold1("Unsqueeze", &nm, &n, &axes, &n1, why), 0);
    assert_int_equal(n1.rank, 1);
    rest = ints(4, NULL, (int64_t[]){2, 32, 8, 8});
    make_node(&nm, "Concat");
    add_int(&nm, "axis", 0);
    assert_int_equal(fold1("Concat", &nm, &n1, &rest, &cat, why), 0);
    assert_forms(&cat, 5, (int64_t[]){1, 0, 0, 0, 0}, (int64_t[]){0, 2, 32, 8, 8});
    assert_false(dt_fold_batch_free(&cat));
    /* a TensorProto only for what is free of N */
    Onnx__TensorProto p;
    assert_int_equal(dt_fold_to_proto(&cat, &p, why, sizeof why), -1);
    assert_non_null(strstr(why, "batch size N"));
    dt_fold_tensor starts = ints(1, NULL, (int64_t[]){2}),
                   ends = ints(1, NULL, (int64_t[]){INT64_MAX});
    const dt_fold_tensor *slice_in[3] = {&shape, &starts, &ends};
    make_node(&nm, "Slice");
    assert_int_equal(dt_fold_node(&nm.node, 13, slice_in, 3, &tail, why, sizeof why), 0);
    assert_forms(&tail, 2, (int64_t[]){0, 0}, (int64_t[]){8, 8});
    assert_int_equal(dt_fold_to_proto(&tail, &p, why, sizeof why), 0);
    assert_int_equal(p.raw_data.len, 16);
    dt_fold_proto_free(&p);
    dt_fold_tensor *all[] = {&shape, &n, &n1, &rest, &cat, &tail, &zero, &axes, &starts, &ends};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_fold_free(all[i]);
}

/* nn.MultiheadAttention's bsz * num_heads: linear, exact, and back by Div; what is not
 * linear in N, or exact only for some N, refused with the reason. */
static void test_batch_arithmetic_is_linear_or_refused(void **state) {
    (void)state;
    char why[300];
    node_maker nm;
    dt_fold_tensor n = scalar(0), four = scalar(4), three = scalar(3), nh, back, bad;
    n.k[0] = 1;
    make_node(&nm, "Mul");
    assert_int_equal(fold1("Mul", &nm, &n, &four, &nh, why), 0);
    assert_forms(&nh, 1, (int64_t[]){4}, (int64_t[]){0});
    make_node(&nm, "Div");
    assert_int_equal(fold1("Div", &nm, &nh, &four, &back, why), 0);
    assert_forms(&back, 1, (int64_t[]){1}, (int64_t[]){0});
    dt_fold_free(&back);
    make_node(&nm, "Add");
    assert_int_equal(fold1("Add", &nm, &nh, &three, &back, why), 0);
    assert_forms(&back, 1, (int64_t[]){4}, (int64_t[]){3});
    make_node(&nm, "Div");
    assert_int_equal(fold1("Div", &nm, &back, &four, &bad, why), -1);
    assert_non_null(strstr(why, "exact only for some N"));
    make_node(&nm, "Mul");
    assert_int_equal(fold1("Mul", &nm, &n, &nh, &bad, why), -1);
    assert_non_null(strstr(why, "N by N"));
    make_node(&nm, "Div");
    assert_int_equal(fold1("Div", &nm, &four, &n, &bad, why), -1);
    make_node(&nm, "Equal");
    assert_int_equal(fold1("Equal", &nm, &n, &three, &bad, why), -1);
    assert_non_null(strstr(why, "only for a batch of 3"));
    dt_fold_free(&back);
    /* never equal for a batch of 1 or more: N against -1 (torch's expand), 4N against 2 */
    dt_fold_tensor minus = scalar(-1), two = scalar(2);
    assert_int_equal(fold1("Equal", &nm, &n, &minus, &back, why), 0);
    assert_int_equal(back.c[0], 0);
    dt_fold_free(&back);
    assert_int_equal(fold1("Equal", &nm, &nh, &two, &back, why), 0);
    assert_int_equal(back.c[0], 0);
    dt_fold_free(&back);
    dt_fold_free(&minus);
    dt_fold_free(&two);
    assert_int_equal(fold1("Equal", &nm, &nh, &nh, &back, why), 0);
    assert_int_equal(back.elem_type, ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
    assert_int_equal(back.c[0], 1);
    dt_fold_free(&back);
    make_node(&nm, "Cast");
    add_int(&nm, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    assert_int_equal(fold1("Cast", &nm, &n, NULL, &bad, why), -1);
    /* a tensor whose size would depend on N */
    dt_fold_tensor shape = ints(2, (int64_t[]){1, 0}, (int64_t[]){0, 5});
    make_node(&nm, "ConstantOfShape");
    assert_int_equal(fold1("ConstantOfShape", &nm, &shape, NULL, &bad, why), -1);
    assert_non_null(strstr(why, "batch size N"));
    dt_fold_tensor *all[] = {&n, &four, &three, &nh, &shape};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_fold_free(all[i]);
}

/* torch's `expand` writes Where(Equal(shape, -1), ones, shape): folded to constants. */
static void test_where_equal_range_constant_of_shape(void **state) {
    (void)state;
    char why[300];
    node_maker nm;
    dt_fold_tensor shape = ints(3, NULL, (int64_t[]){-1, 4, -1}), minus = scalar(-1), eq, ones,
                   where, range;
    make_node(&nm, "Equal");
    assert_int_equal(fold1("Equal", &nm, &shape, &minus, &eq, why), 0);
    assert_forms(&eq, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 0, 1});
    dt_fold_tensor three = ints(1, NULL, (int64_t[]){3});
    make_node(&nm, "ConstantOfShape"); /* no value: float zeros; here int64 ones */
    Onnx__TensorProto one = ONNX__TENSOR_PROTO__INIT;
    int64_t one_value = 1;
    one.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    one.n_int64_data = 1;
    one.int64_data = &one_value;
    Onnx__AttributeProto value = ONNX__ATTRIBUTE_PROTO__INIT;
    value.name = "value";
    value.t = &one;
    nm.attr_ptrs[0] = &value;
    nm.node.n_attribute = 1;
    assert_int_equal(fold1("ConstantOfShape", &nm, &three, NULL, &ones, why), 0);
    assert_forms(&ones, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 1, 1});
    const dt_fold_tensor *w[3] = {&eq, &ones, &shape};
    make_node(&nm, "Where");
    assert_int_equal(dt_fold_node(&nm.node, 17, w, 3, &where, why, sizeof why), 0);
    assert_forms(&where, 3, (int64_t[]){0, 0, 0}, (int64_t[]){1, 4, 1});
    dt_fold_tensor start = scalar(10), limit = scalar(1), delta = scalar(-3);
    const dt_fold_tensor *r[3] = {&start, &limit, &delta};
    make_node(&nm, "Range");
    assert_int_equal(dt_fold_node(&nm.node, 17, r, 3, &range, why, sizeof why), 0);
    assert_forms(&range, 3, (int64_t[]){0, 0, 0}, (int64_t[]){10, 7, 4});
    /* Unsqueeze's axes as an attribute before opset 13 */
    dt_fold_tensor u;
    make_node(&nm, "Unsqueeze");
    add_ints(&nm, "axes", (int64_t[]){0, 2}, 2);
    const dt_fold_tensor *ui[1] = {&range};
    assert_int_equal(dt_fold_node(&nm.node, 11, ui, 1, &u, why, sizeof why), 0);
    assert_int_equal(u.rank, 3);
    assert_true(u.dims[0] == 1 && u.dims[1] == 3 && u.dims[2] == 1);
    dt_fold_tensor *all[] = {&shape, &minus, &eq,    &ones,  &where, &range,
                             &three, &start, &limit, &delta, &u};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dt_fold_free(all[i]);
}

/* ------------------------------------------------------------------ conformance */

static Onnx__TensorProto *read_tensor(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static uint8_t buf[1 << 22];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return onnx__tensor_proto__unpack(NULL, len, buf);
}

/* The families of the operators folded (a case's node must be one of them). */
static const char *const families[] = {"test_shape",     "test_constantofshape_",
                                       "test_range_",    "test_gather_",
                                       "test_unsqueeze", "test_squeeze",
                                       "test_concat_",   "test_slice",
                                       "test_equal",     "test_where_",
                                       "test_cast_",     "test_add",
                                       "test_sub",       "test_mul",
                                       "test_div",       "test_expand_",
                                       "test_reshape_",  "test_identity"};

/* The cases that must come out right (dynamic-batch exports' shape arithmetic). */
static const char *const must_run[] = {"test_shape",
                                       "test_shape_start_1",
                                       "test_shape_end_negative_1",
                                       "test_constantofshape_int_zeros",
                                       "test_constantofshape_float_ones",
                                       "test_range_int32_type_negative_delta",
                                       "test_range_float_type_positive_delta",
                                       "test_gather_0",
                                       "test_unsqueeze_axis_0",
                                       "test_squeeze",
                                       "test_concat_1d_axis_0",
                                       "test_slice",
                                       "test_slice_end_out_of_bounds",
                                       "test_equal",
                                       "test_where_example",
                                       "test_add",
                                       "test_mul",
                                       "test_div",
                                       "test_expand_dim_changed",
                                       "test_reshape_zero_and_negative_dim"};

typedef enum outcome { RIGHT, REFUSED, WRONG, SKIPPED } outcome;

static int same(const dt_fold_tensor *a, const dt_fold_tensor *b) {
    if (a->elem_type != b->elem_type || a->rank != b->rank || a->count != b->count) return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    for (size_t i = 0; i < a->count; i++) {
        if (a->f ? fabs(a->f[i] - b->f[i]) > 1e-6 * fmax(1.0, fabs(b->f[i]))
                 : a->c[i] != b->c[i] || a->k[i] != 0)
            return 0;
    }
    return 1;
}

static outcome run_case(const char *name, char *why, size_t size) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s/model.onnx", data_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, size, "no model.onnx"), SKIPPED;
    static uint8_t buf[1 << 22];
    const size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, buf);
    assert_non_null(model);
    const Onnx__GraphProto *g = model->graph;
    outcome out = SKIPPED;
    long long opset = 1;
    for (size_t i = 0; i < model->n_opset_import; i++)
        if (!model->opset_import[i]->domain || !*model->opset_import[i]->domain)
            opset = model->opset_import[i]->version;
    dt_fold_tensor ins[8], got, want;
    const dt_fold_tensor *in_ptrs[8] = {0};
    size_t n_read = 0;
    memset(ins, 0, sizeof ins);
    memset(&got, 0, sizeof got);
    memset(&want, 0, sizeof want);
    const Onnx__NodeProto *n = g->n_node == 1 ? g->node[0] : NULL;
    if (!n || !dt_fold_takes(n->op_type) || n->n_input > 8 || n->n_output != 1) {
        snprintf(why, size, "not one node the evaluator folds");
        goto done;
    }
    /* the node's inputs are the graph's, in order, each with a data file */
    for (size_t i = 0; i < n->n_input; i++) {
        if (!n->input[i] || !*n->input[i]) continue;
        size_t gi = 0;
        while (gi < g->n_input && strcmp(g->input[gi]->name, n->input[i])) gi++;
        snprintf(path, sizeof path, "%s/%s/test_data_set_0/input_%zu.pb", data_dir, name, gi);
        Onnx__TensorProto *t = gi < g->n_input ? read_tensor(path) : NULL;
        if (!t) {
            snprintf(why, size, "input %zu is not a tensor file", i);
            goto done;
        }
        const Onnx__TypeProto *declared = g->input[gi]->type;
        if (declared && declared->tensor_type && declared->tensor_type->has_elem_type &&
            declared->tensor_type->elem_type != t->data_type) {
            /* test_cast_BFLOAT16_to_FLOAT keeps its bf16 input as UINT16 */
            snprintf(why, size, "its data file's element type %d is not the graph's %d",
                     t->data_type, declared->tensor_type->elem_type);
            onnx__tensor_proto__free_unpacked(t, NULL);
            goto done;
        }
        const int rc = dt_fold_from_proto(t, &ins[i], why, size);
        onnx__tensor_proto__free_unpacked(t, NULL);
        n_read = i + 1;
        if (rc) {
            out = REFUSED;
            goto done;
        }
        in_ptrs[i] = &ins[i];
    }
    snprintf(path, sizeof path, "%s/%s/test_data_set_0/output_0.pb", data_dir, name);
    Onnx__TensorProto *t = read_tensor(path);
    if (!t || dt_fold_from_proto(t, &want, why, size)) {
        if (t) onnx__tensor_proto__free_unpacked(t, NULL);
        snprintf(why, size, "its expected output is not a tensor the evaluator reads");
        goto done;
    }
    onnx__tensor_proto__free_unpacked(t, NULL);
    if (dt_fold_node(n, opset, in_ptrs, n->n_input, &got, why, size)) {
        out = REFUSED;
        goto done;
    }
    out = same(&got, &want) ? RIGHT : WRONG;
    snprintf(why, size, out == RIGHT ? "%zu values equal" : "%zu values differ", want.count);
done:
    for (size_t i = 0; i < n_read; i++) dt_fold_free(&ins[i]);
    dt_fold_free(&got);
    dt_fold_free(&want);
    onnx__model_proto__free_unpacked(model, NULL);
    return out;
}

static int in_list(const char *name, const char *const *list, size_t count, int prefix) {
    for (size_t i = 0; i < count; i++)
        if (prefix ? !strncmp(name, list[i], strlen(list[i])) : !strcmp(name, list[i])) return 1;
    return 0;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_conformance_cases_right_or_refused(void **state) {
    (void)state;
    if (access(data_dir, R_OK)) {
        print_message("skipped: %s is absent (Debian's libonnx-testdata)\n", data_dir);
        skip();
    }
    static char names[2048][128];
    const char *sorted[2048];
    int count = 0;
    DIR *dir = opendir(data_dir);
    assert_non_null(dir);
    for (struct dirent *e; (e = readdir(dir)) && count < 2048;)
        if (e->d_name[0] != '.' && strlen(e->d_name) < 128 &&
            in_list(e->d_name, families, sizeof families / sizeof *families, 1)) {
            memcpy(names[count], e->d_name, strlen(e->d_name) + 1); /* < 128, checked */
            sorted[count] = names[count];
            count++;
        }
    closedir(dir);
    qsort(sorted, (size_t)count, sizeof *sorted, cmp_names);
    int right = 0, refused = 0, wrong = 0, must = 0;
    for (int i = 0; i < count; i++) {
        char why[300];
        const outcome o = run_case(sorted[i], why, sizeof why);
        const int required = in_list(sorted[i], must_run, sizeof must_run / sizeof *must_run, 0);
        print_message("%-48s %s: %s\n", sorted[i],
                      o == RIGHT     ? "right"
                      : o == REFUSED ? "refused"
                      : o == WRONG   ? "WRONG"
                                     : "skipped",
                      why);
        right += o == RIGHT, refused += o == REFUSED, wrong += o == WRONG;
        if (required && o != RIGHT) {
            print_message("  ^ shape arithmetic the importer must fold\n");
            wrong++;
        }
        must += required && o == RIGHT;
    }
    print_message("%d cases right, %d refused, %d wrong; %d of the %zu required right\n", right,
                  refused, wrong, must, sizeof must_run / sizeof *must_run);
    assert_int_equal(wrong, 0);
    assert_int_equal(must, (int)(sizeof must_run / sizeof *must_run));
}

int main(int argc, char **argv) {
    if (argc > 1) data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_reshape_shape_keeps_the_batch_symbolic),
        cmocka_unit_test(test_batch_arithmetic_is_linear_or_refused),
        cmocka_unit_test(test_where_equal_range_constant_of_shape),
        cmocka_unit_test(test_conformance_cases_right_or_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
