/* The CPU backend's kernels for bf16 activations (src/exec/bf16_kernels.c, on the
 * loops and oneDNN primitives of bf16_ops.h), listed in its table (backend.c). */
#ifndef DTRAIN_BF16_KERNELS_H
#define DTRAIN_BF16_KERNELS_H

#include "dtrain/kernel.h"

extern const dt_kernel dt_relu_bf16_kernel, dt_add_bf16_kernel, dt_batchnorm2d_bf16_kernel,
    dt_maxpool2d_bf16_kernel, dt_avgpool2d_bf16_kernel, dt_adaptive_avgpool2d_bf16_kernel,
    dt_dropout_bf16_kernel, dt_concat_bf16_kernel, dt_shortcut_pad_bf16_kernel,
    dt_linear_bf16_kernel, dt_binary_bf16_kernel, dt_binary_bcast_bf16_kernel,
    dt_reduce_mean_bf16_kernel;
/* A ReLU that does nothing: the BatchNorm before it applied it (dt_op.relu_fused). */
extern const dt_kernel dt_relu_fused_kernel;

#endif
