#include "nn/layernorm.h"

#include <math.h>
#include <stdlib.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/elem.h"

static inline void layernorm_body(void *y, float *save_mean, float *save_invstd, const void *x,
                                  const float *weight, const float *bias, size_t rows, int len,
                                  float eps, int bf16) {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const size_t base = r * (size_t)len;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < len; j++) sum += dt_elem_load(x, base + j, bf16);
        const float mean = sum / (float)len;
        float sq = 0.0f; /* two passes: no cancellation for rows far from zero */
#pragma omp simd reduction(+ : sq)
        for (int j = 0; j < len; j++) {
            const float d = dt_elem_load(x, base + j, bf16) - mean;
            sq += d * d;
        }
        const float invstd = 1.0f / sqrtf(sq / (float)len + eps);
        save_mean[r] = mean;
        save_invstd[r] = invstd;
        for (int j = 0; j < len; j++) {
            const float xhat = (dt_elem_load(x, base + j, bf16) - mean) * invstd;
            dt_elem_store(y, base + j, xhat * weight[j] + (bias ? bias[j] : 0.0f), bf16);
        }
    }
}

static inline void layernorm_backward_body(void *dx, float *dweight, float *dbias, const void *dy,
                                           const void *x, const float *mean, const float *invstd,
                                           const float *weight, size_t rows, int len, int bf16) {
    if (dx) {
#pragma omp parallel for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            const size_t base = r * (size_t)len;
            float sum_g = 0.0f, sum_gx = 0.0f; /* g = dy * weight, over the row */
#pragma omp simd reduction(+ : sum_g, sum_gx)
            for (int j = 0; j < len; j++) {
                const float g = dt_elem_load(dy, base + j, bf16) * weight[j];
                const float xhat = (dt_elem_load(x, base + j, bf16) - mean[r]) * invstd[r];
                sum_g += g;
                sum_gx += g * xhat;
            }
            const float mg = sum_g / (float)len, mgx = sum_gx / (float)len;
            for (int j = 0; j < len; j++) {
                const float g = dt_elem_load(dy, base + j, bf16) * weight[j];
                const float xhat = (dt_elem_load(x, base + j, bf16) - mean[r]) * invstd[r];
                dt_elem_add(dx, base + j, invstd[r] * (g - mg - xhat * mgx), bf16);
            }
        }
    }
    /* the parameters: blocks of positions per thread, rows in order within each */
    enum { BLOCK = 64 };
    const int blocks = (len + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < blocks; b++) {
        const int j0 = b * BLOCK, j1 = j0 + BLOCK < len ? j0 + BLOCK : len;
        float dw[BLOCK] = {0}, db[BLOCK] = {0};
        for (size_t r = 0; r < rows; r++) {
            const size_t base = r * (size_t)len;
            for (int j = j0; j < j1; j++) {
                const float g = dt_elem_load(dy, base + j, bf16);
                dw[j - j0] += g * (dt_elem_load(x, base + j, bf16) - mean[r]) * invstd[r];
                db[j - j0] += g;
            }
        }
        for (int j = j0; j < j1; j++) {
            dweight[j] += dw[j - j0];
            if (dbias) dbias[j] += db[j - j0];
        }
    }
}

void dt_layernorm_forward(void *y, float *save_mean, float *save_invstd, const void *x,
                          const float *weight, const float *bias, dt_dtype dtype, size_t rows,
                          int len, float eps) {
    if (dtype == DT_BF16)
        layernorm_body(y, save_mean, save_invstd, x, weight, bias, rows, len, eps, 1);
    else
        layernorm_body(y, save_mean, save_invstd, x, weight, bias, rows, len, eps, 0);
}

void dt_layernorm_backward(void *dx, float *dweight, float *dbias, const void *dy, const void *x,
                           const float *save_mean, const float *save_invstd, const float *weight,
                           dt_dtype dtype, size_t rows, int len) {
    if (dtype == DT_BF16)
        layernorm_backward_body(dx, dweight, dbias, dy, x, save_mean, save_invstd, weight, rows,
                                len, 1);
    else
        layernorm_backward_body(dx, dweight, dbias, dy, x, save_mean, save_invstd, weight, rows,
                                len, 0);
}

/* The op in the graph: rows are the batch times the axes before op->axis; its state the
 * saved mean and 1/std per row. */

typedef struct layernorm_state {
    float *mean, *invstd;
} layernorm_state;

static int layernorm_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)m, (void)err;
    *bytes += 2 * sizeof(float) * (size_t)max_batch * (size_t)op->outer;
    return 0;
}

static void layernorm_op_free(dt_model *m, dt_op *op) {
    (void)m;
    layernorm_state *st = op->state;
    if (st) {
        dt_free(st->mean);
        dt_free(st->invstd);
        free(st);
    }
    op->state = NULL;
}

static int layernorm_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    (void)m;
    layernorm_state *st = calloc(1, sizeof *st);
    if (!st) return dt_error_set(err, "out of memory for layernorm %s", op->name);
    op->state = st;
    const size_t rows = (size_t)max_batch * (size_t)op->outer;
    if (!(st->mean = dt_alloc(sizeof(float) * rows, "layernorm statistics", err)) ||
        !(st->invstd = dt_alloc(sizeof(float) * rows, "layernorm statistics", err)))
        return -1;
    return 0;
}

static void layernorm_op_forward(dt_model *m, dt_op *op, int n) {
    layernorm_state *st = op->state;
    dt_layernorm_forward(dt_model_value_ptr(m, op->out), st->mean, st->invstd,
                         dt_model_value_ptr(m, op->in), dt_model_param(m, op->weight),
                         dt_model_param(m, op->bias), dt_model_value_dtype(m, op->in),
                         (size_t)n * (size_t)op->outer, op->len, op->eps);
}

static void layernorm_op_backward(dt_model *m, dt_op *op, int n) {
    layernorm_state *st = op->state;
    dt_layernorm_backward(dt_model_value_grad_ptr(m, op->in), dt_model_param_grad(m, op->weight),
                          dt_model_param_grad(m, op->bias), dt_model_value_grad_ptr(m, op->out),
                          dt_model_value_ptr(m, op->in), st->mean, st->invstd,
                          dt_model_param(m, op->weight), dt_model_value_dtype(m, op->in),
                          (size_t)n * (size_t)op->outer, op->len);
}

/* mean, variance, normalise, scale and shift: about 8 per element; backward 12 */
static double layernorm_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    return 8.0 * (double)dt_model_value_floats(m, op->out, n);
}

static double layernorm_op_flops(const dt_model *m, const dt_op *op, int n) {
    return 20.0 * (double)dt_model_value_floats(m, op->out, n);
}

const dt_op_class dt_layernorm_op = {
    .name = "layernorm",
    .flops = layernorm_op_flops,
    .forward_flops = layernorm_op_forward_flops,
};

const dt_kernel dt_layernorm_f32_kernel = {
    .kind = DT_OP_LAYERNORM,
    .name = "layernorm.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = layernorm_op_plan,
    .alloc = layernorm_op_alloc,
    .free = layernorm_op_free,
    .forward = layernorm_op_forward,
    .backward = layernorm_op_backward,
};

const dt_kernel dt_layernorm_bf16_kernel = {
    .kind = DT_OP_LAYERNORM,
    .name = "layernorm.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = layernorm_op_plan,
    .alloc = layernorm_op_alloc,
    .free = layernorm_op_free,
    .forward = layernorm_op_forward,
    .backward = layernorm_op_backward,
};
