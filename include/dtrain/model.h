/* The model graph: a list of layer ops over values (activations), built once, then
 * allocated for a maximum batch size. The model owns one contiguous parameter buffer
 * and one gradient buffer in PyTorch's parameter order (state_dict order); layers
 * see offset views into them, so an all-reduce, a bucket or a checkpoint is one buffer
 * range. Non-trainable state (BatchNorm running statistics) lives in `buffers`.
 *
 * Activations are sized for max_batch at allocation; hot loops allocate nothing.
 * Activation gradients share a few pooled buffers, assigned at allocation time from
 * each gradient's live range in the backward pass. */
#ifndef DTRAIN_MODEL_H
#define DTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/activation.h"
#include "dtrain/error.h"
#include "dtrain/kernel.h"
#include "dtrain/op.h"

/* How conv2d layers compute on the CPU backend: oneDNN (default, fastest here) or
 * im2col + OpenBLAS sgemm (the plain reference; also used to cross-check oneDNN). */
typedef enum dt_conv_backend {
    DT_CONV_DNNL,
    DT_CONV_IM2COL,
} dt_conv_backend;

/* The number format of activations and multiplies. fp32: everything fp32. bf16
 * (mixed precision, oneDNN's bf16 primitives on AVX512-BF16 or AMX): activations and
 * their gradients are stored bf16 between layers wherever every op touching them has
 * a bf16 kernel; master weights, weight gradients, BatchNorm's statistics, the loss
 * and the optimizer stay fp32. It needs the oneDNN conv backend and a CPU with bf16
 * (dt_model_alloc says which is missing). */
typedef enum dt_precision {
    DT_PRECISION_FP32,
    DT_PRECISION_BF16,
} dt_precision;

const char *dt_precision_name(dt_precision precision);
/* "fp32" or "bf16"; -1 for anything else. */
int dt_precision_parse(const char *name, dt_precision *precision);

typedef enum dt_init {
    DT_INIT_UNIFORM_FAN_IN, /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for
                               conv/linear weights (kaiming-uniform, a = sqrt(5)) and biases */
    DT_INIT_ONES,
    DT_INIT_ZEROS,
    DT_INIT_NORMAL, /* N(0, std^2): torchvision's schemes (kaiming-normal, N(0, 0.01)) */
} dt_init;

/* A named tensor of the state dict: a parameter (in params/grads) or a buffer. */
typedef struct dt_tensor_entry {
    char name[96];
    int ndim;
    int shape[4];
    size_t numel;
    size_t offset; /* in floats, into params (is_param) or buffers */
    int is_param;
    dt_init init;
    int fan_in;
    float std; /* DT_INIT_NORMAL */
} dt_tensor_entry;

/* The most axes a value has per sample (the batch axis not counted): a transformer's
 * [heads, T, d] takes 3, channel shuffle's [groups, C/groups, H, W] 4. */
enum { DT_VALUE_MAX_RANK = 6 };

/* A value's per-sample shape: `rank` axes in `dims` (the batch axis, symbolic, comes
 * before them). The ops of images and vectors read it as c, h, w: an image [C, H, W]
 * (rank 3) and a vector [F] (rank 1, c = F, h = w = 1); values of any other rank have
 * c = h = w = 0, and those ops refuse them (dt_model_value_is_image). */
typedef struct dt_value {
    int storage;
    int c, h, w; /* the image view of dims: see above */
    int rank;
    int dims[DT_VALUE_MAX_RANK];
} dt_value;

typedef struct dt_storage {
    size_t per_sample; /* elements */
    dt_dtype dtype; /* of data and grad, set by dt_model_alloc: f32, or bf16 (DT_PRECISION_BF16) */
    int needs_grad;
    /* Layout of data and grad, set by dt_model_alloc's layout pass: 0 NCHW, 1 oneDNN's
     * nChw16c (channel blocks of 16 innermost: [n, c/16, h, w, 16]), kept from a conv
     * through BatchNorm, ReLU and residual adds to the next conv so that no reorder
     * runs between them. Only on the oneDNN backend, for channel counts divisible by 16. */
    int blocked;
    int readers;      /* ops that read it (in-place ReLU not counted): 1 lets its reader write
                         the gradient instead of adding to it */
    int grad_written; /* set by the sole reader's plan when its backward writes the
                         gradient: the model then does not zero it first */
    int first_writer, last_user; /* op indices; last_user == n_ops means "the loss" */
    int grad_slot;
    void *data; /* [max_batch, per_sample] of dtype */
    void *grad; /* points into a pooled slot while live in backward */
} dt_storage;

/* The elementwise binary op's function: out = a OP b, or for the _REVERSED ones, where
 * a tensor operand t comes first, out = t - a and t / a. Numbered from 1 so that a
 * graph without these ops hashes as before. */
typedef enum dt_binary_func {
    DT_BINARY_ADD = 1,
    DT_BINARY_SUB,
    DT_BINARY_MUL,
    DT_BINARY_DIV,
    DT_BINARY_SUB_REVERSED,
    DT_BINARY_DIV_REVERSED,
} dt_binary_func;

/* One op of the graph; what it does is its kind's row of the op table (op.h). */
typedef struct dt_op {
    dt_op_kind kind;
    char name[80]; /* state-dict prefix, e.g. "layer1.0.conv1" */
    int in, in2, out;
    /* concat: its n_ins inputs in order are m->op_inputs[ins_first ...] (indices, as that
     * array grows while the graph is built; dt_op_input reads them); 0 for other ops */
    int ins_first, n_ins;
    int weight, bias, running_mean, running_var; /* tensor entry ids or -1 */
    /* conv2d and pools: the window kh x kw, its strides and its pads on each side (ONNX's
     * [top, left, bottom, right]); kernel, stride and pad are kh, stride_h and pad_top,
     * the whole shape where it is square and symmetric (shortcut_pad: its own use) */
    int kernel, stride, pad;
    int kh, kw, stride_h, stride_w;
    int pad_top, pad_left, pad_bottom, pad_right;
    int count_include_pad; /* avgpool: padded cells count in the divisor (PyTorch's default) */
    float pad_value;       /* pad2d: the constant its frame holds */
    int dilation, groups;  /* conv2d: 1 and 1 for a plain convolution */
    int ceil_mode;         /* maxpool: PyTorch's ceil_mode */
    float eps;             /* batchnorm: added to the variance */
    float momentum;        /* batchnorm: PyTorch's momentum, the batch statistics' weight in the
                              running ones (0.1; ONNX's momentum is 1 minus it) */
    float p;               /* dropout: the probability of zeroing an element */
    int64_t num_batches_tracked; /* batchnorm */
    int perm[DT_VALUE_MAX_RANK]; /* transpose: output axis d is input axis perm[d] (per
                                    sample; the batch axis stays first) */
    int relu_fused;              /* batchnorm: its kernel also applies the in-place ReLU that
                                    follows, whose kernel then does nothing (dt_model_alloc) */
    int func;                    /* binary: its dt_binary_func (0 for every other op) */
    float scalar;      /* binary: the constant operand when it has neither in2 nor weight */
    unsigned axes;     /* reduce_mean: bit d set = per-sample axis d (dims[d]) is averaged */
    dt_activation act; /* activation: the function and its parameters */
    /* Ops along one axis of a value of any rank (softmax, layernorm, slice; concat's
     * `axis` is the one it joins, 0 an image's channels, without the geometry):
     * a sample is [outer, len, inner] around the axis `axis` (0 = the first per-sample
     * axis; the batch axis is never one), so the op sees n * outer rows of len x inner.
     * Layernorm and a coerced softmax (opset < 13) span from the axis to the end: inner
     * is 1 there. */
    int axis, outer, len, inner;
    int start, step, count; /* slice: elements start, start + step, ... (count of them) */
    int log_softmax;        /* softmax: log(softmax) */
    const dt_kernel *impl;  /* how it computes: its kernel (kernel.h), chosen by dt_model_alloc */
    void *state;            /* owned by its kernel: e.g. maxpool's argmax, conv2d's oneDNN plan */
} dt_op;

typedef struct dt_model {
    char name[32];
    int classes;
    int max_batch;
    int training; /* 1: BatchNorm uses batch statistics and updates running stats, dropout drops */
    /* Dropout's masks: element i of op k in the t-th training forward is dropped by
     * the counter-based RNG at (dropout_seed, stream k, counter t * 2^40 + i), so runs
     * repeat and successive steps differ. dt_model_forward counts training forwards. */
    uint64_t dropout_seed;
    uint64_t dropout_calls;
    dt_conv_backend conv_backend; /* set before dt_model_alloc: conv2d's kernels */
    dt_precision precision;       /* set before dt_model_alloc: activations' format */
    int plain_layouts; /* set before dt_model_alloc: every activation NCHW (tests compare) */

    dt_tensor_entry *tensors;
    int n_tensors, cap_tensors;
    float *params, *grads;
    size_t n_params;
    float *buffers;
    size_t n_buffers;
    /* Imported starting values (an ONNX graph's initializers), [n_params + n_buffers]:
     * parameters then buffers, each tensor at its offset. NULL for zoo models.
     * dt_model_init_params starts from them instead of drawing. */
    float *imported;

    dt_value *values;
    int n_values, cap_values;
    dt_storage *storages;
    int n_storages, cap_storages;
    dt_op *ops;
    int n_ops, cap_ops;
    int *op_inputs; /* the input lists of ops of many inputs (concat): dt_op.ins_first */
    int n_op_inputs, cap_op_inputs;

    void **grad_slots;
    size_t *grad_slot_bytes;
    int n_grad_slots;
    float *probs;
    dt_backend *backend; /* memory and kernels: made by dt_model_alloc (backend.h) */

    /* Called during backward each time an op has finished writing the gradients of
     * its parameters, params[offset .. offset+count) (e.g. to start all-reducing a
     * bucket). NULL: none. */
    void (*on_grads_ready)(void *ctx, size_t offset, size_t count);
    void *on_grads_ctx;

    /* Optional per-op timing (seconds, accumulated): NULL unless
     * dt_model_enable_profile was called. [n_ops] each. */
    double *op_forward_s, *op_backward_s;

    int build_failed;
    dt_error build_error;
} dt_model;

/* Building: each call appends an op and returns the id of its output value, or -1
 * after recording the first error in the model (checked by dt_model_alloc). */
void dt_model_init_empty(dt_model *m, const char *name, int classes);
int dt_model_input(dt_model *m, int c, int h, int w);
int dt_model_conv2d(dt_model *m, const char *name, int in, int c_out, int kernel, int stride,
                    int pad, int bias);
/* PyTorch's Conv2d(..., dilation, groups): weight [c_out, c_in / groups, k, k]. */
int dt_model_conv2d_grouped(dt_model *m, const char *name, int in, int c_out, int kernel,
                            int stride, int pad, int dilation, int groups, int bias);
/* The same with a kh x kw kernel, strides per axis and pads {top, left, bottom, right}
 * (Inception's 1x7 with pads (0, 3)): weight [c_out, c_in / groups, kh, kw]. */
int dt_model_conv2d_rect(dt_model *m, const char *name, int in, int c_out, int kh, int kw,
                         int stride_h, int stride_w, const int pads[4], int dilation, int groups,
                         int bias);
int dt_model_linear(dt_model *m, const char *name, int in, int out_features);
/* The same with a bias only where bias != 0 (nn.Linear(bias=False) has none). */
int dt_model_linear_bias(dt_model *m, const char *name, int in, int out_features, int bias);
int dt_model_batchnorm2d(dt_model *m, const char *name, int in); /* eps 1e-5, PyTorch's default */
int dt_model_batchnorm2d_eps(dt_model *m, const char *name, int in, float eps);
/* BatchNorm2d(eps=eps, momentum=momentum) as PyTorch: running = (1 - momentum) * running
 * + momentum * batch statistic; 0 <= momentum <= 1. */
int dt_model_batchnorm2d_momentum(dt_model *m, const char *name, int in, float eps, float momentum);
int dt_model_relu(dt_model *m, int in); /* in place */
/* An elementwise activation (activation.h) of a value of any shape, into a new value:
 * clip (bounds a, b: infinite for none; a > b gives b, as ONNX), sigmoid, hardsigmoid
 * (alpha a, beta b), hardswish, tanh, leaky_relu (slope a), gelu, gelu_tanh, silu.
 * Parameters are finite, clip's not NaN. */
int dt_model_activation(dt_model *m, int in, dt_activation act);
/* The same, overwriting its input (as dt_model_relu: nothing may read the input after
 * it), for a function that dt_activation_runs_in_place. */
int dt_model_activation_in_place(dt_model *m, int in, dt_activation act);
int dt_model_maxpool2d(dt_model *m, int in, int kernel, int stride);
/* PyTorch's MaxPool2d(kernel, stride, padding, ceil_mode): padding counts as -inf,
 * pad <= kernel / 2; ceil_mode keeps a last window that starts inside the input. */
int dt_model_maxpool2d_padded(dt_model *m, int in, int kernel, int stride, int pad, int ceil_mode);
int dt_model_avgpool2d(dt_model *m, int in, int kernel, int stride);
/* Max or average pooling (kind DT_OP_MAXPOOL2D or DT_OP_AVGPOOL2D) over kh x kw windows
 * with strides per axis and pads {top, left, bottom, right}, each below its side of the
 * kernel; ceil_mode as above; count_include_pad (average pooling): the divisor counts
 * padded cells, as PyTorch's default. */
int dt_model_pool2d_rect(dt_model *m, dt_op_kind kind, int in, int kh, int kw, int stride_h,
                         int stride_w, const int pads[4], int ceil_mode, int count_include_pad);
/* AdaptiveAvgPool2d((h_out, w_out)): output cell i averages input rows
 * floor(i*h/h_out) .. ceil((i+1)*h/h_out) - 1, and the same for columns. */
int dt_model_adaptive_avgpool2d(dt_model *m, int in, int h_out, int w_out);
/* Dropout(p) as PyTorch: in training, zero with probability p and scale the kept by
 * 1/(1-p); in eval, the identity. 0 <= p <= 1. */
int dt_model_dropout(dt_model *m, int in, float p);
/* torch.cat(ins, dim=1): channels of the inputs, in order; their maps must agree. */
int dt_model_concat(dt_model *m, const int *ins, int count);
/* torch.cat(ins, dim=axis + 1) of any count of values of one rank: axis is per sample
 * (0 .. rank-1, the batch axis not counted); the other axes must agree. */
int dt_model_concat_axis(dt_model *m, const int *ins, int count, int axis);
int dt_model_flatten(dt_model *m, int in); /* a view: no op, no copy */
/* An input of any rank: dims[0..rank) a sample (dt_model_input is rank 3). */
int dt_model_input_shape(dt_model *m, int rank, const int *dims);
/* The same values a sample seen as dims[0..rank): a view of in's storage (no op, no
 * copy); the element count must agree. The batch axis stays first and whole. */
int dt_model_reshape(dt_model *m, int in, int rank, const int *dims);
/* numpy.transpose of each sample: output axis d is input axis perm[d] (a permutation
 * of the value's rank axes; the batch axis stays first). A copy: an op. */
int dt_model_transpose(dt_model *m, int in, const int *perm);
/* F.pad(x, (left, right, top, bottom), value=value) of an image: pads {top, left, bottom,
 * right} >= 0 rows and columns of the value around it (pad2d.h). */
int dt_model_pad2d(dt_model *m, int in, const int pads[4], float value);
int dt_model_add(dt_model *m, int a, int b);
/* Elementwise a OP b with NumPy broadcasting between two activations of the same rank
 * (each per-sample axis equal, or 1 on one side; both have the batch axis): e.g.
 * squeeze-and-excitation's [C,H,W] * [C,1,1]. The output takes the larger extent of each
 * axis. An add of equal shapes is dt_model_add's. */
int dt_model_binary(dt_model *m, dt_binary_func func, int a, int b);
/* a OP t (t OP a for the _REVERSED functions) with a parameter t named `name` of
 * `ndim` <= 4 axes, `shape`, the same for every sample (its gradient summed over the
 * batch and the axes it broadcasts along): its axes align with a's per-sample axes
 * from the right (a leading batch axis of extent 1 dropped: ONNX's [1, T, C] position
 * embedding). Layer scale, position embeddings. Starts as ones; an importer gives it its
 * values. */
int dt_model_binary_param(dt_model *m, const char *name, dt_binary_func func, int a, int ndim,
                          const int *shape);
/* a OP value (value OP a for the _REVERSED functions) with a constant scalar. */
int dt_model_binary_scalar(dt_model *m, dt_binary_func func, int a, float value);
/* The mean over the per-sample axes set in `axes` (bit d: dims[d]); keepdims keeps them
 * as extent 1, else they are dropped (at least one axis must remain). */
int dt_model_reduce_mean(dt_model *m, int in, unsigned axes, int keepdims);
/* The ResNet option-A shortcut (shortcut_pad.h): every stride-th pixel, zero channels
 * up to c_out, split evenly before and after the input's. */
int dt_model_shortcut_pad(dt_model *m, int in, int c_out, int stride);

/* The transformer's ops (issue 41), on values of any rank. `axis` counts per-sample
 * axes (0 = the first after the batch); a negative one counts from the end.
 *
 * Linear over the last axis: x [.., in] -> [.., out_features], one row per position,
 * weight [out, in] and (bias != 0) bias [out] as nn.Linear's. */
int dt_model_linear_last_axis(dt_model *m, const char *name, int in, int out_features, int bias);
/* Softmax (log_softmax: its log) over `axis`, as ONNX's opset-13 Softmax; tail != 0:
 * over every axis from `axis` to the end taken as one (opset < 13's coercion). */
int dt_model_softmax(dt_model *m, int in, int axis, int log_softmax, int tail);
/* LayerNorm over the axes from `axis` to the end (ONNX's LayerNormalization, opset 17;
 * PyTorch's nn.LayerNorm(dims[axis:])): weight (ones) and bias (zeros, if bias) of
 * those axes' shape; the biased variance, eps added. */
int dt_model_layernorm(dt_model *m, const char *name, int in, int axis, float eps, int bias);
/* Batched matrix product of two activations: a [.., M, K] times b [.., K, N] ->
 * [.., M, N], the leading axes equal (torch.matmul without broadcasting). */
int dt_model_matmul(dt_model *m, int a, int b);
/* Elements start, start + step, ... (count of them, step >= 1) along `axis`; keep_axis
 * 0 drops the axis (count must be 1): ONNX's Gather of one constant index. */
int dt_model_slice(dt_model *m, int in, int axis, int start, int count, int step, int keep_axis);
/* A parameter `name` of per-sample shape dims, broadcast over the batch (ViT's class
 * token: expand(N, -1, -1)); its gradient sums over the batch. Initialised to zeros as
 * torchvision's class token is. The op reads no activation (its `in` is the model's
 * input, which has no gradient). Its tensor is [1, dims...] (rank 1 to 3), as
 * PyTorch's parameter is. */
int dt_model_expand_param(dt_model *m, const char *name, int rank, const int *dims);

/* dt_model_alloc (backend.h) puts a built model on a backend; this releases all. */
void dt_model_free(dt_model *m);
/* Index of the first parameter or buffer that is NaN or infinite (buffers after the
 * parameters), or -1. */
long dt_model_first_non_finite(const dt_model *m);
/* A 64-bit hash of the built graph: its ops (kind, name, inputs, output, attributes),
 * values' shapes, and tensors' names and shapes. Not the weights, the model's name, the
 * memory plan (which values share storage, tensors' offsets) or anything dt_model_alloc
 * chooses (kernels, layouts): two files holding the same graph hash equal; a changed
 * op, attribute or shape changes it, a changed aliasing does not. */
uint64_t dt_model_graph_hash(const dt_model *m);

/* PyTorch-default initialisation from a seed: each tensor draws from its own RNG
 * stream, so the result does not depend on order or thread count. A model with
 * imported values (m->imported) takes those instead, whatever the seed. */
void dt_model_init_params(dt_model *m, uint64_t seed);

/* The input of the model: write n samples [n, c, h, w] here before forward. */
float *dt_model_input_data(dt_model *m);
size_t dt_model_input_floats_per_sample(const dt_model *m);
const float *dt_model_logits(const dt_model *m);

void dt_model_forward(dt_model *m, int n);
/* Softmax cross-entropy of the last forward; counts correct predictions if asked. */
double dt_model_loss(dt_model *m, const int32_t *labels, int n, int *correct);
/* Backward of the last forward + loss; accumulates into m->grads. */
void dt_model_backward(dt_model *m, const int32_t *labels, int n);
void dt_model_zero_grad(dt_model *m);

/* Starts accumulating the time of each op's forward and backward. */
int dt_model_enable_profile(dt_model *m, dt_error *err);

/* Floating-point operations of one training step (forward + backward) on n samples,
 * counting multiply-adds of conv and linear layers as 2 flops. */
double dt_model_train_flops(const dt_model *m, int n);
/* Those of the forward pass alone on n samples, same counting. Like the training
 * count, it needs only the built graph: dt_model_alloc need not have run, so a big
 * model's cost is known without its memory. */
double dt_model_forward_flops(const dt_model *m, int n);

float *dt_model_tensor_data(dt_model *m, int tensor);
int dt_model_find_tensor(const dt_model *m, const char *name);

/* Graph access for the ops' rows (op.h): a value's activations [n, per-sample] and
 * its gradient (NULL if it needs none), a tensor's data and gradient (NULL for -1). */
/* f32 kernels read and write activations through these; kernels of other dtypes
 * through dt_model_value_ptr / dt_model_value_grad_ptr. */
/* 1 when the value reads as an image or a vector (rank 3 or 1): what the ops of
 * images (conv2d, pools, BatchNorm2d, ...) and linear need. */
static inline int dt_model_value_is_image(const dt_model *m, int v) {
    return m->values[v].rank == 3 || m->values[v].rank == 1;
}

/* How many values an op reads, and the k-th of them: a concat's list, else in and in2. */
static inline int dt_op_n_inputs(const dt_op *op) {
    return op->n_ins > 0 ? op->n_ins : 1 + (op->in2 >= 0);
}

static inline int dt_op_input(const dt_model *m, const dt_op *op, int k) {
    return op->n_ins > 0 ? m->op_inputs[op->ins_first + k] : k == 0 ? op->in : op->in2;
}

/* 1 when a conv or pool's window is square with one stride and equal pads: the shape
 * the square builders make, and all int8 takes. */
static inline int dt_op_window_is_square(const dt_op *op) {
    return op->kh == op->kw && op->stride_h == op->stride_w && op->pad_top == op->pad_left &&
           op->pad_top == op->pad_bottom && op->pad_top == op->pad_right;
}

static inline float *dt_model_value_data(dt_model *m, int v) {
    return (float *)m->storages[m->values[v].storage].data;
}

static inline void *dt_model_value_ptr(dt_model *m, int v) {
    return m->storages[m->values[v].storage].data;
}

static inline dt_dtype dt_model_value_dtype(const dt_model *m, int v) {
    return m->storages[m->values[v].storage].dtype;
}

static inline int dt_model_value_blocked(const dt_model *m, int v) {
    return m->storages[m->values[v].storage].blocked;
}

static inline int dt_model_value_needs_grad(const dt_model *m, int v) {
    return m->storages[m->values[v].storage].needs_grad;
}

static inline float *dt_model_value_grad(dt_model *m, int v) {
    dt_storage *s = &m->storages[m->values[v].storage];
    return s->needs_grad ? (float *)s->grad : NULL;
}

static inline void *dt_model_value_grad_ptr(dt_model *m, int v) {
    dt_storage *s = &m->storages[m->values[v].storage];
    return s->needs_grad ? s->grad : NULL;
}

static inline size_t dt_model_value_floats(const dt_model *m, int v, int n) {
    return m->storages[m->values[v].storage].per_sample * (size_t)n;
}

static inline float *dt_model_param(dt_model *m, int tensor) {
    return tensor >= 0 ? dt_model_tensor_data(m, tensor) : NULL;
}

static inline float *dt_model_param_grad(dt_model *m, int tensor) {
    return tensor >= 0 ? m->grads + m->tensors[tensor].offset : NULL;
}

#endif
