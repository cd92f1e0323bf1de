#include "nn/matmul.h"

#include <omp.h>
#include <stdlib.h>

#include "core/gemm.h"
#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/elem.h"

size_t dt_matmul_scratch_floats(dt_dtype dtype, int m, int k, int n) {
    if (dtype != DT_BF16) return 0;
    const size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    return mk + kn + mn + (mk > kn ? mk : kn);
}

/* Matrix t of x ([count] elements each) as f32: x itself, or widened into s. */
static inline const float *as_f32(float *s, const void *x, size_t t, size_t count, int bf16) {
    if (!bf16) return (const float *)x + t * count;
    for (size_t i = 0; i < count; i++) s[i] = dt_elem_load(x, t * count + i, 1);
    return s;
}

/* The f32 result r of matrix t written (bf16: rounded) or added into y. */
static inline void put(void *y, const float *r, size_t t, size_t count, int add, int bf16) {
    for (size_t i = 0; i < count; i++) {
        if (add)
            dt_elem_add(y, t * count + i, r[i], bf16);
        else
            dt_elem_store(y, t * count + i, r[i], bf16);
    }
}

static inline void matmul_body(void *c, const void *a, const void *b, size_t batches, int m, int k,
                               int n, float *scratch, int threads, int bf16) {
    const size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    const size_t per_thread = bf16 ? mk + kn + mn + (mk > kn ? mk : kn) : 0;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t t = 0; t < batches; t++) {
        float *s = scratch ? scratch + (size_t)omp_get_thread_num() * per_thread : NULL;
        const float *at = as_f32(s, a, t, mk, bf16),
                    *bt = as_f32(s ? s + mk : NULL, b, t, kn, bf16);
        float *ct = bf16 ? s + mk + kn : (float *)c + t * mn;
        dt_sgemm(0, 0, m, n, k, 1.0f, at, k, bt, n, 0.0f, ct, n);
        if (bf16) put(c, ct, t, mn, 0, 1);
    }
}

static inline void matmul_backward_body(void *da, void *db, const void *dc, const void *a,
                                        const void *b, size_t batches, int m, int k, int n,
                                        float *scratch, int threads, int bf16) {
    const size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
    const size_t per_thread = bf16 ? mk + kn + mn + (mk > kn ? mk : kn) : 0;
    /* f32 accumulates in the GEMM (beta 1); bf16 computes into scratch, then adds with
     * one rounding */
    const float beta = bf16 ? 0.0f : 1.0f;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t t = 0; t < batches; t++) {
        float *s = scratch ? scratch + (size_t)omp_get_thread_num() * per_thread : NULL;
        const float *dct = as_f32(s ? s + mk + kn : NULL, dc, t, mn, bf16);
        float *r = s ? s + mk + kn + mn : NULL;
        if (da) {
            const float *bt = as_f32(s ? s + mk : NULL, b, t, kn, bf16);
            float *dat = bf16 ? r : (float *)da + t * mk;
            dt_sgemm(0, 1, m, k, n, 1.0f, dct, n, bt, n, beta, dat, k);
            if (bf16) put(da, r, t, mk, 1, 1);
        }
        if (db) {
            const float *at = as_f32(s, a, t, mk, bf16);
            float *dbt = bf16 ? r : (float *)db + t * kn;
            dt_sgemm(1, 0, k, n, m, 1.0f, at, k, dct, n, beta, dbt, n);
            if (bf16) put(db, r, t, kn, 1, 1);
        }
    }
}

void dt_matmul_forward(void *c, const void *a, const void *b, dt_dtype dtype, size_t batches, int m,
                       int k, int n, float *scratch, int threads) {
    if (threads < 1) threads = 1;
    if (dtype == DT_BF16)
        matmul_body(c, a, b, batches, m, k, n, scratch, threads, 1);
    else
        matmul_body(c, a, b, batches, m, k, n, NULL, threads, 0);
}

void dt_matmul_backward(void *da, void *db, const void *dc, const void *a, const void *b,
                        dt_dtype dtype, size_t batches, int m, int k, int n, float *scratch,
                        int threads) {
    if (threads < 1) threads = 1;
    if (dtype == DT_BF16)
        matmul_backward_body(da, db, dc, a, b, batches, m, k, n, scratch, threads, 1);
    else
        matmul_backward_body(da, db, dc, a, b, batches, m, k, n, NULL, threads, 0);
}

/* The op in the graph: a [.., M, K] (op->in) times b [.., K, N] (op->in2), batches the
 * batch times op->outer (the leading axes). State: the bf16 scratch and the thread
 * count it was sized for. */

typedef struct matmul_state {
    float *scratch;
    int threads;
} matmul_state;

static void matmul_shape(const dt_model *m, const dt_op *op, int *rows, int *inner, int *cols) {
    const dt_value *a = &m->values[op->in], *b = &m->values[op->in2];
    *rows = a->dims[a->rank - 2];
    *inner = a->dims[a->rank - 1];
    *cols = b->dims[b->rank - 1];
}

static size_t matmul_scratch(const dt_model *m, const dt_op *op, int threads) {
    int r, k, c;
    matmul_shape(m, op, &r, &k, &c);
    return (size_t)threads * dt_matmul_scratch_floats(dt_model_value_dtype(m, op->in), r, k, c);
}

static int matmul_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)err;
    *bytes += sizeof(float) * matmul_scratch(m, op, omp_get_max_threads());
    return 0;
}

static void matmul_op_free(dt_model *m, dt_op *op) {
    (void)m;
    matmul_state *st = op->state;
    if (st) {
        dt_free(st->scratch);
        free(st);
    }
    op->state = NULL;
}

static int matmul_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    (void)max_batch;
    matmul_state *st = calloc(1, sizeof *st);
    if (!st) return dt_error_set(err, "out of memory for a matmul");
    op->state = st;
    st->threads = omp_get_max_threads();
    const size_t floats = matmul_scratch(m, op, st->threads);
    if (floats && !(st->scratch = dt_alloc(sizeof(float) * floats, "matmul scratch", err)))
        return -1;
    return 0;
}

static void matmul_op_forward(dt_model *m, dt_op *op, int n) {
    matmul_state *st = op->state;
    int r, k, c;
    matmul_shape(m, op, &r, &k, &c);
    dt_matmul_forward(dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                      dt_model_value_ptr(m, op->in2), dt_model_value_dtype(m, op->in),
                      (size_t)n * (size_t)op->outer, r, k, c, st->scratch, st->threads);
}

static void matmul_op_backward(dt_model *m, dt_op *op, int n) {
    matmul_state *st = op->state;
    int r, k, c;
    matmul_shape(m, op, &r, &k, &c);
    dt_matmul_backward(dt_model_value_grad_ptr(m, op->in), dt_model_value_grad_ptr(m, op->in2),
                       dt_model_value_grad_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                       dt_model_value_ptr(m, op->in2), dt_model_value_dtype(m, op->in),
                       (size_t)n * (size_t)op->outer, r, k, c, st->scratch, st->threads);
}

static double matmul_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    int r, k, c;
    matmul_shape(m, op, &r, &k, &c);
    return 2.0 * (double)n * op->outer * r * k * c;
}

static double matmul_op_flops(const dt_model *m, const dt_op *op, int n) {
    const int passes = 1 + (dt_model_value_needs_grad(m, op->in) ? 1 : 0) +
                       (dt_model_value_needs_grad(m, op->in2) ? 1 : 0);
    return matmul_op_forward_flops(m, op, n) * passes;
}

const dt_op_class dt_matmul_op = {
    .name = "matmul",
    .flops = matmul_op_flops,
    .forward_flops = matmul_op_forward_flops,
};

const dt_kernel dt_matmul_f32_kernel = {
    .kind = DT_OP_MATMUL,
    .name = "matmul.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = matmul_op_plan,
    .alloc = matmul_op_alloc,
    .free = matmul_op_free,
    .forward = matmul_op_forward,
    .backward = matmul_op_backward,
};
