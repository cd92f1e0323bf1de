/* conv2d on oneDNN (the library PyTorch uses for CPU convolutions): same semantics
 * and OIHW weights as dt_conv2d_*, computed by oneDNN's direct convolution in its
 * blocked layouts. Activations the model keeps in nChw16c (io) go in and out as they
 * are; NCHW ones and the weights are reordered into shared scratch buffers and back,
 * as PyTorch does for NCHW tensors.
 *
 * A plan holds the primitives of one layer for the batch sizes it has seen (the
 * full batch and one other, e.g. the last partial batch). */
#ifndef DTRAIN_CONV2D_DNNL_H
#define DTRAIN_CONV2D_DNNL_H

#include <stddef.h>

#include "dtrain/error.h"
#include "exec/exec.h"
#include "nn/conv2d.h"

typedef struct dt_dnnl dt_dnnl;               /* engine + stream, one per model */
typedef struct dt_conv2d_plan dt_conv2d_plan; /* one per conv layer */

/* act slot DT_DNNL_COL_SLOT holds the unfolded input of a weight gradient computed as
 * a matmul (conv2d_dnnl.c's use_matmul_bwd_weights). */
enum { DT_DNNL_ACT_SLOTS = 4, DT_DNNL_WEIGHT_SLOTS = 3, DT_DNNL_COL_SLOT = 3 };

/* Scratch shared by all conv layers of a model (blocked copies of activations and
 * weights); a plan reports how many bytes of each slot it needs. */
typedef struct dt_dnnl_scratch {
    void *act[DT_DNNL_ACT_SLOTS];
    void *weight[DT_DNNL_WEIGHT_SLOTS];
    size_t act_bytes[DT_DNNL_ACT_SLOTS], weight_bytes[DT_DNNL_WEIGHT_SLOTS];
} dt_dnnl_scratch;

int dt_dnnl_create(dt_dnnl **ctx, dt_error *err);
void dt_dnnl_destroy(dt_dnnl *ctx);
/* s->n is the largest batch; adds this layer's needs to scratch's *_bytes (max). */
/* io: the activations' layouts and types (exec.h); NULL: NCHW f32, accumulating.
 * bf16: multiply in bf16 (f32 src, weights and diff_dst converted on the way in; bf16
 * activations read as they are); results of the activations' types (a bf16 output or
 * input gradient is written by the primitive itself, except an input gradient added
 * to, which goes through an fp32 scratch and one rounding), fp32 weight gradients. */
int dt_conv2d_plan_create(dt_conv2d_plan **plan, dt_dnnl *ctx, const dt_conv2d_shape *s,
                          int has_bias, const dt_exec_conv2d_io *io, int bf16,
                          dt_dnnl_scratch *needs, dt_error *err);
void dt_conv2d_plan_destroy(dt_conv2d_plan *plan);
/* Bytes of the plan's own buffer (the forward's converted input, kept for backward:
 * see dt_conv2d_plan_backward), and its allocation, after the model's memory check;
 * a plan never allocated converts the input twice instead. */
size_t dt_conv2d_plan_own_bytes(const dt_conv2d_plan *plan);
/* 1 when the plan computes the weight gradient as a bf16 matmul of the unfolded input
 * (small output planes, bf16 nChw16c input; conv2d_dnnl.c), 0 for oneDNN's
 * convolution primitive. */
int dt_conv2d_plan_wgrad_is_matmul(const dt_conv2d_plan *plan);
/* oneDNN's implementation of the full batch's forward (pass 0), input gradient (1) and
 * weight gradient (2), e.g. "brg:avx512_core" or "jit:avx512_core_bf16"; "matmul" for a
 * weight gradient computed as a matmul; "" if unknown. */
const char *dt_conv2d_plan_impl(const dt_conv2d_plan *plan, int pass);
int dt_conv2d_plan_alloc(dt_conv2d_plan *plan, dt_error *err);

/* Forward for n <= the plan's batch; out and in (and din, dout below) of the types
 * io gave (float or uint16_t bf16). Exits with a message if oneDNN fails at run
 * time (it only fails on out-of-memory there). */
void dt_conv2d_plan_forward(dt_conv2d_plan *plan, const dt_dnnl_scratch *scratch, int n, void *out,
                            const void *in, const float *weight, const float *bias);
/* Accumulates (+=) into din (may be NULL), dweight and dbias (may be NULL). `in` must
 * be the input of this plan's last forward at batch n, unchanged: where the forward
 * converted it (to bf16, or from NCHW to blocked) and the plan is allocated, the
 * weight gradient reads that copy rather than converting `in` again. */
void dt_conv2d_plan_backward(dt_conv2d_plan *plan, const dt_dnnl_scratch *scratch, int n, void *din,
                             float *dweight, float *dbias, const void *dout, const void *in,
                             const float *weight);

#endif
