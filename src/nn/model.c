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
    if (!valid_value(m, in)) return -1;
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
    if (!valid_value(m, in)) return -1;
    dt_value x = m->values[in];
    int in_features = x.c * x.h * x.w;
    int out = new_vector(m, new_storage(m, out_features, 1, 1), out_features);
    dt_op *op = new_op(m, DT_OP_LINEAR, name, in, -1, out);
    if (!op) return -1;
    int wshape[2] = {out_features, in_features};
    op->weight = new_tensor(m, name, "weight", 1, DT_INIT_UNIFORM_FAN_IN, in_features, 2, wshape);
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
    if (!valid_value(m, in)) return -1;
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
    int out = new_value(m, x.storage, x.c, x.h, x.w);
    return new_op(m, DT_OP_RELU, NULL, in, -1, out) ? out : -1;
}

int dt_model_pool2d_rect(dt_model *m, dt_op_kind kind, int in, int kh, int kw, int stride_h,
                         int stride_w, const int pads[4], int ceil_mode, int count_include_pad) {
    if (!valid_value(m, in)) return -1;
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
    if (!valid_value(m, in)) return -1;
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
    int out = new_value(m, new_storage(m, x.c, x.h, x.w), x.c, x.h, x.w);
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
    return new_vector(m, x.storage, x.c * x.h * x.w);
}

int dt_model_add(dt_model *m, int a, int b) {
    if (!valid_value(m, a) || !valid_value(m, b)) return -1;
    dt_value x = m->values[a], y = m->values[b];
    if (x.c != y.c || x.h != y.h || x.w != y.w)
        return build_fail(m, "model %s: residual add of different shapes", m->name);
    int out = new_value(m, new_storage(m, x.c, x.h, x.w), x.c, x.h, x.w);
    return new_op(m, DT_OP_ADD, NULL, a, b, out) ? out : -1;
}

int dt_model_shortcut_pad(dt_model *m, int in, int c_out, int stride) {
    if (!valid_value(m, in)) return -1;
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
