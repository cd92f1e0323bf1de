#include "nn/softmax.h"

#include <math.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/elem.h"

/* One column: len values at x + base, stride inner. The last axis (inner 1), the
 * attention's case, is contiguous and its loops vectorise. */
static inline void softmax_column(void *y, const void *x, size_t base, int len, size_t inner,
                                  int log_softmax, int bf16) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int l = 0; l < len; l++) mx = fmaxf(mx, dt_elem_load(x, base + l * inner, bf16));
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int l = 0; l < len; l++) sum += expf(dt_elem_load(x, base + l * inner, bf16) - mx);
    if (log_softmax) {
        /* (x - max) - log(sum), not x - (max + log(sum)): a max of 1e4 would round the
         * sum's log to its ulp there (ONNX's large_number case) */
        const float log_sum = logf(sum);
#pragma omp simd
        for (int l = 0; l < len; l++)
            dt_elem_store(y, base + l * inner,
                          (dt_elem_load(x, base + l * inner, bf16) - mx) - log_sum, bf16);
    } else {
        const float scale = 1.0f / sum;
#pragma omp simd
        for (int l = 0; l < len; l++)
            dt_elem_store(y, base + l * inner,
                          expf(dt_elem_load(x, base + l * inner, bf16) - mx) * scale, bf16);
    }
}

static inline void softmax_column_backward(void *dx, const void *dy, const void *y, size_t base,
                                           int len, size_t inner, int log_softmax, int bf16) {
    float dot = 0.0f; /* softmax: sum dy * y; log-softmax: sum dy */
#pragma omp simd reduction(+ : dot)
    for (int l = 0; l < len; l++) {
        const size_t i = base + l * inner;
        dot += dt_elem_load(dy, i, bf16) * (log_softmax ? 1.0f : dt_elem_load(y, i, bf16));
    }
#pragma omp simd
    for (int l = 0; l < len; l++) {
        const size_t i = base + l * inner;
        const float g = dt_elem_load(dy, i, bf16), yi = dt_elem_load(y, i, bf16);
        dt_elem_add(dx, i, log_softmax ? g - expf(yi) * dot : yi * (g - dot), bf16);
    }
}

static inline void softmax_body(void *y, const void *x, size_t rows, int len, int inner,
                                int log_softmax, int bf16) {
    if (inner == 1) { /* the last axis: the column loops with a constant stride of 1 */
#pragma omp parallel for schedule(static)
        for (size_t r = 0; r < rows; r++)
            softmax_column(y, x, r * (size_t)len, len, 1, log_softmax, bf16);
        return;
    }
    const size_t columns = rows * (size_t)inner;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < columns; c++) {
        const size_t r = c / (size_t)inner, i = c % (size_t)inner;
        softmax_column(y, x, r * (size_t)len * inner + i, len, (size_t)inner, log_softmax, bf16);
    }
}

static inline void softmax_backward_body(void *dx, const void *dy, const void *y, size_t rows,
                                         int len, int inner, int log_softmax, int bf16) {
    if (inner == 1) {
#pragma omp parallel for schedule(static)
        for (size_t r = 0; r < rows; r++)
            softmax_column_backward(dx, dy, y, r * (size_t)len, len, 1, log_softmax, bf16);
        return;
    }
    const size_t columns = rows * (size_t)inner;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < columns; c++) {
        const size_t r = c / (size_t)inner, i = c % (size_t)inner;
        softmax_column_backward(dx, dy, y, r * (size_t)len * inner + i, len, (size_t)inner,
                                log_softmax, bf16);
    }
}

void dt_softmax_forward(void *y, const void *x, dt_dtype dtype, size_t rows, int len, int inner,
                        int log_softmax) {
    if (dtype == DT_BF16)
        softmax_body(y, x, rows, len, inner, log_softmax, 1);
    else
        softmax_body(y, x, rows, len, inner, log_softmax, 0);
}

void dt_softmax_backward(void *dx, const void *dy, const void *y, dt_dtype dtype, size_t rows,
                         int len, int inner, int log_softmax) {
    if (dtype == DT_BF16)
        softmax_backward_body(dx, dy, y, rows, len, inner, log_softmax, 1);
    else
        softmax_backward_body(dx, dy, y, rows, len, inner, log_softmax, 0);
}

/* The op in the graph: rows are the batch times the axes before op->axis. */

static void softmax_op_forward(dt_model *m, dt_op *op, int n) {
    dt_softmax_forward(dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                       dt_model_value_dtype(m, op->in), (size_t)n * (size_t)op->outer, op->len,
                       op->inner, op->log_softmax);
}

static void softmax_op_backward(dt_model *m, dt_op *op, int n) {
    void *dx = dt_model_value_grad_ptr(m, op->in);
    if (!dx) return;
    dt_softmax_backward(dx, dt_model_value_grad_ptr(m, op->out), dt_model_value_ptr(m, op->out),
                        dt_model_value_dtype(m, op->in), (size_t)n * (size_t)op->outer, op->len,
                        op->inner, op->log_softmax);
}

/* max, subtract + exp, sum, scale: about 5 per element forward, 4 backward */
static double softmax_op_forward_flops(const dt_model *m, const dt_op *op, int n) {
    return 5.0 * (double)dt_model_value_floats(m, op->out, n);
}

static double softmax_op_flops(const dt_model *m, const dt_op *op, int n) {
    return softmax_op_forward_flops(m, op, n) + 4.0 * (double)dt_model_value_floats(m, op->out, n);
}

const dt_op_class dt_softmax_op = {
    .name = "softmax",
    .flops = softmax_op_flops,
    .forward_flops = softmax_op_forward_flops,
};

const dt_kernel dt_softmax_f32_kernel = {
    .kind = DT_OP_SOFTMAX,
    .name = "softmax.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = softmax_op_forward,
    .backward = softmax_op_backward,
};

const dt_kernel dt_softmax_bf16_kernel = {
    .kind = DT_OP_SOFTMAX,
    .name = "softmax.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = softmax_op_forward,
    .backward = softmax_op_backward,
};
