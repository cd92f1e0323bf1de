/* The elementwise activations: one op kind (DT_OP_ACTIVATION, op.h) whose function is
 * one of these, with up to two float parameters. Each computes as PyTorch's function
 * of that name, forward and backward (src/nn/activation.c), on values of any shape. */
#ifndef DTRAIN_ACTIVATION_H
#define DTRAIN_ACTIVATION_H

typedef enum dt_activation_fn {
    DT_ACT_CLIP,        /* min(max(x, a), b), PyTorch's hardtanh: ReLU6 is (0, 6) */
    DT_ACT_SIGMOID,     /* 1 / (1 + exp(-x)) */
    DT_ACT_HARDSIGMOID, /* max(0, min(1, a x + b)): PyTorch's a = 1/6, b = 1/2 */
    DT_ACT_HARDSWISH,   /* x * min(max(x + 3, 0), 6) / 6 */
    DT_ACT_TANH,
    DT_ACT_LEAKY_RELU, /* x > 0 ? x : a x */
    DT_ACT_GELU,       /* x * (1 + erf(x / sqrt 2)) / 2 */
    DT_ACT_GELU_TANH,  /* x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 */
    DT_ACT_SILU,       /* x * sigmoid(x) (PyTorch's SiLU, "swish") */
    DT_ACT_COUNT
} dt_activation_fn;

/* A function and its parameters (unused ones 0). */
typedef struct dt_activation {
    dt_activation_fn fn;
    float a, b;
} dt_activation;

/* "clip", "sigmoid", ...; NULL for a value out of range. */
const char *dt_activation_name(dt_activation_fn fn);
/* 1 when the derivative follows from the output alone, so the op may overwrite its
 * input: clip, sigmoid, hardsigmoid, tanh, leaky_relu of a slope >= 0. */
int dt_activation_runs_in_place(dt_activation act);

#endif
