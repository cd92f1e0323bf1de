#include "dtrain/model.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/timer.h"
#include "nn/conv2d.h"
#include "nn/cross_entropy.h"
#include "nn/pool2d.h"
#include "nn/shortcut_pad.h"

const char *dt_precision_name(dt_precision precision) {
    return precision == DT_PRECISION_BF16 ? "bf16" : "fp32";
}

int dt_precision_parse(const char *name, dt_precision *precision) {
    if (!strcmp(name, "fp32"))
        *precision = DT_PRECISION_FP32;
    else if (!strcmp(name, "bf16"))
        *precision = DT_PRECISION_BF16;
    else
        return -1;
    return 0;
}

static int build_fail(dt_model *m, const char *fmt, const char *what) {
    if (!m->build_failed) {
        m->build_failed = 1;
        dt_error_set(&m->build_error, fmt, what);
    }
    return -1;
}

/* The first error, formatted, as build_fail records it. */
static int build_failf(dt_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int build_failf(dt_model *m, const char *fmt, ...) {
    if (!m->build_failed) {
        char msg[sizeof m->build_error.msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        build_fail(m, "%s", msg);
    }
    return -1;
}

/* Grows *array (of elem bytes) so that index `count` is valid. */
static int grow(void **array, int *cap, int count, size_t elem) {
    if (count < *cap) return 0;
    int new_cap = *cap ? *cap * 2 : 16;
    void *p = realloc(*array, (size_t)new_cap * elem);
    if (!p) return -1;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(new_cap - *cap) * elem);
    *array = p;
    *cap = new_cap;
    return 0;
}

/* Grows *array so that `extra` more elements fit after the first `count`. */
static int grow_by(void **array, int *cap, int count, int extra, size_t elem) {
    if (extra > INT_MAX - count) return -1;
    while (count + extra > *cap)
        if (grow(array, cap, *cap, elem)) return -1;
    return 0;
}

void dt_model_init_empty(dt_model *m, const char *name, int classes) {
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->classes = classes;
    m->training = 1;
}

static int valid_value(dt_model *m, int v) {
    if (m->build_failed) return 0;
    if (v < 0 || v >= m->n_values) {
        build_fail(m, "model %s: op input refers to no value", m->name);
        return 0;
    }
    return 1;
}

/* A storage of c*h*w values a sample: a product that wraps size_t (three sides of 2^25
 * from a hostile file) is refused, not taken as a small one. */
static int new_storage(dt_model *m, long long c, long long h, long long w) {
    size_t ch, per_sample;
    if (c < 0 || h < 0 || w < 0 || __builtin_mul_overflow((size_t)c, (size_t)h, &ch) ||
        __builtin_mul_overflow(ch, (size_t)w, &per_sample))
        return build_failf(m, "model %s: a value of %lldx%lldx%lld overflows its size", m->name, c,
                           h, w);
    if (grow((void **)&m->storages, &m->cap_storages, m->n_storages, sizeof(dt_storage)))
        return build_fail(m, "model %s: out of memory while building", m->name);
    dt_storage *s = &m->storages[m->n_storages];
    s->per_sample = per_sample;
    s->needs_grad = m->n_storages > 0; /* the input needs no gradient */
    s->first_writer = -1;
    s->last_user = -1;
    s->grad_slot = -1;
    return m->n_storages++;
}

static int new_value(dt_model *m, int storage, int c, int h, int w) {
    if (storage < 0) return -1;
    if (grow((void **)&m->values, &m->cap_values, m->n_values, sizeof(dt_value)))
        return build_fail(m, "model %s: out of memory while building", m->name);
    dt_value *v = &m->values[m->n_values];
    memset(v, 0, sizeof *v);
    v->storage = storage;
    v->c = c;
    v->h = h;
    v->w = w;
    v->rank = 3;
    v->dims[0] = c;
    v->dims[1] = h;
    v->dims[2] = w;
    return m->n_values++;
}

/* A value of any rank: images (rank 3) and vectors (rank 1) get their c/h/w view. */
static int new_value_dims(dt_model *m, int storage, int rank, const int *dims) {
    int v = rank == 3   ? new_value(m, storage, dims[0], dims[1], dims[2])
            : rank == 1 ? new_value(m, storage, dims[0], 1, 1)
                        : new_value(m, storage, 0, 0, 0);
    if (v < 0) return -1;
    dt_value *x = &m->values[v];
    x->rank = rank;
    memset(x->dims, 0, sizeof x->dims);
    for (int d = 0; d < rank; d++) x->dims[d] = dims[d];
    return v;
}

/* "[2, 3, 4]": a value's per-sample shape for messages. */
typedef struct shape_buf {
    char text[80];
} shape_buf;

static shape_buf shape_text(const dt_value *v) {
    shape_buf b;
    size_t used = 0;
    b.text[0] = '\0';
    for (int d = 0; d < v->rank && used < sizeof b.text; d++) {
        int w = snprintf(b.text + used, sizeof b.text - used, "%s%d", d ? ", " : "[", v->dims[d]);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used < sizeof b.text) snprintf(b.text + used, sizeof b.text - used, "]");
    return b;
}

/* A vector [F] (a flatten's or a linear's output): c = F, h = w = 1 for the ops that
 * read it as an image. */
static int new_vector(dt_model *m, int storage, int features) {
    int v = new_value(m, storage, features, 1, 1);
    if (v < 0) return -1;
    m->values[v].rank = 1;
    m->values[v].dims[1] = m->values[v].dims[2] = 0;
    return v;
}

/* A value of any rank: dims[0..rank) per sample, with the image view (c, h, w) that
 * images (rank 3) and vectors (rank 1) have, zeros otherwise. */
static int new_value_shape(dt_model *m, int storage, int rank, const int *dims) {
    int v = rank == 3   ? new_value(m, storage, dims[0], dims[1], dims[2])
            : rank == 1 ? new_vector(m, storage, dims[0])
                        : new_value(m, storage, 0, 0, 0);
    if (v < 0) return -1;
    dt_value *x = &m->values[v];
    x->rank = rank;
    for (int d = 0; d < DT_VALUE_MAX_RANK; d++) x->dims[d] = d < rank ? dims[d] : 0;
    return v;
}

/* A value shaped as x (an elementwise op's output) on `storage`. */
static int new_value_like(dt_model *m, int storage, const dt_value *x) {
    return new_value_shape(m, storage, x->rank, x->dims);
}

/* A storage for a value of any rank: the product of dims, overflow refused. */
static int new_storage_shape(dt_model *m, int rank, const int *dims) {
    long long count = 1;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 1 || __builtin_mul_overflow(count, (long long)dims[d], &count) ||
            count > INT32_MAX)
            return build_failf(m, "model %s: a value of rank %d has an axis of %d or overflows",
                               m->name, rank, dims[d]);
    return new_storage(m, count, 1, 1);
}

/* The ops of images (conv2d, pools, BatchNorm2d, ...) read c, h, w: other ranks are
 * refused by name, not read as an empty image. */
static int image_input(dt_model *m, int in, const char *what) {
    if (!valid_value(m, in)) return 0;
    if (dt_model_value_is_image(m, in)) return 1;
    build_failf(m, "model %s: %s takes an image [C, H, W], not a value of rank %d", m->name, what,
                m->values[in].rank);
    return 0;
}

/* A value of per-sample shape dims[0 .. rank) on a storage of its own. */
static int new_value_of_rank(dt_model *m, int rank, const int *dims) {
    if (rank < 1 || rank > DT_VALUE_MAX_RANK)
        return build_failf(m, "model %s: a value of %d axes a sample (1 to %d)", m->name, rank,
                           DT_VALUE_MAX_RANK);
    return new_value_shape(m, new_storage_shape(m, rank, dims), rank, dims);
}

/* The axis ops' names for the shape helpers above. */
static int new_dims(dt_model *m, int rank, const int *dims) {
    return new_value_of_rank(m, rank, dims);
}

static int new_tensor(dt_model *m, const char *prefix, const char *suffix, int is_param,
                      dt_init init, int fan_in, int ndim, const int *shape) {
    if (grow((void **)&m->tensors, &m->cap_tensors, m->n_tensors, sizeof(dt_tensor_entry)))
        return build_fail(m, "model %s: out of memory while building", m->name);
    dt_tensor_entry *t = &m->tensors[m->n_tensors];
    snprintf(t->name, sizeof t->name, "%s.%s", prefix, suffix);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->numel *= (size_t)shape[i];
    }
    t->is_param = is_param;
    t->init = init;
    t->fan_in = fan_in;
    if (is_param) {
        t->offset = m->n_params;
        m->n_params += t->numel;
    } else {
        t->offset = m->n_buffers;
        m->n_buffers += t->numel;
    }
    return m->n_tensors++;
}

/* Appends an op reading `in` (and in2) and writing `out`; records storage use. */
static dt_op *new_op(dt_model *m, dt_op_kind kind, const char *name, int in, int in2, int out) {
    if (out < 0 || m->build_failed) return NULL;
    if (grow((void **)&m->ops, &m->cap_ops, m->n_ops, sizeof(dt_op))) {
        build_fail(m, "model %s: out of memory while building", m->name);
        return NULL;
    }
    int index = m->n_ops++;
    dt_op *op = &m->ops[index];
    op->kind = kind;
    snprintf(op->name, sizeof op->name, "%s", name ? name : "");
    op->in = in;
    op->in2 = in2;
    op->out = out;
    op->weight = op->bias = op->running_mean = op->running_var = -1;
    m->storages[m->values[in].storage].last_user = index;
    if (in2 >= 0) m->storages[m->values[in2].storage].last_user = index;
    dt_storage *so = &m->storages[m->values[out].storage];
    if (so->first_writer < 0) so->first_writer = index;
    so->last_user = index > so->last_user ? index : so->last_user;
    return op;
}

int dt_model_input(dt_model *m, int c, int h, int w) {
    if (m->n_values != 0) return build_fail(m, "model %s: input declared twice", m->name);
    int v = new_value(m, new_storage(m, c, h, w), c, h, w);
    return v;
}

int dt_model_conv2d(dt_model *m, const char *name, int in, int c_out, int kernel, int stride,
                    int pad, int bias) {
    return dt_model_conv2d_grouped(m, name, in, c_out, kernel, stride, pad, 1, 1, bias);
}

int dt_model_conv2d_grouped(dt_model *m, const char *name, int in, int c_out, int kernel,
                            int stride, int pad, int dilation, int groups, int bias) {
    const int pads[4] = {pad, pad, pad, pad};
    return dt_model_conv2d_rect(m, name, in, c_out, kernel, kernel, stride, stride, pads, dilation,
                                groups, bias);
}

/* The window's fields of a conv or pool op: kernel, stride and pad the square view. */
static void set_window(dt_op *op, int kh, int kw, int stride_h, int stride_w, const int pads[4]) {
    op->kh = kh, op->kw = kw, op->stride_h = stride_h, op->stride_w = stride_w;
    op->pad_top = pads[0], op->pad_left = pads[1], op->pad_bottom = pads[2],
    op->pad_right = pads[3];
    op->kernel = kh, op->stride = stride_h, op->pad = pads[0];
}

int dt_model_conv2d_rect(dt_model *m, const char *name, int in, int c_out, int kh, int kw,
                         int stride_h, int stride_w, const int pads[4], int dilation, int groups,
                         int bias) {
    if (!image_input(m, in, "conv2d")) return -1;
    dt_value x = m->values[in];
    if (!dt_model_value_is_image(m, in))
        return build_failf(m, "conv2d %s: its input is not an image", name);
    if (groups < 1 || x.c % groups || c_out % groups)
        return build_failf(m, "conv2d %s: %d groups do not divide %d input and %d output channels",
                           name, groups, x.c, c_out);
    dt_conv2d_shape s;
    if (dt_conv2d_shape_make_rect(&s, 1, x.c, x.h, x.w, c_out, kh, kw, stride_h, stride_w, pads,
                                  dilation, groups))
        return build_fail(m, "conv2d %s: kernel does not fit its input", name);
    int out = new_value(m, new_storage(m, c_out, s.h_out, s.w_out), c_out, s.h_out, s.w_out);
    dt_op *op = new_op(m, DT_OP_CONV2D, name, in, -1, out);
    if (!op) return -1;
    int fan_in = x.c / groups * kh * kw;
    int wshape[4] = {c_out, x.c / groups, kh, kw};
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_UNIFORM_FAN_IN, fan_in, 4, wshape);
    if (bias) op->bias = new_tensor(m, name, "bias", 1, DT_INIT_UNIFORM_FAN_IN, fan_in, 1, &c_out);
    set_window(op, kh, kw, stride_h, stride_w, pads);
    op->dilation = dilation;
    op->groups = groups;
    return m->build_failed ? -1 : out;
}

int dt_model_linear(dt_model *m, const char *name, int in, int out_features) {
    return dt_model_linear_bias(m, name, in, out_features, 1);
}

int dt_model_linear_bias(dt_model *m, const char *name, int in, int out_features, int bias) {
    if (!valid_value(m, in)) return -1;
    /* the input read flat: a sample's values, whatever its rank */
    int in_features = (int)dt_model_value_floats(m, in, 1);
    int out = new_vector(m, new_storage(m, out_features, 1, 1), out_features);
    dt_op *op = new_op(m, DT_OP_LINEAR, name, in, -1, out);
    if (!op) return -1;
    int wshape[2] = {out_features, in_features};
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_UNIFORM_FAN_IN, in_features, 2, wshape);
    if (bias)
        op->bias =
            new_tensor(m, name, "bias", 1, DT_INIT_UNIFORM_FAN_IN, in_features, 1, &out_features);
    return m->build_failed ? -1 : out;
}

int dt_model_batchnorm2d(dt_model *m, const char *name, int in) {
    return dt_model_batchnorm2d_eps(m, name, in, 1e-5f);
}

int dt_model_batchnorm2d_eps(dt_model *m, const char *name, int in, float eps) {
    return dt_model_batchnorm2d_momentum(m, name, in, eps, 0.1f);
}

int dt_model_batchnorm2d_momentum(dt_model *m, const char *name, int in, float eps,
                                  float momentum) {
    if (!image_input(m, in, "batchnorm2d")) return -1;
    if (!(eps > 0.0f)) return build_fail(m, "batchnorm2d %s: eps must be positive", name);
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return build_failf(m, "batchnorm2d %s: momentum %g is not in [0, 1]", name,
                           (double)momentum);
    dt_value x = m->values[in];
    int out = new_value(m, new_storage(m, x.c, x.h, x.w), x.c, x.h, x.w);
    dt_op *op = new_op(m, DT_OP_BATCHNORM2D, name, in, -1, out);
    if (!op) return -1;
    op->eps = eps;
    op->momentum = momentum;
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_ONES, 0, 1, &x.c);
    op->bias = new_tensor(m, name, "bias", 1, DT_INIT_ZEROS, 0, 1, &x.c);
    op->running_mean = new_tensor(m, name, "running_mean", 0, DT_INIT_ZEROS, 0, 1, &x.c);
    op->running_var = new_tensor(m, name, "running_var", 0, DT_INIT_ONES, 0, 1, &x.c);
    return m->build_failed ? -1 : out;
}

int dt_model_relu(dt_model *m, int in) {
    if (!valid_value(m, in)) return -1;
    dt_value x = m->values[in];
    int out = new_value_like(m, x.storage, &x);
    return new_op(m, DT_OP_RELU, NULL, in, -1, out) ? out : -1;
}

/* An activation of `in` into `storage` (a new one, or in's own in place). */
static int activation(dt_model *m, int in, dt_activation act, int in_place) {
    if (!valid_value(m, in)) return -1;
    const char *fn = dt_activation_name(act.fn);
    if (!fn) return build_failf(m, "model %s: activation function %d is unknown", m->name, act.fn);
    const int bounds = act.fn == DT_ACT_CLIP;
    if (bounds ? isnan(act.a) || isnan(act.b) : !isfinite(act.a) || !isfinite(act.b))
        return build_failf(m, "model %s: %s with parameters %g, %g", m->name, fn, (double)act.a,
                           (double)act.b);
    if (in_place && !dt_activation_runs_in_place(act))
        return build_failf(m, "model %s: %s cannot run in place (its gradient needs its input)",
                           m->name, fn);
    dt_value x = m->values[in];
    const int storage =
        in_place ? x.storage : new_storage(m, (long long)m->storages[x.storage].per_sample, 1, 1);
    int out = new_value(m, storage, 0, 0, 0);
    if (out < 0) return -1;
    dt_value *y = &m->values[out]; /* x's shape, whatever its rank */
    *y = x;
    y->storage = storage;
    dt_op *op = new_op(m, DT_OP_ACTIVATION, fn, in, -1, out); /* its name: the function's */
    if (!op) return -1;
    op->act = act;
    return out;
}

int dt_model_activation(dt_model *m, int in, dt_activation act) {
    return activation(m, in, act, 0);
}

int dt_model_activation_in_place(dt_model *m, int in, dt_activation act) {
    return activation(m, in, act, 1);
}

int dt_model_pool2d_rect(dt_model *m, dt_op_kind kind, int in, int kh, int kw, int stride_h,
                         int stride_w, const int pads[4], int ceil_mode, int count_include_pad) {
    if (!image_input(m, in, "pooling")) return -1;
    dt_value x = m->values[in];
    if (kind != DT_OP_MAXPOOL2D && kind != DT_OP_AVGPOOL2D)
        return build_failf(m, "model %s: pooling of kind %d", m->name, (int)kind);
    if (!dt_model_value_is_image(m, in))
        return build_failf(m, "model %s: pooling of a value that is not an image", m->name);
    /* every window then holds an input cell (a pad below the kernel's side; the ceil
     * mode's last window starts inside the input or its leading pad) */
    const int valid = kh >= 1 && kw >= 1 && stride_h >= 1 && stride_w >= 1 && pads[0] >= 0 &&
                      pads[1] >= 0 && pads[2] >= 0 && pads[3] >= 0 && pads[0] < kh &&
                      pads[2] < kh && pads[1] < kw && pads[3] < kw;
    if (!valid)
        return build_failf(m,
                           "model %s: pooling %dx%d stride %dx%d pads %d,%d,%d,%d is not a valid "
                           "window",
                           m->name, kh, kw, stride_h, stride_w, pads[0], pads[1], pads[2], pads[3]);
    int ho = dt_pool2d_out_size_pads(x.h, kh, stride_h, pads[0], pads[2], ceil_mode),
        wo = dt_pool2d_out_size_pads(x.w, kw, stride_w, pads[1], pads[3], ceil_mode);
    if (ho < 1 || wo < 1)
        return build_failf(m, "model %s: a %dx%d pooling window does not fit its %dx%d input",
                           m->name, kh, kw, x.h, x.w);
    int out = new_value(m, new_storage(m, x.c, ho, wo), x.c, ho, wo);
    dt_op *op = new_op(m, kind, NULL, in, -1, out);
    if (!op) return -1;
    set_window(op, kh, kw, stride_h, stride_w, pads);
    op->ceil_mode = ceil_mode != 0;
    op->count_include_pad = kind == DT_OP_AVGPOOL2D && count_include_pad != 0;
    return out;
}

static int pool(dt_model *m, dt_op_kind kind, int in, int kernel, int stride, int pad,
                int ceil_mode) {
    if (kernel >= 1 && pad > kernel / 2) /* PyTorch's bound on the square pools */
        return build_failf(m, "model %s: pooling %dx%d stride %d pad %d is not a valid window",
                           m->name, kernel, kernel, stride, pad);
    const int pads[4] = {pad, pad, pad, pad};
    return dt_model_pool2d_rect(m, kind, in, kernel, kernel, stride, stride, pads, ceil_mode, 0);
}

int dt_model_maxpool2d(dt_model *m, int in, int kernel, int stride) {
    return pool(m, DT_OP_MAXPOOL2D, in, kernel, stride, 0, 0);
}

int dt_model_maxpool2d_padded(dt_model *m, int in, int kernel, int stride, int pad, int ceil_mode) {
    return pool(m, DT_OP_MAXPOOL2D, in, kernel, stride, pad, ceil_mode != 0);
}

int dt_model_avgpool2d(dt_model *m, int in, int kernel, int stride) {
    return pool(m, DT_OP_AVGPOOL2D, in, kernel, stride, 0, 0);
}

int dt_model_adaptive_avgpool2d(dt_model *m, int in, int h_out, int w_out) {
    if (!image_input(m, in, "adaptive pooling")) return -1;
    dt_value x = m->values[in];
    if (h_out < 1 || w_out < 1)
        return build_failf(m, "model %s: adaptive pooling to %dx%d", m->name, h_out, w_out);
    int out = new_value(m, new_storage(m, x.c, h_out, w_out), x.c, h_out, w_out);
    return new_op(m, DT_OP_ADAPTIVE_AVGPOOL2D, NULL, in, -1, out) ? out : -1;
}

int dt_model_dropout(dt_model *m, int in, float p) {
    if (!valid_value(m, in)) return -1;
    if (!(p >= 0.0f && p <= 1.0f))
        return build_failf(m, "model %s: dropout probability %g is not in [0, 1]", m->name,
                           (double)p);
    dt_value x = m->values[in];
    int out = new_value_like(m, new_storage_shape(m, x.rank, x.dims), &x);
    dt_op *op = new_op(m, DT_OP_DROPOUT, NULL, in, -1, out);
    if (!op) return -1;
    op->p = p;
    return out;
}

int dt_model_concat(dt_model *m, const int *ins, int count) {
    return dt_model_concat_axis(m, ins, count, 0);
}

int dt_model_concat_axis(dt_model *m, const int *ins, int count, int axis) {
    if (count < 1) return build_failf(m, "model %s: concat of %d inputs", m->name, count);
    for (int k = 0; k < count; k++)
        if (!valid_value(m, ins[k])) return -1;
    const dt_value x0 = m->values[ins[0]];
    if (axis < 0 || axis >= x0.rank)
        return build_failf(m, "model %s: concat along axis %d of a rank-%d value", m->name, axis,
                           x0.rank);
    long long joined = 0;
    for (int k = 0; k < count; k++) {
        const dt_value x = m->values[ins[k]];
        int same = x.rank == x0.rank;
        for (int d = 0; same && d < x0.rank; d++) same = d == axis || x.dims[d] == x0.dims[d];
        if (!same)
            return build_failf(m, "model %s: concat of a %s and a %s value along axis %d", m->name,
                               shape_text(&x0).text, shape_text(&x).text, axis);
        joined += x.dims[axis];
    }
    if (joined > INT_MAX)
        return build_failf(m, "model %s: concat of %lld along axis %d", m->name, joined, axis);
    int dims[DT_VALUE_MAX_RANK];
    memcpy(dims, x0.dims, sizeof dims);
    dims[axis] = (int)joined;
    long long per_sample = 1;
    for (int d = 0; d < x0.rank; d++) per_sample *= dims[d];
    int out = new_value_dims(m, new_storage(m, per_sample, 1, 1), x0.rank, dims);
    if (out < 0) return -1;
    if (grow_by((void **)&m->op_inputs, &m->cap_op_inputs, m->n_op_inputs, count, sizeof(int)))
        return build_fail(m, "model %s: out of memory while building", m->name);
    dt_op *op = new_op(m, DT_OP_CONCAT, NULL, ins[0], count > 1 ? ins[1] : -1, out);
    if (!op) return -1;
    op->ins_first = m->n_op_inputs;
    op->n_ins = count;
    op->axis = axis;
    /* new_op marked in and in2 as read here; the other inputs too, for the gradient
     * buffers' live ranges */
    for (int k = 0; k < count; k++) {
        m->op_inputs[m->n_op_inputs++] = ins[k];
        m->storages[m->values[ins[k]].storage].last_user = m->n_ops - 1;
    }
    return out;
}

int dt_model_pad2d(dt_model *m, int in, const int pads[4], float value) {
    if (!valid_value(m, in)) return -1;
    if (!dt_model_value_is_image(m, in) || m->values[in].rank != 3)
        return build_failf(m, "model %s: padding of a value that is not an image", m->name);
    for (int i = 0; i < 4; i++)
        if (pads[i] < 0 || pads[i] > (1 << 24))
            return build_failf(m, "model %s: a pad of %d", m->name, pads[i]);
    if (!isfinite(value))
        return build_failf(m, "model %s: padding with %g", m->name, (double)value);
    const dt_value x = m->values[in];
    const long long ho = (long long)x.h + pads[0] + pads[2],
                    wo = (long long)x.w + pads[1] + pads[3];
    if (ho > INT_MAX || wo > INT_MAX)
        return build_failf(m, "model %s: a padded image of %lldx%lld", m->name, ho, wo);
    int out = new_value(m, new_storage(m, x.c, ho, wo), x.c, (int)ho, (int)wo);
    dt_op *op = new_op(m, DT_OP_PAD2D, NULL, in, -1, out);
    if (!op) return -1;
    set_window(op, 0, 0, 0, 0, pads);
    op->pad_value = value;
    return out;
}

int dt_model_flatten(dt_model *m, int in) {
    if (!valid_value(m, in)) return -1;
    dt_value x = m->values[in];
    const int features = (int)m->storages[x.storage].per_sample;
    return dt_model_reshape(m, in, 1, &features);
}

int dt_model_input_shape(dt_model *m, int rank, const int *dims) {
    if (m->n_values != 0) return build_fail(m, "model %s: input declared twice", m->name);
    if (rank < 1 || rank > DT_VALUE_MAX_RANK)
        return build_failf(m, "model %s: an input of rank %d (1 to %d a sample)", m->name, rank,
                           DT_VALUE_MAX_RANK);
    return new_value_shape(m, new_storage_shape(m, rank, dims), rank, dims);
}

int dt_model_reshape(dt_model *m, int in, int rank, const int *dims) {
    if (!valid_value(m, in)) return -1;
    if (rank < 1 || rank > DT_VALUE_MAX_RANK)
        return build_failf(m, "model %s: a reshape to rank %d (1 to %d a sample)", m->name, rank,
                           DT_VALUE_MAX_RANK);
    long long count = 1;
    for (int d = 0; d < rank; d++) {
        if (dims[d] < 1)
            return build_failf(m, "model %s: a reshape to an axis of %d", m->name, dims[d]);
        count *= dims[d]; /* <= 6 factors each below 2^31, checked as it grows */
        if (count > (long long)m->storages[m->values[in].storage].per_sample) break;
    }
    if (count != (long long)m->storages[m->values[in].storage].per_sample)
        return build_failf(m, "model %s: a reshape of %zu values a sample to %lld", m->name,
                           m->storages[m->values[in].storage].per_sample, count);
    return new_value_shape(m, m->values[in].storage, rank, dims);
}

int dt_model_transpose(dt_model *m, int in, const int *perm) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    int seen[DT_VALUE_MAX_RANK] = {0}, dims[DT_VALUE_MAX_RANK];
    for (int d = 0; d < x.rank; d++) {
        if (perm[d] < 0 || perm[d] >= x.rank || seen[perm[d]]++)
            return build_failf(m, "model %s: a transpose's axes are not a permutation of %d",
                               m->name, x.rank);
        dims[d] = x.dims[perm[d]];
    }
    int out = new_value_shape(m, new_storage_shape(m, x.rank, dims), x.rank, dims);
    dt_op *op = new_op(m, DT_OP_TRANSPOSE, NULL, in, -1, out);
    if (!op) return -1;
    for (int d = 0; d < x.rank; d++) op->perm[d] = perm[d];
    return out;
}

int dt_model_add(dt_model *m, int a, int b) {
    if (!valid_value(m, a) || !valid_value(m, b)) return -1;
    dt_value x = m->values[a], y = m->values[b];
    /* images and vectors by their c, h, w (a vector [F] adds to an image [F, 1, 1]);
     * values of other ranks by every axis */
    int same = x.c == y.c && x.h == y.h && x.w == y.w;
    const int image_x = x.rank == 1 || x.rank == 3, image_y = y.rank == 1 || y.rank == 3;
    if (!image_x || !image_y) {
        same = x.rank == y.rank;
        for (int d = 0; same && d < x.rank; d++) same = x.dims[d] == y.dims[d];
    }
    if (!same) return build_fail(m, "model %s: residual add of different shapes", m->name);
    int out = new_value_like(m, new_storage_shape(m, x.rank, x.dims), &x);
    return new_op(m, DT_OP_ADD, NULL, a, b, out) ? out : -1;
}

/* The broadcast of per-sample shapes x and y (both `rank` axes) into out: each axis
 * equal, or 1 on one side. -1 if they do not broadcast. */
static int broadcast_dims(int rank, const int *x, const int *y, int *out) {
    for (int d = 0; d < rank; d++) {
        if (x[d] != y[d] && x[d] != 1 && y[d] != 1) return -1;
        out[d] = x[d] > y[d] ? x[d] : y[d];
    }
    return 0;
}

static void format_dims(char *buf, size_t size, int rank, const int *dims) {
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < rank && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, d ? "x%d" : "%d", dims[d]);
}

int dt_model_binary(dt_model *m, dt_binary_func func, int a, int b) {
    if (!valid_value(m, a) || !valid_value(m, b)) return -1;
    if (func < DT_BINARY_ADD || func > DT_BINARY_DIV)
        return build_failf(m, "model %s: binary function %d between two activations", m->name,
                           (int)func);
    const dt_value x = m->values[a], y = m->values[b];
    int dims[DT_VALUE_MAX_RANK];
    if (x.rank != y.rank || broadcast_dims(x.rank, x.dims, y.dims, dims)) {
        char xs[64], ys[64];
        format_dims(xs, sizeof xs, x.rank, x.dims);
        format_dims(ys, sizeof ys, y.rank, y.dims);
        return build_failf(m, "model %s: values of %s and %s a sample do not broadcast", m->name,
                           xs, ys);
    }
    const int out = new_value_of_rank(m, x.rank, dims);
    dt_op *op = new_op(m, DT_OP_BINARY, NULL, a, b, out);
    if (!op) return -1;
    op->func = func;
    return out;
}

int dt_model_binary_param(dt_model *m, const char *name, dt_binary_func func, int a, int ndim,
                          const int *shape) {
    if (!valid_value(m, a)) return -1;
    if (func < DT_BINARY_ADD || func > DT_BINARY_DIV_REVERSED)
        return build_failf(m, "model %s: binary function %d", m->name, (int)func);
    const dt_value x = m->values[a];
    /* the tensor's axes against the sample's, from the right; a leading batch axis of 1 goes */
    if (ndim < 0 || ndim > 4 || (ndim > x.rank && !(ndim == x.rank + 1 && shape[0] == 1)))
        return build_failf(m, "model %s: tensor %s of %d axes against values of %d a sample",
                           m->name, name, ndim, x.rank);
    const int skip = ndim > x.rank ? 1 : 0;
    int t[DT_VALUE_MAX_RANK], dims[DT_VALUE_MAX_RANK];
    for (int d = 0; d < x.rank; d++) {
        const int k = d - (x.rank - (ndim - skip)); /* the tensor's axis, past the skipped one */
        t[d] = k >= 0 ? shape[k + skip] : 1;
    }
    if (broadcast_dims(x.rank, x.dims, t, dims)) {
        char xs[64], ts[64];
        format_dims(xs, sizeof xs, x.rank, x.dims);
        format_dims(ts, sizeof ts, ndim, shape);
        return build_failf(m, "model %s: tensor %s of %s does not broadcast with values of %s",
                           m->name, name, ts, xs);
    }
    const int out = new_value_of_rank(m, x.rank, dims);
    dt_op *op = new_op(m, DT_OP_BINARY, name, a, -1, out);
    if (!op) return -1;
    op->func = func;
    op->weight = new_tensor(m, "", "", 1, DT_INIT_ONES, 0, ndim, shape);
    if (op->weight < 0) return -1;
    snprintf(m->tensors[op->weight].name, sizeof m->tensors[op->weight].name, "%s", name);
    return m->build_failed ? -1 : out;
}

int dt_model_binary_scalar(dt_model *m, dt_binary_func func, int a, float value) {
    if (!valid_value(m, a)) return -1;
    if (func < DT_BINARY_ADD || func > DT_BINARY_DIV_REVERSED)
        return build_failf(m, "model %s: binary function %d", m->name, (int)func);
    const dt_value x = m->values[a];
    const int out = new_value_of_rank(m, x.rank, x.dims);
    dt_op *op = new_op(m, DT_OP_BINARY, NULL, a, -1, out);
    if (!op) return -1;
    op->func = func;
    op->scalar = value;
    return out;
}

int dt_model_reduce_mean(dt_model *m, int in, unsigned axes, int keepdims) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    if (axes == 0 || (axes >> x.rank) != 0)
        return build_failf(m, "model %s: a mean over axes 0x%x of a value of %d axes", m->name,
                           axes, x.rank);
    int dims[DT_VALUE_MAX_RANK], rank = 0;
    for (int d = 0; d < x.rank; d++) {
        if (!(axes >> d & 1u))
            dims[rank++] = x.dims[d];
        else if (keepdims)
            dims[rank++] = 1;
    }
    if (rank == 0)
        return build_failf(m,
                           "model %s: a mean over every axis of a sample without keepdims "
                           "leaves none",
                           m->name);
    const int out = new_value_of_rank(m, rank, dims);
    dt_op *op = new_op(m, DT_OP_REDUCE_MEAN, NULL, in, -1, out);
    if (!op) return -1;
    op->axes = axes;
    return out;
}

int dt_model_shortcut_pad(dt_model *m, int in, int c_out, int stride) {
    if (!image_input(m, in, "shortcut_pad")) return -1;
    dt_value x = m->values[in];
    if (c_out < x.c || stride < 1)
        return build_fail(m, "model %s: a padding shortcut cannot drop channels", m->name);
    int ho = dt_shortcut_pad_out_size(x.h, stride), wo = dt_shortcut_pad_out_size(x.w, stride);
    int out = new_value(m, new_storage(m, c_out, ho, wo), c_out, ho, wo);
    dt_op *op = new_op(m, DT_OP_SHORTCUT_PAD, NULL, in, -1, out);
    if (!op) return -1;
    op->stride = stride;
    op->pad = (c_out - x.c) / 2; /* planes // 4 each side when channels double, as the reference */
    return out;
}

/* ---- values of any rank: the transformer's ops (issue 41) */

/* `axis` of a rank-r value, a negative one from the end; -1 (recorded) if outside. */
static int norm_axis(dt_model *m, const char *what, int rank, int axis) {
    const int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
        return build_failf(m,
                           "model %s: %s: axis %d of a value of %d axes (the batch axis not "
                           "counted)",
                           m->name, what, axis, rank);
    return a;
}

/* The op's [outer, len, inner] around axis a of x; tail: len spans a..end. */
static void set_geometry(dt_op *op, const dt_value *x, int a, int tail) {
    op->axis = a;
    op->outer = op->len = op->inner = 1;
    for (int d = 0; d < a; d++) op->outer *= x->dims[d];
    op->len = x->dims[a];
    for (int d = a + 1; d < x->rank; d++) {
        if (tail)
            op->len *= x->dims[d];
        else
            op->inner *= x->dims[d];
    }
}

int dt_model_linear_last_axis(dt_model *m, const char *name, int in, int out_features, int bias) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    if (x.rank < 2 || out_features < 1)
        return build_failf(m,
                           "linear %s: a linear layer over the last axis needs a value of "
                           "rank >= 2 and outputs, got rank %d",
                           name, x.rank);
    const int in_features = x.dims[x.rank - 1];
    int dims[DT_VALUE_MAX_RANK];
    memcpy(dims, x.dims, sizeof dims);
    dims[x.rank - 1] = out_features;
    int out = new_dims(m, x.rank, dims);
    dt_op *op = new_op(m, DT_OP_LINEAR, name, in, -1, out);
    if (!op) return -1;
    int wshape[2] = {out_features, in_features};
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_UNIFORM_FAN_IN, in_features, 2, wshape);
    if (bias)
        op->bias =
            new_tensor(m, name, "bias", 1, DT_INIT_UNIFORM_FAN_IN, in_features, 1, &out_features);
    return m->build_failed ? -1 : out;
}

int dt_model_softmax(dt_model *m, int in, int axis, int log_softmax, int tail) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    const int a = norm_axis(m, "softmax", x.rank, axis);
    if (a < 0) return -1;
    int out = new_dims(m, x.rank, x.dims);
    dt_op *op = new_op(m, DT_OP_SOFTMAX, NULL, in, -1, out);
    if (!op) return -1;
    set_geometry(op, &x, a, tail);
    op->log_softmax = log_softmax != 0;
    return out;
}

int dt_model_layernorm(dt_model *m, const char *name, int in, int axis, float eps, int bias) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    const int a = norm_axis(m, "layernorm", x.rank, axis);
    if (a < 0) return -1;
    if (!(eps > 0.0f)) return build_failf(m, "layernorm %s: eps must be positive", name);
    if (x.rank - a > 4)
        return build_failf(m, "layernorm %s: normalizes %d axes (at most 4)", name, x.rank - a);
    int out = new_dims(m, x.rank, x.dims);
    dt_op *op = new_op(m, DT_OP_LAYERNORM, name, in, -1, out);
    if (!op) return -1;
    set_geometry(op, &x, a, 1);
    op->eps = eps;
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_ONES, 0, x.rank - a, x.dims + a);
    if (bias) op->bias = new_tensor(m, name, "bias", 1, DT_INIT_ZEROS, 0, x.rank - a, x.dims + a);
    return m->build_failed ? -1 : out;
}

int dt_model_matmul(dt_model *m, int a, int b) {
    if (!valid_value(m, a) || !valid_value(m, b)) return -1;
    const dt_value x = m->values[a], y = m->values[b];
    int same = x.rank == y.rank && x.rank >= 2;
    for (int d = 0; same && d < x.rank - 2; d++) same = x.dims[d] == y.dims[d];
    if (!same || x.dims[x.rank - 1] != y.dims[y.rank - 2])
        return build_failf(m,
                           "model %s: matmul of values of rank %d and %d whose shapes do not "
                           "multiply ([.., M, K] times [.., K, N], the leading axes equal)",
                           m->name, x.rank, y.rank);
    int dims[DT_VALUE_MAX_RANK];
    memcpy(dims, x.dims, sizeof dims);
    dims[x.rank - 1] = y.dims[y.rank - 1];
    int out = new_dims(m, x.rank, dims);
    dt_op *op = new_op(m, DT_OP_MATMUL, NULL, a, b, out);
    if (!op) return -1;
    op->outer = 1;
    for (int d = 0; d < x.rank - 2; d++) op->outer *= x.dims[d];
    return out;
}

int dt_model_slice(dt_model *m, int in, int axis, int start, int count, int step, int keep_axis) {
    if (!valid_value(m, in)) return -1;
    const dt_value x = m->values[in];
    const int a = norm_axis(m, "slice", x.rank, axis);
    if (a < 0) return -1;
    const int len = x.dims[a];
    if (step < 1 || count < 1 || start < 0 || start >= len ||
        (long long)start + (long long)(count - 1) * step >= len || (!keep_axis && count != 1))
        return build_failf(m, "model %s: slice of %d elements from %d by %d outside an axis of %d",
                           m->name, count, start, step, len);
    if (!keep_axis && x.rank == 1)
        return build_failf(m, "model %s: a gather would leave only the batch axis", m->name);
    int dims[DT_VALUE_MAX_RANK], rank = 0;
    for (int d = 0; d < x.rank; d++) {
        if (d == a && !keep_axis) continue;
        dims[rank++] = d == a ? count : x.dims[d];
    }
    int out = new_dims(m, rank, dims);
    dt_op *op = new_op(m, DT_OP_SLICE, NULL, in, -1, out);
    if (!op) return -1;
    set_geometry(op, &x, a, 0);
    op->start = start;
    op->count = count;
    op->step = step;
    return out;
}

int dt_model_expand_param(dt_model *m, const char *name, int rank, const int *dims) {
    if (m->n_values < 1 || m->build_failed)
        return build_failf(m, "model %s: expand %s before the input", m->name, name);
    if (rank < 1 || rank > 3)
        return build_failf(m, "expand %s: a parameter of %d axes a sample (1 to 3)", name, rank);
    int out = new_dims(m, rank, dims);
    dt_op *op = new_op(m, DT_OP_EXPAND_PARAM, name, 0, -1, out);
    if (!op) return -1;
    /* stored [1, dims...], as PyTorch holds it: the state dict, checkpoints and --save
     * keep its shape */
    int shape[4] = {1};
    for (int d = 0; d < rank; d++) shape[d + 1] = dims[d];
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_ZEROS, 0, rank + 1, shape);
    if (m->build_failed) return -1;
    /* a bare parameter (torchvision's `class_token`), not a module's weight */
    snprintf(m->tensors[op->weight].name, sizeof m->tensors[op->weight].name, "%s", name);
    return out;
}

void dt_model_free(dt_model *m) {
    dt_backend *b = m->backend;
    if (b) {
        for (int i = 0; i < m->n_storages; i++) b->free(b->ctx, m->storages[i].data);
        for (int k = 0; k < m->n_grad_slots; k++) b->free(b->ctx, m->grad_slots[k]);
        /* The ops' state first: it may hold plans made by the backend's context. */
        for (int i = 0; i < m->n_ops; i++) {
            const dt_kernel *k = m->ops[i].impl;
            if (k && k->free) k->free(m, &m->ops[i]);
        }
        b->destroy(b->ctx);
        free(b);
    }
    free(m->grad_slots);
    free(m->grad_slot_bytes);
    free(m->op_forward_s);
    free(m->op_backward_s);
    dt_free(m->params);
    dt_free(m->grads);
    dt_free(m->buffers);
    dt_free(m->probs);
    free(m->imported);
    free(m->tensors);
    free(m->values);
    free(m->storages);
    free(m->ops);
    free(m->op_inputs);
    memset(m, 0, sizeof *m);
}

/* FNV-1a, 64 bits: fed field by field (never a struct's bytes, whose padding and
 * pointers differ between processes). */
typedef struct graph_hash {
    uint64_t h;
} graph_hash;

static void hash_bytes(graph_hash *g, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) g->h = (g->h ^ b[i]) * 0x100000001b3ULL;
}

static void hash_int(graph_hash *g, int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)v >> (8 * i));
    hash_bytes(g, b, sizeof b);
}

static void hash_float(graph_hash *g, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    hash_int(g, bits);
}

static void hash_text(graph_hash *g, const char *s) {
    hash_bytes(g, s, strlen(s) + 1); /* the terminator ends it */
}

uint64_t dt_model_graph_hash(const dt_model *m) {
    graph_hash g = {0xcbf29ce484222325ULL};
    /* what the graph computes, not where the build put things: storages (which values
     * share memory), their sizes and the tensors' offsets are the memory plan, which
     * may change (an alias, a new in-place op) without a checkpoint becoming another
     * model's */
    hash_int(&g, m->classes);
    hash_int(&g, m->n_values);
    for (int i = 0; i < m->n_values; i++) {
        const dt_value *v = &m->values[i];
        hash_int(&g, v->c), hash_int(&g, v->h), hash_int(&g, v->w);
        /* images and vectors hash as before ranks existed, so their checkpoints
         * still resume; other ranks add their axes */
        if (v->rank != 1 && v->rank != 3) {
            hash_int(&g, v->rank);
            for (int d = 0; d < v->rank; d++) hash_int(&g, v->dims[d]);
        }
    }
    hash_int(&g, m->n_tensors);
    for (int i = 0; i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        hash_text(&g, t->name);
        hash_int(&g, t->is_param), hash_int(&g, t->ndim);
        for (int d = 0; d < t->ndim; d++) hash_int(&g, t->shape[d]);
    }
    hash_int(&g, m->n_ops);
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op *op = &m->ops[i];
        hash_int(&g, op->kind);
        hash_text(&g, op->name);
        hash_int(&g, op->in), hash_int(&g, op->in2), hash_int(&g, op->out);
        hash_int(&g, op->n_ins);
        for (int k = 0; k < op->n_ins; k++) hash_int(&g, dt_op_input(m, op, k));
        const int fields[] = {op->weight, op->bias,     op->running_mean, op->running_var,
                              op->kernel, op->stride,   op->pad,          op->dilation,
                              op->groups, op->ceil_mode};
        for (size_t k = 0; k < sizeof fields / sizeof *fields; k++) hash_int(&g, fields[k]);
        hash_float(&g, op->eps);
        hash_float(&g, op->p);
        if (op->kind == DT_OP_TRANSPOSE) /* other kinds hash as before */
            for (int d = 0; d < m->values[op->in].rank; d++) hash_int(&g, op->perm[d]);
        if (op->func || op->axes) { /* what older graphs lack */
            hash_int(&g, op->func), hash_int(&g, (int64_t)op->axes);
            hash_float(&g, op->scalar);
        }
        if (op->kind == DT_OP_ACTIVATION) { /* the other kinds hash as before */
            hash_int(&g, op->act.fn);
            hash_float(&g, op->act.a), hash_float(&g, op->act.b);
        }
        /* the axis ops' fields (issue 41), hashed only where set: the graphs before
         * them hash as they did */
        const int axis_fields[] = {op->axis,  op->outer, op->len,   op->inner,
                                   op->start, op->step,  op->count, op->log_softmax};
        int any = 0;
        for (size_t k = 0; k < sizeof axis_fields / sizeof *axis_fields; k++)
            any |= axis_fields[k] != 0;
        for (size_t k = 0; any && k < sizeof axis_fields / sizeof *axis_fields; k++)
            hash_int(&g, axis_fields[k]);
        /* attributes added later hash only where they differ from what every op had
         * before them: older checkpoints' graphs keep their hash */
        if (op->kind == DT_OP_BATCHNORM2D && op->momentum != 0.1f) hash_float(&g, op->momentum);
        if (op->axis != 0) hash_int(&g, op->axis);
        if (!dt_op_window_is_square(op)) {
            const int window[] = {op->kh,      op->kw,       op->stride_h,   op->stride_w,
                                  op->pad_top, op->pad_left, op->pad_bottom, op->pad_right};
            for (size_t k = 0; k < sizeof window / sizeof *window; k++) hash_int(&g, window[k]);
        }
        if (op->count_include_pad) hash_int(&g, op->count_include_pad);
        if (op->pad_value != 0.0f) hash_float(&g, op->pad_value);
    }
    return g.h;
}

float *dt_model_tensor_data(dt_model *m, int tensor) {
    const dt_tensor_entry *t = &m->tensors[tensor];
    return (t->is_param ? m->params : m->buffers) + t->offset;
}

int dt_model_find_tensor(const dt_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return i;
    return -1;
}

/* Every tensor drawn by its init rule from (seed, tensor index). */
static void draw_params(dt_model *m, uint64_t seed) {
    for (int i = 0; i < m->n_tensors; i++) {
        const dt_tensor_entry *t = &m->tensors[i];
        float *data = dt_model_tensor_data(m, i);
        dt_rng rng = dt_rng_make(seed, (uint64_t)i);
        float bound = t->fan_in > 0 ? 1.0f / sqrtf((float)t->fan_in) : 0.0f;
        for (size_t k = 0; k < t->numel; k++) {
            switch (t->init) {
            case DT_INIT_UNIFORM_FAN_IN:
                data[k] = (2.0f * dt_rng_uniform(&rng) - 1.0f) * bound;
                break;
            case DT_INIT_ONES:
                data[k] = 1.0f;
                break;
            case DT_INIT_ZEROS:
                data[k] = 0.0f;
                break;
            case DT_INIT_NORMAL:
                data[k] = t->std * dt_rng_normal(&rng);
                break;
            }
        }
    }
}

void dt_model_init_params(dt_model *m, uint64_t seed) {
    if (m->imported) { /* an ONNX graph's initializers */
        if (m->n_params) memcpy(m->params, m->imported, sizeof(float) * m->n_params);
        if (m->n_buffers)
            memcpy(m->buffers, m->imported + m->n_params, sizeof(float) * m->n_buffers);
    } else {
        draw_params(m, seed);
    }
    for (int i = 0; i < m->n_ops; i++) m->ops[i].num_batches_tracked = 0;
}

float *dt_model_input_data(dt_model *m) {
    return (float *)m->storages[0].data; /* f32: the loader's samples */
}

size_t dt_model_input_floats_per_sample(const dt_model *m) {
    return m->storages[0].per_sample;
}

const float *dt_model_logits(const dt_model *m) {
    return (const float *)m->storages[m->values[m->n_values - 1].storage].data; /* f32 */
}

int dt_model_enable_profile(dt_model *m, dt_error *err) {
    if (m->op_forward_s) return 0;
    m->op_forward_s = calloc((size_t)m->n_ops, sizeof(double));
    m->op_backward_s = calloc((size_t)m->n_ops, sizeof(double));
    if (!m->op_forward_s || !m->op_backward_s) {
        free(m->op_forward_s);
        free(m->op_backward_s);
        m->op_forward_s = m->op_backward_s = NULL;
        return dt_error_set(err, "out of memory for the profile");
    }
    return 0;
}

void dt_model_forward(dt_model *m, int n) {
    if (m->training) m->dropout_calls++; /* a new mask for every training forward */
    for (int i = 0; i < m->n_ops; i++) {
        double t0 = m->op_forward_s ? dt_now() : 0.0;
        dt_op *op = &m->ops[i];
        op->impl->forward(m, op, n);
        if (m->op_forward_s) m->op_forward_s[i] += dt_now() - t0;
    }
}

double dt_model_loss(dt_model *m, const int32_t *labels, int n, int *correct) {
    return dt_cross_entropy_forward(m->probs, dt_model_logits(m), labels, n, m->classes, correct);
}

void dt_model_zero_grad(dt_model *m) {
    memset(m->grads, 0, sizeof(float) * m->n_params);
}

/* Zeroes the gradients that become live at backward time t, but for those whose only
 * reader writes them (a pass over memory saved). */
static void start_live_grads(dt_model *m, int t, int n) {
    for (int si = 0; si < m->n_storages; si++) {
        dt_storage *s = &m->storages[si];
        if (s->needs_grad && !s->grad_written && m->n_ops - s->last_user == t)
            m->backend->memset0(m->backend->ctx, s->grad,
                                dt_dtype_size(s->dtype) * s->per_sample * (size_t)n);
    }
}

void dt_model_backward(dt_model *m, const int32_t *labels, int n) {
    start_live_grads(m, 0, n);
    dt_cross_entropy_backward(dt_model_value_grad(m, m->n_values - 1), m->probs, labels, n,
                              m->classes);
    for (int i = m->n_ops - 1; i >= 0; i--) {
        double t0 = m->op_backward_s ? dt_now() : 0.0;
        start_live_grads(m, m->n_ops - i, n);
        dt_op *op = &m->ops[i];
        op->impl->backward(m, op, n);
        if (m->op_backward_s) m->op_backward_s[i] += dt_now() - t0;
        if (m->on_grads_ready && op->weight >= 0) {
            /* weight and bias are adjacent in the parameter buffer (built so) */
            const dt_tensor_entry *w = &m->tensors[op->weight];
            size_t count = w->numel + (op->bias >= 0 ? m->tensors[op->bias].numel : 0);
            m->on_grads_ready(m->on_grads_ctx, w->offset, count);
        }
    }
}

double dt_model_train_flops(const dt_model *m, int n) {
    double flops = 0.0;
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op_class *cls = dt_op_class_of(m->ops[i].kind);
        if (cls->flops) flops += cls->flops(m, &m->ops[i], n);
    }
    return flops;
}

double dt_model_forward_flops(const dt_model *m, int n) {
    double flops = 0.0;
    for (int i = 0; i < m->n_ops; i++) {
        const dt_op_class *cls = dt_op_class_of(m->ops[i].kind);
        if (cls->forward_flops) flops += cls->forward_flops(m, &m->ops[i], n);
    }
    return flops;
}

long dt_model_first_non_finite(const dt_model *m) {
    for (size_t i = 0; i < m->n_params; i++)
        if (!isfinite(m->params[i])) return (long)i;
    for (size_t i = 0; i < m->n_buffers; i++)
        if (!isfinite(m->buffers[i])) return (long)(m->n_params + i);
    return -1;
}
