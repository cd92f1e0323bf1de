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

static inline void concat_body(void *y, const void *const *xs, const int *lens, int count,
                               size_t rows, int inner, int bf16) {
    const size_t es = bf16 ? 2 : 4;
    int total = 0;
    for (int k = 0; k < count; k++) total += lens[k];
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        size_t off = r * (size_t)total * inner;
        for (int k = 0; k < count; k++) {
            const size_t part = (size_t)lens[k] * inner;
            memcpy((char *)y + off * es, (const char *)xs[k] + r * part * es, part * es);
            off += part;
        }
    }
}

static inline void concat_backward_body(void *const *dxs, const void *dy, const int *lens,
                                        int count, size_t rows, int inner, int bf16) {
    int total = 0;
    for (int k = 0; k < count; k++) total += lens[k];
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        size_t off = r * (size_t)total * inner;
        for (int k = 0; k < count; k++) {
            const size_t part = (size_t)lens[k] * inner;
            if (dxs[k])
                for (size_t j = 0; j < part; j++)
                    dt_elem_add(dxs[k], r * part + j, dt_elem_load(dy, off + j, bf16), bf16);
            off += part;
        }
    }
}

void dt_concat_axis_forward(void *y, const void *const *xs, const int *lens, int count,
                            dt_dtype dtype, size_t rows, int inner) {
    if (dtype == DT_BF16)
        concat_body(y, xs, lens, count, rows, inner, 1);
    else
        concat_body(y, xs, lens, count, rows, inner, 0);
}

void dt_concat_axis_backward(void *const *dxs, const void *dy, const int *lens, int count,
                             dt_dtype dtype, size_t rows, int inner) {
    if (dtype == DT_BF16)
        concat_backward_body(dxs, dy, lens, count, rows, inner, 1);
    else
        concat_backward_body(dxs, dy, lens, count, rows, inner, 0);
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

static void concat_axis_lens(const dt_model *m, const dt_op *op, int *lens) {
    for (int k = 0; k < op->n_ins; k++) lens[k] = m->values[op->ins[k]].dims[op->axis];
}

static void concat_axis_op_forward(dt_model *m, dt_op *op, int n) {
    const void *xs[DT_OP_MAX_INPUTS];
    int lens[DT_OP_MAX_INPUTS];
    concat_axis_lens(m, op, lens);
    for (int k = 0; k < op->n_ins; k++) xs[k] = dt_model_value_ptr(m, op->ins[k]);
    dt_concat_axis_forward(dt_model_value_ptr(m, op->out), xs, lens, op->n_ins,
                           dt_model_value_dtype(m, op->out), (size_t)n * op->outer, op->inner);
}

static void concat_axis_op_backward(dt_model *m, dt_op *op, int n) {
    void *dxs[DT_OP_MAX_INPUTS];
    int lens[DT_OP_MAX_INPUTS];
    concat_axis_lens(m, op, lens);
    for (int k = 0; k < op->n_ins; k++) {
        dxs[k] = dt_model_value_grad_ptr(m, op->ins[k]);
        for (int j = 0; j < k; j++) /* the same input twice: its gradient once per use */
            if (dxs[k] && dxs[j] == dxs[k]) {
                void *one[DT_OP_MAX_INPUTS] = {0};
                one[k] = dxs[k];
                dt_concat_axis_backward(one, dt_model_value_grad_ptr(m, op->out), lens, op->n_ins,
                                        dt_model_value_dtype(m, op->out), (size_t)n * op->outer,
                                        op->inner);
                dxs[k] = NULL;
                break;
            }
    }
    dt_concat_axis_backward(dxs, dt_model_value_grad_ptr(m, op->out), lens, op->n_ins,
                            dt_model_value_dtype(m, op->out), (size_t)n * op->outer, op->inner);
}

const dt_op_class dt_concat_axis_op = {.name = "concat_axis"};

const dt_kernel dt_concat_axis_f32_kernel = {
    .kind = DT_OP_CONCAT_AXIS,
    .name = "concat_axis.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = concat_axis_op_forward,
    .backward = concat_axis_op_backward,
};

const dt_kernel dt_concat_axis_bf16_kernel = {
    .kind = DT_OP_CONCAT_AXIS,
    .name = "concat_axis.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .forward = concat_axis_op_forward,
    .backward = concat_axis_op_backward,
};
