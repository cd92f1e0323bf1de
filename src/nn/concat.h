/* Channel concatenation (torch.cat(xs, dim=1)), NCHW: each sample's output holds the
 * inputs' channels one after the other; all inputs share the spatial size hw. */
#ifndef DTRAIN_CONCAT_H
#define DTRAIN_CONCAT_H

void dt_concat_forward(float *out,              /* [n, sum(channels), hw] */
                       const float *const *ins, /* count inputs, [n, channels[k], hw] each */
                       const int *channels, int count, int n, int hw);
/* Accumulates (+=) each input's slice of dout into dins[k]; a NULL dins[k] is skipped. */
void dt_concat_backward(float *const *dins, const float *dout, const int *channels, int count,
                        int n, int hw);

#endif
