/* Concatenation along one axis (torch.cat): viewed as [outer, total, inner], the output
 * holds the inputs [outer, size_k, inner] one after the other along the middle axis.
 * An image's channels (torch.cat(xs, dim=1)) are outer = n, inner = h * w. Each input
 * is one call of the part functions, so any number of inputs joins without a list. */
#ifndef DTRAIN_CONCAT_H
#define DTRAIN_CONCAT_H

#include <stddef.h>

/* in [outer, size, inner] into out [outer, total, inner] at rows offset .. offset+size. */
void dt_concat_part_forward(float *out, const float *in, size_t outer, int total, int offset,
                            int size, size_t inner);
/* Accumulates (+=) that slice of dout into din. */
void dt_concat_part_backward(float *din, const float *dout, size_t outer, int total, int offset,
                             int size, size_t inner);

/* The channels of count inputs, through the above. */
void dt_concat_forward(float *out,              /* [n, sum(channels), hw] */
                       const float *const *ins, /* count inputs, [n, channels[k], hw] each */
                       const int *channels, int count, int n, int hw);
/* Accumulates (+=) each input's slice of dout into dins[k]; a NULL dins[k] is skipped. */
void dt_concat_backward(float *const *dins, const float *dout, const int *channels, int count,
                        int n, int hw);

/* The model's concat op as the part functions see it: outer = n times the sample's axes
 * before op->axis, total = the output's size along it, inner = the axes after. */
struct dt_model;
struct dt_op;
void dt_concat_op_geometry(const struct dt_model *m, const struct dt_op *op, int n, size_t *outer,
                           int *total, size_t *inner);

#endif
