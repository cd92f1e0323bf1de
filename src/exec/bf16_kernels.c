/* The CPU backend's bf16 kernels: the graph's side of src/exec/bf16_ops.c. Each row
 * runs an op whose activations (data and gradient) are bf16, with the semantics of
 * its f32 twin in src/nn. Where an op is its input gradient's only reader, its plan
 * claims the gradient (grad_written) and backward writes it instead of adding, which
 * spares the model zeroing it. */
#include "exec/bf16_kernels.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/model.h"
#include "exec/bf16_ops.h"
#include "exec/exec.h"
#include "nn/binary.h"
#include "nn/concat.h"
#include "nn/dropout.h"
#include "nn/reduce_mean.h"
#include "nn/linear.h"

static uint16_t *data16(dt_model *m, int v) {
    return dt_model_value_ptr(m, v);
}

static uint16_t *grad16(dt_model *m, int v) {
    return dt_model_value_grad_ptr(m, v);
}

static size_t count_of(const dt_model *m, int v, int n) {
    return dt_model_value_floats(m, v, n);
}

/* 1: backward adds into value v's gradient; 0: it writes it. */
static int adds(const dt_model *m, int v) {
    return !m->storages[m->values[v].storage].grad_written;
}

/* The op is the only reader of its input: its backward writes the input's gradient. */
static void claim_input_grad(dt_model *m, int v) {
    dt_storage *s = &m->storages[m->values[v].storage];
    if (s->readers == 1) s->grad_written = 1;
}

static int claim_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    claim_input_grad(m, op->in);
    return 0;
}

/* ReLU, in place: din and dout are one buffer, so backward writes. */

static void relu_forward(dt_model *m, dt_op *op, int n) {
    dt_bf16_relu_forward(data16(m, op->out), data16(m, op->in), count_of(m, op->in, n));
}

static void relu_backward(dt_model *m, dt_op *op, int n) {
    uint16_t *din = grad16(m, op->in);
    if (din)
        dt_bf16_relu_backward(din, grad16(m, op->out), data16(m, op->out), count_of(m, op->out, n),
                              0);
}

const dt_kernel dt_relu_bf16_kernel = {
    .kind = DT_OP_RELU,
    .name = "relu.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .forward = relu_forward,
    .backward = relu_backward,
};

/* The ReLU a BatchNorm kernel applied already (op->relu_fused on the BatchNorm). */
static void nothing(dt_model *m, dt_op *op, int n) {
    (void)m, (void)op, (void)n;
}

const dt_kernel dt_relu_fused_kernel = {
    .kind = DT_OP_RELU,
    .name = "relu.fused",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .forward = nothing,
    .backward = nothing,
};

/* Residual add. */

static int add_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    /* the same storage twice (x + x) must accumulate */
    if (m->values[op->in].storage != m->values[op->in2].storage) {
        claim_input_grad(m, op->in);
        claim_input_grad(m, op->in2);
    }
    return 0;
}

static void add_forward(dt_model *m, dt_op *op, int n) {
    dt_bf16_add_forward(data16(m, op->out), data16(m, op->in), data16(m, op->in2),
                        count_of(m, op->out, n));
}

static void add_backward(dt_model *m, dt_op *op, int n) {
    dt_bf16_add_backward(grad16(m, op->in), grad16(m, op->in2), grad16(m, op->out),
                         count_of(m, op->out, n), adds(m, op->in), adds(m, op->in2));
}

const dt_kernel dt_add_bf16_kernel = {
    .kind = DT_OP_ADD,
    .name = "add.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = add_plan,
    .forward = add_forward,
    .backward = add_backward,
};

/* BatchNorm2d on bf16_ops' plan (oneDNN for nChw16c, the loops for NCHW), with the
 * fp32 batch statistics saved for backward as the f32 kernel keeps them. */

typedef struct bn_state {
    dt_bf16_batchnorm *plan;
    float *mean, *invstd; /* [c] */
} bn_state;

static void bn_free(dt_model *m, dt_op *op) {
    (void)m;
    bn_state *st = op->state;
    if (st) {
        dt_bf16_batchnorm_destroy(st->plan);
        dt_free(st->mean);
        dt_free(st->invstd);
        free(st);
    }
    op->state = NULL;
}

static int bn_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    const dt_value *x = &m->values[op->in];
    bn_state *st = calloc(1, sizeof *st);
    if (!st) return dt_error_set(err, "out of memory for batchnorm %s", op->name);
    op->state = st;
    if (dt_bf16_batchnorm_create(&st->plan, dt_exec_dnnl(m->backend->ctx), max_batch, x->c,
                                 x->h * x->w, dt_model_value_blocked(m, op->in), op->relu_fused,
                                 op->eps, err))
        return -1;
    *bytes += 2 * sizeof(float) * (size_t)x->c + dt_bf16_batchnorm_own_bytes(st->plan);
    claim_input_grad(m, op->in);
    return 0;
}

static int bn_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    (void)max_batch;
    const size_t c = (size_t)m->values[op->in].c;
    bn_state *st = op->state;
    if (!(st->mean = dt_alloc(sizeof(float) * c, "batchnorm statistics", err)) ||
        !(st->invstd = dt_alloc(sizeof(float) * c, "batchnorm statistics", err)))
        return -1;
    return 0;
}

static void bn_forward(dt_model *m, dt_op *op, int n) {
    bn_state *st = op->state;
    if (m->training) {
        dt_bf16_batchnorm_forward_train(st->plan, n, data16(m, op->out), st->mean, st->invstd,
                                        dt_model_param(m, op->running_mean),
                                        dt_model_param(m, op->running_var), data16(m, op->in),
                                        dt_model_param(m, op->weight), dt_model_param(m, op->bias),
                                        op->momentum);
        op->num_batches_tracked++;
    } else {
        dt_bf16_batchnorm_forward_eval(st->plan, n, data16(m, op->out), data16(m, op->in),
                                       dt_model_param(m, op->running_mean),
                                       dt_model_param(m, op->running_var),
                                       dt_model_param(m, op->weight), dt_model_param(m, op->bias));
    }
}

static void bn_backward(dt_model *m, dt_op *op, int n) {
    bn_state *st = op->state;
    dt_bf16_batchnorm_backward(st->plan, n, grad16(m, op->in), dt_model_param_grad(m, op->weight),
                               dt_model_param_grad(m, op->bias), grad16(m, op->out),
                               data16(m, op->in), data16(m, op->out), st->mean, st->invstd,
                               dt_model_param(m, op->weight), adds(m, op->in));
}

const dt_kernel dt_batchnorm2d_bf16_kernel = {
    .kind = DT_OP_BATCHNORM2D,
    .name = "batchnorm2d.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = bn_plan,
    .alloc = bn_alloc,
    .free = bn_free,
    .forward = bn_forward,
    .backward = bn_backward,
};

/* Max pooling: the argmax per output element, as the f32 kernel keeps it. */

static int maxpool_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)err;
    *bytes += sizeof(int32_t) * count_of(m, op->out, max_batch);
    claim_input_grad(m, op->in);
    return 0;
}

static int maxpool_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    op->state = dt_alloc(sizeof(int32_t) * count_of(m, op->out, max_batch), "maxpool indices", err);
    return op->state ? 0 : -1;
}

static void maxpool_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_free(op->state);
    op->state = NULL;
}

static void maxpool_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    dt_bf16_maxpool2d_forward(data16(m, op->out), op->state, data16(m, op->in), n, x->c, x->h, x->w,
                              op->kernel, op->stride, op->pad, op->ceil_mode,
                              dt_model_value_blocked(m, op->in));
}

static void maxpool_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    uint16_t *din = grad16(m, op->in);
    if (din)
        dt_bf16_maxpool2d_backward(din, grad16(m, op->out), op->state, n, x->c, x->h, x->w,
                                   op->kernel, op->stride, op->pad, op->ceil_mode,
                                   dt_model_value_blocked(m, op->in), adds(m, op->in));
}

/* Its loops (hand-vectorised for square windows) take a square window with equal pads;
 * other max pools run in f32. */
static int maxpool_accepts(const dt_model *m, const dt_op *op) {
    return dt_op_window_is_square(op) && dt_model_value_dtype(m, op->in) == DT_BF16 &&
           dt_model_value_dtype(m, op->out) == DT_BF16;
}

const dt_kernel dt_maxpool2d_bf16_kernel = {
    .kind = DT_OP_MAXPOOL2D,
    .accepts = maxpool_accepts,
    .name = "maxpool2d.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = maxpool_plan,
    .alloc = maxpool_alloc,
    .free = maxpool_free,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
};

static void avgpool_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, op->count_include_pad, x->h, x->w, &wy, &wx);
    dt_bf16_avgpool2d_windows_forward(data16(m, op->out), data16(m, op->in), n, x->c, &wy, &wx,
                                      dt_model_value_blocked(m, op->in));
}

static void avgpool_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    uint16_t *din = grad16(m, op->in);
    if (!din) return;
    const dt_pool2d_geom g = dt_op_pool_geom(op);
    dt_pool_windows wy, wx;
    dt_avgpool2d_windows_of(&g, op->count_include_pad, x->h, x->w, &wy, &wx);
    dt_bf16_avgpool2d_windows_backward(din, grad16(m, op->out), n, x->c, &wy, &wx,
                                       dt_model_value_blocked(m, op->in), adds(m, op->in));
}

const dt_kernel dt_avgpool2d_bf16_kernel = {
    .kind = DT_OP_AVGPOOL2D,
    .name = "avgpool2d.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .plan = claim_plan,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
};

static void adaptive_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_bf16_adaptive_avgpool2d_forward(data16(m, op->out), data16(m, op->in), n, x->c, x->h, x->w,
                                       y->h, y->w, dt_model_value_blocked(m, op->in));
}

static void adaptive_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    uint16_t *din = grad16(m, op->in);
    if (din)
        dt_bf16_adaptive_avgpool2d_backward(din, grad16(m, op->out), n, x->c, x->h, x->w, y->h,
                                            y->w, dt_model_value_blocked(m, op->in),
                                            adds(m, op->in));
}

const dt_kernel dt_adaptive_avgpool2d_bf16_kernel = {
    .kind = DT_OP_ADAPTIVE_AVGPOOL2D,
    .name = "adaptive_avgpool2d.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_ANY_IN_PLAIN_OUT,
    .plan = claim_plan,
    .forward = adaptive_forward,
    .backward = adaptive_backward,
};

/* Dropout: the mask of the f32 kernel for the same key; eval (and p = 0) copies. */

static void dropout_forward(dt_model *m, dt_op *op, int n) {
    const size_t count = count_of(m, op->in, n);
    if (m->training && op->p > 0.0f)
        dt_bf16_dropout_forward(data16(m, op->out), data16(m, op->in), count, op->p,
                                dt_dropout_op_key(m, op));
    else
        memcpy(data16(m, op->out), data16(m, op->in), sizeof(uint16_t) * count);
}

static void dropout_backward(dt_model *m, dt_op *op, int n) {
    uint16_t *din = grad16(m, op->in);
    if (!din) return;
    const size_t count = count_of(m, op->in, n);
    /* p = 0 keeps every element with scale 1: the identity's gradient */
    const float p = m->training ? op->p : 0.0f;
    dt_bf16_dropout_backward(din, grad16(m, op->out), count, p, dt_dropout_op_key(m, op),
                             adds(m, op->in));
}

const dt_kernel dt_dropout_bf16_kernel = {
    .kind = DT_OP_DROPOUT,
    .name = "dropout.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = claim_plan,
    .forward = dropout_forward,
    .backward = dropout_backward,
};

/* Concat and the option-A shortcut: copies of 16-bit elements. */

static int concat_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    for (int k = 0; k < op->n_ins; k++)
        for (int j = 0; j < k; j++)
            if (m->values[dt_op_input(m, op, j)].storage ==
                m->values[dt_op_input(m, op, k)].storage)
                return 0; /* an input twice: every gradient accumulates */
    for (int k = 0; k < op->n_ins; k++) claim_input_grad(m, dt_op_input(m, op, k));
    return 0;
}

static void concat_forward(dt_model *m, dt_op *op, int n) {
    size_t outer, inner;
    int total;
    dt_concat_op_geometry(m, op, n, &outer, &total, &inner);
    for (int k = 0, offset = 0; k < op->n_ins; k++) {
        const int x = dt_op_input(m, op, k), size = m->values[x].dims[op->axis];
        dt_bf16_concat_part_forward(data16(m, op->out), data16(m, x), outer, total, offset, size,
                                    inner);
        offset += size;
    }
}

static void concat_backward(dt_model *m, dt_op *op, int n) {
    size_t outer, inner;
    int total;
    dt_concat_op_geometry(m, op, n, &outer, &total, &inner);
    for (int k = 0, offset = 0; k < op->n_ins; k++) {
        const int x = dt_op_input(m, op, k), size = m->values[x].dims[op->axis];
        uint16_t *din = grad16(m, x);
        if (din)
            dt_bf16_concat_part_backward(din, grad16(m, op->out), outer, total, offset, size, inner,
                                         adds(m, x));
        offset += size;
    }
}

const dt_kernel dt_concat_bf16_kernel = {
    .kind = DT_OP_CONCAT,
    .name = "concat.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = concat_plan,
    .forward = concat_forward,
    .backward = concat_backward,
};

static void pad_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_bf16_shortcut_pad_forward(data16(m, op->out), data16(m, op->in), n, x->c, x->h, x->w, y->c,
                                 op->pad, op->stride);
}

static void pad_backward(dt_model *m, dt_op *op, int n) {
    uint16_t *din = grad16(m, op->in);
    if (!din) return;
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    dt_bf16_shortcut_pad_backward(din, grad16(m, op->out), n, x->c, x->h, x->w, y->c, op->pad,
                                  op->stride, adds(m, op->in));
}

const dt_kernel dt_shortcut_pad_bf16_kernel = {
    .kind = DT_OP_SHORTCUT_PAD,
    .name = "shortcut_pad.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = claim_plan,
    .forward = pad_forward,
    .backward = pad_backward,
};

/* Linear on oneDNN's bf16 matmul: the input bf16 or the model's f32, the output bf16
 * or f32 logits; at least one of them bf16 (all-f32 is the f32 kernel's). */

static int linear_accepts(const dt_model *m, const dt_op *op) {
    const dt_dtype in = dt_model_value_dtype(m, op->in), out = dt_model_value_dtype(m, op->out);
    return (in == DT_BF16 || out == DT_BF16) && (in == DT_BF16 || in == DT_F32) &&
           (out == DT_BF16 || out == DT_F32);
}

static int linear_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    dt_dnnl *dnnl = dt_exec_dnnl(m->backend->ctx);
    if (!dnnl) return dt_error_set(err, "linear %s: bf16 needs the oneDNN backend", op->name);
    dt_bf16_linear *lin;
    int rows, in_f, out_f; /* a linear over the last axis: rows per sample times the batch */
    dt_linear_op_geometry(m, op, max_batch, &rows, &in_f, &out_f);
    if (dt_bf16_linear_create(&lin, dnnl, rows, in_f, out_f, op->bias >= 0,
                              dt_model_value_dtype(m, op->in), dt_model_value_dtype(m, op->out),
                              err))
        return -1;
    op->state = lin;
    *bytes += dt_bf16_linear_own_bytes(lin);
    claim_input_grad(m, op->in);
    return 0;
}

static void linear_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_bf16_linear_destroy(op->state);
    op->state = NULL;
}

static int linear_rows(const dt_model *m, const dt_op *op, int n) {
    int rows, in_f, out_f;
    dt_linear_op_geometry(m, op, n, &rows, &in_f, &out_f);
    return rows;
}

static void linear_forward(dt_model *m, dt_op *op, int n) {
    dt_bf16_linear_forward(op->state, linear_rows(m, op, n), dt_model_value_ptr(m, op->out),
                           dt_model_value_ptr(m, op->in), dt_model_param(m, op->weight),
                           dt_model_param(m, op->bias));
}

static void linear_backward(dt_model *m, dt_op *op, int n) {
    dt_bf16_linear_backward(op->state, linear_rows(m, op, n), dt_model_value_grad_ptr(m, op->in),
                            dt_model_param_grad(m, op->weight), dt_model_param_grad(m, op->bias),
                            dt_model_value_grad_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                            adds(m, op->in));
}

const dt_kernel dt_linear_bf16_kernel = {
    .kind = DT_OP_LINEAR,
    .name = "linear.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .accepts = linear_accepts,
    .plan = linear_plan,
    .free = linear_free,
    .forward = linear_forward,
    .backward = linear_backward,
};

/* The elementwise binary op and ReduceMean: the f32 kernels' functions (binary.c,
 * reduce_mean.c), whose loops are instantiated for bf16 too; a tensor operand stays f32.
 * Their backward adds into every gradient. */

static int bf16_activations(const dt_model *m, const dt_op *op) {
    return dt_model_value_dtype(m, op->in) == DT_BF16 &&
           dt_model_value_dtype(m, op->out) == DT_BF16 &&
           (op->in2 < 0 || dt_model_value_dtype(m, op->in2) == DT_BF16);
}

static int binary_any_layout_accepts(const dt_model *m, const dt_op *op) {
    return bf16_activations(m, op) && dt_binary_any_layout(m, op);
}

const dt_kernel dt_binary_bf16_kernel = {
    .kind = DT_OP_BINARY,
    .name = "binary.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_SAME_LAYOUT,
    .accepts = binary_any_layout_accepts,
    .plan = dt_binary_kernel_plan,
    .free = dt_binary_kernel_free,
    .forward = dt_binary_kernel_forward,
    .backward = dt_binary_kernel_backward,
};

const dt_kernel dt_binary_bcast_bf16_kernel = {
    .kind = DT_OP_BINARY,
    .name = "binary_bcast.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .accepts = bf16_activations,
    .plan = dt_binary_kernel_plan,
    .free = dt_binary_kernel_free,
    .forward = dt_binary_kernel_forward,
    .backward = dt_binary_kernel_backward,
};

const dt_kernel dt_reduce_mean_bf16_kernel = {
    .kind = DT_OP_REDUCE_MEAN,
    .name = "reduce_mean.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = dt_reduce_mean_kernel_plan,
    .free = dt_reduce_mean_kernel_free,
    .forward = dt_reduce_mean_kernel_forward,
    .backward = dt_reduce_mean_kernel_backward,
};
