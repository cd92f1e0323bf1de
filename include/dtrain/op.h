/* The op table: the graph's facts about each kind of op in one row per kind (name,
 * FLOPs). Each row is defined next to its layer's math (src/nn/<layer>.c); the table
 * itself is src/nn/op.c. How ops compute is in kernel rows (kernel.h), which a
 * backend lists.
 *
 * Adding an op: a kind below, its row in its layer's file, the row in the table, a
 * builder dt_model_<op>() in model.c and its kernels (docs/architecture.md, "How to
 * add an op"). */
#ifndef DTRAIN_OP_H
#define DTRAIN_OP_H

#include <stddef.h>

#include "dtrain/error.h"

typedef enum dt_op_kind {
    DT_OP_CONV2D,
    DT_OP_LINEAR,
    DT_OP_BATCHNORM2D,
    DT_OP_RELU,
    DT_OP_MAXPOOL2D,
    DT_OP_AVGPOOL2D,
    DT_OP_ADD,
    DT_OP_SHORTCUT_PAD,
    DT_OP_DROPOUT,
    DT_OP_CONCAT,
    DT_OP_ADAPTIVE_AVGPOOL2D,
    DT_OP_TRANSPOSE,
    DT_OP_BINARY,
    DT_OP_REDUCE_MEAN,
    DT_OP_ACTIVATION, /* elementwise: its function in dt_op.act (activation.h) */
    DT_OP_SOFTMAX,
    DT_OP_LAYERNORM,
    DT_OP_MATMUL,
    DT_OP_SLICE,
    DT_OP_EXPAND_PARAM,
    DT_OP_PAD2D,
    DT_OP_COUNT /* the number of kinds: size arrays and loops with it */
} dt_op_kind;

typedef struct dt_model dt_model;
typedef struct dt_op dt_op;

/* The graph's facts about one kind of op: its name and what it costs. How an op
 * computes is a kernel's business (kernel.h): a backend offers kernels per kind,
 * dtype and layout, and dt_model_alloc picks one for each op. Both cost functions
 * read only the graph's shapes, so they work on a model built but not allocated. */
typedef struct dt_op_class {
    const char *name; /* e.g. "conv2d": profiles and messages */
    /* Floating-point operations of one training step on n samples. NULL: not counted. */
    double (*flops)(const dt_model *m, const dt_op *op, int n);
    /* Those of the forward pass alone (inference cost, `dtrain models`). */
    double (*forward_flops)(const dt_model *m, const dt_op *op, int n);
} dt_op_class;

const dt_op_class *dt_op_class_of(dt_op_kind kind);
const char *dt_op_kind_name(dt_op_kind kind);

/* The rows, each defined in its layer's file. */
extern const dt_op_class dt_conv2d_op, dt_linear_op, dt_batchnorm2d_op, dt_relu_op, dt_maxpool2d_op,
    dt_avgpool2d_op, dt_add_op;
extern const dt_op_class dt_shortcut_pad_op, dt_dropout_op, dt_concat_op, dt_adaptive_avgpool2d_op;
extern const dt_op_class dt_transpose_op;
extern const dt_op_class dt_binary_op, dt_reduce_mean_op;
extern const dt_op_class dt_activation_op;
extern const dt_op_class dt_softmax_op, dt_layernorm_op, dt_matmul_op, dt_slice_op,
    dt_expand_param_op;
extern const dt_op_class dt_pad2d_op;

#endif
