#include "nn/pad2d.h"

#include <stddef.h>

#include "dtrain/dtype.h"
#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* An element's load and store: fp32 as it is, bf16 converted (rounded to nearest even). */
static inline float load_f32(const void *p, size_t i) {
    return ((const float *)p)[i];
}
static inline void store_f32(void *p, size_t i, float v) {
    ((float *)p)[i] = v;
}
static inline float load_bf16(const void *p, size_t i) {
    return dt_bf16_to_f32(((const uint16_t *)p)[i]);
}
static inline void store_bf16(void *p, size_t i, float v) {
    ((uint16_t *)p)[i] = dt_bf16_from_f32(v);
}

typedef float (*load_fn)(const void *, size_t);
typedef void (*store_fn)(void *, size_t, float);

/* The one forward loop: a plane at a time, each output cell the input's or the value. */
static inline void pad_forward_body(void *out, const void *in, int n, int c, int h, int w,
                                    const int pads[4], float value, load_fn load, store_fn store) {
    const int ho = h + pads[0] + pads[2], wo = w + pads[1] + pads[3];
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const size_t x0 = (size_t)plane * h * w, y0 = (size_t)plane * ho * wo;
        for (int oy = 0; oy < ho; oy++) {
            const int iy = oy - pads[0];
            for (int ox = 0; ox < wo; ox++) {
                const int ix = ox - pads[1];
                const int inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
                store(out, y0 + (size_t)oy * wo + ox,
                      inside ? load(in, x0 + (size_t)iy * w + ix) : value);
            }
        }
    }
}

/* The one backward loop: each input cell gets its output cell's gradient. */
static inline void pad_backward_body(void *din, const void *dout, int n, int c, int h, int w,
                                     const int pads[4], int add, load_fn load, store_fn store) {
    const int ho = h + pads[0] + pads[2], wo = w + pads[1] + pads[3];
#pragma omp parallel for schedule(static)
    for (int plane = 0; plane < n * c; plane++) {
        const size_t x0 = (size_t)plane * h * w, y0 = (size_t)plane * ho * wo;
        for (int iy = 0; iy < h; iy++)
            for (int ix = 0; ix < w; ix++) {
                const size_t i = x0 + (size_t)iy * w + ix;
                const float g = load(dout, y0 + (size_t)(iy + pads[0]) * wo + ix + pads[1]);
                store(din, i, add ? load(din, i) + g : g);
            }
    }
}

void dt_pad2d_forward(float *out, const float *in, int n, int c, int h, int w, const int pads[4],
                      float value) {
    pad_forward_body(out, in, n, c, h, w, pads, value, load_f32, store_f32);
}

void dt_pad2d_backward(float *din, const float *dout, int n, int c, int h, int w, const int pads[4],
                       int add) {
    pad_backward_body(din, dout, n, c, h, w, pads, add, load_f32, store_f32);
}

void dt_bf16_pad2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h, int w,
                           const int pads[4], float value) {
    pad_forward_body(out, in, n, c, h, w, pads, value, load_bf16, store_bf16);
}

void dt_bf16_pad2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h, int w,
                            const int pads[4], int add) {
    pad_backward_body(din, dout, n, c, h, w, pads, add, load_bf16, store_bf16);
}

/* The op in the model graph: pads {top, left, bottom, right} in the window's fields,
 * the value in pad_value. */

static void op_pads(const dt_op *op, int pads[4]) {
    pads[0] = op->pad_top, pads[1] = op->pad_left, pads[2] = op->pad_bottom,
    pads[3] = op->pad_right;
}

/* 1: backward adds into the input's gradient; 0: it writes it (the op is its only
 * reader, planned below). */
static int adds(const dt_model *m, int v) {
    return !m->storages[m->values[v].storage].grad_written;
}

static int pad2d_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    dt_storage *in = &m->storages[m->values[op->in].storage];
    if (in->readers == 1) in->grad_written = 1;
    return 0;
}

static void pad2d_op_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    int pads[4];
    op_pads(op, pads);
    if (dt_model_value_dtype(m, op->out) == DT_BF16)
        dt_bf16_pad2d_forward(dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in), n,
                              x->c, x->h, x->w, pads, op->pad_value);
    else
        dt_pad2d_forward(dt_model_value_data(m, op->out), dt_model_value_data(m, op->in), n, x->c,
                         x->h, x->w, pads, op->pad_value);
}

static void pad2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    void *din = dt_model_value_grad_ptr(m, op->in);
    if (!din) return;
    int pads[4];
    op_pads(op, pads);
    if (dt_model_value_dtype(m, op->in) == DT_BF16)
        dt_bf16_pad2d_backward(din, dt_model_value_grad_ptr(m, op->out), n, x->c, x->h, x->w, pads,
                               adds(m, op->in));
    else
        dt_pad2d_backward(din, dt_model_value_grad(m, op->out), n, x->c, x->h, x->w, pads,
                          adds(m, op->in));
}

/* No FLOPs counted: a copy. */
const dt_op_class dt_pad2d_op = {
    .name = "pad2d",
};

/* The CPU backend's kernels: the loops above, in each element type. */
const dt_kernel dt_pad2d_f32_kernel = {
    .kind = DT_OP_PAD2D,
    .name = "pad2d.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = pad2d_op_plan,
    .forward = pad2d_op_forward,
    .backward = pad2d_op_backward,
};

const dt_kernel dt_pad2d_bf16_kernel = {
    .kind = DT_OP_PAD2D,
    .name = "pad2d.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = pad2d_op_plan,
    .forward = pad2d_op_forward,
    .backward = pad2d_op_backward,
};
