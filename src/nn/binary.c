#include "nn/binary.h"

#include <stdlib.h>

#include "dtrain/kernel.h"
#include "nn/broadcast.h"

/* ---- the op's facts ---- */

static double binary_forward_flops(const dt_model *m, const dt_op *op, int n) {
    return (double)dt_model_value_floats(m, op->out, n); /* one operation an element */
}

static double binary_flops(const dt_model *m, const dt_op *op, int n) {
    /* forward, and each operand's gradient: one or two more an element */
    return 3.0 * binary_forward_flops(m, op, n);
}

const dt_op_class dt_binary_op = {
    .name = "binary",
    .flops = binary_flops,
    .forward_flops = binary_forward_flops,
};

/* ---- shapes ---- */

/* The operand b's axes aligned with a's per-sample axes: a parameter's as
 * dt_model_binary_param aligned them (from the right, a leading batch axis of 1
 * dropped), a scalar's all 1. */
static void operand_dims(const dt_model *m, const dt_op *op, int rank, int *dims) {
    if (op->weight < 0) {
        for (int d = 0; d < rank; d++) dims[d] = 1;
        return;
    }
    const dt_tensor_entry *t = &m->tensors[op->weight];
    const int skip = t->ndim > rank ? 1 : 0;
    for (int d = 0; d < rank; d++) {
        const int k = d - (rank - (t->ndim - skip));
        dims[d] = k >= 0 ? t->shape[k + skip] : 1;
    }
}

/* The operand shapes a blocked (nChw16c) layout runs: an image and a per-channel
 * operand [C, 1, 1] (an activation: squeeze-and-excitation's scale; a parameter: a layer
 * scale), the image the output's shape. *image_is_b: which operand is the image. */
static int per_channel(const dt_model *m, const dt_op *op, int *image_is_b) {
    const dt_value *out = &m->values[op->out], *a = &m->values[op->in];
    if (out->rank != 3) return 0;
    int b_dims[3];
    if (op->in2 >= 0)
        for (int d = 0; d < 3; d++) b_dims[d] = m->values[op->in2].dims[d];
    else
        operand_dims(m, op, 3, b_dims);
    const int a_image = a->dims[0] == out->c && a->dims[1] == out->h && a->dims[2] == out->w;
    const int b_image = b_dims[0] == out->c && b_dims[1] == out->h && b_dims[2] == out->w;
    const int a_channel = a->dims[0] == out->c && a->dims[1] == 1 && a->dims[2] == 1;
    const int b_channel = b_dims[0] == out->c && b_dims[1] == 1 && b_dims[2] == 1;
    *image_is_b = !a_image;
    return (a_image && b_channel) || (b_image && a_channel);
}

int dt_binary_any_layout(const dt_model *m, const dt_op *op) {
    int image_is_b;
    return dt_binary_is_elementwise(m, op) || per_channel(m, op, &image_is_b);
}

int dt_binary_is_elementwise(const dt_model *m, const dt_op *op) {
    const dt_value *a = &m->values[op->in];
    if (op->in2 < 0) return op->weight < 0 || m->tensors[op->weight].numel == 1;
    const dt_value *b = &m->values[op->in2];
    if (a->rank != b->rank) return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

int dt_binary_kernel_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch;
    const dt_value *a = &m->values[op->in];
    int b_dims[DT_VALUE_MAX_RANK];
    if (op->in2 >= 0) {
        for (int d = 0; d < a->rank; d++) b_dims[d] = m->values[op->in2].dims[d];
    } else {
        operand_dims(m, op, a->rank, b_dims);
    }
    dt_bcast *p = calloc(1, sizeof *p);
    if (!p) return dt_error_set(err, "out of memory for the binary op %s", op->name);
    op->state = p;
    int image_is_b;
    if (dt_model_value_blocked(m, op->out) && !dt_binary_is_elementwise(m, op) &&
        per_channel(m, op, &image_is_b)) {
        /* nChw16c: the image [C/16, H*W, 16], the per-channel operand [C/16, 1, 16] (the
         * same memory as [C]); the walk's runs are the 16 lanes of a block */
        const dt_value *out = &m->values[op->out];
        const int image[3] = {out->c / 16, out->h * out->w, 16}, channel[3] = {out->c / 16, 1, 16};
        if (dt_bcast_plan(p, 3, image_is_b ? channel : image, image_is_b ? image : channel, 1,
                          op->in2 >= 0))
            return dt_error_set(err, "binary op %s: its operands do not broadcast", op->name);
        *bytes += sizeof *p;
        return 0;
    }
    if (dt_bcast_plan(p, a->rank, a->dims, b_dims, 1, op->in2 >= 0))
        return dt_error_set(err, "binary op %s: its operands do not broadcast", op->name);
    *bytes += sizeof *p;
    return 0;
}

void dt_binary_kernel_free(dt_model *m, dt_op *op) {
    (void)m;
    free(op->state);
    op->state = NULL;
}

/* ---- the loops, written once over dt_elem_load/store ---- */

typedef struct bin_args {
    int func;
    const void *a, *b, *dout;
    void *out;
    /* bf16 flags: the activations (a, out, dout); b (an activation in a bf16 model) */
    int act_bf, b_bf;
    /* a gradient: of b (x_is_b) or a; how it and the other operand enter (phi, psi below) */
    int x_is_b, phi, psi;
    const void *x, *other; /* the operand whose gradient is made, the other one */
    void *dx;
    int x_bf, other_bf, dx_bf;
} bin_args;

DT_ELEM_INLINE float apply(int func, float x, float y) {
    switch (func) {
    case DT_BINARY_ADD:
        return x + y;
    case DT_BINARY_SUB:
        return x - y;
    case DT_BINARY_MUL:
        return x * y;
    case DT_BINARY_DIV:
        return x / y;
    case DT_BINARY_SUB_REVERSED:
        return y - x;
    default: /* DT_BINARY_DIV_REVERSED */
        return y / x;
    }
}

DT_ELEM_INLINE void fwd_loop(const bin_args *g, size_t o, size_t ia, size_t ib, size_t len, int sa,
                             int sb, int func, int abf, int bbf) {
    const void *a = g->a, *b = g->b;
    void *out = g->out;
    if (sa && sb) {
        for (size_t j = 0; j < len; j++)
            dt_elem_store(out, o + j,
                          apply(func, dt_elem_load(a, ia + j, abf), dt_elem_load(b, ib + j, bbf)),
                          abf);
    } else if (sa) { /* b broadcast along the run: squeeze-and-excitation's scale */
        const float y = dt_elem_load(b, ib, bbf);
        for (size_t j = 0; j < len; j++)
            dt_elem_store(out, o + j, apply(func, dt_elem_load(a, ia + j, abf), y), abf);
    } else if (sb) {
        const float x = dt_elem_load(a, ia, abf);
        for (size_t j = 0; j < len; j++)
            dt_elem_store(out, o + j, apply(func, x, dt_elem_load(b, ib + j, bbf)), abf);
    } else {
        const float v = apply(func, dt_elem_load(a, ia, abf), dt_elem_load(b, ib, bbf));
        for (size_t j = 0; j < len; j++) dt_elem_store(out, o + j, v, abf);
    }
}

DT_ELEM_INLINE void fwd_typed(const bin_args *g, size_t o, size_t ia, size_t ib, size_t len, int sa,
                              int sb, int abf, int bbf) {
    switch (g->func) {
    case DT_BINARY_ADD:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_ADD, abf, bbf);
        break;
    case DT_BINARY_SUB:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_SUB, abf, bbf);
        break;
    case DT_BINARY_MUL:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_MUL, abf, bbf);
        break;
    case DT_BINARY_DIV:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_DIV, abf, bbf);
        break;
    case DT_BINARY_SUB_REVERSED:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_SUB_REVERSED, abf, bbf);
        break;
    default:
        fwd_loop(g, o, ia, ib, len, sa, sb, DT_BINARY_DIV_REVERSED, abf, bbf);
        break;
    }
}

static void fwd_run(void *ctx, const dt_bcast_run *r) {
    const bin_args *g = ctx;
    for (size_t i = 0; i < r->rows; i++) {
        const size_t o = r->o + i * r->len, ia = r->ia + i * r->ra, ib = r->ib + i * r->rb;
        if (!g->act_bf)
            fwd_typed(g, o, ia, ib, r->len, r->sa, r->sb, 0, 0);
        else if (g->b_bf)
            fwd_typed(g, o, ia, ib, r->len, r->sa, r->sb, 1, 1);
        else
            fwd_typed(g, o, ia, ib, r->len, r->sa, r->sb, 1, 0);
    }
}

/* An operand's gradient is dout * phi(other) * psi(itself): phi 1, the other operand
 * or its inverse; psi 1, -1 or -1/x^2 (a divisor's). The other operand varies along a
 * reduction's runs, the operand itself does not (every position summed into one of its
 * elements sees the same value), so psi applies once per element, after the sum. */
enum { PHI_ONE, PHI_OTHER, PHI_INV_OTHER };
enum { PSI_ONE, PSI_NEG, PSI_NEG_INV_SQ };

static void grad_terms(int func, int x_is_b, int *phi, int *psi) {
    *phi = PHI_ONE, *psi = PSI_ONE;
    switch (func) {
    case DT_BINARY_ADD:
        break;
    case DT_BINARY_SUB: /* a - b */
        *psi = x_is_b ? PSI_NEG : PSI_ONE;
        break;
    case DT_BINARY_MUL:
        *phi = PHI_OTHER;
        break;
    case DT_BINARY_DIV: /* a / b: 1/b; -a/b^2 */
        *phi = x_is_b ? PHI_OTHER : PHI_INV_OTHER;
        *psi = x_is_b ? PSI_NEG_INV_SQ : PSI_ONE;
        break;
    case DT_BINARY_SUB_REVERSED: /* b - a */
        *psi = x_is_b ? PSI_ONE : PSI_NEG;
        break;
    default: /* b / a: -b/a^2; 1/a */
        *phi = x_is_b ? PHI_INV_OTHER : PHI_OTHER;
        *psi = x_is_b ? PSI_ONE : PSI_NEG_INV_SQ;
        break;
    }
}

DT_ELEM_INLINE float phi_of(int phi, float other) {
    return phi == PHI_ONE ? 1.0f : phi == PHI_OTHER ? other : 1.0f / other;
}

DT_ELEM_INLINE float psi_of(int psi, float x) {
    return psi == PSI_ONE ? 1.0f : psi == PSI_NEG ? -1.0f : -1.0f / (x * x);
}

/* The gradient of an operand that has every output element: dx[ix + j] += ... */
DT_ELEM_INLINE void full_loop(const bin_args *g, size_t o, size_t ix, size_t io, size_t len, int so,
                              int phi, int psi, int dbf, int xbf, int obf, int dxbf) {
    const void *dout = g->dout, *x = g->x, *other = g->other;
    void *dx = g->dx;
    if (!so) {
        const float c = phi_of(phi, dt_elem_load(other, io, obf));
        for (size_t j = 0; j < len; j++) {
            const float s = psi == PSI_ONE ? 1.0f : psi_of(psi, dt_elem_load(x, ix + j, xbf));
            const float v = dt_elem_load(dout, o + j, dbf) * c * s;
            dt_elem_store(dx, ix + j, dt_elem_load(dx, ix + j, dxbf) + v, dxbf);
        }
        return;
    }
    for (size_t j = 0; j < len; j++) {
        const float s = psi == PSI_ONE ? 1.0f : psi_of(psi, dt_elem_load(x, ix + j, xbf));
        const float v =
            dt_elem_load(dout, o + j, dbf) * phi_of(phi, dt_elem_load(other, io + j, obf)) * s;
        dt_elem_store(dx, ix + j, dt_elem_load(dx, ix + j, dxbf) + v, dxbf);
    }
}

DT_ELEM_INLINE void full_phi_psi(const bin_args *g, size_t o, size_t ix, size_t io, size_t len,
                                 int so, int dbf, int xbf, int obf, int dxbf) {
    switch (g->phi * 3 + g->psi) {
    case PHI_ONE * 3 + PSI_ONE:
        full_loop(g, o, ix, io, len, so, PHI_ONE, PSI_ONE, dbf, xbf, obf, dxbf);
        break;
    case PHI_ONE * 3 + PSI_NEG:
        full_loop(g, o, ix, io, len, so, PHI_ONE, PSI_NEG, dbf, xbf, obf, dxbf);
        break;
    case PHI_OTHER * 3 + PSI_ONE:
        full_loop(g, o, ix, io, len, so, PHI_OTHER, PSI_ONE, dbf, xbf, obf, dxbf);
        break;
    case PHI_INV_OTHER * 3 + PSI_ONE:
        full_loop(g, o, ix, io, len, so, PHI_INV_OTHER, PSI_ONE, dbf, xbf, obf, dxbf);
        break;
    default:
        full_loop(g, o, ix, io, len, so, g->phi, g->psi, dbf, xbf, obf, dxbf);
        break;
    }
}

static void full_run(void *ctx, const dt_bcast_run *r) {
    const bin_args *g = ctx;
    const int so = g->x_is_b ? r->sa : r->sb;
    for (size_t i = 0; i < r->rows; i++) {
        const size_t o = r->o + i * r->len, ia = r->ia + i * r->ra, ib = r->ib + i * r->rb;
        const size_t ix = g->x_is_b ? ib : ia, io = g->x_is_b ? ia : ib;
        /* the dtype mixes that occur: all f32; all bf16; bf16 activations with an f32
         * tensor as the other operand (a full operand is an activation) */
        if (!g->act_bf)
            full_phi_psi(g, o, ix, io, r->len, so, 0, 0, 0, 0);
        else if (g->other_bf)
            full_phi_psi(g, o, ix, io, r->len, so, 1, 1, 1, 1);
        else
            full_phi_psi(g, o, ix, io, r->len, so, 1, 1, 0, 1);
    }
}

/* A reduction's run: sum of dout * phi(other) over len positions, into acc[0] or acc[j]. */
DT_ELEM_INLINE void sum_loop(const bin_args *g, float *acc, size_t o, size_t io, size_t len, int so,
                             int acc_stride, int phi, int dbf, int obf) {
    const void *dout = g->dout, *other = g->other;
    if (acc_stride) {
        if (so)
            for (size_t j = 0; j < len; j++)
                acc[j] +=
                    dt_elem_load(dout, o + j, dbf) * phi_of(phi, dt_elem_load(other, io + j, obf));
        else {
            const float c = phi_of(phi, dt_elem_load(other, io, obf));
            for (size_t j = 0; j < len; j++) acc[j] += dt_elem_load(dout, o + j, dbf) * c;
        }
        return;
    }
    /* 8 partial sums (vector lanes, not one latency chain), merged in a fixed order */
    float part[8] = {0};
    size_t j = 0;
    if (so) {
        for (; j + 8 <= len; j += 8)
            for (int l = 0; l < 8; l++)
                part[l] += dt_elem_load(dout, o + j + l, dbf) *
                           phi_of(phi, dt_elem_load(other, io + j + l, obf));
        for (; j < len; j++)
            part[0] +=
                dt_elem_load(dout, o + j, dbf) * phi_of(phi, dt_elem_load(other, io + j, obf));
    } else {
        for (; j + 8 <= len; j += 8)
            for (int l = 0; l < 8; l++) part[l] += dt_elem_load(dout, o + j + l, dbf);
        for (; j < len; j++) part[0] += dt_elem_load(dout, o + j, dbf);
        const float c = phi_of(phi, dt_elem_load(other, io, obf));
        for (int l = 0; l < 8; l++) part[l] *= c;
    }
    acc[0] +=
        ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

DT_ELEM_INLINE void sum_phi(const bin_args *g, float *acc, size_t o, size_t io, size_t len, int so,
                            int acc_stride, int dbf, int obf) {
    switch (g->phi) {
    case PHI_ONE:
        sum_loop(g, acc, o, io, len, so, acc_stride, PHI_ONE, dbf, obf);
        break;
    case PHI_OTHER:
        sum_loop(g, acc, o, io, len, so, acc_stride, PHI_OTHER, dbf, obf);
        break;
    default:
        sum_loop(g, acc, o, io, len, so, acc_stride, PHI_INV_OTHER, dbf, obf);
        break;
    }
}

static void reduce_sum(void *ctx, float *acc, const dt_bcast_sum_run *r) {
    const bin_args *g = ctx;
    for (size_t i = 0; i < r->rows; i++) {
        const size_t o = r->o + i * r->ro, io = r->io + i * r->rio;
        if (!g->act_bf)
            sum_phi(g, acc, o, io, r->len, r->so, r->acc_stride, 0, 0);
        else if (g->other_bf)
            sum_phi(g, acc, o, io, r->len, r->so, r->acc_stride, 1, 1);
        else
            sum_phi(g, acc, o, io, r->len, r->so, r->acc_stride, 1, 0);
    }
}

DT_ELEM_INLINE void done_loop(const bin_args *g, size_t e, const float *acc, size_t len, int xbf,
                              int dxbf) {
    for (size_t j = 0; j < len; j++) {
        const float s = g->psi == PSI_ONE ? 1.0f : psi_of(g->psi, dt_elem_load(g->x, e + j, xbf));
        dt_elem_store(g->dx, e + j, dt_elem_load(g->dx, e + j, dxbf) + s * acc[j], dxbf);
    }
}

static void reduce_done(void *ctx, size_t e, const float *acc, size_t len) {
    const bin_args *g = ctx;
    /* the operand and its gradient have one dtype: an activation's, or a tensor's f32 */
    if (g->x_bf)
        done_loop(g, e, acc, len, 1, 1);
    else
        done_loop(g, e, acc, len, 0, 0);
}

/* ---- the kernel's functions ---- */

static void args_of(dt_model *m, dt_op *op, bin_args *g) {
    g->func = op->func;
    g->act_bf = dt_model_value_dtype(m, op->out) == DT_BF16;
    g->a = dt_model_value_ptr(m, op->in);
    g->out = dt_model_value_ptr(m, op->out);
    if (op->in2 >= 0) {
        g->b = dt_model_value_ptr(m, op->in2);
        g->b_bf = dt_model_value_dtype(m, op->in2) == DT_BF16;
    } else {
        g->b = op->weight >= 0 ? dt_model_tensor_data(m, op->weight) : &op->scalar;
        g->b_bf = 0;
    }
}

void dt_binary_kernel_forward(dt_model *m, dt_op *op, int n) {
    bin_args g = {0};
    args_of(m, op, &g);
    dt_bcast_runs(op->state, n, fwd_run, &g);
}

/* One operand's gradient: elementwise where it has every output element, else summed
 * over the axes it broadcasts along. */
static void operand_grad(const dt_op *op, bin_args *g, int x_is_b, void *dx, int dx_bf, int n) {
    if (!dx) return;
    g->x_is_b = x_is_b;
    grad_terms(g->func, x_is_b, &g->phi, &g->psi);
    g->x = x_is_b ? g->b : g->a;
    g->other = x_is_b ? g->a : g->b;
    g->x_bf = x_is_b ? g->b_bf : g->act_bf;
    g->other_bf = x_is_b ? g->act_bf : g->b_bf;
    g->dx = dx;
    g->dx_bf = dx_bf;
    if (dt_bcast_full(op->state, x_is_b))
        dt_bcast_runs(op->state, n, full_run, g);
    else
        dt_bcast_reduce(op->state, n, x_is_b, reduce_sum, reduce_done, g);
}

void dt_binary_kernel_backward(dt_model *m, dt_op *op, int n) {
    bin_args g = {0};
    args_of(m, op, &g);
    g.dout = dt_model_value_grad_ptr(m, op->out);
    operand_grad(op, &g, 0, dt_model_value_grad_ptr(m, op->in), g.act_bf, n);
    if (op->in2 >= 0)
        operand_grad(op, &g, 1, dt_model_value_grad_ptr(m, op->in2), g.b_bf, n);
    else if (op->weight >= 0) /* a parameter's gradient: f32 */
        operand_grad(op, &g, 1, dt_model_param_grad(m, op->weight), 0, n);
}

/* ---- the CPU backend's f32 kernels ---- */

static int all_of(const dt_model *m, const dt_op *op, dt_dtype dtype) {
    return dt_model_value_dtype(m, op->in) == dtype && dt_model_value_dtype(m, op->out) == dtype &&
           (op->in2 < 0 || dt_model_value_dtype(m, op->in2) == dtype);
}

static int accepts_any_layout_f32(const dt_model *m, const dt_op *op) {
    return all_of(m, op, DT_F32) && dt_binary_any_layout(m, op);
}

static int accepts_f32(const dt_model *m, const dt_op *op) {
    return all_of(m, op, DT_F32);
}

/* Equal shapes, a scalar operand, or an image and a per-channel operand: any layout,
 * the same for all (blocked between convolutions). */
const dt_kernel dt_binary_f32_kernel = {
    .kind = DT_OP_BINARY,
    .name = "binary.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .accepts = accepts_any_layout_f32,
    .plan = dt_binary_kernel_plan,
    .free = dt_binary_kernel_free,
    .forward = dt_binary_kernel_forward,
    .backward = dt_binary_kernel_backward,
};

/* Broadcasting: NCHW (the axes as the shapes say). */
const dt_kernel dt_binary_bcast_f32_kernel = {
    .kind = DT_OP_BINARY,
    .name = "binary_bcast.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .accepts = accepts_f32,
    .plan = dt_binary_kernel_plan,
    .free = dt_binary_kernel_free,
    .forward = dt_binary_kernel_forward,
    .backward = dt_binary_kernel_backward,
};
