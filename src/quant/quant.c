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
    snprintf(v->name, sizeof v->name, "%s", name);
    v->c = m->values[float_value].c;
    v->h = m->values[float_value].h;
    v->w = m->values[float_value].w;
    v->lo = -128;
    v->hi = 127;
    v->float_storage = storage_of(m, float_value);
    v->record_after = record_after;
    v->relu_op = -1;
    return q->n_values++;
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
    if (spatial && (op->groups != 1 || op->dilation != 1))
        return dt_error_set(err,
                            "model %s: conv %s is %s: int8 has plain convolutions only "
                            "(evaluate it in fp32)",
                            m->name, op->name, op->groups != 1 ? "grouped" : "dilated");
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
    if (spatial) {
        o->c_in = x->c;
        o->kernel = op->kernel;
        o->stride = op->stride;
        o->pad = op->pad;
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
    /* the emulation and the engine read every window inside the input (qemu.c's
     * pool_forward): a padded or ceil-mode window would read past it */
    if (!dt_op_window_is_square(op) || op->pad_top || op->ceil_mode)
        return dt_error_set(err,
                            "model %s: a %dx%d pooling with strides %dx%d, pads or ceil_mode: int8 "
                            "pools square unpadded windows only (evaluate it in fp32)",
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
    o->c_in = o->c_out = q->values[in].c;
    o->out = new_value(q, o->name, m, op->out, i);
    q->values[o->out].lo = q->values[in].lo; /* the same integers, fewer of them */
    q->values[o->out].hi = q->values[in].hi;
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
        const dt_op *op = &m->ops[t];
        if (t == add) continue;
        if (t > q->values[v].record_after &&
            (storage_of(m, op->in) == storage_of(m, a) ||
             (op->in2 >= 0 && storage_of(m, op->in2) == storage_of(m, a))))
            return -1;
    }
    return k;
}

static int fuse_add(dt_qnet *q, const dt_model *m, int i, int *of_storage, dt_error *err) {
    const dt_op *op = &m->ops[i];
    int sides[2][2] = {{op->in, op->in2}, {op->in2, op->in}}, k = -1, other = -1;
    for (int s = 0; s < 2 && k < 0; s++) {
        const int res = of_storage[storage_of(m, sides[s][1])];
        k = res >= 0 ? fusable(q, m, i, sides[s][0], of_storage) : -1;
        if (k >= 0) other = sides[s][1];
    }
    if (k < 0)
        return dt_error_set(err,
                            "model %s: a residual add none of whose inputs is a convolution's own "
                            "output: no int8 form here",
                            m->name);
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

static double conv_macs(const dt_qop *o, const dt_qvalue *y) {
    return (double)o->c_out * y->h * y->w * o->c_in * o->kernel * o->kernel;
}

static double linear_macs(const dt_qop *o, const dt_qvalue *y) {
    (void)y;
    return (double)o->c_out * o->c_in;
}

/* One row per kind, matched by designator: what it is, how float op `from` becomes it
 * (returning the next float op: fused ones are consumed), and its multiply-accumulates
 * per sample (NULL: none counted). The engines' rows are in qemu.c and int8_dnnl.c. */
typedef struct qop_row {
    dt_qop_class cls;
    int (*add)(dt_qnet *q, const dt_model *m, int i, dt_qop_kind kind, int *of_storage,
               dt_error *err);
    double (*macs)(const dt_qop *o, const dt_qvalue *y);
} qop_row;

static const qop_row qop_table[] = {
    [DT_QOP_CONV] = {{"conv", DT_OP_CONV2D, 4}, add_conv, conv_macs},
    [DT_QOP_LINEAR] = {{"linear", DT_OP_LINEAR, 2}, add_linear, linear_macs},
    [DT_QOP_MAXPOOL] = {{"maxpool", DT_OP_MAXPOOL2D, 0}, add_pool, NULL},
    [DT_QOP_AVGPOOL] = {{"avgpool", DT_OP_AVGPOOL2D, 0}, add_pool, NULL},
};
_Static_assert(sizeof qop_table / sizeof *qop_table == DT_QOP_COUNT,
               "one table row per quantized op kind");

const dt_qop_class *dt_qop_class_of(dt_qop_kind kind) {
    return &qop_table[kind].cls;
}

/* The kind made from float ops of this kind; -1 if none. */
static int qop_kind_from(dt_op_kind kind) {
    for (int k = 0; k < DT_QOP_COUNT; k++)
        if (qop_table[k].cls.from == kind) return k;
    return -1;
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
    }
    free(q->ops);
    free(q->values);
    free(q->vstats);
    free(q->wstats);
    memset(q, 0, sizeof *q);
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
        const int kind = qop_kind_from(op->kind);
        if (kind >= 0)
            rc = i = qop_table[kind].add(q, m, i, (dt_qop_kind)kind, of_storage, err);
        else if (op->kind == DT_OP_ADD) /* no op of its own: fused into a convolution */
            rc = i = fuse_add(q, m, i, of_storage, err);
        else
            rc = dt_error_set(err,
                              "model %s: op %d (%s%s%s) has no int8 form here (quantized: "
                              "conv2d with its BatchNorm and ReLU, linear, pooling, residual add)",
                              m->name, i, dt_op_kind_name(op->kind), op->name[0] ? " " : "",
                              op->name);
    }
    if (rc >= 0) {
        const int last = of_storage[storage_of(m, m->n_values - 1)];
        if (last < 0 || q->n_ops == 0 || q->ops[q->n_ops - 1].out != last ||
            !has_weights(q->ops[q->n_ops - 1].kind) || q->values[last].relu_op >= 0)
            rc = dt_error_set(err, "model %s does not end in a linear or conv layer", m->name);
        else if (scheme == DT_QUANT_SYMMETRIC)
            q->values[last].is_float = 1; /* logits stay float32 */
    }
    free(of_storage);
    if (rc < 0) {
        dt_qnet_free(q);
        return -1;
    }
    return 0;
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

/* Values the calibration chooses a scale for: the input and every layer's output
 * (pooling inherits its input's, float logits need none). */
static int calibrated(const dt_qnet *q, int v) {
    if (v == 0) return 1;
    for (int i = 0; i < q->n_ops; i++)
        if (q->ops[i].out == v) return has_weights(q->ops[i].kind) && !q->values[v].is_float;
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
    long total = 0;
    for (int index = 0;; index++) {
        const int n = feed(ctx, index, x, m->max_batch, err);
        if (n < 0) return -1;
        if (n == 0) break;
        total += n;
        for (int v = 0; v < q->n_values; v++)
            if (calibrated(q, v) && read_point(q, v, pass) < 0)
                observe(q, v, x, dt_model_input_floats_per_sample(m) * (size_t)n, pass);
        for (int i = 0; i < m->n_ops; i++) {
            dt_op *op = &m->ops[i];
            op->impl->forward(m, op, n);
            for (int v = 0; v < q->n_values; v++) {
                if (!calibrated(q, v) || read_point(q, v, pass) != i) continue;
                const dt_storage *s = &m->storages[q->values[v].float_storage];
                observe(q, v, (const float *)s->data, s->per_sample * (size_t)n, pass);
            }
        }
    }
    if (total == 0) return dt_error_set(err, "no calibration images: the calibration set is empty");
    q->calib_samples = (int)total;
    return 0;
}

/* ---- scales and integers ---- */

/* A layer's float weights [c_out, fan_in] and bias [c_out], its BatchNorm folded in:
 * w' = w * gamma / sqrt(var + eps), b' = beta + (b - mean) * gamma / sqrt(var + eps). */
static void folded_weights(const dt_qop *o, dt_model *m, float *w, float *b) {
    const dt_op *conv = &m->ops[o->float_conv];
    const size_t fan_in = (size_t)o->c_in * o->kernel * o->kernel;
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
    /* of |x|: 128 for s8 and a reduced range's 7-bit u8, 256 for a full u8; the lab's
     * [0, 127] values are searched over 256 levels (as 4701151 did: never reduced) */
    const int levels = x->lo < 0 || q->cfg.reduce_range ? 128 : 256;
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
    const size_t fan_in = (size_t)o->c_in * o->kernel * o->kernel;
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
    const size_t count = (size_t)o->c_in * o->kernel * o->kernel * (size_t)o->c_out;
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

int dt_quantize(dt_qnet *q, dt_model *m, const dt_quant_config *cfg, dt_quant_feed feed,
                void *feed_ctx, dt_error *err) {
    if (cfg->scheme != q->cfg.scheme)
        return dt_error_set(err, "the network was built for the %s scheme, not %s",
                            dt_quant_scheme_name(q->cfg.scheme), dt_quant_scheme_name(cfg->scheme));
    if (cfg->scheme == DT_QUANT_LAB && cfg->per_channel)
        return dt_error_set(err, "the lab scheme quantizes weights per layer; per-channel weights "
                                 "need --scheme symmetric");
    for (int i = 0; i < q->n_ops; i++)
        if (cfg->scheme == DT_QUANT_LAB && q->ops[i].residual >= 0)
            return dt_error_set(err,
                                "the lab scheme chains each layer's scales into the next; model "
                                "%s has residual adds (use --scheme symmetric)",
                                q->model);
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
    for (int i = 0; rc == 0 && i < q->n_ops; i++) {
        dt_qop *o = &q->ops[i];
        dt_qvalue *out = &q->values[o->out];
        if (!has_weights(o->kind)) {
            out->scale = q->values[o->in].scale;
            continue;
        }
        const size_t fan_in = (size_t)o->c_in * o->kernel * o->kernel;
        float *w = malloc(sizeof(float) * fan_in * (size_t)o->c_out);
        float *b = malloc(sizeof(float) * (size_t)o->c_out);
        if (!w || !b) {
            rc = dt_error_set(err, "out of memory quantizing %s", o->name);
        } else {
            folded_weights(o, m, w, b);
            /* the output's scale from its range (the lab's target, which its chain
             * then replaces) */
            if (!out->is_float) rc = value_scale(q, o->out, err);
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
    f->cap = 2 + 7 * q->n_ops;
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
        if (!has_weights(o->kind)) continue;
        int64_t wshape[4] = {o->c_out, o->c_in, o->kernel, o->kernel}, cout = o->c_out,
                ns = o->n_scales;
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
        if (!has_weights(o->kind)) continue;
        const size_t count = (size_t)o->c_out * o->c_in * o->kernel * o->kernel;
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
        if (rc == 0 && !strcmp(en->dtype, "F32"))
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
        if (!has_weights(o->kind)) q->values[o->out].scale = q->values[o->in].scale;
    }
    file_layout_free(&f);
    if (rc) dt_qnet_free(q);
    return rc;
}
