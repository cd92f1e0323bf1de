#include "nn/cross_entropy.h"

#include <math.h>
#include <stddef.h>

double dt_cross_entropy_forward(float *probs, const float *logits, const int32_t *labels, int n,
                                int classes, int *correct) {
    double total = 0.0;
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * classes;
        float *p = probs + (size_t)i * classes;
        int arg = 0;
        for (int k = 1; k < classes; k++)
            if (z[k] > z[arg]) arg = k;
        /* one exp per logit (they were a tenth of logreg's step when computed twice):
         * e^(z - max) kept in probs, then scaled by 1 / sum */
        double sum = 0.0;
        for (int k = 0; k < classes; k++) {
            const double e = exp((double)z[k] - z[arg]);
            p[k] = (float)e;
            sum += e;
        }
        const double log_sum = log(sum) + z[arg], inv_sum = 1.0 / sum;
        for (int k = 0; k < classes; k++) p[k] = (float)(p[k] * inv_sum);
        total += log_sum - z[labels[i]];
        hits += arg == labels[i];
    }
    if (correct) *correct = hits;
    return total / n;
}

void dt_cross_entropy_backward(float *dlogits, const float *probs, const int32_t *labels, int n,
                               int classes) {
    const float inv_n = 1.0f / (float)n;
    for (int i = 0; i < n; i++) {
        float *d = dlogits + (size_t)i * classes;
        const float *p = probs + (size_t)i * classes;
        for (int k = 0; k < classes; k++) d[k] += (p[k] - (k == labels[i])) * inv_n;
    }
}
