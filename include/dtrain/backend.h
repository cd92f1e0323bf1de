/* Putting a built model on a backend (kernel.h): the CPU one, whose conv2d kernels
 * are oneDNN's or the im2col reference (model->conv_backend) and whose other kernels
 * are the loops beside each op's math in src/nn, in f32, plus the bf16 kernels of
 * --precision bf16.
 *
 * dt_model_alloc decides, in order: each storage's dtype (f32; with bf16 precision,
 * bf16 wherever every op touching it has a bf16 kernel, the model's input and its
 * logits staying f32), each op's kernel (the first of its kind in the table that
 * accepts those dtypes), each storage's layout (nChw16c where every kernel touching it
 * handles it), the pooled gradient buffers; then it sums the memory, refuses a batch
 * that does not fit and allocates. */
#ifndef DTRAIN_BACKEND_H
#define DTRAIN_BACKEND_H

#include "dtrain/error.h"
#include "dtrain/model.h"

/* Allocates every buffer for batches of up to max_batch samples; refuses (with the
 * size it would need) a batch that cannot fit in physical memory. */
int dt_model_alloc(dt_model *m, int max_batch, dt_error *err);

/* The kernels of the CPU backend, in the order they are tried. */
const dt_kernel *const *dt_cpu_kernels(size_t *count);

/* The CPU backend's conv2d kernel (src/exec/exec.c): oneDNN or im2col, the
 * multiplies in bf16 with DT_PRECISION_BF16. */
extern const dt_kernel dt_conv2d_kernel;

#endif
