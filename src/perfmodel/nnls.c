#include "perfmodel/nnls.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dt_lstsq_cols(const double *a, const double *b, int m, int n, const int *cols, int k,
                  double *x) {
    for (int j = 0; j < n; j++) x[j] = 0.0;
    if (k == 0) return 0;
    if (k > m) return -1;
    double *q = malloc(sizeof(double) * (size_t)m * k), *y = malloc(sizeof(double) * (size_t)m);
    if (!q || !y) {
        free(q);
        free(y);
        return -1;
    }
    for (int i = 0; i < m; i++) {
        for (int c = 0; c < k; c++) q[i * k + c] = a[i * n + cols[c]];
        y[i] = b[i];
    }
    /* Householder QR of q (m x k), applied to y as we go; R stays in q's upper part. */
    double scale_max = 0.0;
    for (int c = 0; c < k; c++) {
        double norm = 0.0;
        for (int i = c; i < m; i++) norm += q[i * k + c] * q[i * k + c];
        norm = sqrt(norm);
        if (norm > scale_max) scale_max = norm;
        if (norm <= 1e-12 * (scale_max > 0 ? scale_max : 1.0)) {
            free(q);
            free(y);
            return -1;
        }
        double alpha = q[c * k + c] > 0 ? -norm : norm;
        double v0 = q[c * k + c] - alpha;
        double vnorm2 = v0 * v0;
        for (int i = c + 1; i < m; i++) vnorm2 += q[i * k + c] * q[i * k + c];
        /* reflect the remaining columns and y by v = (v0, q[c+1..m-1][c]) */
        for (int cc = c + 1; cc < k; cc++) {
            double dot = v0 * q[c * k + cc];
            for (int i = c + 1; i < m; i++) dot += q[i * k + c] * q[i * k + cc];
            double f = 2.0 * dot / vnorm2;
            q[c * k + cc] -= f * v0;
            for (int i = c + 1; i < m; i++) q[i * k + cc] -= f * q[i * k + c];
        }
        double dot = v0 * y[c];
        for (int i = c + 1; i < m; i++) dot += q[i * k + c] * y[i];
        double f = 2.0 * dot / vnorm2;
        y[c] -= f * v0;
        for (int i = c + 1; i < m; i++) y[i] -= f * q[i * k + c];
        q[c * k + c] = alpha;
    }
    for (int c = k - 1; c >= 0; c--) { /* back substitution R x = Q^T y */
        double s = y[c];
        for (int cc = c + 1; cc < k; cc++) s -= q[c * k + cc] * x[cols[cc]];
        x[cols[c]] = s / q[c * k + c];
    }
    free(q);
    free(y);
    return 0;
}

int dt_nnls(const double *a, const double *b, int m, int n, double *x, double *residual) {
    if (n < 1 || n > DT_NNLS_MAX_COLS || m < 1) return -1;
    int passive[DT_NNLS_MAX_COLS] = {0}, excluded[DT_NNLS_MAX_COLS] = {0}, cols[DT_NNLS_MAX_COLS];
    double w[DT_NNLS_MAX_COLS], z[DT_NNLS_MAX_COLS];
    double *r = malloc(sizeof(double) * (size_t)m);
    if (!r) return -1;
    for (int j = 0; j < n; j++) x[j] = 0.0;
    const double tol = 1e-12;
    int iterations = 0, rc = 0;
    for (;;) {
        /* gradient w = A^T (b - A x) */
        for (int i = 0; i < m; i++) {
            double s = b[i];
            for (int j = 0; j < n; j++) s -= a[i * n + j] * x[j];
            r[i] = s;
        }
        int best = -1;
        double wmax = 0.0, bnorm = 0.0;
        for (int i = 0; i < m; i++) bnorm += fabs(b[i]);
        for (int j = 0; j < n; j++) {
            w[j] = 0.0;
            for (int i = 0; i < m; i++) w[j] += a[i * n + j] * r[i];
            if (!passive[j] && !excluded[j] && w[j] > wmax) wmax = w[j], best = j;
        }
        if (best < 0 || wmax <= tol * (bnorm > 1 ? bnorm : 1)) break; /* KKT hold */
        passive[best] = 1;
        for (;;) { /* inner loop: keep the passive solution feasible */
            if (++iterations > 30 * n + 100) {
                rc = -1;
                goto done;
            }
            int k = 0;
            for (int j = 0; j < n; j++)
                if (passive[j]) cols[k++] = j;
            if (dt_lstsq_cols(a, b, m, n, cols, k, z)) { /* dependent column: leave it out */
                passive[best] = 0;
                excluded[best] = 1;
                goto next;
            }
            int feasible = 1;
            for (int c = 0; c < k; c++) feasible &= z[cols[c]] > 0;
            if (feasible) {
                memcpy(x, z, sizeof(double) * (size_t)n);
                break;
            }
            double alpha = 1.0;
            for (int c = 0; c < k; c++) {
                int j = cols[c];
                if (z[j] <= 0) {
                    double t = x[j] / (x[j] - z[j]);
                    if (t < alpha) alpha = t;
                }
            }
            for (int j = 0; j < n; j++) {
                x[j] += alpha * (z[j] - x[j]);
                if (passive[j] && x[j] <= tol) passive[j] = 0, x[j] = 0.0;
            }
        }
    next:;
        if (++iterations > 30 * n + 100) {
            rc = -1;
            break;
        }
    }
done:
    if (residual) {
        double s2 = 0.0;
        for (int i = 0; i < m; i++) {
            double s = b[i];
            for (int j = 0; j < n; j++) s -= a[i * n + j] * x[j];
            s2 += s * s;
        }
        *residual = sqrt(s2);
    }
    free(r);
    return rc;
}
