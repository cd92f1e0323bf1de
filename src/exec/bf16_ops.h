/* bf16 kernels for the layers between convolutions, on raw pointers: activations and
 * their gradients are bf16 (uint16_t, dtype.h's rounding: to nearest even, once per
 * stored value); parameters, their gradients, BatchNorm's statistics and the loss stay
 * fp32. Each kernel has the semantics of its fp32 twin in src/nn (named beside it);
 * arithmetic is fp32 (reductions fp32 per plane, merged in double), so a kernel
 * differs from the fp32 one on the same bf16-valued inputs only by the rounding of
 * what it stores.
 *
 * `blocked`: nChw16c ([n, c/16, h, w, 16], c a multiple of 16) instead of NCHW, for
 * the ops whose fp32 twin has a *_blocked variant. `add`: accumulate into the
 * gradient (din = bf16(din + g), one rounding) instead of writing it (din = bf16(g));
 * the graph writes where the op is the gradient's only writer, sparing its zeroing.
 * Elementwise kernels (conversions, ReLU, add, dropout) do not care about layout. */
#ifndef DTRAIN_BF16_OPS_H
#define DTRAIN_BF16_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/dtype.h"
#include "dtrain/error.h"
#include "nn/dropout.h"
#include "nn/pool2d.h"

/* Bulk conversions for the edges of a bf16 region (the model's f32 input, an f32
 * consumer): out = bf16(in), out = f32(in); and the accumulating forms, acc =
 * bf16(acc + x) and acc += f32(x). Any count; out and in do not overlap. On a CPU with
 * AVX512-BF16 the rounding is its instruction's: dtype.h's, except that denormals
 * (|x| < 2^-126) become signed zeros, as in oneDNN's kernels; so for every bf16 store
 * here that computes a sum (add, the add modes). */
void dt_bf16_from_f32_n(uint16_t *out, const float *in, size_t count);
void dt_bf16_to_f32_n(float *out, const uint16_t *in, size_t count);
void dt_bf16_add_f32_n(uint16_t *acc, const float *x, size_t count);
void dt_f32_add_bf16_n(float *acc, const uint16_t *x, size_t count);

/* dt_relu_*: out = max(in, 0) (NaN gives 0), in place allowed (out == in).
 * Backward: din = out > 0 ? dout : 0, masked by the OUTPUT; din == dout allowed when
 * !add (the in-place graph's case). */
void dt_bf16_relu_forward(uint16_t *out, const uint16_t *in, size_t count);
void dt_bf16_relu_backward(uint16_t *din, const uint16_t *dout, const uint16_t *out, size_t count,
                           int add);

/* dt_residual_add_*: out = bf16(a + b). Backward: da and db get dout (either may be
 * NULL: no gradient wanted), each written or added per its flag. */
void dt_bf16_add_forward(uint16_t *out, const uint16_t *a, const uint16_t *b, size_t count);
void dt_bf16_add_backward(uint16_t *da, uint16_t *db, const uint16_t *dout, size_t count, int add_a,
                          int add_b);

/* dt_batchnorm2d_*: PyTorch's semantics (training normalises with the biased batch
 * variance and updates running_mean/var with `momentum` and the unbiased one; eval
 * uses the running statistics). Forward saves the batch mean and 1/sqrt(var + eps), as
 * the fp32 kernel does, for backward. relu: also
 * apply the ReLU that follows in the graph (out = max(bn(in), 0)), sparing its pass.
 * dweight and dbias accumulate (+=), din (may be NULL) is written or added.
 *
 * The plan (dt_bf16_batchnorm) is what a layer should use: nChw16c runs on oneDNN's
 * bf16 batch normalization (its JIT kernel, ReLU fused through its bit mask; several
 * times these loops at resnet18's shapes, bench/bf16_ops_bench.c), NCHW on the loops
 * below (oneDNN's NCHW kernel is its slow generic one), as does a din that is added
 * to (oneDNN only writes it). */
typedef struct dt_dnnl dt_dnnl;
typedef struct dt_bf16_batchnorm dt_bf16_batchnorm;

int dt_bf16_batchnorm_create(dt_bf16_batchnorm **bn, dt_dnnl *ctx, int max_batch, int c, int hw,
                             int blocked, int relu, float eps, dt_error *err);
void dt_bf16_batchnorm_destroy(dt_bf16_batchnorm *bn);
/* Bytes the plan allocated (the fused ReLU's mask: a bit per element). */
size_t dt_bf16_batchnorm_own_bytes(const dt_bf16_batchnorm *bn);
void dt_bf16_batchnorm_forward_train(dt_bf16_batchnorm *bn, int n, uint16_t *out,
                                     float *save_mean,    /* [c] */
                                     float *save_invstd,  /* [c] */
                                     float *running_mean, /* [c] updated */
                                     float *running_var,  /* [c] updated */
                                     const uint16_t *in, const float *weight, const float *bias,
                                     float momentum);
void dt_bf16_batchnorm_forward_eval(dt_bf16_batchnorm *bn, int n, uint16_t *out, const uint16_t *in,
                                    const float *running_mean, const float *running_var,
                                    const float *weight, const float *bias);
/* After forward_train at batch n; out: what it wrote (the fused ReLU's output). */
void dt_bf16_batchnorm_backward(dt_bf16_batchnorm *bn, int n, uint16_t *din, float *dweight,
                                float *dbias, const uint16_t *dout, const uint16_t *in,
                                const uint16_t *out, const float *save_mean,
                                const float *save_invstd, const float *weight, int add);

/* The loops, on either layout. Backward: relu_out non-NULL is the fused ReLU's output
 * (masked as dt_bf16_relu_backward masks). */
void dt_bf16_batchnorm2d_forward_train(uint16_t *out,       /* [n, c, hw] */
                                       float *save_mean,    /* [c] */
                                       float *save_invstd,  /* [c] */
                                       float *running_mean, /* [c] updated */
                                       float *running_var,  /* [c] updated */
                                       const uint16_t *in,  /* [n, c, hw] */
                                       const float *weight, /* [c] */
                                       const float *bias,   /* [c] */
                                       int n, int c, int hw, float momentum, float eps, int blocked,
                                       int relu);
void dt_bf16_batchnorm2d_forward_eval(uint16_t *out, const uint16_t *in, const float *running_mean,
                                      const float *running_var, const float *weight,
                                      const float *bias, int n, int c, int hw, float eps,
                                      int blocked, int relu);
void dt_bf16_batchnorm2d_backward(uint16_t *din, float *dweight, float *dbias, const uint16_t *dout,
                                  const uint16_t *in, const float *save_mean,
                                  const float *save_invstd, const float *weight,
                                  const uint16_t *relu_out, int n, int c, int hw, int blocked,
                                  int add);

/* dt_maxpool2d_*: padding (-inf) and ceil_mode as pool2d.h, the first maximum wins,
 * NaN wins; argmax: the index into the input plane, laid out as the output (NCHW or,
 * blocked, per channel in nChw16c), as the fp32 kernels keep it. Backward: each input
 * pixel gathers the gradients of the windows whose argmax it is (one rounding). */
void dt_bf16_maxpool2d_forward(uint16_t *out, int32_t *argmax, const uint16_t *in, int n, int c,
                               int h, int w, int kernel, int stride, int pad, int ceil_mode,
                               int blocked);
void dt_bf16_maxpool2d_backward(uint16_t *din, const uint16_t *dout, const int32_t *argmax, int n,
                                int c, int h, int w, int kernel, int stride, int pad, int ceil_mode,
                                int blocked, int add);

/* dt_avgpool2d_*: no padding, floor mode; the input (and din) NCHW or, in_blocked,
 * nChw16c; the output (and dout) NCHW. */
void dt_bf16_avgpool2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h, int w,
                               int kernel, int stride, int in_blocked);
void dt_bf16_avgpool2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h, int w,
                                int kernel, int stride, int in_blocked, int add);

/* dt_avgpool2d_windows_*: any windows (pads, count_include_pad, ceil mode, adaptive). */
void dt_bf16_avgpool2d_windows_forward(uint16_t *out, const uint16_t *in, int n, int c,
                                       const dt_pool_windows *wy, const dt_pool_windows *wx,
                                       int in_blocked);
void dt_bf16_avgpool2d_windows_backward(uint16_t *din, const uint16_t *dout, int n, int c,
                                        const dt_pool_windows *wy, const dt_pool_windows *wx,
                                        int in_blocked, int add);

/* dt_adaptive_avgpool2d_*: the input (and din) NCHW or, in_blocked, nChw16c; the
 * output (and dout) NCHW [n, c, ho, wo]. */
void dt_bf16_adaptive_avgpool2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h,
                                        int w, int ho, int wo, int in_blocked);
void dt_bf16_adaptive_avgpool2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h,
                                         int w, int ho, int wo, int in_blocked, int add);

/* dt_dropout_*: the same mask as the fp32 kernel for the same key (element i kept iff
 * the RNG's uniform at (seed, stream, counter + i) is >= p), out = bf16(in / (1 - p)). */
void dt_bf16_dropout_forward(uint16_t *out, const uint16_t *in, size_t count, float p,
                             dt_dropout_key key);
void dt_bf16_dropout_backward(uint16_t *din, const uint16_t *dout, size_t count, float p,
                              dt_dropout_key key, int add);

/* dt_concat_* on 16-bit elements (copies). add: per input, NULL = add to all; a NULL
 * dins[k] is skipped. The part functions: one input, add 0 writes its gradient. */
void dt_bf16_concat_part_forward(uint16_t *out, const uint16_t *in, size_t outer, int total,
                                 int offset, int size, size_t inner);
void dt_bf16_concat_part_backward(uint16_t *din, const uint16_t *dout, size_t outer, int total,
                                  int offset, int size, size_t inner, int add);
void dt_bf16_concat_forward(uint16_t *out, const uint16_t *const *ins, const int *channels,
                            int count, int n, int hw);
void dt_bf16_concat_backward(uint16_t *const *dins, const uint16_t *dout, const int *channels,
                             int count, int n, int hw, const int *add);

/* dt_shortcut_pad_* on 16-bit elements. */
void dt_bf16_shortcut_pad_forward(uint16_t *out, const uint16_t *in, int n, int c_in, int h, int w,
                                  int c_out, int pad_lo, int stride);
void dt_bf16_shortcut_pad_backward(uint16_t *din, const uint16_t *dout, int n, int c_in, int h,
                                   int w, int c_out, int pad_lo, int stride, int add);

/* A linear layer (out[n, o] = in[n, :] . weight[o, :] + bias[o]) on oneDNN's bf16
 * matmul: bf16 operands, fp32 accumulation; the input and its gradient f32 or bf16
 * (in_dtype), the output and its gradient f32 (logits for the loss) or bf16
 * (out_dtype); fp32 master weight [out_f, in_f] and bias. The plan keeps the weight's
 * bf16 copy, made by forward and reused by backward (the weight must not change in
 * between, as in a training step), and, for an f32 input, the input's bf16 copy; it
 * holds primitives for its largest batch and one other size, as a conv plan does. */
typedef struct dt_bf16_linear dt_bf16_linear;

int dt_bf16_linear_create(dt_bf16_linear **lin, dt_dnnl *ctx, int max_batch, int in_f, int out_f,
                          int has_bias, dt_dtype in_dtype, dt_dtype out_dtype, dt_error *err);
void dt_bf16_linear_destroy(dt_bf16_linear *lin);
/* Bytes the plan allocated (bf16 copies, primitives' scratchpads not counted). */
size_t dt_bf16_linear_own_bytes(const dt_bf16_linear *lin);
/* n <= max_batch. in: [n, in_f] of in_dtype; out: [n, out_f] of out_dtype. */
void dt_bf16_linear_forward(dt_bf16_linear *lin, int n, void *out, const void *in,
                            const float *weight, const float *bias);
/* dweight (+=), dbias (+=, may be NULL), din (may be NULL; written or added). in and
 * weight: those of the last forward at batch n, unchanged. */
void dt_bf16_linear_backward(dt_bf16_linear *lin, int n, void *din, float *dweight, float *dbias,
                             const void *dout, const void *in, int add);

#endif
