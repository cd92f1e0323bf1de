#include "nn/slice.h"

#include <string.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"
#include "nn/elem.h"

static inline void slice_body(void *y, const void *x, size_t rows, int len, int inner, int start,
                              int count, int step, int bf16) {
    const size_t es = bf16 ? 2 : 4, run = (size_t)inner * es;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (int i = 0; i < count; i++)
            memcpy((char *)y + ((r * count + i) * (size_t)inner) * es,
                   (const char *)x + ((r * len + start + (size_t)i * step) * (size_t)inner) * es,
                   run);
}

static inline void slice_backward_body(void *dx, const void *dy, size_t rows, int len, int inner,
                                       int start, int count, int step, int bf16) {
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (int i = 0; i < count; i++) {
            const size_t from = (r * count + i) * (size_t)inner,
                         to = (r * len + start + (size_t)i * step) * (size_t)inner;
            for (int j = 0; j < inner; j++)
                dt_elem_add(dx, to + j, dt_elem_load(dy, from + j, bf16), bf16);
        }
}

void dt_slice_forward(void *y, const void *x, dt_dtype dtype, size_t rows, int len, int inner,
                      int start, int count, int step) {
    if (dtype == DT_BF16)
        slice_body(y, x, rows, len, inner, start, count, step, 1);
    else
        slice_body(y, x, rows, len, inner, start, count, step, 0);
}

void dt_slice_backward(void *dx, const void *dy, dt_dtype dtype, size_t rows, int len, int inner,
                       int start, int count, int step) {
    if (dtype == DT_BF16)
        slice_backward_body(dx, dy, rows, len, inner, start, count, step, 1);
    else
        slice_backward_body(dx, dy, rows, len, inner, start, count, step, 0);
}

/* The ops in the graph: rows are the batch times the axes before op->axis. */

static void slice_op_forward(dt_model *m, dt_op *op, int n) {
    dt_slice_forward(dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in),
                     dt_model_value_dtype(m, op->in), (size_t)n * op->outer, op->len, op->inner,
                     op->start, op->count, op->step);
}

static void slice_op_backward(dt_model *m, dt_op *op, int n) {
    void *dx = dt_model_value_grad_ptr(m, op->in);
    if (dx)
        dt_slice_backward(dx, dt_model_value_grad_ptr(m, op->out), dt_model_value_dtype(m, op->in),
                          (size_t)n * op->outer, op->len, op->inner, op->start, op->count,
                          op->step);
}

const dt_op_class dt_slice_op = {.name = "slice"};

const dt_kernel dt_slice_f32_kernel = {
    .kind = DT_OP_SLICE,
    .name = "slice.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = slice_op_forward,
    .backward = slice_op_backward,
};

const dt_kernel dt_slice_bf16_kernel = {
    .kind = DT_OP_SLICE,
    .name = "slice.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = slice_op_forward,
    .backward = slice_op_backward,
};
