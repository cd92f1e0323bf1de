#include "nn/transpose.h"

#include <stdint.h>

#include "dtrain/dtype.h"
#include "dtrain/model.h"

/* with the batch axis: the value's rank + 1 */
enum { MAX_AXES = DT_VALUE_MAX_RANK + 1, TILE = 16 };

/* The permutation as the loops run it: axes of size 1 dropped, and input axes that
 * stay neighbours in the output merged into one (channel shuffle's
 * [N, g, C/g, H, W] -> (0, 2, 1, 3, 4) is [N, g, C/g, H*W] -> (0, 2, 1, 3)). */
typedef struct moves {
    int rank;
    size_t dims[MAX_AXES]; /* input axes */
    int perm[MAX_AXES];    /* output axis j is input axis perm[j] */
    size_t in_stride[MAX_AXES], out_stride[MAX_AXES];
} moves;

static void plan_moves(moves *mv, int n, int rank, const int *dims, const int *perm) {
    size_t d[MAX_AXES];
    int p[MAX_AXES], keep[MAX_AXES], renum[MAX_AXES];
    d[0] = (size_t)n, p[0] = 0;
    for (int i = 0; i < rank; i++) d[i + 1] = (size_t)dims[i], p[i + 1] = perm[i] + 1;
    const int axes = rank + 1;
    int kept = 0; /* input axes of more than one element, renumbered */
    for (int i = 0; i < axes; i++) {
        keep[i] = d[i] > 1;
        renum[i] = keep[i] ? kept++ : -1;
    }
    size_t kd[MAX_AXES];
    int kp[MAX_AXES], nk = 0;
    for (int i = 0; i < axes; i++)
        if (keep[i]) kd[renum[i]] = d[i];
    for (int j = 0; j < axes; j++)
        if (keep[p[j]]) kp[nk++] = renum[p[j]];
    if (nk == 0) kd[0] = 1, kp[0] = 0, nk = 1;
    /* runs of output axes whose input axes are consecutive: one axis each */
    int start[MAX_AXES], len[MAX_AXES], groups = 0;
    for (int j = 0; j < nk; j++) {
        if (groups && kp[j] == kp[j - 1] + 1) {
            len[groups - 1]++;
        } else {
            start[groups] = kp[j];
            len[groups++] = 1;
        }
    }
    /* a group's input position: how many groups start before it in the input */
    mv->rank = groups;
    for (int g = 0; g < groups; g++) {
        int pos = 0;
        for (int o = 0; o < groups; o++) pos += start[o] < start[g];
        size_t size = 1;
        for (int a = start[g]; a < start[g] + len[g]; a++) size *= kd[a];
        mv->dims[pos] = size;
        mv->perm[g] = pos;
    }
    size_t s = 1;
    for (int i = groups - 1; i >= 0; i--) mv->in_stride[i] = s, s *= mv->dims[i];
    s = 1;
    for (int j = groups - 1; j >= 0; j--) mv->out_stride[j] = s, s *= mv->dims[mv->perm[j]];
}

/* One element moved: written, or added (bf16: rounded once, as dtype.h rounds). */
static inline __attribute__((always_inline)) void put(void *out, size_t o, const void *in, size_t i,
                                                      int bf16, int add) {
    if (bf16) {
        uint16_t *y = out;
        const uint16_t *x = in;
        y[o] = add ? dt_bf16_from_f32(dt_bf16_to_f32(y[o]) + dt_bf16_to_f32(x[i])) : x[i];
    } else {
        float *y = out;
        const float *x = in;
        y[o] = add ? y[o] + x[i] : x[i];
    }
}

/* The output position of outer index q over the output axes but `skip_a` and
 * `skip_b` (-1: none), and the matching input offset. */
static inline void outer_offsets(const moves *mv, size_t q, int skip_a, int skip_b, size_t *in_off,
                                 size_t *out_off) {
    size_t io = 0, oo = 0;
    for (int j = mv->rank - 1; j >= 0; j--) {
        if (j == skip_a || j == skip_b) continue;
        const size_t size = mv->dims[mv->perm[j]], idx = q % size;
        q /= size;
        io += idx * mv->in_stride[mv->perm[j]];
        oo += idx * mv->out_stride[j];
    }
    *in_off = io;
    *out_off = oo;
}

/* The loop, once for both element types (bf16 and add are constants at each call). */
static inline __attribute__((always_inline)) void
transpose_body(void *out, const void *in, const moves *mv, int bf16, int add) {
    const int last = mv->rank - 1;
    size_t total = 1;
    for (int i = 0; i < mv->rank; i++) total *= mv->dims[i];
    if (mv->perm[last] == last) {
        /* the innermost axis stays: rows copied whole */
        const size_t row = mv->dims[last], rows = total / row;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < rows; q++) {
            size_t io, oo;
            outer_offsets(mv, q, last, -1, &io, &oo);
            for (size_t t = 0; t < row; t++) put(out, oo + t, in, io + t, bf16, add);
        }
        return;
    }
    /* the output's innermost axis is input axis a; the input's innermost (last) is
     * output axis jb: TILE x TILE blocks of the two, so reads and writes both stay in
     * cache lines */
    const int a = mv->perm[last];
    int jb = 0;
    while (mv->perm[jb] != last) jb++;
    const size_t na = mv->dims[a], nb = mv->dims[last], blocks = total / (na * nb);
    const size_t sa = mv->in_stride[a], sb = mv->out_stride[jb];
#pragma omp parallel for schedule(static)
    for (size_t q = 0; q < blocks; q++) {
        size_t io, oo;
        outer_offsets(mv, q, last, jb, &io, &oo);
        for (size_t b0 = 0; b0 < nb; b0 += TILE)
            for (size_t a0 = 0; a0 < na; a0 += TILE) {
                const size_t b1 = b0 + TILE < nb ? b0 + TILE : nb,
                             a1 = a0 + TILE < na ? a0 + TILE : na;
                for (size_t b = b0; b < b1; b++)
                    for (size_t k = a0; k < a1; k++)
                        put(out, oo + b * sb + k, in, io + k * sa + b, bf16, add);
            }
    }
}

void dt_transpose_run(void *out, const void *in, int n, int rank, const int *dims, const int *perm,
                      int add, size_t elem_bytes) {
    moves mv;
    plan_moves(&mv, n, rank, dims, perm);
    if (elem_bytes == 2)
        add ? transpose_body(out, in, &mv, 1, 1) : transpose_body(out, in, &mv, 1, 0);
    else
        add ? transpose_body(out, in, &mv, 0, 1) : transpose_body(out, in, &mv, 0, 0);
}

/* ------------------------------------------------------------------ the op */

static void transpose_forward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    dt_transpose_run(dt_model_value_ptr(m, op->out), dt_model_value_ptr(m, op->in), n, x->rank,
                     x->dims, op->perm, 0, dt_dtype_size(dt_model_value_dtype(m, op->in)));
}

/* din (+)= dout moved back: the output's axes through the inverse permutation. */
static void transpose_backward(dt_model *m, dt_op *op, int n) {
    void *din = dt_model_value_grad_ptr(m, op->in);
    if (!din) return;
    const dt_value *y = &m->values[op->out];
    int inverse[DT_VALUE_MAX_RANK];
    for (int d = 0; d < y->rank; d++) inverse[op->perm[d]] = d;
    const int add = !m->storages[m->values[op->in].storage].grad_written;
    dt_transpose_run(din, dt_model_value_grad_ptr(m, op->out), n, y->rank, y->dims, inverse, add,
                     dt_dtype_size(dt_model_value_dtype(m, op->in)));
}

/* The only reader of its input writes the input's gradient (no zeroing pass). */
static int transpose_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err) {
    (void)max_batch, (void)bytes, (void)err;
    dt_storage *s = &m->storages[m->values[op->in].storage];
    if (s->readers == 1) s->grad_written = 1;
    return 0;
}

/* No FLOPs counted: the counts are conv and linear multiply-adds. */
const dt_op_class dt_transpose_op = {
    .name = "transpose",
};

const dt_kernel dt_transpose_f32_kernel = {
    .kind = DT_OP_TRANSPOSE,
    .name = "transpose.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = transpose_plan,
    .forward = transpose_forward,
    .backward = transpose_backward,
};

const dt_kernel dt_transpose_bf16_kernel = {
    .kind = DT_OP_TRANSPOSE,
    .name = "transpose.bf16",
    .dtype = DT_BF16,
    .layouts = DT_OP_PLAIN_ONLY,
    .plan = transpose_plan,
    .forward = transpose_forward,
    .backward = transpose_backward,
};
