#include "quant/qemu.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "quant/qfloat.h"

struct dt_qemu {
    const dt_qnet *q;
    int max_batch, threads;
    int16_t **act;   /* [n_values]: [max_batch, c, h, w]; NULL for the float logits */
    float *logits;   /* [max_batch, classes] */
    double **weight; /* [n_ops]: conv/linear weights as doubles [c_out, fan_in] */
    double *col;     /* per thread: [fan_in, h_out * w_out] (conv); [max_batch, c_in] (linear) */
    double *acc;     /* per thread: [c_out, h_out * w_out]; [max_batch, c_out] */
    size_t col_each, acc_each;
    dt_qfloat *kept; /* the ops kept float; NULL if none */
};

/* How one kind of op is emulated: its forward over n samples and, for the layers, the
 * scratch it needs (the largest over the network is allocated). */
typedef struct qemu_kernel {
    void (*scratch)(const dt_qop *o, const dt_qvalue *y, int max_batch, size_t *col, size_t *acc);
    void (*forward)(dt_qemu *e, int i, int n);
} qemu_kernel;
static const qemu_kernel qemu_kernels[DT_QOP_COUNT]; /* below, beside its kernels */

static size_t value_count(const dt_qvalue *v) {
    return (size_t)v->c * v->h * v->w;
}

void dt_qemu_destroy(dt_qemu *e) {
    if (!e) return;
    for (int v = 0; e->act && v < e->q->n_values; v++) free(e->act[v]);
    for (int i = 0; e->weight && i < e->q->n_ops; i++) free(e->weight[i]);
    free(e->act);
    free(e->weight);
    free(e->logits);
    free(e->col);
    free(e->acc);
    dt_qfloat_destroy(e->kept);
    free(e);
}

int dt_qemu_create(dt_qemu **out, const dt_qnet *q, int max_batch, dt_error *err) {
    dt_qemu *e = calloc(1, sizeof *e);
    if (!e) return dt_error_set(err, "out of memory for the int8 emulation");
    e->q = q;
    e->max_batch = max_batch;
    e->threads = omp_get_max_threads();
    e->act = calloc((size_t)q->n_values, sizeof(int16_t *));
    e->weight = calloc((size_t)q->n_ops, sizeof(double *));
    e->logits = malloc(sizeof(float) * (size_t)max_batch * (size_t)q->spec.classes);
    int ok = e->act && e->weight && e->logits;
    for (int v = 0; ok && v < q->n_values; v++)
        if (!q->values[v].is_float)
            ok = (e->act[v] = malloc(sizeof(int16_t) * value_count(&q->values[v]) *
                                     (size_t)max_batch)) != NULL;
    for (int i = 0; ok && i < q->n_ops; i++) {
        const dt_qop *o = &q->ops[i];
        const qemu_kernel *k = &qemu_kernels[o->kind];
        if (!k->forward) {
            dt_qemu_destroy(e);
            return dt_error_set(err, "the int8 emulation has no %s kernel (%s)",
                                dt_qop_class_of(o->kind)->name, o->name);
        }
        if (k->scratch) {
            size_t col = 0, acc = 0;
            k->scratch(o, &q->values[o->out], max_batch, &col, &acc);
            e->col_each = col > e->col_each ? col : e->col_each;
            e->acc_each = acc > e->acc_each ? acc : e->acc_each;
        }
        if (!dt_qop_class_of(o->kind)->weight_dims) continue;
        const size_t count = dt_qop_weight_count(o);
        if (!(e->weight[i] = malloc(sizeof(double) * count))) {
            ok = 0;
            break;
        }
        for (size_t j = 0; j < count; j++) e->weight[i][j] = o->weight[j];
    }
    if (ok) {
        e->col = malloc(sizeof(double) * e->col_each * (size_t)e->threads);
        e->acc = malloc(sizeof(double) * e->acc_each * (size_t)e->threads);
        ok = e->col && e->acc;
    }
    if (!ok) {
        dt_qemu_destroy(e);
        return dt_error_set(err, "out of memory for the int8 emulation of %s (batch %d)", q->model,
                            max_batch);
    }
    if (dt_qfloat_create(&e->kept, q, max_batch, err)) {
        dt_qemu_destroy(e);
        return -1;
    }
    *out = e;
    return 0;
}

/* The requantization of quant.h, in oneDNN's order: (float)acc + (float)bias, times
 * the output scale, plus the scaled residual; rounded half to even, clamped. */
static inline int16_t requant(double acc, int32_t bias, float scale, const int16_t *res,
                              float res_scale, int lo, int hi) {
    float y = ((float)acc + (float)bias) * scale;
    if (res) y = fmaf(res_scale, (float)*res, y);
    y = rintf(y);
    return (int16_t)(y < lo ? lo : y > hi ? hi : y);
}

static void conv_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    const int k = o->kernel, d = o->dilation, hw = y->h * y->w;
    const int groups = o->groups, cig = o->c_in / groups, cog = o->c_out / groups;
    const int fan_in = (int)dt_qop_fan_in(o);
    const int16_t *in = e->act[o->in];
    const int16_t *res = o->residual >= 0 ? e->act[o->residual] : NULL;
    int16_t *out = e->act[o->out];
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int s = 0; s < n; s++) {
        double *col = e->col + e->col_each * (size_t)omp_get_thread_num();
        double *acc = e->acc + e->acc_each * (size_t)omp_get_thread_num();
        const int16_t *xs = in + (size_t)s * value_count(x);
        for (int g = 0; g < groups; g++) {
            for (int c = 0; c < cig; c++)
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        double *row = col + (size_t)((c * k + ky) * k + kx) * hw;
                        const int16_t *plane = xs + (size_t)(g * cig + c) * x->h * x->w;
                        for (int oy = 0; oy < y->h; oy++) {
                            const int iy = oy * o->stride - o->pad + ky * d;
                            for (int ox = 0; ox < y->w; ox++) {
                                const int ix = ox * o->stride - o->pad + kx * d;
                                row[oy * y->w + ox] = iy >= 0 && iy < x->h && ix >= 0 && ix < x->w
                                                          ? plane[(size_t)iy * x->w + ix]
                                                          : 0.0;
                            }
                        }
                    }
            /* exact: |products| < 2^15, sums of fewer than 2^38 of them stay below 2^53 */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cog, hw, fan_in, 1.0,
                        e->weight[i] + (size_t)g * cog * fan_in, fan_in, col, hw, 0.0,
                        acc + (size_t)g * cog * hw, hw);
        }
        const size_t base = (size_t)s * value_count(y);
        for (int c = 0; c < o->c_out; c++) {
            const float scale = o->output_scale[o->n_scales > 1 ? c : 0];
            for (int p = 0; p < hw; p++) {
                const size_t at = base + (size_t)c * hw + p;
                if (y->is_float)
                    e->logits[at] = ((float)acc[(size_t)c * hw + p] + (float)o->bias[c]) * scale;
                else
                    out[at] = requant(acc[(size_t)c * hw + p], o->bias[c], scale,
                                      res ? res + at : NULL, o->residual_scale, y->lo, y->hi);
            }
        }
    }
}

static void linear_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    const dt_qvalue *y = &e->q->values[o->out];
    const int16_t *in = e->act[o->in];
    const int16_t *res = o->residual >= 0 ? e->act[o->residual] : NULL;
    double *a = e->col, *acc = e->acc;
    for (size_t k = 0; k < (size_t)n * o->c_in; k++) a[k] = in[k];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, o->c_out, o->c_in, 1.0, a, o->c_in,
                e->weight[i], o->c_in, 0.0, acc, o->c_out);
    for (int s = 0; s < n; s++)
        for (int c = 0; c < o->c_out; c++) {
            const size_t at = (size_t)s * o->c_out + c;
            const float scale = o->output_scale[o->n_scales > 1 ? c : 0];
            if (y->is_float)
                e->logits[at] = ((float)acc[at] + (float)o->bias[c]) * scale;
            else
                e->act[o->out][at] = requant(acc[at], o->bias[c], scale, res ? res + at : NULL,
                                             o->residual_scale, y->lo, y->hi);
        }
}

/* Pooling over kh x kw windows `stride` apart from -pad (max: padding never wins, a
 * window past the input's end, ceil_mode's last one, takes what it covers; average:
 * never padded, quant.c's fits). */
static void pool_forward(dt_qemu *e, int i, int n, int avg, int kh, int kw, int sh, int sw) {
    const dt_qop *o = &e->q->ops[i];
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    const float inv = 1.0f / (float)(kh * kw);
#pragma omp parallel for schedule(static) num_threads(e->threads)
    for (int plane = 0; plane < n * x->c; plane++) {
        const int16_t *xs = e->act[o->in] + (size_t)plane * x->h * x->w;
        int16_t *ys = y->is_float ? NULL : e->act[o->out] + (size_t)plane * y->h * y->w;
        for (int oy = 0; oy < y->h; oy++)
            for (int ox = 0; ox < y->w; ox++) {
                int best = -32768, sum = 0;
                for (int ky = 0; ky < kh; ky++)
                    for (int kx = 0; kx < kw; kx++) {
                        const int iy = oy * sh - o->pad + ky, ix = ox * sw - o->pad + kx;
                        if (iy < 0 || iy >= x->h || ix < 0 || ix >= x->w) continue;
                        const int v = xs[iy * x->w + ix];
                        best = v > best ? v : best;
                        sum += v;
                    }
                /* the mean as oneDNN's int8 pooling: float sum times 1/(kh kw), rounded;
                 * float logits (a final pooling): not rounded, over the input's scale */
                if (y->is_float)
                    e->logits[(size_t)plane * y->h * y->w + oy * y->w + ox] =
                        dt_qfloat_pooled_logit(sum, inv, x->scale);
                else
                    ys[oy * y->w + ox] = (int16_t)(avg ? (int)rintf((float)sum * inv) : best);
            }
    }
}

static void maxpool_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    pool_forward(e, i, n, 0, o->kernel, o->kernel, o->stride, o->stride);
}

static void avgpool_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    pool_forward(e, i, n, 1, o->kernel, o->kernel, o->stride, o->stride);
}

/* Adaptive average pooling whose windows are all (h / h_out) x (w / w_out). */
static void adaptive_avgpool_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    const dt_qvalue *x = &e->q->values[o->in], *y = &e->q->values[o->out];
    const int kh = x->h / y->h, kw = x->w / y->w;
    pool_forward(e, i, n, 1, kh, kw, kh, kw);
}

/* Channels of inputs that share the output's scale: their integers, copied. */
static void concat_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    const dt_qvalue *y = &e->q->values[o->out];
    for (int s = 0; s < n; s++) {
        int16_t *ys = e->act[o->out] + (size_t)s * value_count(y);
        for (int k = 0; k < o->n_ins; k++) {
            const size_t count = value_count(&e->q->values[o->ins[k]]);
            memcpy(ys, e->act[o->ins[k]] + (size_t)s * count, sizeof(int16_t) * count);
            ys += count;
        }
    }
}

/* A kept-float op: inputs of int8 ops dequantized into the float model (those of
 * kept-float ops are there already), the op run, its output quantized. */
static void float_forward(dt_qemu *e, int i, int n) {
    const dt_qop *o = &e->q->ops[i];
    for (int k = 0; k < o->n_ins; k++) {
        if (o->ins[k] < 0) continue; /* none, or a constant the float model holds */
        const dt_qvalue *x = &e->q->values[o->ins[k]];
        if (dt_qfloat_holds(e->kept, o, k, x)) continue;
        float *dst = dt_qfloat_input(e->kept, o, k);
        const int16_t *src = e->act[o->ins[k]];
        for (size_t j = 0; j < value_count(x) * (size_t)n; j++)
            dst[j] = dt_qfloat_dequantize(src[j], x->scale);
    }
    dt_qfloat_run(e->kept, o, n);
    const dt_qvalue *y = &e->q->values[o->out];
    const float *src = dt_qfloat_output(e->kept, o);
    for (size_t j = 0; j < value_count(y) * (size_t)n; j++)
        e->act[o->out][j] = (int16_t)dt_qfloat_quantize(src[j], y);
}

/* Per-thread scratch in doubles: a conv's im2col columns and accumulators of one
 * sample; a linear layer's whole batch, in thread 0's space (one call). */
static void conv_scratch(const dt_qop *o, const dt_qvalue *y, int max_batch, size_t *col,
                         size_t *acc) {
    (void)max_batch;
    *col = dt_qop_fan_in(o) * (size_t)y->h * y->w; /* one group's */
    *acc = (size_t)o->c_out * y->h * y->w;
}

static void linear_scratch(const dt_qop *o, const dt_qvalue *y, int max_batch, size_t *col,
                           size_t *acc) {
    (void)y;
    *col = (size_t)max_batch * o->c_in;
    *acc = (size_t)max_batch * o->c_out;
}

/* One row per kind (quant.h), matched by designator. */
static const qemu_kernel qemu_kernels[] = {
    [DT_QOP_CONV] = {conv_scratch, conv_forward},
    [DT_QOP_LINEAR] = {linear_scratch, linear_forward},
    [DT_QOP_MAXPOOL] = {NULL, maxpool_forward},
    [DT_QOP_AVGPOOL] = {NULL, avgpool_forward},
    [DT_QOP_ADAPTIVE_AVGPOOL] = {NULL, adaptive_avgpool_forward},
    [DT_QOP_CONCAT] = {NULL, concat_forward},
    [DT_QOP_FLOAT] = {NULL, float_forward},
};
_Static_assert(sizeof qemu_kernels / sizeof *qemu_kernels == DT_QOP_COUNT,
               "one emulation row per quantized op kind");

void dt_qemu_forward(dt_qemu *e, const float *x, int n) {
    const dt_qnet *q = e->q;
    const dt_qvalue *v0 = &q->values[0];
    const size_t count = value_count(v0) * (size_t)n;
    int16_t *q0 = e->act[0];
    for (size_t k = 0; k < count; k++) {
        const float r = rintf(x[k] * v0->scale);
        q0[k] = (int16_t)(r < v0->lo ? v0->lo : r > v0->hi ? v0->hi : r);
    }
    for (int i = 0; i < q->n_ops; i++) qemu_kernels[q->ops[i].kind].forward(e, i, n);
    const dt_qvalue *last = &q->values[q->ops[q->n_ops - 1].out];
    if (!last->is_float) {
        const int16_t *ql = e->act[q->ops[q->n_ops - 1].out];
        for (size_t k = 0; k < (size_t)n * q->spec.classes; k++)
            e->logits[k] = (float)ql[k] / last->scale;
    }
}

const float *dt_qemu_logits(const dt_qemu *e) {
    return e->logits;
}

const int16_t *dt_qemu_value(const dt_qemu *e, int value) {
    return e->act[value];
}
