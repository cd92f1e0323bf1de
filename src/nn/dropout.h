/* Dropout with PyTorch's semantics (training): each element is zeroed with probability
 * p and the kept ones are scaled by 1/(1-p), so the expectation is the input. The mask
 * is not stored: element i keeps iff the counter-based RNG's uniform at (seed, stream,
 * counter + i) is >= p, so backward regenerates the forward's mask and any call repeats
 * from its three numbers. (Eval mode, the identity, is the op's business.) */
#ifndef DTRAIN_DROPOUT_H
#define DTRAIN_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

/* The mask's random numbers, as passed to forward and backward. */
typedef struct dt_dropout_key {
    uint64_t seed, stream, counter;
} dt_dropout_key;

void dt_dropout_forward(float *out,      /* [count] */
                        const float *in, /* [count] */
                        size_t count, float p, dt_dropout_key key);
/* Accumulates (+=) dout through the same mask into din. */
void dt_dropout_backward(float *din, const float *dout, size_t count, float p, dt_dropout_key key);

/* The key of a dropout op of a model in its present training forward (every
 * dtype's kernel uses it, so f32 and bf16 drop the same elements). */
typedef struct dt_model dt_model;
typedef struct dt_op dt_op;
dt_dropout_key dt_dropout_op_key(const dt_model *m, const dt_op *op);

#endif
