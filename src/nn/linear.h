/* Fully connected layer: out[n, o] = sum_i in[n, i] * weight[o, i] + bias[o].
 * Row-major flat arrays; weight is [out, in] as in PyTorch. */
#ifndef DTRAIN_LINEAR_H
#define DTRAIN_LINEAR_H

#include <stddef.h>

/* Floats of scratch dt_linear_forward uses for these shapes; 0: it needs none. */
size_t dt_linear_scratch_floats(int n, int in_f, int out_f);

/* scratch: dt_linear_scratch_floats(n, in_f, out_f) floats, or NULL (the same result
 * computed another way, slower for shapes that want scratch). */
void dt_linear_forward(float *out,          /* [n, out_f] */
                       const float *in,     /* [n, in_f] */
                       const float *weight, /* [out_f, in_f] */
                       const float *bias,   /* [out_f] or NULL */
                       int n, int in_f, int out_f, float *scratch);

/* Accumulates (+=) into dweight, dbias and din; din or dbias may be NULL. */
void dt_linear_backward(float *din,          /* [n, in_f] or NULL */
                        float *dweight,      /* [out_f, in_f] */
                        float *dbias,        /* [out_f] or NULL */
                        const float *dout,   /* [n, out_f] */
                        const float *in,     /* [n, in_f] */
                        const float *weight, /* [out_f, in_f] */
                        int n, int in_f, int out_f);

/* A linear op's GEMM for a batch of n: its rows (n, or n times the positions of a
 * linear over the last axis) and features. */
typedef struct dt_model dt_model;
typedef struct dt_op dt_op;
void dt_linear_op_geometry(const dt_model *m, const dt_op *op, int n, int *rows, int *in_f,
                           int *out_f);

#endif
