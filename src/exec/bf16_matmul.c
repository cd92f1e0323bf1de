#include "exec/bf16_matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_ctx.h"
#include "dtrain/model.h"
#include "exec/exec.h"

/* The three products for one batch count: forward, and backward's two, each with its
 * memory objects (handles set at each call). */
typedef struct bmm_variant {
    int batches;
    dnnl_primitive_t prim[3];
    dnnl_memory_t mem[3][3]; /* per primitive: src, weights, dst */
} bmm_variant;

struct dt_bf16_bmm {
    dt_dnnl *ctx;
    int max_batches, m, k, n;
    bmm_variant v[2];
    int n_variants;
};

enum { FWD, BWD_A, BWD_B };

#define BMM_TRY(call, what)                                                                        \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success)                                                                   \
            return dt_error_set(err, "oneDNN: batched matmul %s failed (status %d)", what,         \
                                (int)st_);                                                         \
    } while (0)

/* [batches, rows, cols] of bf16, row-major; transposed: the view of a stored
 * [batches, cols, rows] (strides, no copy). */
static dnnl_status_t md3(dnnl_memory_desc_t *md, int batches, int rows, int cols, int transposed) {
    dnnl_dims_t dims = {batches, rows, cols};
    dnnl_dims_t strides = {(dnnl_dim_t)rows * cols, transposed ? 1 : cols, transposed ? rows : 1};
    return dnnl_memory_desc_init_by_strides(md, 3, dims, dnnl_bf16, strides);
}

static int bmm_primitive(bmm_variant *v, int which, dt_dnnl *ctx, const dnnl_memory_desc_t *src,
                         const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *dst,
                         int accumulate, dt_error *err) {
    dnnl_matmul_desc_t d;
    BMM_TRY(dnnl_matmul_desc_init(&d, src, wei, NULL, dst), "descriptor");
    dnnl_primitive_attr_t attr = NULL;
    if (accumulate) { /* dst = bf16(dst + product): one rounding */
        dnnl_post_ops_t ops;
        BMM_TRY(dnnl_primitive_attr_create(&attr), "attribute");
        BMM_TRY(dnnl_post_ops_create(&ops), "post-op");
        BMM_TRY(dnnl_post_ops_append_sum(ops, 1.0f), "sum post-op");
        BMM_TRY(dnnl_primitive_attr_set_post_ops(attr, ops), "post-op attribute");
        dnnl_post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &d, attr, ctx->engine, NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    BMM_TRY(st, "primitive descriptor");
    st = dnnl_primitive_create(&v->prim[which], pd);
    dnnl_primitive_desc_destroy(pd);
    BMM_TRY(st, "primitive");
    const dnnl_memory_desc_t *mds[3] = {src, wei, dst};
    for (int q = 0; q < 3; q++)
        BMM_TRY(dnnl_memory_create(&v->mem[which][q], mds[q], ctx->engine, DNNL_MEMORY_NONE),
                "memory");
    return 0;
}

static void variant_destroy(bmm_variant *v) {
    for (int p = 0; p < 3; p++) {
        if (v->prim[p]) dnnl_primitive_destroy(v->prim[p]);
        for (int q = 0; q < 3; q++)
            if (v->mem[p][q]) dnnl_memory_destroy(v->mem[p][q]);
    }
    memset(v, 0, sizeof *v);
}

static int variant_init(bmm_variant *v, const dt_bf16_bmm *b, int batches, dt_error *err) {
    const int M = b->m, K = b->k, N = b->n;
    dnnl_memory_desc_t a, bm, c, dc, b_t, da, a_t, db;
    v->batches = batches;
    BMM_TRY(md3(&a, batches, M, K, 0), "md");
    BMM_TRY(md3(&bm, batches, K, N, 0), "md");
    BMM_TRY(md3(&c, batches, M, N, 0), "md");
    BMM_TRY(md3(&dc, batches, M, N, 0), "md");
    BMM_TRY(md3(&b_t, batches, N, K, 1), "md"); /* b^T: the stored [K, N] */
    BMM_TRY(md3(&da, batches, M, K, 0), "md");
    BMM_TRY(md3(&a_t, batches, K, M, 1), "md"); /* a^T: the stored [M, K] */
    BMM_TRY(md3(&db, batches, K, N, 0), "md");
    if (bmm_primitive(v, FWD, b->ctx, &a, &bm, &c, 0, err) ||
        bmm_primitive(v, BWD_A, b->ctx, &dc, &b_t, &da, 1, err) ||
        bmm_primitive(v, BWD_B, b->ctx, &a_t, &dc, &db, 1, err))
        return -1;
    return 0;
}

int dt_bf16_bmm_create(dt_bf16_bmm **bmm, dt_dnnl *ctx, int max_batches, int m, int k, int n,
                       dt_error *err) {
    *bmm = NULL;
    dt_bf16_bmm *b = calloc(1, sizeof *b);
    if (!b) return dt_error_set(err, "out of memory for a batched matmul");
    *b = (dt_bf16_bmm){.ctx = ctx, .max_batches = max_batches, .m = m, .k = k, .n = n};
    if (variant_init(&b->v[0], b, max_batches, err)) {
        dt_bf16_bmm_destroy(b);
        return -1;
    }
    b->n_variants = 1;
    *bmm = b;
    return 0;
}

void dt_bf16_bmm_destroy(dt_bf16_bmm *bmm) {
    if (!bmm) return;
    for (int k = 0; k < 2; k++) variant_destroy(&bmm->v[k]);
    free(bmm);
}

/* The primitives for this batch count: the largest's built at creation, one other on
 * first use (a last partial batch, evaluation), replaced by the next. */
static bmm_variant *variant_for(dt_bf16_bmm *b, int batches) {
    for (int k = 0; k < b->n_variants; k++)
        if (b->v[k].batches == batches) return &b->v[k];
    if (batches > b->max_batches) {
        fprintf(stderr, "dtrain: batched matmul planned for %d matrices run at %d\n",
                b->max_batches, batches);
        exit(1);
    }
    bmm_variant *v = &b->v[1];
    variant_destroy(v);
    b->n_variants = 2;
    dt_error err;
    if (variant_init(v, b, batches, &err)) {
        fprintf(stderr, "dtrain: batched matmul for %d matrices: %s\n", batches, err.msg);
        exit(1);
    }
    return v;
}

static void run(dt_bf16_bmm *b, bmm_variant *v, int which, const void *src, const void *wei,
                void *dst) {
    const void *ptr[3] = {src, wei, dst};
    for (int q = 0; q < 3; q++)
        dt_dnnl_run(dnnl_memory_set_data_handle(v->mem[which][q], (void *)ptr[q]), "set handle");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, v->mem[which][0]},
                               {DNNL_ARG_WEIGHTS, v->mem[which][1]},
                               {DNNL_ARG_DST, v->mem[which][2]}};
    dt_dnnl_run(dnnl_primitive_execute(v->prim[which], b->ctx->stream, 3, args), "batched matmul");
}

void dt_bf16_bmm_forward(dt_bf16_bmm *bmm, int batches, void *c, const void *a, const void *b) {
    bmm_variant *v = variant_for(bmm, batches);
    run(bmm, v, FWD, a, b, c);
    dt_dnnl_run(dnnl_stream_wait(bmm->ctx->stream), "stream wait");
}

void dt_bf16_bmm_backward(dt_bf16_bmm *bmm, int batches, void *da, void *db, const void *dc,
                          const void *a, const void *b) {
    bmm_variant *v = variant_for(bmm, batches);
    if (da) run(bmm, v, BWD_A, dc, b, da);
    if (db) run(bmm, v, BWD_B, a, dc, db);
    dt_dnnl_run(dnnl_stream_wait(bmm->ctx->stream), "stream wait");
}

/* The graph's side: the matmul op (nn/matmul.h) with bf16 activations. Its backward
 * adds into both inputs' gradients (it claims neither), as the f32 kernel does. */

static void shape_of(const dt_model *m, const dt_op *op, int *rows, int *inner, int *cols) {
    const dt_value *a = &m->values[op->in], *b = &m->values[op->in2];
    *rows = a->dims[a->rank - 2];
    *inner = a->dims[a->rank - 1];
    *cols = b->dims[b->rank - 1];
}

static int matmul_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)bytes;
    dt_dnnl *dnnl = dt_exec_dnnl(m->backend->ctx);
    if (!dnnl) return dt_error_set(err, "matmul: bf16 needs the oneDNN backend");
    int r, k, c;
    shape_of(m, op, &r, &k, &c);
    dt_bf16_bmm *bmm;
    if (dt_bf16_bmm_create(&bmm, dnnl, max_batch * op->outer, r, k, c, err)) return -1;
    op->state = bmm;
    return 0;
}

static void matmul_free(dt_model *m, dt_op *op) {
    (void)m;
    dt_bf16_bmm_destroy(op->state);
    op->state = NULL;
}

static void matmul_forward(dt_model *m, dt_op *op, int n) {
    dt_bf16_bmm_forward(op->state, n * op->outer, dt_model_value_ptr(m, op->out),
                        dt_model_value_ptr(m, op->in), dt_model_value_ptr(m, op->in2));
}

static void matmul_backward(dt_model *m, dt_op *op, int n) {
    dt_bf16_bmm_backward(op->state, n * op->outer, dt_model_value_grad_ptr(m, op->in),
                         dt_model_value_grad_ptr(m, op->in2), dt_model_value_grad_ptr(m, op->out),
                         dt_model_value_ptr(m, op->in), dt_model_value_ptr(m, op->in2));
}

const dt_kernel dt_matmul_bf16_kernel = {
    .kind = DT_OP_MATMUL,
    .name = "matmul.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = matmul_plan,
    .free = matmul_free,
    .forward = matmul_forward,
    .backward = matmul_backward,
};
