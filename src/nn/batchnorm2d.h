/* Batch normalisation over (N, H, W) per channel, PyTorch semantics: training mode
 * normalises with the biased batch variance and updates running stats with
 * `momentum` using the unbiased variance; eval mode uses the running stats. */
#ifndef DTRAIN_BATCHNORM2D_H
#define DTRAIN_BATCHNORM2D_H

void dt_batchnorm2d_forward_train(float *out,          /* [n, c, hw] */
                                  float *save_mean,    /* [c] batch mean, for backward */
                                  float *save_invstd,  /* [c] 1/sqrt(var + eps) */
                                  float *running_mean, /* [c] updated in place */
                                  float *running_var,  /* [c] updated in place */
                                  const float *in,     /* [n, c, hw] */
                                  const float *weight, const float *bias, /* [c] */
                                  int n, int c, int hw, float momentum, float eps);

void dt_batchnorm2d_forward_eval(float *out, const float *in, const float *running_mean,
                                 const float *running_var, const float *weight, const float *bias,
                                 int n, int c, int hw, float eps);

/* Accumulates (+=) into dweight, dbias, and into din when add_to_din (else writes
 * it: the model passes 0 where this op is din's only writer, sparing its zeroing);
 * din may be NULL. */
void dt_batchnorm2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *save_mean, const float *save_invstd,
                             const float *weight, int n, int c, int hw, int add_to_din);

/* The same on nChw16c data ([n, c/16, hw, 16]; c a multiple of 16), bit for bit. */
void dt_batchnorm2d_forward_train_blocked(float *out, float *save_mean, float *save_invstd,
                                          float *running_mean, float *running_var, const float *in,
                                          const float *weight, const float *bias, int n, int c,
                                          int hw, float momentum, float eps);
void dt_batchnorm2d_forward_eval_blocked(float *out, const float *in, const float *running_mean,
                                         const float *running_var, const float *weight,
                                         const float *bias, int n, int c, int hw, float eps);
void dt_batchnorm2d_backward_blocked(float *din, float *dweight, float *dbias, const float *dout,
                                     const float *in, const float *save_mean,
                                     const float *save_invstd, const float *weight, int n, int c,
                                     int hw, int add_to_din);

#endif
