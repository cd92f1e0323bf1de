/* NumPy broadcasting between two operands a and b into an output, as a loop plan made
 * once (at plan time) and walked by the elementwise binary op and ReduceMean: the
 * output's axes with the operands' strides (0 where one broadcasts), adjacent axes
 * merged where the strides allow, so that [N,C,H,W] * [N,C,1,1] is N*C runs of H*W.
 * The walks split their work over threads by ranges, each range's start found by one
 * division per axis; inside a range an odometer steps the indices (no division per
 * element). Every sum has a fixed order, whatever the thread count. */
#ifndef DTRAIN_BROADCAST_H
#define DTRAIN_BROADCAST_H

#include <stddef.h>

#include "dtrain/dtype.h"
#include "dtrain/model.h"

/* Element access for loops written once for f32 and bf16 (bf16: 1): inlined where the
 * flag is a constant, so each instantiation is a plain loop of its own type. Stores
 * round as dtype.h does. */
#define DT_ELEM_INLINE static inline __attribute__((always_inline))
DT_ELEM_INLINE float dt_elem_load(const void *p, size_t i, int bf16) {
    return bf16 ? dt_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
DT_ELEM_INLINE void dt_elem_store(void *p, size_t i, float v, int bf16) {
    if (bf16)
        ((uint16_t *)p)[i] = dt_bf16_from_f32(v);
    else
        ((float *)p)[i] = v;
}

enum { DT_BCAST_MAX_AXES = DT_VALUE_MAX_RANK + 1 };

typedef struct dt_bcast {
    int rank; /* per-sample axes after merging (0: a sample is one element) */
    size_t dims[DT_BCAST_MAX_AXES];
    size_t sa[DT_BCAST_MAX_AXES], sb[DT_BCAST_MAX_AXES]; /* element strides; 0: broadcast */
    /* a sample's elements of a, b and the output; a_sample or b_sample 0: that operand
     * has no batch axis (a tensor: the same for every sample) */
    size_t a_sample, b_sample, out_sample;
} dt_bcast;

/* The plan of out[rank] = a[rank] OP b[rank] (each axis equal, or 1 on one side);
 * a_batched, b_batched: whether each operand has the batch axis. -1 if the shapes do
 * not broadcast. */
int dt_bcast_plan(dt_bcast *p, int rank, const int *a_dims, const int *b_dims, int a_batched,
                  int b_batched);

/* Runs of output elements: `rows` rows of `len`, one after the other in the output from
 * offset o; along a row the operands step by sa and sb (0 or 1) from ia and ib, and from
 * one row to the next by ra and rb (squeeze-and-excitation's [N*C, H*W] is one call of
 * N*C rows, or a thread's share of them). */
typedef struct dt_bcast_run {
    size_t o, ia, ib, len;
    int sa, sb;
    size_t rows, ra, rb;
} dt_bcast_run;
typedef void (*dt_bcast_run_fn)(void *ctx, const dt_bcast_run *r);
/* Every output element of n samples, once (in parallel). */
void dt_bcast_runs(const dt_bcast *p, int n, dt_bcast_run_fn fn, void *ctx);

/* Reductions onto one operand X (b when x_is_b, else a) from the output positions
 * broadcast to each of its elements: the gradient of a broadcast operand, ReduceMean.
 * `sum` adds `rows` runs of `len` output positions, from o and then ro apart, the other
 * operand's from io, rio apart (along a run its elements `so` apart, 0 or 1): into
 * acc[0] when acc_stride is 0 (a run all maps to one X element), else acc[j] for
 * position j (a run maps to as many X elements). `done` gets X's elements e .. e+len-1
 * and their sums (each X element's sum is complete). */
typedef struct dt_bcast_sum_run {
    size_t o, io, len;
    int so, acc_stride;
    size_t rows, ro, rio;
} dt_bcast_sum_run;
typedef void (*dt_bcast_sum_fn)(void *ctx, float *acc, const dt_bcast_sum_run *r);
typedef void (*dt_bcast_done_fn)(void *ctx, size_t e, const float *acc, size_t len);
void dt_bcast_reduce(const dt_bcast *p, int n, int x_is_b, dt_bcast_sum_fn sum,
                     dt_bcast_done_fn done, void *ctx);

/* 1 when operand a (b) has every element of the output (no broadcast, batched): its
 * gradient is then elementwise, at the output's offsets. */
int dt_bcast_full(const dt_bcast *p, int x_is_b);

#endif
