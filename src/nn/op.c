#include "dtrain/op.h"

/* One row per kind, matched by designator. A kind appended before DT_OP_COUNT
 * without its row fails the assertion; a missing row elsewhere would be NULL. */
static const dt_op_class *const op_table[] = {
    [DT_OP_CONV2D] = &dt_conv2d_op,
    [DT_OP_LINEAR] = &dt_linear_op,
    [DT_OP_BATCHNORM2D] = &dt_batchnorm2d_op,
    [DT_OP_RELU] = &dt_relu_op,
    [DT_OP_MAXPOOL2D] = &dt_maxpool2d_op,
    [DT_OP_AVGPOOL2D] = &dt_avgpool2d_op,
    [DT_OP_ADD] = &dt_add_op,
    [DT_OP_SHORTCUT_PAD] = &dt_shortcut_pad_op,
    [DT_OP_DROPOUT] = &dt_dropout_op,
    [DT_OP_CONCAT] = &dt_concat_op,
    [DT_OP_ADAPTIVE_AVGPOOL2D] = &dt_adaptive_avgpool2d_op,
    [DT_OP_TRANSPOSE] = &dt_transpose_op,
    [DT_OP_BINARY] = &dt_binary_op,
    [DT_OP_REDUCE_MEAN] = &dt_reduce_mean_op,
    [DT_OP_ACTIVATION] = &dt_activation_op,
    [DT_OP_SOFTMAX] = &dt_softmax_op,
    [DT_OP_LAYERNORM] = &dt_layernorm_op,
    [DT_OP_MATMUL] = &dt_matmul_op,
    [DT_OP_SLICE] = &dt_slice_op,
    [DT_OP_EXPAND_PARAM] = &dt_expand_param_op,
    [DT_OP_PAD2D] = &dt_pad2d_op,
};
_Static_assert(sizeof op_table / sizeof *op_table == DT_OP_COUNT, "one table row per op kind");

const dt_op_class *dt_op_class_of(dt_op_kind kind) {
    return op_table[kind];
}

const char *dt_op_kind_name(dt_op_kind kind) {
    return op_table[kind]->name;
}
