#include "nn/reduce_mean.h"

#include <stdlib.h>

#include "dtrain/kernel.h"
#include "nn/broadcast.h"

static double reduce_mean_forward_flops(const dt_model *m, const dt_op *op, int n) {
    return (double)dt_model_value_floats(m, op->in, n); /* one add an input element */
}

static double reduce_mean_flops(const dt_model *m, const dt_op *op, int n) {
    return 2.0 * reduce_mean_forward_flops(m, op, n); /* and one multiply-add back */
}

const dt_op_class dt_reduce_mean_op = {
    .name = "reduce_mean",
    .flops = reduce_mean_flops,
    .forward_flops = reduce_mean_forward_flops,
};

/* The plan: the input as the walk's output and first operand, the means (their axes
 * kept as 1) as the second, which broadcasts along the averaged axes. */
typedef struct reduce_state {
    dt_bcast plan;
    float inv_count;
} reduce_state;

int dt_reduce_mean_kernel_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes,
                               dt_error *err) {
    (void)max_batch;
    const dt_value *x = &m->values[op->in];
    int kept[DT_VALUE_MAX_RANK];
    for (int d = 0; d < x->rank; d++) kept[d] = op->axes >> d & 1u ? 1 : x->dims[d];
    reduce_state *st = calloc(1, sizeof *st);
    if (!st) return dt_error_set(err, "out of memory for a reduce_mean op");
    op->state = st;
    if (dt_bcast_plan(&st->plan, x->rank, x->dims, kept, 1, 1))
        return dt_error_set(err, "reduce_mean: axes 0x%x of a value of %d axes", op->axes, x->rank);
    st->inv_count = (float)((double)st->plan.b_sample / (double)st->plan.a_sample);
    *bytes += sizeof *st;
    return 0;
}

void dt_reduce_mean_kernel_free(dt_model *m, dt_op *op) {
    (void)m;
    free(op->state);
    op->state = NULL;
}

typedef struct mean_args {
    const void *in, *dout;
    void *out, *din;
    float inv_count;
    int bf;
} mean_args;

/* A run of input elements into the sum (acc[0]) or sums (acc[j]) of its means. */
DT_ELEM_INLINE void sum_loop(const void *in, float *acc, size_t o, size_t len, int acc_stride,
                             int bf) {
    if (acc_stride) {
        for (size_t j = 0; j < len; j++) acc[j] += dt_elem_load(in, o + j, bf);
        return;
    }
    float part[8] = {0}; /* partial sums merged in a fixed order */
    size_t j = 0;
    for (; j + 8 <= len; j += 8)
        for (int l = 0; l < 8; l++) part[l] += dt_elem_load(in, o + j + l, bf);
    for (; j < len; j++) part[0] += dt_elem_load(in, o + j, bf);
    acc[0] +=
        ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

static void mean_sum(void *ctx, float *acc, const dt_bcast_sum_run *r) {
    const mean_args *g = ctx; /* the input is the walk's output space: at o */
    for (size_t i = 0; i < r->rows; i++) {
        if (g->bf)
            sum_loop(g->in, acc, r->o + i * r->ro, r->len, r->acc_stride, 1);
        else
            sum_loop(g->in, acc, r->o + i * r->ro, r->len, r->acc_stride, 0);
    }
}

DT_ELEM_INLINE void store_means(const mean_args *g, size_t e, const float *acc, size_t len,
                                int bf) {
    for (size_t j = 0; j < len; j++) dt_elem_store(g->out, e + j, acc[j] * g->inv_count, bf);
}

static void mean_done(void *ctx, size_t e, const float *acc, size_t len) {
    const mean_args *g = ctx;
    if (g->bf)
        store_means(g, e, acc, len, 1);
    else
        store_means(g, e, acc, len, 0);
}

DT_ELEM_INLINE void spread_loop(const mean_args *g, size_t o, size_t ib, size_t len, int sb,
                                int bf) {
    const float c = g->inv_count;
    if (sb) {
        for (size_t j = 0; j < len; j++)
            dt_elem_store(g->din, o + j,
                          dt_elem_load(g->din, o + j, bf) + dt_elem_load(g->dout, ib + j, bf) * c,
                          bf);
        return;
    }
    const float v = dt_elem_load(g->dout, ib, bf) * c;
    for (size_t j = 0; j < len; j++)
        dt_elem_store(g->din, o + j, dt_elem_load(g->din, o + j, bf) + v, bf);
}

static void mean_spread(void *ctx, const dt_bcast_run *r) {
    const mean_args *g = ctx;
    for (size_t i = 0; i < r->rows; i++) {
        const size_t o = r->o + i * r->len, ib = r->ib + i * r->rb;
        if (g->bf)
            spread_loop(g, o, ib, r->len, r->sb, 1);
        else
            spread_loop(g, o, ib, r->len, r->sb, 0);
    }
}

void dt_reduce_mean_kernel_forward(dt_model *m, dt_op *op, int n) {
    const reduce_state *st = op->state;
    mean_args g = {.in = dt_model_value_ptr(m, op->in),
                   .out = dt_model_value_ptr(m, op->out),
                   .inv_count = st->inv_count,
                   .bf = dt_model_value_dtype(m, op->out) == DT_BF16};
    dt_bcast_reduce(&st->plan, n, 1, mean_sum, mean_done, &g);
}

void dt_reduce_mean_kernel_backward(dt_model *m, dt_op *op, int n) {
    const reduce_state *st = op->state;
    mean_args g = {.dout = dt_model_value_grad_ptr(m, op->out),
                   .din = dt_model_value_grad_ptr(m, op->in),
                   .inv_count = st->inv_count,
                   .bf = dt_model_value_dtype(m, op->out) == DT_BF16};
    if (g.din) dt_bcast_runs(&st->plan, n, mean_spread, &g);
}

/* The CPU backend's f32 kernel: NCHW (the axes as the shapes say). */
const dt_kernel dt_reduce_mean_f32_kernel = {
    .kind = DT_OP_REDUCE_MEAN,
    .name = "reduce_mean.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = dt_reduce_mean_kernel_plan,
    .free = dt_reduce_mean_kernel_free,
    .forward = dt_reduce_mean_kernel_forward,
    .backward = dt_reduce_mean_kernel_backward,
};
