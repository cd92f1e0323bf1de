#include "quant/quant.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cpu_isa.h"
#include "core/parse.h"

/* The largest float below 2^31: a bias beyond it does not fit in int32. */
#define INT32_FLOAT_LIMIT 2147483520.0f

int dt_quant_reduce_range_here(dt_quant_scheme scheme) {
    return scheme == DT_QUANT_SYMMETRIC && !dt_cpu_has_int8_vnni();
}

/* A reduced range: u8 activations of 7 bits (their scales follow from hi). */
static void apply_range(dt_qnet *q) {
    if (!q->cfg.reduce_range) return;
    for (int v = 0; v < q->n_values; v++)
        if (q->values[v].lo == 0 && q->values[v].hi > 127) q->values[v].hi = 127;
}

int dt_quant_scheme_parse(const char *text, dt_quant_scheme *out) {
    if (!strcmp(text, "symmetric"))
        *out = DT_QUANT_SYMMETRIC;
    else if (!strcmp(text, "lab"))
        *out = DT_QUANT_LAB;
    else
        return -1;
    return 0;
}

const char *dt_quant_scheme_name(dt_quant_scheme scheme) {
    return scheme == DT_QUANT_LAB ? "lab" : "symmetric";
}

/* ---- the structure ---- */

/* dst = a + b, cut to size (names are state-dict prefixes, far shorter). */
static void join_name(char *dst, size_t size, const char *a, const char *b) {
    if (snprintf(dst, size, "%s%s", a, b) >= (int)size) dst[size - 1] = '\0';
}

static int storage_of(const dt_model *m, int value) {
    return m->values[value].storage;
}

static int new_value(dt_qnet *q, const char *name, const dt_model *m, int float_value,
                     int record_after) {
    dt_qvalue *v = &q->values[q->n_values];
    const dt_value *x = &m->values[float_value];
    snprintf(v->name, sizeof v->name, "%s", name);
    if (dt_model_value_is_image(m, float_value)) {
        v->c = x->c;
        v->h = x->h;
        v->w = x->w;
    } else { /* any other rank (a kept-float op's), as a vector of its elements */
        v->c = (int)m->storages[x->storage].per_sample;
        v->h = v->w = 1;
    }
    v->lo = -128;
    v->hi = 127;
    v->float_storage = storage_of(m, float_value);
    v->record_after = record_after;
    v->relu_op = -1;
    v->share = q->n_values;
    return q->n_values++;
}

/* The group of values that share a scale (union-find over `share`). */
static int share_root(const dt_qnet *q, int v) {
    while (q->values[v].share != v) v = q->values[v].share;
    return v;
}

static void share_scale(dt_qnet *q, int a, int b) {
    const int ra = share_root(q, a), rb = share_root(q, b);
    if (ra != rb) q->values[rb].share = ra;
}

/* A ReLU right after the layer: its integers lose their negative half. The lab clamps
 * to [-128, 127] first, so its ReLU outputs stay within [0, 127]. */
static int maybe_fuse_relu(dt_qnet *q, const dt_model *m, int next, int float_value, int value,
                           dt_quant_scheme scheme) {
    if (next >= m->n_ops || m->ops[next].kind != DT_OP_RELU || m->ops[next].in != float_value)
        return next;
    dt_qvalue *v = &q->values[value];
    v->relu_op = next;
    v->lo = 0;
    v->hi = scheme == DT_QUANT_LAB ? 127 : 255;
    return next + 1;
}

/* A conv or linear layer for float op i, with the BatchNorm after a conv folded in and a
 * ReLU after either fused; returns the next float op. `spatial`: a convolution's
 * geometry (kernel, stride, padding over c_in channels), else a linear layer's fan-in. */
static int add_layer(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int spatial,
                     int *of_storage, dt_error *err) {
    const dt_op *op = &m->ops[i];
    const int in = of_storage[storage_of(m, op->in)];
    if (in < 0)
        return dt_error_set(err, "model %s: layer %s reads a value with no int8 form", m->name,
                            op->name);
    if (spatial && !dt_op_window_is_square(op))
        return dt_error_set(err,
                            "model %s: conv %s has a %dx%d kernel, strides %dx%d or unequal pads: "
                            "int8 has square kernels, one stride and equal pads only (evaluate it "
                            "in fp32)",
                            m->name, op->name, op->kh, op->kw, op->stride_h, op->stride_w);
    dt_qop *o = &q->ops[q->n_ops++];
    const dt_value *x = &m->values[op->in];
    snprintf(o->name, sizeof o->name, "%s", op->name);
    o->kind = kind;
    o->in = in;
    o->residual = -1;
    o->float_conv = i;
    o->float_bn = -1;
    o->c_out = m->values[op->out].c;
    o->groups = o->dilation = 1;
    if (spatial) {
        o->c_in = x->c;
        o->kernel = op->kernel;
        o->stride = op->stride;
        o->pad = op->pad;
        o->groups = op->groups;
        o->dilation = op->dilation;
    } else {
        o->c_in = x->c * x->h * x->w;
        o->kernel = o->stride = 1;
    }
    int last = i, out = op->out;
    if (spatial && i + 1 < m->n_ops && m->ops[i + 1].kind == DT_OP_BATCHNORM2D &&
        m->ops[i + 1].in == op->out) {
        o->float_bn = i + 1; /* folded into this convolution */
        out = m->ops[i + 1].out;
        last = i + 1;
    }
    o->out = new_value(q, op->name, m, out, last);
    of_storage[storage_of(m, out)] = o->out;
    return maybe_fuse_relu(q, m, last + 1, out, o->out, q->cfg.scheme);
}

static int add_conv(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
                    dt_error *err) {
    return add_layer(q, m, i, kind, 1, of_storage, err);
}

static int add_linear(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
                      dt_error *err) {
    return add_layer(q, m, i, kind, 0, of_storage, err);
}

/* A pooling, named after its input ("conv1.maxpool"); its integers keep their range. */
static int add_pool(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
                    dt_error *err) {
    const dt_op *op = &m->ops[i];
    const int in = of_storage[storage_of(m, op->in)];
    if (in < 0)
        return dt_error_set(err, "model %s: a pooling reads a value with no int8 form", m->name);
    /* the int8 pools take one square window, one stride and equal pads (the max pool's
     * padding and ceil_mode clipped in both engines, the average pool's refused by
     * fits) */
    if (!dt_op_window_is_square(op))
        return dt_error_set(err,
                            "model %s: a %dx%d pooling with strides %dx%d or unequal pads: int8 "
                            "pools square windows only (evaluate it in fp32)",
                            m->name, op->kh, op->kw, op->stride_h, op->stride_w);
    dt_qop *o = &q->ops[q->n_ops++];
    o->kind = kind;
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".%s", dt_qop_class_of(kind)->name);
    join_name(o->name, sizeof o->name, q->values[in].name, suffix);
    o->in = in;
    o->residual = -1;
    o->float_conv = o->float_bn = -1;
    o->kernel = op->kernel;
    o->stride = op->stride;
    o->pad = op->pad; /* max pooling: padding never wins; the output's size has ceil_mode */
    o->groups = o->dilation = 1;
    o->c_in = o->c_out = q->values[in].c;
    o->out = new_value(q, o->name, m, op->out, i);
    q->values[o->out].lo = q->values[in].lo; /* the same integers, fewer of them */
    q->values[o->out].hi = q->values[in].hi;
    share_scale(q, in, o->out);
    of_storage[storage_of(m, op->out)] = o->out;
    return i + 1;
}

/* The inputs of float op i in order (a concat's every input; else in, and in2 if any),
 * at most DT_QOP_MAX_INPUTS (fits_concat keeps larger concats float). */
static int float_inputs(const dt_model *m, int i, int *ins) {
    const dt_op *op = &m->ops[i];
    int n = dt_op_n_inputs(op);
    if (n > DT_QOP_MAX_INPUTS) n = DT_QOP_MAX_INPUTS;
    for (int k = 0; k < n; k++) ins[k] = dt_op_input(m, op, k);
    return n;
}

/* Whether an op of m writes value v's storage (the input is written by the caller). */
static int written(const dt_model *m, int v) {
    if (storage_of(m, v) == storage_of(m, 0)) return 1;
    for (int i = 0; i < m->n_ops; i++)
        if (m->ops[i].out >= 0 && storage_of(m, m->ops[i].out) == storage_of(m, v)) return 1;
    return 0;
}

/* An op reading several values: their int8 forms in o->ins. */
static int take_inputs(dt_qnet *q, const dt_model *m, int i, dt_qop *o, const int *of_storage,
                       dt_error *err) {
    int ins[DT_QOP_MAX_INPUTS];
    o->n_ins = float_inputs(m, i, ins);
    for (int k = 0; k < o->n_ins; k++) {
        o->ins[k] = ins[k] >= 0 ? of_storage[storage_of(m, ins[k])] : -1;
        /* -1: no input there, or a value no op writes (a constant of the float model,
         * which a kept-float op reads as it is); a value an op writes must have its
         * int8 form */
        if (o->ins[k] < 0 && ins[k] >= 0 && written(m, ins[k]))
            return dt_error_set(err, "model %s: op %d (%s) reads a value the int8 network lacks",
                                m->name, i, dt_op_kind_name(m->ops[i].kind));
    }
    o->in = o->ins[0];
    (void)q;
    return 0;
}

/* torch.cat on channels: its inputs take its scale (PyTorch's x86 backend shares one
 * observer across a cat too), so the concat copies integers and rounds nothing again;
 * a u8 input of a signed concat keeps [0, 127] (dt_qnet_build's end). */
static int add_concat(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
                      dt_error *err) {
    const dt_op *op = &m->ops[i];
    dt_qop *o = &q->ops[q->n_ops++];
    o->kind = kind;
    snprintf(o->name, sizeof o->name, "concat.%d", i);
    o->residual = -1;
    o->float_conv = o->float_bn = -1;
    o->kernel = o->stride = o->groups = o->dilation = 1;
    if (take_inputs(q, m, i, o, of_storage, err)) return -1;
    o->c_out = m->values[op->out].c;
    o->out = new_value(q, o->name, m, op->out, i);
    /* signed only if an input is (dt_qnet_build's end decides, over the whole group) */
    q->values[o->out].lo = 0;
    q->values[o->out].hi = 255;
    for (int k = 0; k < o->n_ins; k++) share_scale(q, o->ins[k], o->out);
    of_storage[storage_of(m, op->out)] = o->out;
    return i + 1;
}

static int op_name_is_unique(const dt_model *m, int i) {
    for (int j = 0; j < m->n_ops; j++)
        if (j != i && !strcmp(m->ops[j].name, m->ops[i].name)) return 0;
    return 1;
}

/* An op with no int8 form: the float model runs it (qfloat.h) on its inputs
 * dequantized, and its output is quantized at a scale of its own. Named after the op
 * if no other op has its name, else its name or kind and its index ("clip.12",
 * "shortcut_pad.12"): the file's entries are keyed by these names (an activation op is
 * named after its function, so mobilenet_v2's 35 ReLU6 are all "clip"). */
static int add_float(dt_qnet *q, const dt_model *m, int i, int *of_storage, dt_error *err) {
    const dt_op *op = &m->ops[i];
    dt_qop *o = &q->ops[q->n_ops++];
    o->kind = DT_QOP_FLOAT;
    if (op->name[0] && op_name_is_unique(m, i))
        snprintf(o->name, sizeof o->name, "%s", op->name);
    else if (snprintf(o->name, sizeof o->name, "%s.%d",
                      op->name[0] ? op->name : dt_op_kind_name(op->kind), i) >= (int)sizeof o->name)
        return dt_error_set(err, "model %s: op %d's name %s is too long to number", m->name, i,
                            op->name);
    o->residual = -1;
    o->float_conv = o->float_bn = -1;
    o->float_op = i;
    snprintf(o->float_kind, sizeof o->float_kind, "%s", dt_op_kind_name(op->kind));
    o->kernel = o->stride = o->groups = o->dilation = 1;
    if (take_inputs(q, m, i, o, of_storage, err)) return -1;
    const int tensors[4] = {op->weight, op->bias, op->running_mean, op->running_var};
    for (int k = 0; k < 4; k++) {
        o->float_tensor[k] = tensors[k];
        if (tensors[k] < 0) continue;
        snprintf(o->float_name[k], sizeof o->float_name[k], "%s", m->tensors[tensors[k]].name);
        o->float_count[k] = m->tensors[tensors[k]].numel;
    }
    o->c_out = m->values[op->out].c;
    o->out = new_value(q, o->name, m, op->out, i);
    q->values[o->out].from_float = 1;
    of_storage[storage_of(m, op->out)] = o->out;
    return i + 1;
}

/* Whether the residual add at op `add` can be fused into the convolution writing its
 * input a: a's integers are nobody else's input. */
static int fusable(const dt_qnet *q, const dt_model *m, int add, int a, const int *of_storage) {
    const int v = of_storage[storage_of(m, a)];
    if (v < 0 || q->values[v].relu_op >= 0) return -1;
    int k = -1;
    for (int j = 0; j < q->n_ops; j++)
        if (q->ops[j].out == v) k = j;
    if (k < 0 || q->ops[k].kind != DT_QOP_CONV || q->ops[k].residual >= 0) return -1;
    for (int t = 0; t < m->n_ops; t++) {
        if (t == add) continue;
        if (t <= q->values[v].record_after) continue;
        int ins[DT_QOP_MAX_INPUTS];
        const int n = float_inputs(m, t, ins);
        for (int j = 0; j < n; j++)
            if (ins[j] >= 0 && storage_of(m, ins[j]) == storage_of(m, a)) return -1;
    }
    return k;
}

static int fits_image(const dt_model *m, const dt_op *op);

static int fuse_add(dt_qnet *q, const dt_model *m, int i, int *of_storage, dt_error *err) {
    const dt_op *op = &m->ops[i];
    int sides[2][2] = {{op->in, op->in2}, {op->in2, op->in}}, k = -1, other = -1;
    /* a residual: two images of the output's shape (not a broadcast) */
    const int same = op->in >= 0 && op->in2 >= 0 && fits_image(m, op) &&
                     m->values[op->in2].rank == 3 && m->values[op->in].c == m->values[op->out].c &&
                     m->values[op->in2].c == m->values[op->out].c &&
                     m->values[op->in].h == m->values[op->out].h &&
                     m->values[op->in2].h == m->values[op->out].h &&
                     m->values[op->in].w == m->values[op->out].w &&
                     m->values[op->in2].w == m->values[op->out].w;
    for (int s = 0; same && s < 2 && k < 0; s++) {
        const int res = of_storage[storage_of(m, sides[s][1])];
        k = res >= 0 ? fusable(q, m, i, sides[s][0], of_storage) : -1;
        if (k >= 0) other = sides[s][1];
    }
    if (k < 0) /* none of its inputs is a convolution's own output: kept float */
        return add_float(q, m, i, of_storage, err);
    /* The convolution moves after whatever computes the other input (the shortcut). */
    dt_qop conv = q->ops[k];
    memmove(&q->ops[k], &q->ops[k + 1], sizeof(dt_qop) * (size_t)(q->n_ops - k - 1));
    conv.residual = of_storage[storage_of(m, other)];
    q->ops[q->n_ops - 1] = conv;
    dt_qvalue *v = &q->values[conv.out];
    char name[sizeof v->name];
    join_name(name, sizeof name, v->name, "+add");
    memcpy(v->name, name, sizeof name);
    of_storage[v->float_storage] = -1;
    v->float_storage = storage_of(m, op->out);
    v->record_after = i;
    of_storage[v->float_storage] = conv.out;
    return maybe_fuse_relu(q, m, i + 1, op->out, conv.out, q->cfg.scheme);
}

static double linear_macs(const dt_qop *o, const dt_qvalue *y) {
    (void)y;
    return (double)o->c_out * o->c_in;
}

static double group_conv_macs(const dt_qop *o, const dt_qvalue *y) {
    return (double)o->c_out * y->h * y->w * (double)dt_qop_fan_in(o);
}

/* Whether a float op's int8 form fits it: images in and out (any other rank is kept
 * float); average pooling without padding or ceil_mode (oneDNN's and the emulation's
 * window is then always k x k); adaptive pooling whose windows are all the same size. */
static int fits_image(const dt_model *m, const dt_op *op) {
    return m->values[op->in].rank == 3 && m->values[op->out].rank == 3;
}

/* A linear layer of a flattened image or a vector (not one applied along an axis of
 * a value of another rank, per token). */
static int fits_linear(const dt_model *m, const dt_op *op) {
    const int r = m->values[op->in].rank;
    return (r == 3 || r == 1) && m->values[op->out].rank == 1;
}

static int fits_avgpool(const dt_model *m, const dt_op *op) {
    return fits_image(m, op) && op->pad == 0 && !op->ceil_mode;
}

static int fits_adaptive(const dt_model *m, const dt_op *op) {
    const dt_value *x = &m->values[op->in], *y = &m->values[op->out];
    return fits_image(m, op) && x->h % y->h == 0 && x->w % y->w == 0;
}

static int fits_concat(const dt_model *m, const dt_op *op) {
    if (dt_op_n_inputs(op) > DT_QOP_MAX_INPUTS || op->axis != 0) return 0;
    int ins[DT_QOP_MAX_INPUTS];
    const int n = float_inputs(m, (int)(op - m->ops), ins);
    for (int k = 0; k < n; k++)
        if (ins[k] < 0 || m->values[ins[k]].rank != 3) return 0;
    return m->values[op->out].rank == 3;
}

/* One row per kind, matched by designator: what it is, whether float op `from` has this
 * int8 form (fits), how it becomes it (returning the next float op: fused ones are
 * consumed), and its multiply-accumulates per sample (NULL: none counted). The engines'
 * rows are in qemu.c and int8_dnnl.c. DT_QOP_FLOAT's row takes no float op by itself:
 * it is what an op no other row fits becomes. */
typedef struct qop_row {
    dt_qop_class cls;
    int (*fits)(const dt_model *m, const dt_op *op);
    int (*add)(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
               dt_error *err);
    double (*macs)(const dt_qop *o, const dt_qvalue *y);
} qop_row;

static const qop_row qop_table[] = {
    [DT_QOP_CONV] = {{"conv", DT_OP_CONV2D, 4}, fits_image, add_conv, group_conv_macs},
    [DT_QOP_LINEAR] = {{"linear", DT_OP_LINEAR, 2}, fits_linear, add_linear, linear_macs},
    [DT_QOP_MAXPOOL] = {{"maxpool", DT_OP_MAXPOOL2D, 0}, fits_image, add_pool, NULL},
    [DT_QOP_AVGPOOL] = {{"avgpool", DT_OP_AVGPOOL2D, 0}, fits_avgpool, add_pool, NULL},
    [DT_QOP_ADAPTIVE_AVGPOOL] = {{"adaptive_avgpool", DT_OP_ADAPTIVE_AVGPOOL2D, 0},
                                 fits_adaptive,
                                 add_pool,
                                 NULL},
    [DT_QOP_CONCAT] = {{"concat", DT_OP_CONCAT, 0}, fits_concat, add_concat, NULL},
    [DT_QOP_FLOAT] = {{"float", DT_OP_COUNT, 0}, NULL, NULL, NULL},
};
_Static_assert(sizeof qop_table / sizeof *qop_table == DT_QOP_COUNT,
               "one table row per quantized op kind");

const dt_qop_class *dt_qop_class_of(dt_qop_kind kind) {
    return &qop_table[kind].cls;
}

/* The int8 form of float op i: the first row made from its kind that fits it; -1 if
 * none (it is kept float). */
static int qop_kind_for(const dt_model *m, int i) {
    for (int k = 0; k < DT_QOP_COUNT; k++)
        if (qop_table[k].cls.from == m->ops[i].kind && qop_table[k].fits &&
            qop_table[k].fits(m, &m->ops[i]))
            return k;
    return -1;
}

size_t dt_qop_fan_in(const dt_qop *o) {
    const int groups = o->groups > 1 ? o->groups : 1;
    return (size_t)(o->c_in / groups) * o->kernel * o->kernel;
}

size_t dt_qop_weight_count(const dt_qop *o) {
    return dt_qop_fan_in(o) * (size_t)o->c_out;
}

int dt_qop_reads(const dt_qop *o, int v) {
    if (o->in == v || o->residual == v) return 1;
    for (int k = 0; k < o->n_ins; k++)
        if (o->ins[k] == v) return 1;
    return 0;
}

/* Whether ops of this kind hold int8 weights: layers, not poolings. */
static int has_weights(dt_qop_kind kind) {
    return qop_table[kind].cls.weight_dims > 0;
}

void dt_qnet_free(dt_qnet *q) {
    for (int i = 0; q->ops && i < q->n_ops; i++) {
        free(q->ops[i].weight);
        free(q->ops[i].bias);
        free(q->ops[i].weight_scale);
        free(q->ops[i].output_scale);
        for (int k = 0; k < 4; k++) free(q->ops[i].float_data[k]);
    }
    free(q->ops);
    free(q->values);
    free(q->vstats);
    free(q->wstats);
    memset(q, 0, sizeof *q);
}

/* Values sharing a scale share its integers' range: a group with a signed member is
 * signed, and its u8 members keep [0, 127] (the integers the signed concat can hold, as
 * many levels per unit as the s8 members); an all-u8 group stays [0, 255]. */
static int resolve_shared_ranges(dt_qnet *q, dt_error *err) {
    char *is_signed = calloc((size_t)q->n_values, 1); /* per group root */
    if (!is_signed) return dt_error_set(err, "out of memory building the quantized network");
    for (int v = 0; v < q->n_values; v++)
        if (q->values[v].lo < 0) is_signed[share_root(q, v)] = 1;
    for (int v = 0; v < q->n_values; v++)
        if (is_signed[share_root(q, v)] && q->values[v].lo == 0 && q->values[v].hi > 127)
            q->values[v].hi = 127;
    /* in order, so that a pooling of a concat follows it */
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        dt_qvalue *y = &q->values[o->out];
        if (o->kind == DT_QOP_CONCAT) {
            const int s = is_signed[share_root(q, o->out)];
            y->lo = s ? -128 : 0;
            y->hi = s ? 127 : 255;
            for (int k = 0; !s && k < o->n_ins; k++)
                if (q->values[o->ins[k]].hi < y->hi) y->hi = q->values[o->ins[k]].hi;
        } else if (!qop_table[o->kind].cls.weight_dims && o->kind != DT_QOP_FLOAT) {
            y->lo = q->values[o->in].lo; /* a pooling: its input's integers */
            y->hi = q->values[o->in].hi;
        }
    }
    free(is_signed);
    return 0;
}

int dt_qnet_build(dt_qnet *q, const dt_model *m, const dt_model_spec *spec, dt_quant_scheme scheme,
                  dt_error *err) {
    memset(q, 0, sizeof *q);
    if (strlen(spec->name) >= sizeof q->model) /* named whole in the file, or not made */
        return dt_error_set(err, "cannot quantize %.64s...: a name of %zu bytes (at most %zu)",
                            spec->name, strlen(spec->name), sizeof q->model - 1);
    snprintf(q->model, sizeof q->model, "%s", spec->name);
    q->spec = *spec;
    q->spec.name = q->model;
    q->cfg.scheme = scheme;
    q->values = calloc((size_t)m->n_ops + 1, sizeof(dt_qvalue));
    q->ops = calloc((size_t)m->n_ops + 1, sizeof(dt_qop));
    int *of_storage = malloc(sizeof(int) * (size_t)m->n_storages);
    if (!q->values || !q->ops || !of_storage) {
        free(of_storage);
        dt_qnet_free(q);
        return dt_error_set(err, "out of memory building the quantized network");
    }
    for (int s = 0; s < m->n_storages; s++) of_storage[s] = -1;
    of_storage[storage_of(m, 0)] = new_value(q, "input", m, 0, -1);
    int rc = 0;
    for (int i = 0; rc >= 0 && i < m->n_ops;) {
        const dt_op *op = &m->ops[i];
        const int kind = qop_kind_for(m, i);
        if (op->kind == DT_OP_DROPOUT) { /* the identity at inference: its input's integers */
            of_storage[storage_of(m, op->out)] = of_storage[storage_of(m, op->in)];
            rc = ++i;
        } else if (kind >= 0) {
            rc = i = qop_table[kind].add(q, m, i, (dt_qop_kind)kind, of_storage, err);
        } else if (op->kind == DT_OP_ADD) { /* fused into a convolution, or kept float */
            rc = i = fuse_add(q, m, i, of_storage, err);
        } else {
            rc = i = add_float(q, m, i, of_storage, err);
        }
    }
    if (rc >= 0) rc = resolve_shared_ranges(q, err);
    if (rc >= 0) {
        const int last = of_storage[storage_of(m, m->n_values - 1)];
        const int layer = last >= 0 && q->n_ops > 0 && q->ops[q->n_ops - 1].out == last &&
                          has_weights(q->ops[q->n_ops - 1].kind) && q->values[last].relu_op < 0;
        if (last < 0 || q->n_ops == 0 || q->ops[q->n_ops - 1].out != last ||
            (scheme == DT_QUANT_LAB && !layer))
            rc = dt_error_set(err, "model %s does not end in a linear or conv layer", m->name);
        else if (scheme == DT_QUANT_SYMMETRIC &&
                 (layer || q->ops[q->n_ops - 1].kind == DT_QOP_AVGPOOL ||
                  q->ops[q->n_ops - 1].kind == DT_QOP_ADAPTIVE_AVGPOOL))
            /* logits stay float32; a final average pooling (squeezenet's, after its last
             * convolution and ReLU) is not rounded: rounded, 3.9% of a Fashion-MNIST
             * model's images tied two classes */
            q->values[last].is_float = 1;
        /* else int8 logits, its integers over its scale */
    }
    free(of_storage);
    if (rc < 0) {
        dt_qnet_free(q);
        return -1;
    }
    return 0;
}

int dt_qnet_float_summary(const dt_qnet *q, char *text, size_t size) {
    int total = 0;
    for (int i = 0; i < q->n_ops; i++)
        if (q->ops[i].kind == DT_QOP_FLOAT) total++;
    text[0] = '\0';
    if (!total) return 0;
    /* each kind once, counted, in the order it first appears */
    size_t at = (size_t)snprintf(text, size, "%d op%s (", total, total == 1 ? "" : "s");
    int first = 1;
    for (int i = 0; i < q->n_ops && at < size; i++) {
        const dt_qop *o = &q->ops[i];
        if (o->kind != DT_QOP_FLOAT) continue;
        int earlier = 0, same = 0;
        for (int j = 0; j < q->n_ops; j++)
            if (q->ops[j].kind == DT_QOP_FLOAT && !strcmp(q->ops[j].float_kind, o->float_kind)) {
                same++;
                earlier |= j < i;
            }
        if (earlier) continue;
        at += (size_t)snprintf(text + at, size - at, "%s%s x%d", first ? "" : ", ", o->float_kind,
                               same);
        first = 0;
    }
    if (at < size) snprintf(text + at, size - at, ")");
    return total;
}

double dt_qnet_macs(const dt_qnet *q) {
    double macs = 0.0;
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        if (qop_table[o->kind].macs) macs += qop_table[o->kind].macs(o, &q->values[o->out]);
    }
    return macs;
}

int dt_quant_file_hash(const char *path, long expect_bytes, char *hex, size_t size, dt_error *err) {
    /* O_NONBLOCK: a FIFO named here must not block the open; it is refused below */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = dt_error_set(err, "cannot read %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = dt_error_set(err, "cannot read %s: not a regular file", path);
    else if (expect_bytes >= 0 && (long long)st.st_size != expect_bytes)
        rc = dt_error_set(err, "%s has %lld bytes, not the %ld recorded", path,
                          (long long)st.st_size, expect_bytes);
    uint64_t h = 1469598103934665603ULL;
    unsigned char buf[65536];
    /* no further than the size fstat gave: a file that grows is not read forever */
    for (off_t left = st.st_size; rc == 0 && left > 0;) {
        const ssize_t got = read(fd, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            rc = dt_error_set(err, "cannot read %s: %s", path,
                              got < 0 ? strerror(errno) : "shorter than its size");
            break;
        }
        for (ssize_t i = 0; i < got; i++) h = (h ^ buf[i]) * 1099511628211ULL;
        left -= got;
    }
    close(fd);
    if (rc == 0) snprintf(hex, size, "%016llx", (unsigned long long)h);
    return rc;
}

/* ---- calibration ---- */

enum { PASS_RANGE, PASS_HIST, PASS_REPORT };

/* Values the calibration reads: the input, every layer's, concat's and kept-float op's
 * output (pooling inherits its input's scale, float logits need none). */
static int calibrated(const dt_qnet *q, int v) {
    if (v == 0) return 1;
    for (int i = 0; i < q->n_ops; i++)
        if (q->ops[i].out == v)
            return (has_weights(q->ops[i].kind) && !q->values[v].is_float) ||
                   q->ops[i].kind == DT_QOP_CONCAT || q->ops[i].kind == DT_QOP_FLOAT;
    return 0;
}

/* The float model's op after which value v is read in a pass: calibration reads the
 * lab's layers before their ReLU (as the lab's hooks on the conv and linear layers
 * do), the symmetric scheme's after; the report compares what is passed on. */
static int read_point(const dt_qnet *q, int v, int pass) {
    const dt_qvalue *x = &q->values[v];
    if (x->relu_op >= 0 && (pass == PASS_REPORT || q->cfg.scheme == DT_QUANT_SYMMETRIC))
        return x->relu_op;
    return x->record_after;
}

static void report_observe(dt_qvalue_stats *st, const dt_qvalue *v, const float *x, size_t n) {
    uint64_t clipped = 0;
    double signal = 0.0, noise = 0.0;
    const float lo = (float)v->lo, hi = (float)v->hi;
    for (size_t i = 0; i < n; i++) {
        const float r = rintf(x[i] * v->scale);
        const float qv = r < lo ? lo : r > hi ? hi : r;
        /* ReLU's zeros are not clipping: only values beyond the range that is kept */
        clipped += r > hi || (r < lo && !(v->lo == 0 && x[i] <= 0.0f));
        const double e = (double)x[i] - (double)qv / v->scale;
        signal += (double)x[i] * x[i];
        noise += e * e;
    }
    st->clipped += (double)clipped;
    st->signal += signal;
    st->noise += noise;
}

static void observe(dt_qnet *q, int v, const float *x, size_t n, int pass) {
    dt_qvalue_stats *st = &q->vstats[v];
    if (pass == PASS_RANGE)
        dt_calib_observe_range(&st->calib, x, n);
    else if (pass == PASS_HIST)
        dt_calib_observe_hist(&st->calib, x, n);
    else
        report_observe(st, &q->values[v], x, n);
}

/* One pass over the calibration images through the float model, op by op, reading
 * each calibrated value where the pass wants it. */
static int calib_pass(dt_qnet *q, dt_model *m, dt_quant_feed feed, void *ctx, int pass,
                      dt_error *err) {
    /* the statistics read the float model's activations as f32 */
    for (int si = 0; si < m->n_storages; si++)
        if (m->storages[si].dtype != DT_F32)
            return dt_error_set(err, "calibration runs the float model in fp32, not %s",
                                dt_dtype_name(m->storages[si].dtype));
    float *x = dt_model_input_data(m);
    char *read = malloc((size_t)q->n_values);
    if (!read) return dt_error_set(err, "out of memory for calibration");
    for (int v = 0; v < q->n_values; v++) read[v] = (char)calibrated(q, v);
    long total = 0;
    for (int index = 0;; index++) {
        const int n = feed(ctx, index, x, m->max_batch, err);
        if (n < 0) {
            free(read);
            return -1;
        }
        if (n == 0) break;
        total += n;
        for (int v = 0; v < q->n_values; v++)
            if (read[v] && read_point(q, v, pass) < 0)
                observe(q, v, x, dt_model_input_floats_per_sample(m) * (size_t)n, pass);
        for (int i = 0; i < m->n_ops; i++) {
            dt_op *op = &m->ops[i];
            op->impl->forward(m, op, n);
            for (int v = 0; v < q->n_values; v++) {
                if (!read[v] || read_point(q, v, pass) != i) continue;
                const dt_storage *s = &m->storages[q->values[v].float_storage];
                observe(q, v, (const float *)s->data, s->per_sample * (size_t)n, pass);
            }
        }
    }
    free(read);
    if (total == 0) return dt_error_set(err, "no calibration images: the calibration set is empty");
    q->calib_samples = (int)total;
    return 0;
}

/* ---- scales and integers ---- */

/* A layer's float weights [c_out, fan_in] and bias [c_out], its BatchNorm folded in:
 * w' = w * gamma / sqrt(var + eps), b' = beta + (b - mean) * gamma / sqrt(var + eps). */
static void folded_weights(const dt_qop *o, dt_model *m, float *w, float *b) {
    const dt_op *conv = &m->ops[o->float_conv];
    const size_t fan_in = dt_qop_fan_in(o);
    const float *w0 = dt_model_param(m, conv->weight), *b0 = dt_model_param(m, conv->bias);
    memcpy(w, w0, sizeof(float) * fan_in * (size_t)o->c_out);
    for (int c = 0; c < o->c_out; c++) b[c] = b0 ? b0[c] : 0.0f;
    if (o->float_bn < 0) return;
    const dt_op *bn = &m->ops[o->float_bn];
    const float *gamma = dt_model_param(m, bn->weight), *beta = dt_model_param(m, bn->bias);
    const float *mean = dt_model_tensor_data(m, bn->running_mean);
    const float *var = dt_model_tensor_data(m, bn->running_var);
    for (int c = 0; c < o->c_out; c++) {
        const double s = (double)gamma[c] / sqrt((double)var[c] + 1e-5); /* PyTorch's eps */
        for (size_t k = 0; k < fan_in; k++)
            w[(size_t)c * fan_in + k] = (float)((double)w[(size_t)c * fan_in + k] * s);
        b[c] = (float)((double)beta[c] + ((double)b[c] - (double)mean[c]) * s);
    }
}

/* The scale of a calibrated value from its statistics: the lab's 127 / (hi - lo) of
 * its range, or the symmetric levels / threshold. */
static int value_scale(dt_qnet *q, int v, dt_error *err) {
    dt_qvalue *x = &q->values[v];
    dt_qvalue_stats *st = &q->vstats[v];
    const dt_calib_stats *c = &st->calib;
    if (c->nonfinite || !isfinite(c->min) || !isfinite(c->max))
        return dt_error_set(err,
                            "activations of %s are not finite (NaN or infinity) over the %d "
                            "calibration images",
                            x->name, q->calib_samples);
    /* of |x|: 128 for s8 and a 7-bit u8 (a reduced range, a signed concat's input), 256
     * for a full u8; the lab's [0, 127] values are searched over 256 levels (as 4701151
     * did: never reduced) */
    const int levels = q->cfg.scheme == DT_QUANT_LAB ? (x->lo < 0 ? 128 : 256)
                       : x->hi <= 127                ? 128
                                                     : 256;
    float scale;
    if (q->cfg.scheme == DT_QUANT_LAB) {
        double lo, hi;
        dt_calib_range(c, &q->cfg.calib, levels, &lo, &hi);
        scale = 127.0f / ((float)hi - (float)lo);
    } else {
        const double t = dt_calib_threshold(c, &q->cfg.calib, levels);
        scale = (float)x->hi / (float)t;
    }
    if (!isfinite(scale) || !(scale > 0.0f))
        return dt_error_set(err,
                            "activations of %s are all %g over the %d calibration images: its "
                            "scale would be infinite",
                            x->name, c->max, q->calib_samples);
    x->scale = scale;
    return 0;
}

/* A layer's integers: weights at weight_scale, the accumulator at weight_scale x the
 * input's scale, the output at the next scale. */
static int quantize_layer(dt_qnet *q, dt_qop *o, const float *w, const float *b, dt_error *err) {
    const size_t fan_in = dt_qop_fan_in(o);
    const int lab = q->cfg.scheme == DT_QUANT_LAB;
    const int even = q->cfg.reduce_range && q->values[o->in].lo < 0;
    const float wlo = lab ? -128.0f : even ? -126.0f : -127.0f, whi = even ? 126.0f : 127.0f;
    o->n_scales = q->cfg.per_channel ? o->c_out : 1;
    o->weight = malloc(fan_in * (size_t)o->c_out);
    o->bias = malloc(sizeof(int32_t) * (size_t)o->c_out);
    o->weight_scale = malloc(sizeof(float) * (size_t)o->n_scales);
    o->output_scale = malloc(sizeof(float) * (size_t)o->n_scales);
    if (!o->weight || !o->bias || !o->weight_scale || !o->output_scale)
        return dt_error_set(err, "out of memory quantizing %s", o->name);
    const size_t per_scale = fan_in * (size_t)o->c_out / (size_t)o->n_scales;
    for (int s = 0; s < o->n_scales; s++) {
        float lo = INFINITY, hi = -INFINITY, amax = 0.0f;
        for (size_t k = 0; k < per_scale; k++) {
            const float v = w[(size_t)s * per_scale + k];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            amax = fabsf(v) > amax ? fabsf(v) : amax;
        }
        if (!isfinite(lo) || !isfinite(hi))
            return dt_error_set(err, "weights of %s are not finite", o->name);
        float ws;
        if (lab) {
            if (!(hi > lo))
                return dt_error_set(err,
                                    "weights of %s are all %g: the lab's step (max - min) / 127 "
                                    "is 0",
                                    o->name, (double)lo);
            ws = 127.0f / (hi - lo);
        } else {
            ws = amax > 0.0f ? 127.0f / amax : 1.0f; /* an all-zero channel stays zero */
        }
        o->weight_scale[s] = ws;
        for (size_t k = 0; k < per_scale; k++) {
            /* even: 2 rint(w ws / 2), which oneDNN halves exactly (quant.h) */
            const float x = w[(size_t)s * per_scale + k] * ws;
            const float r = even ? 2.0f * rintf(0.5f * x) : rintf(x);
            o->weight[(size_t)s * per_scale + k] = (int8_t)(r < wlo ? wlo : r > whi ? whi : r);
        }
    }
    const dt_qvalue *in = &q->values[o->in];
    dt_qvalue *out = &q->values[o->out];
    for (int c = 0; c < o->c_out; c++) {
        const int s = o->n_scales > 1 ? c : 0;
        const float acc_scale = o->weight_scale[s] * in->scale;
        const float qb = rintf(b[c] * acc_scale);
        if (!(fabsf(qb) <= INT32_FLOAT_LIMIT))
            return dt_error_set(err,
                                "bias of %s (%g) overflows int32 at the accumulator's scale %g",
                                o->name, (double)b[c], (double)acc_scale);
        o->bias[c] = (int32_t)qb;
    }
    for (int s = 0; s < o->n_scales; s++) {
        const float acc_scale = o->weight_scale[s] * in->scale;
        /* float logits: dequantize; else the output's scale over the accumulator's */
        o->output_scale[s] = out->is_float ? 1.0f / acc_scale : out->scale / acc_scale;
        if (!isfinite(o->output_scale[s]) || !(o->output_scale[s] > 0.0f))
            return dt_error_set(err, "layer %s: output scale %g is not a positive number", o->name,
                                (double)o->output_scale[s]);
    }
    if (out->is_float)
        out->scale = 1.0f;
    else if (lab) /* the lab's chain: the input's scale times (weight x output scale) */
        out->scale = in->scale * (o->weight_scale[0] * o->output_scale[0]);
    if (o->residual >= 0) o->residual_scale = out->scale / q->values[o->residual].scale;
    return 0;
}

static void weight_stats(dt_qweight_stats *st, const dt_qop *o, const float *w) {
    const size_t count = dt_qop_weight_count(o);
    const size_t per_scale = count / (size_t)o->n_scales;
    st->min = INFINITY;
    st->max = -INFINITY;
    for (size_t k = 0; k < count; k++) {
        st->min = fmin(st->min, w[k]);
        st->max = fmax(st->max, w[k]);
    }
    const double width = (st->max - st->min) / DT_QUANT_WEIGHT_BINS;
    for (size_t k = 0; k < count; k++) {
        int b = width > 0.0 ? (int)((w[k] - st->min) / width) : 0;
        st->hist[b >= DT_QUANT_WEIGHT_BINS ? DT_QUANT_WEIGHT_BINS - 1 : b]++;
        const double e = (double)w[k] - (double)o->weight[k] / o->weight_scale[k / per_scale];
        st->signal += (double)w[k] * w[k];
        st->noise += e * e;
    }
}

/* The symmetric scheme's scales, before any layer is quantized: each calibrated value's
 * own, then one per group of values that share it (quant.h: a concat and its inputs, a
 * pooling and its input), the smallest of the group's (the widest threshold), so no
 * member clips more than it did alone. */
static int shared_scales(dt_qnet *q, dt_error *err) {
    for (int v = 1; v < q->n_values; v++)
        if (calibrated(q, v) && !q->values[v].is_float && value_scale(q, v, err)) return -1;
    float *group = malloc(sizeof(float) * (size_t)q->n_values);
    if (!group) return dt_error_set(err, "out of memory for calibration");
    for (int v = 0; v < q->n_values; v++) group[v] = INFINITY;
    for (int v = 0; v < q->n_values; v++) {
        const int r = share_root(q, v);
        if (calibrated(q, v) && !q->values[v].is_float && q->values[v].scale < group[r])
            group[r] = q->values[v].scale;
    }
    /* float logits of a layer get 1 there; a final pooling's keep its input's scale */
    for (int v = 0; v < q->n_values; v++) q->values[v].scale = group[share_root(q, v)];
    free(group);
    return 0;
}

/* A kept-float op's parameters and buffers, copied for the file. */
static int keep_float_params(dt_qop *o, dt_model *m, dt_error *err) {
    for (int k = 0; k < 4; k++) {
        if (o->float_tensor[k] < 0) continue;
        o->float_data[k] = malloc(sizeof(float) * o->float_count[k]);
        if (!o->float_data[k]) return dt_error_set(err, "out of memory quantizing %s", o->name);
        memcpy(o->float_data[k], dt_model_tensor_data(m, o->float_tensor[k]),
               sizeof(float) * o->float_count[k]);
    }
    return 0;
}

int dt_quantize(dt_qnet *q, dt_model *m, const dt_quant_config *cfg, dt_quant_feed feed,
                void *feed_ctx, dt_error *err) {
    if (cfg->scheme != q->cfg.scheme)
        return dt_error_set(err, "the network was built for the %s scheme, not %s",
                            dt_quant_scheme_name(q->cfg.scheme), dt_quant_scheme_name(cfg->scheme));
    if (cfg->scheme == DT_QUANT_LAB && cfg->per_channel)
        return dt_error_set(err, "the lab scheme quantizes weights per layer; per-channel weights "
                                 "need --scheme symmetric");
    for (int i = 0; i < q->n_ops; i++)
        if (cfg->scheme == DT_QUANT_LAB &&
            (q->ops[i].residual >= 0 || q->ops[i].kind == DT_QOP_CONCAT ||
             q->ops[i].kind == DT_QOP_FLOAT))
            return dt_error_set(err,
                                "the lab scheme chains each layer's scales into the next; model "
                                "%s has %s (use --scheme symmetric)",
                                q->model,
                                q->ops[i].residual >= 0           ? "residual adds"
                                : q->ops[i].kind == DT_QOP_CONCAT ? "concats"
                                                                  : "ops kept float");
    if (cfg->reduce_range && cfg->scheme == DT_QUANT_LAB)
        return dt_error_set(err, "the lab scheme's ranges are the lab's; a reduced int8 range "
                                 "needs --scheme symmetric");
    q->cfg = *cfg;
    q->vstats = calloc((size_t)q->n_values, sizeof(dt_qvalue_stats));
    q->wstats = calloc((size_t)q->n_ops, sizeof(dt_qweight_stats));
    if (!q->vstats || !q->wstats) return dt_error_set(err, "out of memory for calibration");
    apply_range(q);
    for (int v = 0; v < q->n_values; v++) dt_calib_init(&q->vstats[v].calib);

    const int saved_training = m->training;
    m->training = 0;
    int rc = calib_pass(q, m, feed, feed_ctx, PASS_RANGE, err);
    if (rc == 0 && (dt_calib_needs_histograms(&cfg->calib) || cfg->report))
        rc = calib_pass(q, m, feed, feed_ctx, PASS_HIST, err);
    if (rc == 0) rc = value_scale(q, 0, err);
    if (rc == 0 && cfg->scheme == DT_QUANT_SYMMETRIC) rc = shared_scales(q, err);
    for (int i = 0; rc == 0 && i < q->n_ops; i++) {
        dt_qop *o = &q->ops[i];
        dt_qvalue *out = &q->values[o->out];
        if (o->kind == DT_QOP_FLOAT) {
            rc = keep_float_params(o, m, err);
            continue;
        }
        if (!has_weights(o->kind)) {
            if (cfg->scheme == DT_QUANT_LAB) out->scale = q->values[o->in].scale;
            continue;
        }
        const size_t fan_in = dt_qop_fan_in(o);
        float *w = malloc(sizeof(float) * fan_in * (size_t)o->c_out);
        float *b = malloc(sizeof(float) * (size_t)o->c_out);
        if (!w || !b) {
            rc = dt_error_set(err, "out of memory quantizing %s", o->name);
        } else {
            folded_weights(o, m, w, b);
            /* the output's scale from its range (the lab's target, which its chain
             * then replaces); the symmetric scheme's are set */
            if (!out->is_float && cfg->scheme == DT_QUANT_LAB) rc = value_scale(q, o->out, err);
            if (rc == 0) rc = quantize_layer(q, o, w, b, err);
            if (rc == 0) weight_stats(&q->wstats[i], o, w);
        }
        free(w);
        free(b);
    }
    for (int v = 0; rc == 0 && v < q->n_values; v++) {
        dt_qvalue_stats *st = &q->vstats[v];
        st->range_lo = q->values[v].lo / q->values[v].scale;
        st->range_hi = q->values[v].hi / q->values[v].scale;
    }
    if (rc == 0 && cfg->report) rc = calib_pass(q, m, feed, feed_ctx, PASS_REPORT, err);
    m->training = saved_training;
    return rc;
}

/* ---- the file ---- */

enum { NAME_BYTES = 128 };

/* The tensors of the file, with their data, in one place so save and load agree. */
typedef struct file_layout {
    dt_st_entry *entries;
    char (*names)[NAME_BYTES];
    int n, cap;
    float *act_scale;   /* [n_values] */
    int32_t *act_range; /* [n_values][2] */
} file_layout;

static dt_st_entry *add_entry(file_layout *f, const char *prefix, const char *suffix,
                              const char *dtype, int ndim, const int64_t *shape, const void *data) {
    dt_st_entry *e = &f->entries[f->n];
    snprintf(f->names[f->n], NAME_BYTES, "%s.%s", prefix, suffix);
    e->name = f->names[f->n];
    e->dtype = dtype;
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++) e->shape[d] = shape[d];
    e->data = data;
    f->n++;
    return e;
}

static void file_layout_free(file_layout *f) {
    free(f->entries);
    free(f->names);
    free(f->act_scale);
    free(f->act_range);
    memset(f, 0, sizeof *f);
}

/* Every tensor the file holds for q (data pointing into q, or into f for the
 * per-value scalars); on load the same list says what must be there. */
static int file_layout_make(file_layout *f, const dt_qnet *q, dt_error *err) {
    memset(f, 0, sizeof *f);
    f->cap = 2 + 7 * q->n_ops; /* a layer's at most 7; a concat's 2, a float op's 6 */
    f->entries = calloc((size_t)f->cap, sizeof(dt_st_entry));
    f->names = calloc((size_t)f->cap, NAME_BYTES);
    f->act_scale = calloc((size_t)q->n_values, sizeof(float));
    f->act_range = calloc((size_t)q->n_values * 2, sizeof(int32_t));
    if (!f->entries || !f->names || !f->act_scale || !f->act_range) {
        file_layout_free(f);
        return dt_error_set(err, "out of memory listing the quantized tensors");
    }
    for (int v = 0; v < q->n_values; v++) {
        f->act_scale[v] = q->values[v].scale;
        f->act_range[2 * v] = q->values[v].lo;
        f->act_range[2 * v + 1] = q->values[v].hi;
    }
    const int64_t one = 1, two = 2;
    add_entry(f, "input", "act_scale", "F32", 1, &one, &f->act_scale[0]);
    add_entry(f, "input", "act_range", "I32", 1, &two, &f->act_range[0]);
    for (int i = 0; i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        if (o->kind == DT_QOP_CONCAT || o->kind == DT_QOP_FLOAT) { /* a scale of its own */
            add_entry(f, o->name, "act_scale", "F32", 1, &one, &f->act_scale[o->out]);
            add_entry(f, o->name, "act_range", "I32", 1, &two, &f->act_range[2 * o->out]);
        }
        for (int k = 0; o->kind == DT_QOP_FLOAT && k < 4; k++) {
            const int64_t count = (int64_t)o->float_count[k];
            if (o->float_tensor[k] >= 0)
                add_entry(f, "float", o->float_name[k], "F32", 1, &count, o->float_data[k]);
        }
        if (!has_weights(o->kind)) continue;
        int64_t wshape[4] = {o->c_out, o->c_in / (o->groups > 1 ? o->groups : 1), o->kernel,
                             o->kernel},
                cout = o->c_out, ns = o->n_scales;
        add_entry(f, o->name, "weight", "I8", qop_table[o->kind].cls.weight_dims, wshape,
                  o->weight);
        add_entry(f, o->name, "bias", "I32", 1, &cout, o->bias);
        add_entry(f, o->name, "weight_scale", "F32", 1, &ns, o->weight_scale);
        add_entry(f, o->name, "output_scale", "F32", 1, &ns, o->output_scale);
        if (!q->values[o->out].is_float) {
            add_entry(f, o->name, "act_scale", "F32", 1, &one, &f->act_scale[o->out]);
            add_entry(f, o->name, "act_range", "I32", 1, &two, &f->act_range[2 * o->out]);
        }
        if (o->residual >= 0)
            add_entry(f, o->name, "residual_scale", "F32", 1, &one, &o->residual_scale);
    }
    return 0;
}

static int effective_width(const dt_model_spec *spec) {
    dt_model_spec d;
    if (spec->width > 0) return spec->width;
    return dt_zoo_default_spec(&d, spec->name) == 0 ? d.width : 0;
}

int dt_qnet_save(const dt_qnet *q, const char *path, const dt_st_meta *meta, int n_meta,
                 dt_error *err) {
    file_layout f;
    if (file_layout_make(&f, q, err)) return -1;
    enum { OWN_META = 12 };
    dt_st_meta *all = calloc((size_t)(OWN_META + n_meta), sizeof(dt_st_meta));
    if (!all) {
        file_layout_free(&f);
        return dt_error_set(err, "out of memory saving %s", path);
    }
    int k = 0;
#define META(k_, ...)                                                                              \
    do {                                                                                           \
        snprintf(all[k].key, sizeof all[k].key, "%s", k_);                                         \
        snprintf(all[k].value, sizeof all[k].value, __VA_ARGS__);                                  \
        k++;                                                                                       \
    } while (0)
    META("format", "dtrain-int8");
    META("format_version", "1");
    META("model", "%s", q->model);
    META("width", "%d", effective_width(&q->spec));
    META("input", "%dx%dx%d", q->spec.in_c, q->spec.in_h, q->spec.in_w);
    META("classes", "%d", q->spec.classes);
    META("scheme", "%s", dt_quant_scheme_name(q->cfg.scheme));
    META("weights", "%s", q->cfg.per_channel ? "per-channel" : "per-tensor");
    char calib[64];
    dt_calib_format(&q->cfg.calib, calib, sizeof calib);
    META("calib_method", "%s", calib);
    META("calib_samples", "%d", q->calib_samples);
    META("logits", "%s", q->cfg.scheme == DT_QUANT_LAB ? "int8" : "float");
    META("int8_range", "%s", q->cfg.reduce_range ? "reduced" : "full");
#undef META
    for (int i = 0; i < n_meta; i++) all[k++] = meta[i];
    int rc = dt_safetensors_write(path, f.entries, f.n, all, k, err);
    free(all);
    file_layout_free(&f);
    return rc;
}

int dt_qnet_file_is_quantized(const dt_safetensors *st) {
    const char *format = dt_safetensors_meta(st, "format");
    return format && !strcmp(format, "dtrain-int8");
}

/* A metadata value that must be there. */
static const char *need_meta(const dt_safetensors *st, const char *key, dt_error *err) {
    const char *v = dt_safetensors_meta(st, key);
    if (!v) dt_error_set(err, "%s: metadata %s is missing", st->path, key);
    return v;
}

static int check_scales(const dt_safetensors *st, const char *name, const float *s, int count,
                        dt_error *err) {
    for (int i = 0; i < count; i++)
        if (!isfinite(s[i]) || !(s[i] > 0.0f))
            return dt_error_set(err, "%s: %s[%d] is %g, not a positive finite scale", st->path,
                                name, i, (double)s[i]);
    return 0;
}

static int check_finite(const dt_safetensors *st, const char *name, const float *x, int64_t count,
                        dt_error *err) {
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(x[i]))
            return dt_error_set(err, "%s: %s[%lld] is %g, not a finite number", st->path, name,
                                (long long)i, (double)x[i]);
    return 0;
}

int dt_qnet_load(dt_qnet *q, const dt_safetensors *st, const dt_model_spec *spec, dt_error *err) {
    memset(q, 0, sizeof *q);
    if (!dt_qnet_file_is_quantized(st))
        return dt_error_set(err,
                            "%s is not a quantized network (its metadata lacks format "
                            "dtrain-int8)",
                            st->path);
    const char *model = need_meta(st, "model", err),
               *scheme_s = model ? need_meta(st, "scheme", err) : NULL;
    const char *weights = scheme_s ? need_meta(st, "weights", err) : NULL;
    const char *width_s = weights ? need_meta(st, "width", err) : NULL;
    const char *calib_s = width_s ? need_meta(st, "calib_method", err) : NULL;
    if (!calib_s) return -1;
    if (strcmp(model, spec->name))
        return dt_error_set(err, "%s holds a quantized %s, not %s", st->path, model, spec->name);
    long width;
    if (dt_parse_long("width", width_s, 0, 1 << 20, &width, err)) return -1;
    if (width != effective_width(spec))
        return dt_error_set(err, "%s holds %s of width %ld, not %d", st->path, model, width,
                            effective_width(spec));
    dt_quant_scheme scheme;
    if (dt_quant_scheme_parse(scheme_s, &scheme))
        return dt_error_set(err, "%s: unknown scheme '%s'", st->path, scheme_s);
    if (strcmp(weights, "per-tensor") && strcmp(weights, "per-channel"))
        return dt_error_set(err, "%s: unknown weights '%s'", st->path, weights);
    dt_calib_choice calib;
    if (dt_calib_parse(calib_s, &calib, err)) return -1;
    const char *samples = dt_safetensors_meta(st, "calib_samples");
    /* absent in files made before it existed: those are full-range */
    const char *range = dt_safetensors_meta(st, "int8_range");
    if (range && strcmp(range, "full") && strcmp(range, "reduced"))
        return dt_error_set(err, "%s: unknown int8_range '%s' (full or reduced)", st->path, range);
    const int reduced = range && !strcmp(range, "reduced");
    if (reduced && scheme != DT_QUANT_SYMMETRIC)
        return dt_error_set(err, "%s: int8_range reduced with the %s scheme (symmetric only)",
                            st->path, scheme_s);

    dt_model m;
    if (dt_zoo_build(&m, spec, err)) return -1;
    int rc = dt_qnet_build(q, &m, spec, scheme, err);
    dt_model_free(&m);
    if (rc) return -1;
    q->cfg.per_channel = !strcmp(weights, "per-channel");
    q->cfg.calib = calib;
    q->cfg.reduce_range = reduced;
    apply_range(q);
    long n_samples = 0;
    if (samples && dt_parse_long("calib_samples", samples, 0, 1L << 40, &n_samples, err) == 0)
        q->calib_samples = (int)n_samples;
    for (int i = 0; i < q->n_ops; i++) {
        dt_qop *o = &q->ops[i];
        for (int k = 0; o->kind == DT_QOP_FLOAT && k < 4; k++)
            if (o->float_tensor[k] >= 0 &&
                !(o->float_data[k] = malloc(sizeof(float) * o->float_count[k]))) {
                dt_qnet_free(q);
                return dt_error_set(err, "out of memory loading %s", st->path);
            }
        if (!has_weights(o->kind)) continue;
        const size_t count = dt_qop_weight_count(o);
        o->n_scales = q->cfg.per_channel ? o->c_out : 1;
        o->weight = malloc(count);
        o->bias = malloc(sizeof(int32_t) * (size_t)o->c_out);
        o->weight_scale = malloc(sizeof(float) * (size_t)o->n_scales);
        o->output_scale = malloc(sizeof(float) * (size_t)o->n_scales);
        if (!o->weight || !o->bias || !o->weight_scale || !o->output_scale) {
            dt_qnet_free(q);
            return dt_error_set(err, "out of memory loading %s", st->path);
        }
    }
    file_layout f;
    if (file_layout_make(&f, q, err)) {
        dt_qnet_free(q);
        return -1;
    }
    for (int e = 0; rc == 0 && e < f.n; e++) {
        const dt_st_entry *en = &f.entries[e];
        int shape[DT_ST_MAX_DIMS];
        for (int d = 0; d < en->ndim; d++) shape[d] = (int)en->shape[d];
        rc = dt_safetensors_get(st, en->name, en->dtype, en->ndim, shape, (void *)en->data, err);
        if (rc == 0 && !strncmp(en->name, "float.", 6)) /* a kept-float op's weights */
            rc = check_finite(st, en->name, en->data, en->shape[0], err);
        else if (rc == 0 && !strcmp(en->dtype, "F32"))
            rc = check_scales(st, en->name, en->data, (int)en->shape[0], err);
    }
    for (int v = 0; rc == 0 && v < q->n_values; v++) {
        dt_qvalue *x = &q->values[v];
        if (x->is_float) {
            x->scale = 1.0f; /* float logits, as dt_quantize leaves them */
            continue;
        }
        x->scale = f.act_scale[v];
        const int lo = f.act_range[2 * v], hi = f.act_range[2 * v + 1];
        /* the integers' type must be the one the network's structure gives */
        if (lo != x->lo || hi != x->hi)
            rc = dt_error_set(err,
                              "%s: %s's act_range is [%d, %d], the %s scheme (%s range) has "
                              "[%d, %d] there",
                              st->path, x->name, lo, hi, scheme_s, reduced ? "reduced" : "full",
                              x->lo, x->hi);
    }
    for (int i = 0; rc == 0 && i < q->n_ops; i++) {
        dt_qop *o = &q->ops[i];
        if (o->kind == DT_QOP_CONCAT) /* a copy: its inputs' scale is its own */
            for (int k = 0; rc == 0 && k < o->n_ins; k++) {
                if (q->values[o->ins[k]].scale != q->values[o->out].scale)
                    rc = dt_error_set(err, "%s: %s's input %s has scale %g, not the concat's %g",
                                      st->path, o->name, q->values[o->ins[k]].name,
                                      (double)q->values[o->ins[k]].scale,
                                      (double)q->values[o->out].scale);
            }
        else if (!has_weights(o->kind) && o->kind != DT_QOP_FLOAT)
            q->values[o->out].scale = q->values[o->in].scale;
    }
    file_layout_free(&f);
    if (rc) dt_qnet_free(q);
    return rc;
}
