/* The int8 engine: a quantized network (quant.h) on oneDNN's int8 primitives, which
 * run on the CPU's integer dot-product units (AVX-512 VNNI here): s8 weights, u8 (after
 * a ReLU) or s8 activations in NHWC between layers, s32 accumulators and biases,
 * requantized by each primitive's output scales, the fused residual add as a sum
 * post-op (conv2 writes over its shortcut's integers), the lab's [0, 127] clamp as a
 * clip post-op; the input quantized by a reorder with the input's scale. It computes
 * the integers of the float emulation (qemu.h), up to the rare half-way case that a
 * fused multiply-add rounds the other way. Primitives exist for the full batch and for
 * one other size (the last, partial batch), built when first needed. */
#ifndef DTRAIN_INT8_DNNL_H
#define DTRAIN_INT8_DNNL_H

#include <stddef.h>

#include "dtrain/error.h"
#include "quant/quant.h"

typedef struct dt_int8_dnnl dt_int8_dnnl;

/* Whether oneDNN computes q's integers exactly on this CPU (core/cpu_isa: capped by
 * ONEDNN_MAX_CPU_ISA). With AVX512-VNNI always; without, its kernels sum pairs of u8 x s8
 * products in 16 bits with saturation (vpmaddubsw) and halve the weights of a layer
 * with a signed input (rounding them), so every layer must read u8 integers of at most
 * 7 bits or s8 ones with even weights: a reduced range (quant.h). If not, `why` gets
 * the first layer that breaks it. */
int dt_int8_dnnl_exact_here(const dt_qnet *q, char *why, size_t why_size);

/* The names of oneDNN implementations layer o of q must not run on this CPU
 * (NULL-terminated; NULL: none): without VNNI, GEMM ones for a signed input and the
 * 1x1 kernel for a strided 1x1 convolution. */
const char *const *dt_int8_dnnl_avoided(const dt_qnet *q, const dt_qop *o);

/* q must outlive the engine. Refused, with the reason, where it would not be exact
 * (dt_int8_dnnl_exact_here). */
int dt_int8_dnnl_create(dt_int8_dnnl **e, const dt_qnet *q, int max_batch, dt_error *err);
void dt_int8_dnnl_destroy(dt_int8_dnnl *e);
/* x: [n, c, h, w] normalised floats, n <= max_batch. Exits with a message if oneDNN
 * fails at run time (only out of memory can make it fail there). */
void dt_int8_dnnl_forward(dt_int8_dnnl *e, const float *x, int n);
/* [n, classes] after forward: float logits, or int8 ones divided by their scale. */
const float *dt_int8_dnnl_logits(const dt_int8_dnnl *e);
/* A value's integers after the last forward, [n, h, w, c] (NHWC); NULL if the block
 * output fused onto them has overwritten them. For tests. */
const void *dt_int8_dnnl_value(const dt_int8_dnnl *e, int value);
/* Bytes of activations and reordered weights it holds (for the memory comparison). */
size_t dt_int8_dnnl_bytes(const dt_int8_dnnl *e);

#endif
