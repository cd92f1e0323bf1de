#include "nn/batchnorm2d.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "dtrain/kernel.h"
#include "dtrain/model.h"

/* Each channel is reduced by one thread in a fixed order (double accumulators), so
 * results do not depend on the thread count's scheduling. */

void dt_batchnorm2d_forward_train(float *out, float *save_mean, float *save_invstd,
                                  float *running_mean, float *running_var, const float *in,
                                  const float *weight, const float *bias, int n, int c, int hw,
                                  float momentum, float eps) {
    const double count = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double sum = 0.0;
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) sum += x[p];
        }
        double mean = sum / count, sq = 0.0;
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) {
                double d = x[p] - mean;
                sq += d * d;
            }
        }
        double var = sq / count;
        float invstd = (float)(1.0 / sqrt(var + eps));
        save_mean[ch] = (float)mean;
        save_invstd[ch] = invstd;
        double unbiased = count > 1 ? sq / (count - 1) : var;
        running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mean);
        running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * unbiased);
        /* (x - mean) * scale + bias, not x * scale + (bias - mean * scale): the
         * latter cancels badly when |mean| >> std. */
        const float scale = weight[ch] * invstd, shift = bias[ch], fmean = (float)mean;
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            float *y = out + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) y[p] = (x[p] - fmean) * scale + shift;
        }
    }
}

void dt_batchnorm2d_forward_eval(float *out, const float *in, const float *running_mean,
                                 const float *running_var, const float *weight, const float *bias,
                                 int n, int c, int hw, float eps) {
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        const float scale = weight[ch] / sqrtf(running_var[ch] + eps);
        const float shift = bias[ch], mean = running_mean[ch];
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            float *y = out + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) y[p] = (x[p] - mean) * scale + shift;
        }
    }
}

void dt_batchnorm2d_backward(float *din, float *dweight, float *dbias, const float *dout,
                             const float *in, const float *save_mean, const float *save_invstd,
                             const float *weight, int n, int c, int hw, int add_to_din) {
    const double count = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        const float mean = save_mean[ch], invstd = save_invstd[ch];
        double sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            const float *dy = dout + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) {
                sum_dy += dy[p];
                sum_dy_xhat += (double)dy[p] * ((x[p] - mean) * invstd);
            }
        }
        dbias[ch] += (float)sum_dy;
        dweight[ch] += (float)sum_dy_xhat;
        if (!din) continue;
        /* dx = gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)) */
        const float k = weight[ch] * invstd;
        const float mean_dy = (float)(sum_dy / count);
        const float mean_dy_xhat = (float)(sum_dy_xhat / count);
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * c + ch) * hw;
            const float *dy = dout + ((size_t)m * c + ch) * hw;
            float *dx = din + ((size_t)m * c + ch) * hw;
            for (int p = 0; p < hw; p++) {
                float xhat = (x[p] - mean) * invstd;
                float g = k * (dy[p] - mean_dy - xhat * mean_dy_xhat);
                dx[p] = add_to_din ? dx[p] + g : g;
            }
        }
    }
}

/* The same three on nChw16c data: one channel block (16 lanes, innermost) per
 * iteration, each lane summed in the order of the NCHW loops above, so both layouts
 * give the same bits. */

enum { BLK = 16 };

void dt_batchnorm2d_forward_train_blocked(float *out, float *save_mean, float *save_invstd,
                                          float *running_mean, float *running_var, const float *in,
                                          const float *weight, const float *bias, int n, int c,
                                          int hw, float momentum, float eps) {
    const double count = (double)n * hw;
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; cb++) {
        double sum[BLK] = {0}, sq[BLK] = {0};
        float fmean[BLK], scale[BLK], shift[BLK];
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++) sum[l] += x[p * BLK + l];
        }
        double mean[BLK];
        for (int l = 0; l < BLK; l++) mean[l] = sum[l] / count;
        for (int m = 0; m < n; m++) {
            const float *x = in + ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++) {
                    double d = x[p * BLK + l] - mean[l];
                    sq[l] += d * d;
                }
        }
        for (int l = 0; l < BLK; l++) {
            const int ch = cb * BLK + l;
            double var = sq[l] / count;
            float invstd = (float)(1.0 / sqrt(var + eps));
            save_mean[ch] = (float)mean[l];
            save_invstd[ch] = invstd;
            double unbiased = count > 1 ? sq[l] / (count - 1) : var;
            running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * mean[l]);
            running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * unbiased);
            scale[l] = weight[ch] * invstd;
            shift[l] = bias[ch];
            fmean[l] = (float)mean[l];
        }
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++)
                    out[base + p * BLK + l] =
                        (in[base + p * BLK + l] - fmean[l]) * scale[l] + shift[l];
        }
    }
}

void dt_batchnorm2d_forward_eval_blocked(float *out, const float *in, const float *running_mean,
                                         const float *running_var, const float *weight,
                                         const float *bias, int n, int c, int hw, float eps) {
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; cb++) {
        float scale[BLK], shift[BLK], mean[BLK];
        for (int l = 0; l < BLK; l++) {
            const int ch = cb * BLK + l;
            scale[l] = weight[ch] / sqrtf(running_var[ch] + eps);
            shift[l] = bias[ch];
            mean[l] = running_mean[ch];
        }
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++)
                    out[base + p * BLK + l] =
                        (in[base + p * BLK + l] - mean[l]) * scale[l] + shift[l];
        }
    }
}

void dt_batchnorm2d_backward_blocked(float *din, float *dweight, float *dbias, const float *dout,
                                     const float *in, const float *save_mean,
                                     const float *save_invstd, const float *weight, int n, int c,
                                     int hw, int add_to_din) {
    const double count = (double)n * hw;
    const int blocks = c / BLK;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; cb++) {
        float mean[BLK], invstd[BLK], k[BLK], mean_dy[BLK], mean_dy_xhat[BLK];
        double sum_dy[BLK] = {0}, sum_dy_xhat[BLK] = {0};
        for (int l = 0; l < BLK; l++) {
            mean[l] = save_mean[cb * BLK + l];
            invstd[l] = save_invstd[cb * BLK + l];
        }
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            for (int p = 0; p < hw; p++)
                for (int l = 0; l < BLK; l++) {
                    const float x = in[base + p * BLK + l], dy = dout[base + p * BLK + l];
                    sum_dy[l] += dy;
                    sum_dy_xhat[l] += (double)dy * ((x - mean[l]) * invstd[l]);
                }
        }
        for (int l = 0; l < BLK; l++) {
            const int ch = cb * BLK + l;
            dbias[ch] += (float)sum_dy[l];
            dweight[ch] += (float)sum_dy_xhat[l];
            k[l] = weight[ch] * invstd[l];
            mean_dy[l] = (float)(sum_dy[l] / count);
            mean_dy_xhat[l] = (float)(sum_dy_xhat[l] / count);
        }
        if (!din) continue;
        for (int m = 0; m < n; m++) {
            const size_t base = ((size_t)m * blocks + cb) * hw * BLK;
            if (add_to_din)
                for (int p = 0; p < hw; p++)
                    for (int l = 0; l < BLK; l++) {
                        const size_t i = base + p * BLK + l;
                        float xhat = (in[i] - mean[l]) * invstd[l];
                        din[i] += k[l] * (dout[i] - mean_dy[l] - xhat * mean_dy_xhat[l]);
                    }
            else
                for (int p = 0; p < hw; p++)
                    for (int l = 0; l < BLK; l++) {
                        const size_t i = base + p * BLK + l;
                        float xhat = (in[i] - mean[l]) * invstd[l];
                        din[i] = k[l] * (dout[i] - mean_dy[l] - xhat * mean_dy_xhat[l]);
                    }
        }
    }
}

/* The op in the model graph, with the op's momentum and eps (PyTorch's 0.1 and 1e-5
 * unless built otherwise). Its state is the batch statistics that forward saves for
 * backward. */

typedef struct batchnorm2d_saved {
    float *mean, *invstd; /* [c] */
} batchnorm2d_saved;

static int batchnorm2d_op_plan(dt_model *m, dt_op *op, int max_batch, size_t *bytes,
                               dt_error *err) {
    (void)max_batch, (void)err;
    *bytes += 2 * sizeof(float) * (size_t)m->values[op->in].c;
    dt_storage *in = &m->storages[m->values[op->in].storage];
    if (in->readers == 1) in->grad_written = 1; /* the only gradient: backward writes it */
    return 0;
}

static int batchnorm2d_op_alloc(dt_model *m, dt_op *op, int max_batch, dt_error *err) {
    (void)max_batch;
    size_t c = (size_t)m->values[op->in].c;
    batchnorm2d_saved *saved = calloc(1, sizeof *saved);
    if (!saved) return dt_error_set(err, "out of memory for batchnorm statistics");
    op->state = saved;
    if (!(saved->mean = dt_alloc(sizeof(float) * c, "batchnorm statistics", err)) ||
        !(saved->invstd = dt_alloc(sizeof(float) * c, "batchnorm statistics", err)))
        return -1;
    return 0;
}

static void batchnorm2d_op_free(dt_model *m, dt_op *op) {
    (void)m;
    batchnorm2d_saved *saved = op->state;
    if (saved) {
        dt_free(saved->mean);
        dt_free(saved->invstd);
        free(saved);
    }
    op->state = NULL;
}

static void batchnorm2d_op_forward(dt_model *m, dt_op *op, int n) {
    const float momentum = op->momentum, eps = op->eps;
    const dt_value *x = &m->values[op->in];
    float *in = dt_model_value_data(m, op->in), *out = dt_model_value_data(m, op->out);
    const int blocked = dt_model_value_blocked(m, op->in);
    if (m->training) {
        batchnorm2d_saved *saved = op->state;
        (blocked ? dt_batchnorm2d_forward_train_blocked : dt_batchnorm2d_forward_train)(
            out, saved->mean, saved->invstd, dt_model_param(m, op->running_mean),
            dt_model_param(m, op->running_var), in, dt_model_param(m, op->weight),
            dt_model_param(m, op->bias), n, x->c, x->h * x->w, momentum, eps);
        op->num_batches_tracked++;
    } else {
        (blocked ? dt_batchnorm2d_forward_eval_blocked : dt_batchnorm2d_forward_eval)(
            out, in, dt_model_param(m, op->running_mean), dt_model_param(m, op->running_var),
            dt_model_param(m, op->weight), dt_model_param(m, op->bias), n, x->c, x->h * x->w, eps);
    }
}

static void batchnorm2d_op_backward(dt_model *m, dt_op *op, int n) {
    const dt_value *x = &m->values[op->in];
    const batchnorm2d_saved *saved = op->state;
    (dt_model_value_blocked(m, op->in) ? dt_batchnorm2d_backward_blocked : dt_batchnorm2d_backward)(
        dt_model_value_grad(m, op->in), dt_model_param_grad(m, op->weight),
        dt_model_param_grad(m, op->bias), dt_model_value_grad(m, op->out),
        dt_model_value_data(m, op->in), saved->mean, saved->invstd, dt_model_param(m, op->weight),
        n, x->c, x->h * x->w, !m->storages[x->storage].grad_written);
}

const dt_op_class dt_batchnorm2d_op = {
    .name = "batchnorm2d",
};

/* The CPU backend's f32 kernel: the loops above. */
const dt_kernel dt_batchnorm2d_f32_kernel = {
    .kind = DT_OP_BATCHNORM2D,
    .name = "batchnorm2d.f32",
    .dtype = DT_F32,
    .layouts = DT_OP_SAME_LAYOUT,
    .plan = batchnorm2d_op_plan,
    .alloc = batchnorm2d_op_alloc,
    .free = batchnorm2d_op_free,
    .forward = batchnorm2d_op_forward,
    .backward = batchnorm2d_op_backward,
};
