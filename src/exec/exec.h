/* The execution context of a model: the backend state that computes its ops, kept
 * apart from the graph (model.h), which only holds an opaque pointer to it. This
 * module is the fp32 backend: conv2d on oneDNN (engine + stream, one plan per layer,
 * blocked scratch shared by all layers) or on the im2col reference (one shared
 * workspace). Ops ask the model's context for their plans; a number format (int8,
 * bf16) would be a sibling module in src/exec/, chosen per model at build time.
 *
 * Life cycle: create, plan every layer (each plan reports its scratch), size and
 * allocate the shared scratch, then run; hot calls allocate nothing. */
#ifndef DTRAIN_EXEC_H
#define DTRAIN_EXEC_H

#include <stddef.h>

#include "dtrain/dtype.h"
#include "dtrain/error.h"
#include "dtrain/model.h"
#include "nn/conv2d.h"

typedef struct dt_exec dt_exec;               /* one per model */
typedef struct dt_exec_conv2d dt_exec_conv2d; /* one per conv2d layer */

/* DT_PRECISION_BF16 needs the oneDNN backend and a CPU with bf16 support (the error
 * says which is missing). */
int dt_exec_create(dt_exec **exec, dt_conv_backend conv_backend, dt_precision precision,
                   dt_error *err);
/* Destroy every plan first: oneDNN plans hold the context's engine. */
void dt_exec_destroy(dt_exec *exec);
/* The oneDNN engine and stream (NULL on im2col), for other oneDNN kernels' plans. */
typedef struct dt_dnnl dt_dnnl;
dt_dnnl *dt_exec_dnnl(dt_exec *exec);

/* Where a conv layer's activations live (the model's layout pass decides). */
typedef struct dt_exec_conv2d_io {
    int in_blocked, out_blocked; /* nChw16c (oneDNN only) instead of NCHW, data and grad */
    int din_sole_writer;         /* din is zero on entry and no other op adds to it: the conv may
                                    write it instead of adding (saves a pass over it) */
    /* The type of the input's data and gradient, and of the output's: DT_F32 (0, the
     * default) or DT_BF16 (oneDNN only). */
    dt_dtype in_dtype, out_dtype;
} dt_exec_conv2d_io;

/* Plans a conv2d layer for batches of up to s->n and grows the shared scratch to
 * what it needs. io NULL: NCHW, accumulating. */
int dt_exec_conv2d_plan(dt_exec *exec, const dt_conv2d_shape *s, int has_bias,
                        const dt_exec_conv2d_io *io, dt_exec_conv2d **conv, dt_error *err);
void dt_exec_conv2d_destroy(dt_exec_conv2d *conv);
/* Bytes the layer's plan keeps of its own (beyond the shared scratch), and their
 * allocation once the model has checked that everything fits. */
size_t dt_exec_conv2d_own_bytes(const dt_exec_conv2d *conv);
int dt_exec_conv2d_alloc(dt_exec_conv2d *conv, dt_error *err);
/* 1 when the layer's backward writes din rather than adding to it (oneDNN, with
 * io->din_sole_writer; the im2col reference always adds). */
int dt_exec_conv2d_writes_din(const dt_exec_conv2d *conv);

/* Bytes of the shared scratch the planned layers need; then allocates it (once,
 * after the last plan). */
size_t dt_exec_scratch_bytes(const dt_exec *exec);
int dt_exec_alloc_scratch(dt_exec *exec, dt_error *err);

/* n <= the planned batch. Same buffers and semantics as dt_conv2d_forward. */
/* out, in (and din, dout): of the dtypes the plan's io gave. */
void dt_exec_conv2d_forward(dt_exec *exec, dt_exec_conv2d *conv, int n, void *out, const void *in,
                            const float *weight, const float *bias);
/* Accumulates (+=) into din, dweight, dbias; din or dbias may be NULL. */
void dt_exec_conv2d_backward(dt_exec *exec, dt_exec_conv2d *conv, int n, void *din, float *dweight,
                             float *dbias, const void *dout, const void *in, const float *weight);

#endif
