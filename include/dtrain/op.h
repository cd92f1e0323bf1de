/* The op table: what each kind of op in the model graph does, in one row per kind
 * (name, per-op state, forward, backward, flops). The model walks its ops and calls
 * through their rows, so it never asks which kind an op is. Each row is defined next
 * to its layer's math (src/nn/<layer>.c), with the glue that finds its arrays in the
 * graph; the table itself is src/nn/op.c.
 *
 * Adding an op: a kind below, its row in its layer's file, the row in the table, and
 * a builder dt_model_<op>() in model.c (docs/architecture.md, "How to add an op"). */
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
    DT_OP_COUNT /* the number of kinds: size arrays and loops with it */
} dt_op_kind;

typedef struct dt_model dt_model;
typedef struct dt_op dt_op;

/* Which activation layouts an op's row handles (model.h, dt_storage.blocked). */
typedef enum dt_op_layouts {
    DT_OP_PLAIN_ONLY = 0,   /* NCHW in and out */
    DT_OP_ANY_LAYOUTS,      /* each input and the output in either layout (conv2d) */
    DT_OP_SAME_LAYOUT,      /* either, the inputs' and the output's the same */
    DT_OP_ANY_IN_PLAIN_OUT, /* input in either layout, output NCHW */
} dt_op_layouts;

/* Every function gets the model (to find values and tensors) and the op; n is the
 * batch of this call, max_batch the one the model is allocated for. NULL entries:
 * the op has nothing to do there. */
typedef struct dt_op_class {
    const char *name; /* e.g. "conv2d": profiles and messages */
    dt_op_layouts layouts;
    /* Before anything is allocated: adds the bytes the op's own state will take to
     * *bytes (so the model can refuse a batch that does not fit) and asks the
     * model's exec context for backend plans, which reserve shared scratch. */
    int (*plan)(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err);
    /* Allocates op->state for batches of up to max_batch. */
    int (*alloc)(dt_model *m, dt_op *op, int max_batch, dt_error *err);
    /* Releases whatever plan and alloc made; called also after a failed alloc. */
    void (*free)(dt_model *m, dt_op *op);
    void (*forward)(dt_model *m, dt_op *op, int n);
    /* Accumulates (+=) into the input's and the parameters' gradients. */
    void (*backward)(dt_model *m, dt_op *op, int n);
    /* Floating-point operations of one training step on n samples. */
    double (*flops)(const dt_model *m, const dt_op *op, int n);
    /* Those of the forward pass alone (inference cost, `dtrain models`). Both read only
     * the graph's shapes, so they work on a model built but not allocated. */
    double (*forward_flops)(const dt_model *m, const dt_op *op, int n);
} dt_op_class;

const dt_op_class *dt_op_class_of(dt_op_kind kind);
const char *dt_op_kind_name(dt_op_kind kind);

/* The rows, each defined in its layer's file. */
extern const dt_op_class dt_conv2d_op, dt_linear_op, dt_batchnorm2d_op, dt_relu_op, dt_maxpool2d_op,
    dt_avgpool2d_op, dt_add_op;
extern const dt_op_class dt_shortcut_pad_op, dt_dropout_op, dt_concat_op, dt_adaptive_avgpool2d_op;

#endif
