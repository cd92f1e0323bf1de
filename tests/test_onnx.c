/* The ONNX importer's refusals (docs/onnx.md): every file it cannot train gets one
 * error naming the file and, for a graph, the node, its op type and why; never a
 * crash or a guess. The graphs are written here with protobuf-c (the same generated
 * code the importer reads with); PyTorch's own exports are test_parity's fixtures.
 * Also: what a good file gives (shape, classes, names, starting weights). */
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

static char folder[256];

/* A graph under construction: input [N, 1, 4, 4], nodes and initializers appended. */
enum { GRAPH_MAX_NODES = 12 }; /* GELU's tanh form: 9 */
typedef struct graph {
    Onnx__NodeProto nodes[GRAPH_MAX_NODES], *node_ptrs[GRAPH_MAX_NODES];
    Onnx__AttributeProto attrs[GRAPH_MAX_NODES][4], *attr_ptrs[GRAPH_MAX_NODES][4];
    char *node_in[GRAPH_MAX_NODES][4], *node_out[GRAPH_MAX_NODES][2];
    Onnx__TensorProto inits[8], *init_ptrs[8];
    int64_t init_dims[8][4];
    float init_data[8][64];
    Onnx__StringStringEntryProto ext[2], *ext_ptrs[2];
    int n_nodes, n_inits;
    Onnx__ValueInfoProto input, output, *input_ptr, *output_ptr;
    Onnx__TypeProto type;
    Onnx__TypeProto__Tensor tensor_type;
    Onnx__TensorShapeProto shape;
    Onnx__TensorShapeProto__Dimension dims[4], *dim_ptrs[4];
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset, *opset_ptr;
    Onnx__ModelProto model;
} graph;

static void graph_init(graph *gr, int rank) {
    memset(gr, 0, sizeof *gr);
    onnx__model_proto__init(&gr->model);
    onnx__graph_proto__init(&gr->g);
    onnx__value_info_proto__init(&gr->input);
    onnx__value_info_proto__init(&gr->output);
    onnx__type_proto__init(&gr->type);
    onnx__type_proto__tensor__init(&gr->tensor_type);
    onnx__tensor_shape_proto__init(&gr->shape);
    const int64_t sizes[4] = {2, 1, 4, 4};
    for (int i = 0; i < rank; i++) {
        onnx__tensor_shape_proto__dimension__init(&gr->dims[i]);
        gr->dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        gr->dims[i].dim_value = rank == 4 ? sizes[i] : (i == 0 ? 2 : 16);
        gr->dim_ptrs[i] = &gr->dims[i];
    }
    gr->shape.n_dim = (size_t)rank;
    gr->shape.dim = gr->dim_ptrs;
    gr->tensor_type.has_elem_type = 1;
    gr->tensor_type.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    gr->tensor_type.shape = &gr->shape;
    gr->type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    gr->type.tensor_type = &gr->tensor_type;
    gr->input.name = "x";
    gr->input.type = &gr->type;
    gr->input_ptr = &gr->input;
    gr->g.n_input = 1;
    gr->g.input = &gr->input_ptr;
    gr->output.name = "y";
    gr->output_ptr = &gr->output;
    gr->g.n_output = 1;
    gr->g.output = &gr->output_ptr;
    gr->g.node = gr->node_ptrs;
    gr->g.initializer = gr->init_ptrs;
    gr->model.graph = &gr->g;
    onnx__operator_set_id_proto__init(&gr->opset);
    gr->opset.domain = "";
    gr->opset.has_version = 1;
    gr->opset.version = 14; /* PyTorch's exports' (tests/fixtures/onnx) */
    gr->opset_ptr = &gr->opset;
    gr->model.n_opset_import = 1;
    gr->model.opset_import = &gr->opset_ptr;
}

/* Appends a node op(ins...) -> out; returns it for attributes. */
static Onnx__NodeProto *node(graph *gr, const char *op, const char *name, const char *out, int n_in,
                             ...) {
    const int k = gr->n_nodes++;
    assert_true(k < GRAPH_MAX_NODES);
    Onnx__NodeProto *n = &gr->nodes[k];
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++) gr->node_in[k][i] = va_arg(ap, char *);
    va_end(ap);
    n->n_input = (size_t)n_in;
    n->input = gr->node_in[k];
    gr->node_out[k][0] = (char *)out;
    n->n_output = 1;
    n->output = gr->node_out[k];
    n->attribute = gr->attr_ptrs[k];
    gr->node_ptrs[k] = n;
    gr->g.n_node = (size_t)gr->n_nodes;
    return n;
}

static Onnx__AttributeProto *new_attr(graph *gr, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    const int k = (int)(n - gr->nodes), a = (int)n->n_attribute++;
    Onnx__AttributeProto *at = &gr->attrs[k][a];
    onnx__attribute_proto__init(at);
    at->name = (char *)name;
    at->has_type = 1;
    at->type = type;
    gr->attr_ptrs[k][a] = at;
    return at;
}

static void attr_ints(graph *gr, Onnx__NodeProto *n, const char *name, int count, int64_t *v) {
    Onnx__AttributeProto *at = new_attr(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    at->n_ints = (size_t)count;
    at->ints = v;
}

static void attr_int(graph *gr, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *at = new_attr(gr, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    at->has_i = 1;
    at->i = v;
}

/* A float initializer of the given dims (values 0.01 * i). */
static Onnx__TensorProto *init(graph *gr, const char *name, int ndim, ...) {
    const int k = gr->n_inits++;
    Onnx__TensorProto *t = &gr->inits[k];
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    va_list ap;
    va_start(ap, ndim);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        gr->init_dims[k][i] = va_arg(ap, int);
        numel *= (size_t)gr->init_dims[k][i];
    }
    va_end(ap);
    assert_true(numel <= 64);
    for (size_t i = 0; i < numel; i++) gr->init_data[k][i] = 0.01f * (float)i;
    t->n_dims = (size_t)ndim;
    t->dims = gr->init_dims[k];
    t->n_float_data = numel;
    t->float_data = gr->init_data[k];
    gr->init_ptrs[k] = t;
    gr->g.n_initializer = (size_t)gr->n_inits;
    return t;
}

/* conv(1 -> 2, 3x3, pad 1) -> relu -> global average pool -> flatten -> gemm(2 -> 3) */
static void good_graph(graph *gr) {
    static int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1};
    graph_init(gr, 4);
    init(gr, "features.0.weight", 4, 2, 1, 3, 3);
    init(gr, "features.0.bias", 1, 2);
    init(gr, "head.weight", 2, 3, 2);
    init(gr, "head.bias", 1, 3);
    Onnx__NodeProto *c =
        node(gr, "Conv", "conv", "c", 3, "x", "features.0.weight", "features.0.bias");
    attr_ints(gr, c, "kernel_shape", 2, k3);
    attr_ints(gr, c, "pads", 4, p1);
    node(gr, "Relu", "relu", "r", 1, "c");
    node(gr, "GlobalAveragePool", "gap", "p", 1, "r");
    node(gr, "Flatten", "flatten", "f", 1, "p");
    Onnx__NodeProto *gm = node(gr, "Gemm", "gemm", "y", 3, "f", "head.weight", "head.bias");
    attr_int(gr, gm, "transB", 1);
}

/* Writes the graph to FOLDER/name; returns the path (static buffer). */
static const char *write_graph(graph *gr, const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    const size_t len = onnx__model_proto__get_packed_size(&gr->model);
    uint8_t *buf = test_alloc(len + 1);
    onnx__model_proto__pack(&gr->model, buf);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(buf);
    return path;
}

/* The import of path fails with an error containing each of the given parts. */
static void refused(const char *path, int parts, ...) {
    dt_model_spec spec;
    dt_error err;
    assert_int_not_equal(dt_zoo_spec_of(&spec, path, &err), 0);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    assert_null(strchr(err.msg, '\n'));
    va_list ap;
    va_start(ap, parts);
    for (int i = 0; i < parts; i++) {
        const char *part = va_arg(ap, const char *);
        if (!strstr(err.msg, part)) fail_msg("'%s' not in: %s", part, err.msg);
    }
    va_end(ap);
}

static void test_a_good_graph_gives_its_shape_names_and_weights(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    const char *path = write_graph(&gr, "good.onnx");
    dt_model_spec spec;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err)) fail_msg("%s", err.msg);
    assert_int_equal(spec.in_c, 1);
    assert_int_equal(spec.in_h, 4);
    assert_int_equal(spec.in_w, 4);
    assert_int_equal(spec.classes, 3);
    dt_model m;
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_params, 2 * 9 + 2 + 6 + 3);
    const int w = dt_model_find_tensor(&m, "features.0.weight");
    const int hw = dt_model_find_tensor(&m, "head.weight");
    assert_true(w >= 0 && hw >= 0 && dt_model_find_tensor(&m, "head.bias") >= 0);
    assert_non_null(m.imported);
    assert_float_equal(m.imported[m.tensors[w].offset + 5], 0.05f, 0.0f);
    assert_float_equal(m.imported[m.tensors[hw].offset + 4], 0.04f, 0.0f);
    dt_model_free(&m);
}

static void test_files_that_are_not_onnx_are_refused(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/missing.onnx", folder);
    refused(path, 1, "cannot open");
    snprintf(path, sizeof path, "%s/text.onnx", folder);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("this is not a protobuf at all\n", f);
    fclose(f);
    refused(path, 1, "not an ONNX model");
    /* a good file cut in half */
    graph gr;
    good_graph(&gr);
    const char *good = write_graph(&gr, "whole.onnx");
    FILE *in = fopen(good, "rb");
    assert_non_null(in);
    uint8_t buf[4096];
    const size_t len = fread(buf, 1, sizeof buf, in);
    fclose(in);
    snprintf(path, sizeof path, "%s/truncated.onnx", folder);
    f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(buf, 1, len / 2, f);
    fclose(f);
    refused(path, 1, "not an ONNX model");
}

static void test_an_unsupported_op_names_the_node(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.nodes[1].op_type = "Hardmax"; /* Softmax imports since issue 41 */
    gr.nodes[1].name = "the_hardmax";
    refused(write_graph(&gr, "hardmax.onnx"), 3, "node 'the_hardmax'", "(Hardmax)",
            "not an operator dtrain imports");
}

/* Every operator dtrain lacks is named at once, with its count, in the graph's order,
 * before a limit of a known operator (here a Conv's group) is reported. */
static void test_every_lacking_op_is_named_at_once(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    attr_int(&gr, &gr.nodes[0], "group", 2); /* refused at its node, after the list */
    gr.nodes[1].op_type = "Elu";
    gr.nodes[1].name = "elu";
    gr.nodes[2].op_type = "Sin";
    gr.nodes[3].op_type = "Elu";
    refused(write_graph(&gr, "lacking.onnx"), 1,
            "dtrain lacks 2 operators this graph needs: Elu (2 nodes, first 'elu'), Sin (1)");
}

/* An eval-mode export's Conv reads tensors the exporter computed ("onnx::Conv_N": its
 * BatchNorm folded in): refused with the export flags that keep the BatchNorms. */
static void test_an_eval_mode_export_is_refused_with_its_fix(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.inits[0].name = "onnx::Conv_25";
    gr.nodes[0].input[1] = "onnx::Conv_25";
    refused(write_graph(&gr, "folded.onnx"), 3, "node 'conv' (Conv): its weight 'onnx::Conv_25'",
            "folds each BatchNorm into the convolution",
            "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False");
}

/* Grouped and dilated convolutions import (test_parity's separable_dilated fixture);
 * groups that do not divide the channels and unequal dilations are refused. */
static void test_bad_groups_and_dilations_are_refused(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    attr_int(&gr, &gr.nodes[0], "group", 2); /* one input channel */
    refused(write_graph(&gr, "group.onnx"), 2, "node 'conv' (Conv)",
            "group 2 does not divide its 1 input and 2 output channels");
    static int64_t d21[2] = {2, 1};
    good_graph(&gr);
    attr_ints(&gr, &gr.nodes[0], "dilations", 2, d21);
    refused(write_graph(&gr, "dilated.onnx"), 1, "only equal dilations");
}

static void test_undefined_inputs_and_cycles_are_refused(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.node_in[2][0] = "nowhere";
    refused(write_graph(&gr, "undefined.onnx"), 2, "node 'gap' (GlobalAveragePool)",
            "'nowhere' is not defined before it");
    /* a cycle: the relu reads the pooling's output, computed after it */
    good_graph(&gr);
    gr.node_in[1][0] = "p";
    refused(write_graph(&gr, "cycle.onnx"), 2, "node 'relu' (Relu)", "topological order");
}

static void test_shape_contradictions_and_huge_dims_are_refused(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.init_dims[0][1] = 3; /* the conv weight takes 3 channels, the input has 1 */
    gr.inits[0].n_float_data = 54;
    refused(write_graph(&gr, "channels.onnx"), 2, "node 'conv' (Conv)", "takes 3 channels");
    good_graph(&gr);
    gr.inits[2].n_float_data = 5; /* head.weight: 5 values for its 3x2 */
    refused(write_graph(&gr, "short.onnx"), 2, "head.weight", "its shape needs 6");
    good_graph(&gr);
    gr.init_dims[2][0] = (int64_t)1 << 40;
    refused(write_graph(&gr, "huge.onnx"), 1, "dimensions out of range");
    good_graph(&gr);
    gr.dims[2].dim_value = (int64_t)1 << 40;
    refused(write_graph(&gr, "hugeinput.onnx"), 1, "not a fixed size");
    graph flat;
    graph_init(&flat, 2); /* an input of [N, 16]: dtrain feeds images */
    node(&flat, "Identity", "id", "y", 1, "x");
    refused(write_graph(&flat, "flat.onnx"), 1, "[batch, C, H, W]");
}

/* head.weight's data in an external file: the key/value pairs given (at most 2 here,
 * 3 with the caller's own entries). */
static void head_external(graph *gr, int count, const char *const (*kv)[2],
                          Onnx__StringStringEntryProto *e, Onnx__StringStringEntryProto **ep) {
    Onnx__TensorProto *t = &gr->inits[2];
    t->n_float_data = 0;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    for (int i = 0; i < count; i++) {
        onnx__string_string_entry_proto__init(&e[i]);
        e[i].key = (char *)kv[i][0];
        e[i].value = (char *)kv[i][1];
        ep[i] = &e[i];
    }
    t->n_external_data = (size_t)count;
    t->external_data = ep;
}

static void test_external_data_outside_the_folder_is_refused(void **state) {
    (void)state;
    const char *locations[] = {"../weights.bin", "/etc/passwd", "a/../../weights.bin"};
    for (int i = 0; i < 3; i++) {
        graph gr;
        good_graph(&gr);
        const char *const kv[1][2] = {{"location", locations[i]}};
        head_external(&gr, 1, kv, gr.ext, gr.ext_ptrs);
        refused(write_graph(&gr, "outside.onnx"), 2, "head.weight", "outside the model's folder");
    }
}

static void test_external_data_inside_the_folder_is_read(void **state) {
    (void)state;
    char bin[512];
    snprintf(bin, sizeof bin, "%s/head.bin", folder);
    const float values[6] = {1, 2, 3, 4, 5, 6};
    FILE *f = fopen(bin, "wb");
    assert_non_null(f);
    fwrite("pad!", 1, 4, f);
    fwrite(values, sizeof(float), 6, f);
    fclose(f);
    graph gr;
    good_graph(&gr);
    const char *const kv[3][2] = {{"location", "head.bin"}, {"offset", "4"}, {"length", "24"}};
    Onnx__StringStringEntryProto e[3], *ep[3];
    head_external(&gr, 3, kv, e, ep);
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    const char *path = write_graph(&gr, "external.onnx");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    const int hw = dt_model_find_tensor(&m, "head.weight");
    assert_memory_equal(m.imported + m.tensors[hw].offset, values, sizeof values);
    dt_model_free(&m);
}

static void test_a_relu_whose_input_has_other_readers_is_refused(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.node_in[2][0] = "c"; /* the pooling reads the conv's output too */
    refused(write_graph(&gr, "inplace.onnx"), 2, "node 'relu' (Relu)", "in place");
}

/* y = x + relu(identity(x)): the ReLU, in place, would overwrite x under its other name
 * (y = 2 relu(x)); refused. relu(identity(x)) + itself reads only the ReLU's output:
 * it imports and computes 2 relu(x) exactly. */
static void test_a_relu_through_an_alias_counts_every_name(void **state) {
    (void)state;
    graph gr;
    graph_init(&gr, 4);
    node(&gr, "Identity", "alias", "a", 1, "x");
    node(&gr, "Relu", "relu", "r", 1, "a");
    node(&gr, "Add", "add", "y", 2, "x", "r");
    gr.dims[2].dim_value = gr.dims[3].dim_value = 1;
    refused(write_graph(&gr, "alias.onnx"), 2, "node 'relu' (Relu)", "one of its aliases");
    gr.node_in[2][0] = "r";
    const char *path = write_graph(&gr, "alias.onnx");
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    m.plain_layouts = 1;
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 0);
    const float x[2] = {-1.5f, 2.25f}; /* [2, 1, 1, 1] */
    memcpy(dt_model_input_data(&m), x, sizeof x);
    dt_model_forward(&m, 2);
    const float *y = dt_model_value_data(&m, m.n_values - 1);
    assert_float_equal(y[0], 0.0f, 0.0f);
    assert_float_equal(y[1], 4.5f, 0.0f);
    dt_model_free(&m);
}

/* Prepends one length-delimited field (its key and length) before the `len` bytes at *pos. */
static void prepend_field(uint8_t *buf, size_t *pos, int number, size_t len) {
    uint8_t head[20];
    size_t n = 0;
    for (uint64_t v = (uint64_t)number << 3 | 2, k = 0; k < 2; k++, v = len) {
        do {
            head[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
            v >>= 7;
        } while (v);
    }
    *pos -= n;
    memcpy(buf + *pos, head, n);
}

/* 3,000 graphs each in an attribute of a node of the one above: protobuf-c's recursive
 * unpack overflowed the stack on it; refused before unpacking. */
static void test_deeply_nested_subgraphs_are_refused(void **state) {
    (void)state;
    enum { SIZE = 1 << 17 };
    uint8_t *buf = test_alloc(SIZE);
    size_t pos = SIZE;
    for (int level = 0; level < 3000; level++) {
        prepend_field(buf, &pos, 6, SIZE - pos); /* AttributeProto.g: the graph below */
        const uint8_t attr_head[] = {0x0A, 1, 'g', 0xA0, 0x01, 5}; /* name "g", type GRAPH */
        pos -= sizeof attr_head;
        memcpy(buf + pos, attr_head, sizeof attr_head);
        prepend_field(buf, &pos, 5, SIZE - pos);  /* NodeProto.attribute */
        const uint8_t op[] = {0x22, 2, 'I', 'f'}; /* op_type "If" */
        pos -= sizeof op;
        memcpy(buf + pos, op, sizeof op);
        prepend_field(buf, &pos, 1, SIZE - pos); /* GraphProto.node */
        assert_true(pos > 64);
    }
    prepend_field(buf, &pos, 7, SIZE - pos); /* ModelProto.graph */
    char path[512];
    snprintf(path, sizeof path, "%s/deep.onnx", folder);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf + pos, 1, SIZE - pos, f), SIZE - pos);
    assert_int_equal(fclose(f), 0);
    free(buf);
    refused(path, 1, "nested more than 32 deep");
}

/* A Gemm of transB 0 holds its weight [in, out], dtrain [out, in]: --save writes it
 * back as the file held it. */
static void test_save_writes_weights_in_the_files_layout(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.attrs[4][0].i = 0; /* transB 0: head.weight [in 2, out 3] */
    gr.init_dims[2][0] = 2;
    gr.init_dims[2][1] = 3;
    const char *written = write_graph(&gr, "layout.onnx");
    char path[512], out[512];
    snprintf(path, sizeof path, "%s", written);
    snprintf(out, sizeof out, "%s/layout_saved.onnx", folder);
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 0);
    const int hw = dt_model_find_tensor(&m, "head.weight");
    assert_int_equal(m.tensors[hw].shape[0], 3);                         /* [out, in] */
    assert_float_equal(m.params[m.tensors[hw].offset + 1], 0.03f, 0.0f); /* [0][1] = file [1][0] */
    if (dt_onnx_save(&m, path, out, &err)) fail_msg("%s", err.msg);
    dt_model_free(&m);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    static uint8_t bytes[1 << 16];
    const size_t len = fread(bytes, 1, sizeof bytes, f);
    assert_true(len < sizeof bytes && feof(f) && !ferror(f)); /* the whole file */
    fclose(f);
    Onnx__ModelProto *saved = onnx__model_proto__unpack(NULL, len, bytes);
    assert_non_null(saved);
    const Onnx__TensorProto *t = saved->graph->initializer[2];
    assert_string_equal(t->name, "head.weight");
    assert_int_equal(t->raw_data.len, 6 * sizeof(float));
    float values[6];
    memcpy(values, t->raw_data.data, sizeof values);
    for (int i = 0; i < 6; i++) assert_float_equal(values[i], 0.01f * (float)i, 0.0f);
    onnx__model_proto__free_unpacked(saved, NULL);
}

/* What --save and checkpoints could not write back, and operators of an older opset
 * than the one imported, are refused at import. */
static void test_untrainable_weights_and_old_opsets_are_refused(void **state) {
    (void)state;
    graph gr;
    good_graph(&gr);
    gr.opset.version = 18;
    refused(write_graph(&gr, "opset.onnx"), 1, "opset 18 of ONNX's default domain is past 17");
    good_graph(&gr);
    gr.opset.version = 6;
    refused(write_graph(&gr, "opset.onnx"), 2, "node 'gemm' (Gemm)", "opset 6's Gemm");
    good_graph(&gr);
    gr.model.n_opset_import = 0;
    refused(write_graph(&gr, "opset.onnx"), 1, "declares no opset");
    good_graph(&gr);
    gr.inits[2].name = "__metadata__";
    gr.node_in[4][1] = "__metadata__";
    refused(write_graph(&gr, "reserved.onnx"), 1, "a name safetensors and checkpoints reserve");
    good_graph(&gr);
    gr.init_data[3][1] = NAN; /* head.bias: the spec (the graph) imports, the build refuses */
    const char *path = write_graph(&gr, "nan.onnx");
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err)) fail_msg("%s", err.msg);
    assert_int_not_equal(dt_zoo_build(&m, &spec, &err), 0);
    assert_non_null(strstr(err.msg, "initializer 'head.bias' holds NaN or infinite values"));
}

/* --save FILE.onnx is checked before training: weights past protobuf's 2 GiB are
 * refused then, not after the run (a graph built, never allocated: 65536 x 8193
 * floats of one linear layer, 2^29 + 65536). */
static void test_a_save_past_2_gib_is_refused_before_training(void **state) {
    (void)state;
    dt_model m;
    dt_model_init_empty(&m, "big", 8193);
    const int in = dt_model_input(&m, 65536, 1, 1);
    assert_true(dt_model_linear(&m, "fc", in, 8193) >= 0);
    assert_false(m.build_failed);
    dt_error err;
    assert_int_equal(dt_onnx_save_check(&m, "big.onnx", "out.onnx", &err), -1);
    assert_string_equal(err.msg, "--save out.onnx: the weights (2.00 GiB) are past protobuf's 2 "
                                 "GiB, which an ONNX file cannot hold inline; save them as "
                                 ".safetensors");
    dt_model_free(&m);
}

/* dtrain's model refuses a value whose size wraps size_t (the importer refuses such a
 * Conv before it gets there: test_bad_input_onnx.sh's convwrap and convbig files) */
static void test_a_value_past_size_t_is_refused_by_the_model(void **state) {
    (void)state;
    dt_model m;
    dt_model_init_empty(&m, "wrap", 10);
    const int x = dt_model_input(&m, 1, 2, 2);
    assert_int_equal(x, 0);
    const int big = (1 << 24) - 1; /* 65536 x (2^24 + 1)^2 values: 2^64 + 2^41 + 2^16 */
    assert_true(dt_model_conv2d_grouped(&m, "conv", x, 65536, 2, 1, big, big, 1, 0) < 0);
    assert_true(m.build_failed);
    assert_non_null(strstr(m.build_error.msg, "65536x16777217x16777217 overflows its size"));
    dt_model_free(&m);
}

/* conv -> SE (ReduceMean over H, W; Mul) -> layer scale first (Mul) -> a constant minus
 * it (Sub) -> ReduceMean over W -> Flatten -> Gemm: the layer scale is a parameter
 * (a state_dict name), the "onnx::" initializer a constant (kept in its op), the SE
 * mean the global average pool. */
static void broadcast_graph(graph *gr) {
    static int64_t k3[2] = {3, 3}, p1[4] = {1, 1, 1, 1}, hw[2] = {2, 3}, w_axis[1] = {-1};
    graph_init(gr, 4);
    init(gr, "features.0.weight", 4, 2, 1, 3, 3);
    init(gr, "features.0.bias", 1, 2);
    init(gr, "layer_scale", 3, 2, 1, 1);
    init(gr, "onnx::Sub_9", 1, 1)->float_data[0] = 2.5f;
    init(gr, "head.weight", 2, 3, 8);
    init(gr, "head.bias", 1, 3);
    Onnx__NodeProto *c =
        node(gr, "Conv", "conv", "c", 3, "x", "features.0.weight", "features.0.bias");
    attr_ints(gr, c, "kernel_shape", 2, k3);
    attr_ints(gr, c, "pads", 4, p1);
    attr_ints(gr, node(gr, "ReduceMean", "se_mean", "s", 1, "c"), "axes", 2, hw);
    node(gr, "Mul", "se", "e", 2, "c", "s");
    node(gr, "Mul", "scale", "g", 2, "layer_scale", "e");
    node(gr, "Sub", "minus", "h", 2, "onnx::Sub_9", "g");
    attr_ints(gr, node(gr, "ReduceMean", "w_mean", "q", 1, "h"), "axes", 1, w_axis);
    node(gr, "Flatten", "flatten", "f", 1, "q");
    Onnx__NodeProto *gm = node(gr, "Gemm", "gemm", "y", 3, "f", "head.weight", "head.bias");
    attr_int(gr, gm, "transB", 1);
}

/* The parity fixture of issue 41's CNN generalisations imports as it was exported:
 * 1x7 and 7x1 convolutions with their one-axis pads, the ten-input concat, BatchNorm's
 * momentum 0.01 (ONNX's 0.99), both average pools (the one counting its padding
 * exported as a Pad of zeros, folded into it), the rectangular ceil-mode max pool. */
static void test_inception_like_imports_its_windows(void **state) {
    (void)state;
    char path[512];
    const char *dir = getenv("DT_FIXTURES");
    snprintf(path, sizeof path, "%s/onnx/inception_like.onnx", dir ? dir : "tests/fixtures");
    dt_model_spec spec = {.name = path};
    dt_model m;
    dt_error err;
    if (dt_onnx_build_any(&m, &spec, &err)) fail_msg("%s", err.msg);
    int convs_1x7 = 0, convs_7x1 = 0, concat10 = 0, bn = 0, avg_incl = 0, avg_excl = 0, maxp = 0;
    for (int i = 0; i < m.n_ops; i++) {
        const dt_op *op = &m.ops[i];
        if (op->kind == DT_OP_CONV2D && op->kh == 1 && op->kw == 7)
            convs_1x7 +=
                op->pad_top == 0 && op->pad_left == 3 && op->pad_bottom == 0 && op->pad_right == 3;
        if (op->kind == DT_OP_CONV2D && op->kh == 7 && op->kw == 1)
            convs_7x1 += op->pad_top == 3 && op->pad_left == 0;
        if (op->kind == DT_OP_CONCAT) concat10 += op->n_ins == 10 && op->axis == 0;
        if (op->kind == DT_OP_BATCHNORM2D) bn += op->momentum == 0.01f;
        if (op->kind == DT_OP_AVGPOOL2D && op->kh == 3 && op->pad_top == 1 && op->pad_right == 1) {
            avg_incl += op->count_include_pad == 1;
            avg_excl += op->count_include_pad == 0;
        }
        if (op->kind == DT_OP_MAXPOOL2D)
            maxp += op->kh == 3 && op->kw == 2 && op->stride_h == 2 && op->stride_w == 1 &&
                    op->ceil_mode;
    }
    assert_int_equal(convs_1x7, 1);
    assert_int_equal(convs_7x1, 1);
    assert_int_equal(concat10, 1);
    assert_int_equal(bn, 3);
    assert_int_equal(avg_incl, 1);
    assert_int_equal(avg_excl, 1);
    assert_int_equal(maxp, 1);
    dt_model_free(&m);
}

/* input -> Pad (opset 10's attribute form) -> node `after` -> flatten -> gemm */
static void pad_graph(graph *gr, const char *after, int64_t *pads, float value) {
    static int64_t k3[2] = {3, 3};
    graph_init(gr, 4);
    gr->opset.version = 10;
    const int conv = !strcmp(after, "Conv");
    if (conv) init(gr, "conv.weight", 4, 1, 1, 3, 3);
    init(gr, "head.weight", 2, 3, 16); /* 4x4 out */
    init(gr, "head.bias", 1, 3);
    Onnx__NodeProto *pad = node(gr, "Pad", "pad", "padded", 1, "x");
    attr_ints(gr, pad, "pads", 8, pads);
    Onnx__AttributeProto *v =
        new_attr(gr, pad, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    v->has_f = 1;
    v->f = value;
    Onnx__NodeProto *a = conv ? node(gr, "Conv", "after", "a", 2, "padded", "conv.weight")
                              : node(gr, after, "after", "a", 1, "padded");
    attr_ints(gr, a, "kernel_shape", 2, k3);
    node(gr, "Flatten", "flatten", "f", 1, "a");
    Onnx__NodeProto *gm = node(gr, "Gemm", "gemm", "y", 3, "f", "head.weight", "head.bias");
    attr_int(gr, gm, "transB", 1);
}

static void test_broadcasting_ops_take_parameters_and_constants(void **state) {
    (void)state;
    graph gr;
    broadcast_graph(&gr);
    const char *path = write_graph(&gr, "broadcast.onnx");
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err)) fail_msg("%s", err.msg);
    if (dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_params, 2 * 9 + 2 + 2 + 3 * 8 + 3);
    const int ls = dt_model_find_tensor(&m, "layer_scale");
    assert_true(ls >= 0);
    assert_int_equal(m.tensors[ls].is_param, 1);
    assert_int_equal(m.n_tensors, 5); /* conv 2, layer scale, head 2; the constant in its op */

    assert_float_equal(m.imported[m.tensors[ls].offset + 1], 0.01f, 0.0f);
    const dt_op_kind kinds[] = {DT_OP_CONV2D, DT_OP_ADAPTIVE_AVGPOOL2D, DT_OP_BINARY, DT_OP_BINARY,
                                DT_OP_BINARY, DT_OP_REDUCE_MEAN,        DT_OP_LINEAR};
    assert_int_equal(m.n_ops, 7);
    for (int i = 0; i < 7; i++) assert_int_equal(m.ops[i].kind, kinds[i]);
    assert_int_equal(m.ops[3].func, DT_BINARY_MUL);
    assert_int_equal(m.ops[3].weight, ls);
    assert_int_equal(m.ops[4].func, DT_BINARY_SUB_REVERSED);
    assert_int_equal(m.ops[4].weight, -1);
    assert_float_equal(m.ops[4].scalar, 2.5f, 0.0f);
    /* it trains: the forward of the constant minus the scaled SE product is finite and
     * the layer scale gets a gradient */
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 1);
    fill_uniform(dt_model_input_data(&m), 32, 5, -1, 1);
    int32_t labels[2] = {0, 2};
    dt_model_zero_grad(&m);
    dt_model_forward(&m, 2);
    assert_true(isfinite(dt_model_loss(&m, labels, 2, NULL)));
    dt_model_backward(&m, labels, 2);
    assert_true(m.grads[m.tensors[ls].offset] != 0.0f);
    dt_model_free(&m);
}

/* nn.Linear(bias=False)'s export: a MatMul read by no Add is a linear layer without a
 * bias (refused before: "no Add of a bias follows it"), over the last axis of tokens
 * (by the Transpose of an [out, in] weight) and of a flat input ([in, out]). */
static void test_a_matmul_without_an_add_is_a_linear_without_bias(void **state) {
    (void)state;
    graph gr;
    graph_init(&gr, 4); /* x [N, 1, 4, 4] */
    init(&gr, "tok.weight", 2, 3, 4);
    init(&gr, "fc.weight", 2, 12, 3);
    node(&gr, "Transpose", "tok_t", "wt", 1, "tok.weight");
    node(&gr, "MatMul", "tok", "t", 2, "x", "wt"); /* [N, 1, 4, 3] */
    node(&gr, "Flatten", "flatten", "f", 1, "t");
    node(&gr, "MatMul", "fc", "y", 2, "f", "fc.weight");
    const char *path = write_graph(&gr, "matmul_nobias.onnx");
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_ops, 2);
    assert_int_equal(m.n_params, 12 + 36);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(m.ops[i].kind, DT_OP_LINEAR);
        assert_int_equal(m.ops[i].bias, -1);
    }
    m.plain_layouts = 1;
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 0);
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = 0.1f * (float)(i % 7) - 0.3f;
    memcpy(dt_model_input_data(&m), x, sizeof x);
    dt_model_forward(&m, 2);
    /* init() fills a tensor with 0.01 i: tok.weight[o][k] = 0.01 (4 o + k) ([out, in]),
     * fc.weight[k][o] = 0.01 (3 k + o) ([in, out]) */
    const float *y = dt_model_value_data(&m, m.n_values - 1);
    for (int n = 0; n < 2; n++)
        for (int o = 0; o < 3; o++) {
            double want = 0.0;
            for (int r = 0; r < 4; r++)
                for (int j = 0; j < 3; j++) {
                    double t = 0.0;
                    for (int k = 0; k < 4; k++)
                        t += (double)x[n * 16 + r * 4 + k] * 0.01 * (4 * j + k);
                    want += t * 0.01 * (3 * (r * 3 + j) + o);
                }
            assert_float_equal(y[n * 3 + o], want, 1e-6);
        }
    dt_model_free(&m);
}

static void test_broadcasting_ops_refuse_what_they_cannot(void **state) {
    (void)state;
    graph gr;
    static int64_t last[1] = {-1}, batch[1] = {0};
    broadcast_graph(&gr);
    gr.node_in[2][1] = "q0"; /* Mul(c [N,2,4,4], a mean over W without keepdims [N,2,4]) */
    gr.nodes[1].output[0] = "q0";
    gr.attrs[1][0].ints = last;
    gr.attrs[1][0].n_ints = 1;
    attr_int(&gr, &gr.nodes[1], "keepdims", 0);
    refused(write_graph(&gr, "ranks.onnx"), 2, "node 'se' (Mul)",
            "its inputs have 4 and 3 axes: an activation's batch axis broadcasts only");
    broadcast_graph(&gr);
    gr.init_dims[2][0] = 1, gr.init_dims[2][1] = 2, gr.inits[2].n_dims = 2; /* [1, 2] */
    refused(write_graph(&gr, "wrong_axis.onnx"), 2, "node 'scale' (Mul)",
            "tensor layer_scale of 1x2 does not broadcast with values of 2x4x4");
    broadcast_graph(&gr);
    gr.init_dims[2][0] = 2, gr.init_dims[2][1] = 2, gr.init_dims[2][2] = 1;
    gr.init_dims[2][3] = 1, gr.inits[2].n_dims = 4; /* [2, 2, 1, 1]: 4 values, 2 given */
    gr.init_data[2][2] = gr.init_data[2][3] = 0.0f;
    gr.inits[2].n_float_data = 4;
    refused(write_graph(&gr, "batch_axis.onnx"), 2, "node 'scale' (Mul)",
            "its initializer 'layer_scale' has 2 along the batch axis");
    broadcast_graph(&gr);
    gr.attrs[1][0].ints = batch;
    gr.attrs[1][0].n_ints = 1;
    refused(write_graph(&gr, "batch_mean.onnx"), 2, "node 'se_mean' (ReduceMean)",
            "a mean over the batch axis");
    broadcast_graph(&gr);
    gr.init_dims[3][0] = 2, gr.inits[3].n_float_data = 2; /* onnx::Sub_9 of 2 values */
    refused(write_graph(&gr, "constant_tensor.onnx"), 2, "node 'minus' (Sub)",
            "its constant 'onnx::Sub_9' has 2 values: dtrain takes constants of one value");
    broadcast_graph(&gr);
    gr.node_in[1][1] = "onnx::Sub_9"; /* ReduceMean's axes as an input, before opset 18 */
    gr.nodes[1].n_input = 2;
    refused(write_graph(&gr, "axes_input.onnx"), 2, "node 'se_mean' (ReduceMean)",
            "an axes input before opset 18");
    broadcast_graph(&gr);
    gr.inits[3].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64; /* onnx::Sub_9 an integer */
    refused(write_graph(&gr, "constant_int.onnx"), 2, "node 'minus' (Sub)",
            "its constant 'onnx::Sub_9' is not float or double (element type 7)");
    broadcast_graph(&gr);
    gr.node_in[4][1] = "head.bias"; /* Sub(onnx::Sub_9, head.bias) */
    refused(write_graph(&gr, "constants.onnx"), 2, "node 'minus' (Sub)",
            "both its inputs are constants");
}

/* ---- activations (src/nn/activation.c) and the patterns imported as one ---- */

/* A scalar float initializer. */
static void scalar(graph *gr, const char *name, float v) {
    init(gr, name, 0)->float_data[0] = v;
}

/* Imports path, runs it forward on x (2 samples of 16) and returns the ops' count;
 * y gets the output, fn the first op's function. */
static int run_16(const char *path, const float *x, float *y, dt_activation_fn *fn) {
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    if (dt_model_alloc(&m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 0);
    memcpy(dt_model_input_data(&m), x, sizeof(float) * 32);
    dt_model_forward(&m, 2);
    memcpy(y, dt_model_value_data(&m, m.n_values - 1), sizeof(float) * 32);
    const int ops = m.n_ops;
    assert_int_equal(m.ops[0].kind, DT_OP_ACTIVATION);
    *fn = m.ops[0].act.fn;
    dt_model_free(&m);
    return ops;
}

/* A graph of input [2, 16, 1, 1]: its activations' output reads as [batch, classes]. */
static void graph_init_16(graph *gr) {
    graph_init(gr, 4);
    gr->dims[1].dim_value = 16;
    gr->dims[2].dim_value = gr->dims[3].dim_value = 1;
}

static void inputs_16(float *x) {
    for (int i = 0; i < 32; i++) x[i] = -4.0f + 0.25f * (float)i;
}

/* torch.onnx's nn.GELU: Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5, one op; a
 * graph that differs from it (here: + 2) is refused naming its Erf. */
static void test_gelus_decomposition_is_one_op(void **state) {
    (void)state;
    graph gr;
    graph_init_16(&gr);
    scalar(&gr, "sqrt2", 1.4142135f);
    scalar(&gr, "one", 1.0f);
    scalar(&gr, "half", 0.5f);
    node(&gr, "Div", "div", "d", 2, "x", "sqrt2");
    node(&gr, "Erf", "erf", "e", 1, "d");
    node(&gr, "Add", "add", "a", 2, "e", "one");
    node(&gr, "Mul", "mul", "m", 2, "x", "a");
    node(&gr, "Mul", "mul_1", "y", 2, "m", "half");
    float x[32], y[32];
    inputs_16(x);
    dt_activation_fn fn;
    assert_int_equal(run_16(write_graph(&gr, "gelu.onnx"), x, y, &fn), 1);
    assert_int_equal(fn, DT_ACT_GELU);
    for (int i = 0; i < 32; i++)
        assert_float_equal(y[i], 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0))), 2e-6);
    /* the halving first, the operands swapped: the same op */
    gr.node_in[3][0] = "half", gr.node_in[3][1] = "a";
    gr.node_in[4][1] = "x";
    assert_int_equal(run_16(write_graph(&gr, "gelu.onnx"), x, y, &fn), 1);
    assert_int_equal(fn, DT_ACT_GELU);
    gr.inits[1].float_data[0] = 2.0f;
    refused(write_graph(&gr, "gelu.onnx"), 3, "node 'erf' (Erf)", "GELU's decomposition",
            "step 3 of 5");
    /* Erf alone: refused naming it */
    graph_init_16(&gr);
    node(&gr, "Erf", "erf", "y", 1, "x");
    refused(write_graph(&gr, "erf.onnx"), 2, "node 'erf' (Erf)", "only inside GELU's");
}

/* PyTorch's GELU(approximate='tanh'): nine nodes, one op. */
static void test_gelus_tanh_form_is_one_op(void **state) {
    (void)state;
    graph gr;
    graph_init_16(&gr);
    scalar(&gr, "kappa", 0.044715f);
    scalar(&gr, "beta", 0.7978846f);
    scalar(&gr, "one", 1.0f);
    scalar(&gr, "half", 0.5f);
    node(&gr, "Mul", "sq", "s", 2, "x", "x");
    node(&gr, "Mul", "cube", "c", 2, "x", "s");
    node(&gr, "Mul", "k", "k", 2, "kappa", "c");
    node(&gr, "Add", "inner", "i", 2, "x", "k");
    node(&gr, "Mul", "b", "b", 2, "beta", "i");
    node(&gr, "Tanh", "tanh", "t", 1, "b");
    node(&gr, "Add", "plus1", "p", 2, "one", "t");
    node(&gr, "Mul", "times_x", "m", 2, "x", "p");
    node(&gr, "Mul", "halve", "y", 2, "half", "m");
    float x[32], y[32];
    inputs_16(x);
    dt_activation_fn fn;
    assert_int_equal(run_16(write_graph(&gr, "gelu_tanh.onnx"), x, y, &fn), 1);
    assert_int_equal(fn, DT_ACT_GELU_TANH);
    for (int i = 0; i < 32; i++) {
        const double v = x[i],
                     inner = sqrt(2.0 / 3.14159265358979323846) * (v + 0.044715 * v * v * v);
        assert_float_equal(y[i], 0.5 * v * (1.0 + tanh(inner)), 2e-6);
    }
}

/* Sigmoid whose one reader is Mul(x, it): SiLU, one op; read by another node too, a
 * Sigmoid (here the graph's output, which nothing else reads, is the Sigmoid's). */
static void test_silu_and_hardswishs_decompositions_are_one_op(void **state) {
    (void)state;
    graph gr;
    graph_init_16(&gr);
    node(&gr, "Sigmoid", "sig", "s", 1, "x");
    node(&gr, "Mul", "mul", "y", 2, "s", "x");
    float x[32], y[32];
    inputs_16(x);
    dt_activation_fn fn;
    assert_int_equal(run_16(write_graph(&gr, "silu.onnx"), x, y, &fn), 1);
    assert_int_equal(fn, DT_ACT_SILU);
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], x[i] / (1.0 + exp(-x[i])), 1e-6);
    /* opset 13's nn.Hardswish: HardSigmoid(alpha 1/6) then Mul by x */
    gr.nodes[0].op_type = "HardSigmoid";
    Onnx__AttributeProto *alpha =
        new_attr(&gr, &gr.nodes[0], "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    alpha->has_f = 1, alpha->f = 1.0f / 6.0f;
    assert_int_equal(run_16(write_graph(&gr, "hardswish.onnx"), x, y, &fn), 1);
    assert_int_equal(fn, DT_ACT_HARDSWISH);
    for (int i = 0; i < 32; i++)
        assert_float_equal(y[i], x[i] * fmin(fmax(x[i] + 3.0, 0.0), 6.0) / 6.0, 1e-6);
    /* another alpha: x * hardsigmoid(x) is no HardSwish: two ops, a HardSigmoid and the
     * broadcasting Mul */
    alpha->f = 0.2f;
    assert_int_equal(run_16(write_graph(&gr, "hardsigmoid.onnx"), x, y, &fn), 2);
    assert_int_equal(fn, DT_ACT_HARDSIGMOID);
    for (int i = 0; i < 32; i++)
        assert_float_equal(y[i], x[i] * fmin(fmax(0.2 * x[i] + 0.5, 0.0), 1.0), 1e-6);
}

/* An activation whose gradient follows from its output overwrites its input where no
 * other node reads it (one storage for the chain), and keeps it where one does. */
static void test_activations_run_in_place_where_nothing_else_reads_the_input(void **state) {
    (void)state;
    graph gr;
    graph_init_16(&gr);
    node(&gr, "Tanh", "tanh", "t", 1, "x");
    Onnx__NodeProto *leaky = node(&gr, "LeakyRelu", "leaky", "y", 1, "t");
    Onnx__AttributeProto *alpha =
        new_attr(&gr, leaky, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    alpha->has_f = 1, alpha->f = 0.5f;
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    const char *path = write_graph(&gr, "inplace_chain.onnx");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_storages, 1);
    dt_model_free(&m);
    alpha->f = -0.5f; /* a negative slope needs its input */
    path = write_graph(&gr, "inplace_chain.onnx");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_storages, 2);
    dt_model_free(&m);
    graph_init_16(&gr);
    node(&gr, "Tanh", "tanh", "t", 1, "x");
    node(&gr, "Sigmoid", "sigmoid", "s", 1, "x");
    node(&gr, "Add", "add", "y", 2, "t", "s");
    float x[32], y[32];
    inputs_16(x);
    path = write_graph(&gr, "shared_input.onnx");
    if (dt_zoo_spec_of(&spec, path, &err) || dt_zoo_build(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.n_storages, 4); /* x, tanh's, sigmoid's, the sum */
    dt_model_free(&m);
    dt_activation_fn fn;
    run_16(path, x, y, &fn);
    for (int i = 0; i < 32; i++)
        assert_float_equal(y[i], tanh(x[i]) + 1.0 / (1.0 + exp(-x[i])), 1e-6);
}

/* Clip's bounds: attributes before opset 11, constant inputs from it. */
static void test_clip_takes_its_bounds_as_its_opset_says(void **state) {
    (void)state;
    graph gr;
    graph_init_16(&gr);
    scalar(&gr, "lo", -1.0f);
    scalar(&gr, "hi", 2.5f);
    node(&gr, "Clip", "clip", "y", 3, "x", "lo", "hi");
    float x[32], y[32];
    inputs_16(x);
    dt_activation_fn fn;
    assert_int_equal(run_16(write_graph(&gr, "clip.onnx"), x, y, &fn), 1);
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], fmin(fmax(x[i], -1.0), 2.5), 0);
    gr.node_in[0][1] = ""; /* no lower bound */
    run_16(write_graph(&gr, "clip.onnx"), x, y, &fn);
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], fmin(x[i], 2.5), 0);
    gr.opset.version = 10;
    refused(write_graph(&gr, "clip.onnx"), 2, "node 'clip' (Clip)", "as attributes");
    gr.nodes[0].n_input = 1;
    Onnx__AttributeProto *lo =
        new_attr(&gr, &gr.nodes[0], "min", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    lo->has_f = 1, lo->f = 0.0f;
    run_16(write_graph(&gr, "clip.onnx"), x, y, &fn);
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], fmax(x[i], 0.0), 0);
    gr.opset.version = 14;
    gr.nodes[0].n_input = 2;
    gr.node_in[0][1] = "x"; /* a bound that is an activation */
    refused(write_graph(&gr, "clip.onnx"), 2, "node 'clip' (Clip)", "must be an initializer");
    /* torch.onnx 1.13's ReLU6: its bounds cast to float first */
    graph_init_16(&gr);
    scalar(&gr, "lo", 0.0f);
    scalar(&gr, "hi", 6.0f);
    attr_int(&gr, node(&gr, "Cast", "cast_lo", "lo_f", 1, "lo"), "to", 1);
    attr_int(&gr, node(&gr, "Cast", "cast_hi", "hi_f", 1, "hi"), "to", 1);
    node(&gr, "Clip", "clip", "y", 3, "x", "lo_f", "hi_f");
    run_16(write_graph(&gr, "relu6.onnx"), x, y, &fn);
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], fmin(fmax(x[i], 0.0), 6.0), 0);
    gr.node_in[0][0] = "x"; /* a Cast of an activation */
    refused(write_graph(&gr, "relu6.onnx"), 2, "node 'cast_lo' (Cast)", "float constant");
}

/* An int64 initializer: count values, 1-D; count 0: a scalar holding v[0]. */
static void init_int64s(graph *gr, const char *name, int count, int64_t *v) {
    Onnx__TensorProto *t = init(gr, name, 0);
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_float_data = 0;
    t->float_data = NULL;
    const int k = (int)(t - gr->inits);
    if (count > 0) {
        t->n_dims = 1;
        gr->init_dims[k][0] = count;
    }
    t->n_int64_data = (size_t)(count > 0 ? count : 1);
    t->int64_data = v;
}

/* ViT's class token: Expand of a [1, ..] parameter to the batch, a Concat with the
 * tokens on axis 2 (here the image's rows), then Gathers of index 0 (x[:, :, 0],
 * x[:, 0]): the output is the token itself for every sample, and its gradient the sum
 * of the samples'. */
static void test_a_class_token_imports_and_sums_its_gradient_over_the_batch(void **state) {
    (void)state;
    static int64_t shape[4] = {2, 1, 1, 4}, zero[1] = {0};
    graph gr;
    graph_init(&gr, 4); /* x: [N, 1, 4, 4] */
    init(&gr, "class_token", 4, 1, 1, 1, 4);
    init_int64s(&gr, "shape", 4, shape);
    init_int64s(&gr, "index", 0, zero);
    node(&gr, "Expand", "expand", "e", 2, "class_token", "shape");
    attr_int(&gr, node(&gr, "Concat", "concat", "c", 2, "e", "x"), "axis", 2);
    attr_int(&gr, node(&gr, "Gather", "rows", "g", 2, "c", "index"), "axis", 2);
    attr_int(&gr, node(&gr, "Gather", "channel", "y", 2, "g", "index"), "axis", 1);
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, write_graph(&gr, "class_token.onnx"), &err) ||
        dt_zoo_build(&m, &spec, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(m.classes, 4);
    enum { N = 3 };
    if (dt_model_alloc(&m, N, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 1);
    fill_uniform(dt_model_input_data(&m), N * 16, 2, -1, 1);
    dt_model_zero_grad(&m);
    dt_model_forward(&m, N);
    const int32_t labels[N] = {0, 3, 1};
    dt_model_loss(&m, labels, N, NULL);
    dt_model_backward(&m, labels, N);
    const int t = dt_model_find_tensor(&m, "class_token");
    assert_true(t >= 0);
    const float *logits = dt_model_logits(&m), *probs = m.probs;
    for (int j = 0; j < 4; j++) {
        double want = 0.0; /* d loss / d logit = (p - onehot) / N, summed over samples */
        for (int i = 0; i < N; i++) {
            assert_float_equal(logits[i * 4 + j], 0.01f * (float)j, 0.0f);
            want += (probs[i * 4 + j] - (labels[i] == j)) / (double)N;
        }
        assert_float_equal(m.grads[m.tensors[t].offset + (size_t)j], want, 1e-6);
    }
    dt_model_free(&m);
}

/* A Gemm on a value whose rows are positions of the batch's samples ([N, 4, 4] here,
 * after a Gather): a linear over the last axis, each row times W^T plus the bias. */
static void test_a_gemm_on_rows_is_a_linear_over_the_last_axis(void **state) {
    (void)state;
    static int64_t zero[1] = {0}, two[1] = {2};
    graph gr;
    graph_init(&gr, 4); /* x: [N, 1, 4, 4] */
    init(&gr, "fc.weight", 2, 3, 4);
    init(&gr, "fc.bias", 1, 3);
    init_int64s(&gr, "zero", 0, zero);
    init_int64s(&gr, "two", 0, two);
    attr_int(&gr, node(&gr, "Gather", "plane", "p", 2, "x", "zero"), "axis", 1); /* [N, 4, 4] */
    attr_int(&gr, node(&gr, "Gemm", "fc", "r", 3, "p", "fc.weight", "fc.bias"), "transB", 1);
    attr_int(&gr, node(&gr, "Gather", "row", "y", 2, "r", "two"), "axis", 1); /* [N, 3] */
    dt_model_spec spec;
    dt_model m;
    dt_error err;
    if (dt_zoo_spec_of(&spec, write_graph(&gr, "gemm_rows.onnx"), &err) ||
        dt_zoo_build(&m, &spec, &err))
        fail_msg("%s", err.msg);
    enum { N = 2 };
    if (dt_model_alloc(&m, N, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(&m, 1);
    float *x = dt_model_input_data(&m);
    fill_uniform(x, N * 16, 3, -1, 1);
    dt_model_forward(&m, N);
    const float *y = dt_model_logits(&m);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < 3; o++) {
            double want = 0.01 * o; /* fc.bias: 0.01 * index, fc.weight likewise */
            for (int k = 0; k < 4; k++) want += 0.01 * (o * 4 + k) * x[i * 16 + 2 * 4 + k];
            assert_float_equal(y[i * 3 + o], want, 1e-6);
        }
    dt_model_free(&m);
}

/* The transformer's ops refuse what they cannot do in one line naming the node. */
static void test_transformer_ops_refuse_in_one_line(void **state) {
    (void)state;
    static int64_t shape[4] = {2, 1, 1, 4}, zero[1] = {0};
    graph gr;
    graph_init(&gr, 4);
    attr_int(&gr, node(&gr, "Softmax", "sm", "y", 1, "x"), "axis", 0);
    refused(write_graph(&gr, "softmax0.onnx"), 3, "node 'sm' (Softmax)", "axis 0 is the batch axis",
            "not supported");
    graph_init(&gr, 4);
    init(&gr, "ln.weight", 1, 3); /* the last axis has 4 */
    node(&gr, "LayerNormalization", "ln", "y", 2, "x", "ln.weight");
    refused(write_graph(&gr, "lnscale.onnx"), 2, "node 'ln' (LayerNormalization)",
            "its scale is not of the normalised axes' shape");
    graph_init(&gr, 4);
    init_int64s(&gr, "shape", 4, shape);
    node(&gr, "Expand", "ex", "y", 2, "x", "shape");
    refused(write_graph(&gr, "expandx.onnx"), 2, "node 'ex' (Expand)",
            "only an Expand of a parameter");
    graph_init(&gr, 4);
    node(&gr, "Gather", "ga", "y", 2, "x", "x");
    refused(write_graph(&gr, "gatherx.onnx"), 2, "node 'ga' (Gather)",
            "its indices 'x' are computed: only constant indices are supported");
    graph_init(&gr, 4);
    init_int64s(&gr, "index", 0, zero);
    attr_int(&gr, node(&gr, "Gather", "gb", "y", 2, "x", "index"), "axis", 0);
    refused(write_graph(&gr, "gather0.onnx"), 2, "node 'gb' (Gather)", "the batch axis");
    graph_init(&gr, 4); /* [N, 1, 4, 4] times [N, 1, 4, 4]: a batched matmul, whose 4 x 4
                           output is not [batch, classes] */
    node(&gr, "MatMul", "mm", "y", 2, "x", "x");
    refused(write_graph(&gr, "matmulxx.onnx"), 2, "the graph's output 'y'", "not [batch, classes]");
}

/* A Pad of zeros on H and W becomes the padding of the Conv or AveragePool that alone
 * reads it (its pads, the reader's output size); before a MaxPool, or of another value,
 * it is a pad2d op; a Pad of channels is refused naming the node. */
static void test_a_pad_of_zeros_folds_into_its_reader(void **state) {
    (void)state;
    static int64_t hw[8] = {0, 0, 1, 0, 0, 0, 1, 2}; /* top 1, bottom 1, right 2 */
    graph gr;
    pad_graph(&gr, "Conv", hw, 0.0f);
    /* 4x4 in, pads 1 + 1 and 0 + 2: 6x6, a 3x3 kernel: 4x4 */
    dt_model_spec spec = {.name = write_graph(&gr, "pad_conv.onnx")};
    dt_model m;
    dt_error err;
    if (dt_onnx_build_any(&m, &spec, &err)) fail_msg("%s", err.msg);
    const dt_op *conv = &m.ops[0];
    assert_int_equal(conv->kind, DT_OP_CONV2D);
    assert_int_equal(conv->pad_top, 1);
    assert_int_equal(conv->pad_left, 0);
    assert_int_equal(conv->pad_bottom, 1);
    assert_int_equal(conv->pad_right, 2);
    assert_int_equal(m.values[conv->out].h, 4);
    assert_int_equal(m.values[conv->out].w, 4);
    dt_model_free(&m);
    pad_graph(&gr, "AveragePool", hw, 0.0f);
    spec.name = write_graph(&gr, "pad_avg.onnx");
    if (dt_onnx_build_any(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.ops[0].kind, DT_OP_AVGPOOL2D);
    assert_int_equal(m.ops[0].pad_right, 2);
    assert_int_equal(m.ops[0].count_include_pad, 1); /* the zeros count, as before folding */
    dt_model_free(&m);
    /* a MaxPool pads with -inf: the zeros become a pad2d op before it; so does a value */
    pad_graph(&gr, "MaxPool", hw, 0.0f);
    spec.name = write_graph(&gr, "pad_max.onnx");
    if (dt_onnx_build_any(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_int_equal(m.ops[0].kind, DT_OP_PAD2D);
    assert_int_equal(m.ops[0].pad_right, 2);
    assert_true(m.ops[1].kind == DT_OP_MAXPOOL2D && m.ops[1].pad_top == 0);
    dt_model_free(&m);
    pad_graph(&gr, "Conv", hw, 1.5f);
    spec.name = write_graph(&gr, "pad_value.onnx");
    if (dt_onnx_build_any(&m, &spec, &err)) fail_msg("%s", err.msg);
    assert_true(m.ops[0].kind == DT_OP_PAD2D && m.ops[0].pad_value == 1.5f);
    assert_true(m.ops[1].kind == DT_OP_CONV2D && m.ops[1].pad_top == 0);
    dt_model_free(&m);
    static int64_t channels[8] = {0, 1, 0, 0, 0, 0, 0, 0};
    pad_graph(&gr, "Conv", channels, 0.0f);
    refused(write_graph(&gr, "pad_channels.onnx"), 2, "node 'pad' (Pad)", "height and width");
}

int main(void) {
    snprintf(folder, sizeof folder, "/tmp/dtrain_test_onnx_XXXXXX");
    if (!mkdtemp(folder)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_good_graph_gives_its_shape_names_and_weights),
        cmocka_unit_test(test_files_that_are_not_onnx_are_refused),
        cmocka_unit_test(test_an_unsupported_op_names_the_node),
        cmocka_unit_test(test_every_lacking_op_is_named_at_once),
        cmocka_unit_test(test_an_eval_mode_export_is_refused_with_its_fix),
        cmocka_unit_test(test_bad_groups_and_dilations_are_refused),
        cmocka_unit_test(test_undefined_inputs_and_cycles_are_refused),
        cmocka_unit_test(test_shape_contradictions_and_huge_dims_are_refused),
        cmocka_unit_test(test_external_data_outside_the_folder_is_refused),
        cmocka_unit_test(test_external_data_inside_the_folder_is_read),
        cmocka_unit_test(test_a_relu_whose_input_has_other_readers_is_refused),
        cmocka_unit_test(test_a_relu_through_an_alias_counts_every_name),
        cmocka_unit_test(test_deeply_nested_subgraphs_are_refused),
        cmocka_unit_test(test_save_writes_weights_in_the_files_layout),
        cmocka_unit_test(test_untrainable_weights_and_old_opsets_are_refused),
        cmocka_unit_test(test_a_save_past_2_gib_is_refused_before_training),
        cmocka_unit_test(test_a_value_past_size_t_is_refused_by_the_model),
        cmocka_unit_test(test_broadcasting_ops_take_parameters_and_constants),
        cmocka_unit_test(test_a_matmul_without_an_add_is_a_linear_without_bias),
        cmocka_unit_test(test_broadcasting_ops_refuse_what_they_cannot),
        cmocka_unit_test(test_gelus_decomposition_is_one_op),
        cmocka_unit_test(test_gelus_tanh_form_is_one_op),
        cmocka_unit_test(test_silu_and_hardswishs_decompositions_are_one_op),
        cmocka_unit_test(test_clip_takes_its_bounds_as_its_opset_says),
        cmocka_unit_test(test_activations_run_in_place_where_nothing_else_reads_the_input),
        cmocka_unit_test(test_a_class_token_imports_and_sums_its_gradient_over_the_batch),
        cmocka_unit_test(test_transformer_ops_refuse_in_one_line),
        cmocka_unit_test(test_a_gemm_on_rows_is_a_linear_over_the_last_axis),
        cmocka_unit_test(test_inception_like_imports_its_windows),
        cmocka_unit_test(test_a_pad_of_zeros_folds_into_its_reader),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "%s", folder);
    /* the scratch folder's files, then the folder (no shell) */
    const char *names[] = {
        "good.onnx",   "text.onnx",         "whole.onnx",     "truncated.onnx", "softmax.onnx",
        "group.onnx",  "dilated.onnx",      "undefined.onnx", "cycle.onnx",     "channels.onnx",
        "short.onnx",  "huge.onnx",         "hugeinput.onnx", "flat.onnx",      "outside.onnx",
        "head.bin",    "external.onnx",     "inplace.onnx",   "alias.onnx",     "deep.onnx",
        "layout.onnx", "layout_saved.onnx", "opset.onnx",     "reserved.onnx",  "nan.onnx"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", folder, names[i]);
        unlink(p);
    }
    rmdir(cmd);
    return failed;
}
