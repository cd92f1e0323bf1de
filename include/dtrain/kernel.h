/* What the graph asks of a backend: memory for its buffers and a kernel per op.
 *
 * A kernel is how one kind of op computes on one backend for the activation dtypes
 * and layouts it accepts (conv2d on oneDNN in f32 or bf16, ReLU's loop in f32, ...).
 * A backend lists its kernels in a table; when a model is allocated (backend.h), each
 * storage gets a dtype and a layout and each op the first kernel of its kind in the
 * table that accepts them. The model then runs forward and backward through its ops'
 * kernels and never asks which backend or dtype they are.
 *
 * The graph's types only: nothing here names a backend, so src/nn depends on no
 * backend (the CPU one is src/exec/). */
#ifndef DTRAIN_KERNEL_H
#define DTRAIN_KERNEL_H

/* area: nn */

#include <stddef.h>

#include "dtrain/dtype.h"
#include "dtrain/error.h"
#include "dtrain/op.h"

/* Which activation layouts a kernel handles (model.h, dt_storage.blocked). */
typedef enum dt_op_layouts {
    DT_OP_PLAIN_ONLY = 0,   /* NCHW in and out */
    DT_OP_ANY_LAYOUTS,      /* each input and the output in either layout (conv2d) */
    DT_OP_SAME_LAYOUT,      /* either, the inputs' and the output's the same */
    DT_OP_ANY_IN_PLAIN_OUT, /* input in either layout, output NCHW */
} dt_op_layouts;

/* Every function gets the model (to find values and tensors) and the op; n is the
 * batch of this call, max_batch the one the model is allocated for. NULL entries:
 * nothing to do there. */
typedef struct dt_kernel {
    dt_op_kind kind;
    const char *name; /* e.g. "relu.bf16": messages and the run record */
    /* The activations' dtype this kernel is for: every input and output of the op in
     * it, unless `accepts` says otherwise. */
    dt_dtype dtype;
    dt_op_layouts layouts;
    /* NULL: the op's storages must all be `dtype`. Else 1 when the kernel runs this op
     * with its storages' present dtypes (e.g. a conv reading the model's f32 input
     * and writing bf16, a linear head writing f32 logits from bf16). */
    int (*accepts)(const dt_model *m, const dt_op *op);
    /* Before anything is allocated: adds the bytes the op's own state will take to
     * *bytes (so the model can refuse a batch that does not fit) and asks the
     * backend for plans, which reserve shared scratch. */
    int (*plan)(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err);
    /* Allocates op->state for batches of up to max_batch. */
    int (*alloc)(dt_model *m, dt_op *op, int max_batch, dt_error *err);
    /* Releases whatever plan and alloc made; called also after a failed alloc. */
    void (*free)(dt_model *m, dt_op *op);
    void (*forward)(dt_model *m, dt_op *op, int n);
    /* Accumulates (+=) into the input's and the parameters' gradients, or writes the
     * input's when plan set its storage's grad_written. */
    void (*backward)(dt_model *m, dt_op *op, int n);
} dt_kernel;

/* A backend: its state, its memory and its kernel table. Made by the code that
 * allocates a model (src/exec/backend.c for the CPU) and owned by the model. */
typedef struct dt_backend {
    const char *name; /* "cpu" */
    void *ctx;        /* the backend's own state (engines, scratch) */
    /* Memory the kernels read: activations and their gradients. Host memory on the
     * CPU; a device backend would return device pointers here. */
    void *(*alloc)(void *ctx, size_t bytes, const char *what, dt_error *err);
    void (*free)(void *ctx, void *p);
    void (*memset0)(void *ctx, void *p, size_t bytes);
    /* The kernels, tried in order for each op. */
    const dt_kernel *const *kernels;
    size_t n_kernels;
    /* Releases ctx; the ops' kernels have freed their state first. */
    void (*destroy)(void *ctx);
} dt_backend;

/* The CPU loops' f32 kernels, each beside its op's math in src/nn/<op>.c (conv2d's
 * is the backend's own, backend.h). */
extern const dt_kernel dt_linear_f32_kernel, dt_batchnorm2d_f32_kernel, dt_relu_f32_kernel,
    dt_maxpool2d_f32_kernel, dt_avgpool2d_f32_kernel, dt_add_f32_kernel, dt_shortcut_pad_f32_kernel,
    dt_dropout_f32_kernel, dt_concat_f32_kernel, dt_adaptive_avgpool2d_f32_kernel;
/* The elementwise binary op: same shapes (any layout), and broadcasting (NCHW). */
extern const dt_kernel dt_binary_f32_kernel, dt_binary_bcast_f32_kernel, dt_reduce_mean_f32_kernel;
/* The activations' loop is one body for both element types: both its kernels are
 * beside it (src/nn/activation.c). */
extern const dt_kernel dt_activation_f32_kernel, dt_activation_bf16_kernel;
/* The transformer's ops: each loop written once for f32 and bf16 activations (nn/elem.h),
 * both kernel rows beside the op's math; but matmul's bf16 row, on oneDNN's bf16 matmul
 * (src/exec/bf16_matmul.c). */
extern const dt_kernel dt_softmax_f32_kernel, dt_softmax_bf16_kernel, dt_layernorm_f32_kernel,
    dt_layernorm_bf16_kernel, dt_matmul_f32_kernel, dt_matmul_bf16_kernel, dt_slice_f32_kernel,
    dt_slice_bf16_kernel, dt_expand_param_f32_kernel, dt_expand_param_bf16_kernel;
/* Constant padding's kernels, both in src/nn/pad2d.c (one loop, two element types). */
extern const dt_kernel dt_pad2d_f32_kernel, dt_pad2d_bf16_kernel;

#endif
