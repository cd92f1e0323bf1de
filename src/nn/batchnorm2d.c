#include "dtrain/batchnorm2d.h"

#include <math.h>
#include <stddef.h>

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
                             const float *weight, int n, int c, int hw) {
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
                dx[p] += k * (dy[p] - mean_dy - xhat * mean_dy_xhat);
            }
        }
    }
}
