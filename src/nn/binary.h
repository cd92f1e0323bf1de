/* The elementwise binary op out = a OP b (add, sub, mul, div; model.h's dt_binary_func)
 * with NumPy broadcasting: a is an activation; b an activation (both batched), a
 * parameter (op->weight) or a constant scalar (op->scalar), the same for every sample. Its loops
 * are written once over an element load and store and instantiated for f32 and bf16 activations;
 * the CPU backend's f32 kernels are binary.c's, its bf16 ones (bf16_kernels.c) run the
 * same functions. */
#ifndef DTRAIN_BINARY_H
#define DTRAIN_BINARY_H

#include <stddef.h>

#include "dtrain/error.h"
#include "dtrain/model.h"

/* 1 when the op broadcasts nothing (equal shapes, or a scalar operand): it is then
 * elementwise in any layout. */
int dt_binary_is_elementwise(const dt_model *m, const dt_op *op);
/* 1 when the op runs in either layout (the same for its operands and output): it is
 * elementwise, or an image [C, H, W] and a per-channel operand [C, 1, 1] (squeeze-and-
 * excitation, layer scale), which in nChw16c are blocks of 16 channels. */
int dt_binary_any_layout(const dt_model *m, const dt_op *op);

/* A kernel's functions: the plan (its broadcast, op->state), forward and backward on the
 * op's activations in their dtype (f32 or bf16). Backward adds into the gradients. */
int dt_binary_kernel_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes, dt_error *err);
void dt_binary_kernel_free(dt_model *m, dt_op *op);
void dt_binary_kernel_forward(dt_model *m, dt_op *op, int n);
void dt_binary_kernel_backward(dt_model *m, dt_op *op, int n);

#endif
