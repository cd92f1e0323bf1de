#include "dtrain/jobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Solves the f x f system a w = b by Gaussian elimination with partial pivoting. */
static int solve(double *a, double *b, int f) {
    for (int c = 0; c < f; c++) {
        int piv = c;
        for (int r = c + 1; r < f; r++)
            if (fabs(a[r * f + c]) > fabs(a[piv * f + c])) piv = r;
        if (fabs(a[piv * f + c]) < 1e-14) return -1;
        if (piv != c) {
            for (int k = 0; k < f; k++) {
                double t = a[c * f + k];
                a[c * f + k] = a[piv * f + k];
                a[piv * f + k] = t;
            }
            double t = b[c];
            b[c] = b[piv];
            b[piv] = t;
        }
        for (int r = c + 1; r < f; r++) {
            double m = a[r * f + c] / a[c * f + c];
            for (int k = c; k < f; k++) a[r * f + k] -= m * a[c * f + k];
            b[r] -= m * b[c];
        }
    }
    for (int c = f - 1; c >= 0; c--) {
        double s = b[c];
        for (int k = c + 1; k < f; k++) s -= a[c * f + k] * b[k];
        b[c] = s / a[c * f + c];
    }
    return 0;
}

int dt_ridge_fit(const double *x, const double *y, int n, int f, double lambda, dt_ridge *model,
                 dt_error *err) {
    return dt_ridge_fit_scaled(x, y, n, f, lambda, 1, model, err);
}

int dt_ridge_fit_scaled(const double *x, const double *y, int n, int f, double lambda,
                        int standardize, dt_ridge *model, dt_error *err) {
    if (f < 1 || f > DT_RIDGE_MAX_FEATURES)
        return dt_error_set(err, "ridge: %d features (1..%d supported)", f, DT_RIDGE_MAX_FEATURES);
    if (n < 2) return dt_error_set(err, "ridge: too few jobs to fit (%d; need 2)", n);
    memset(model, 0, sizeof *model);
    model->n_features = f;
    model->lambda = lambda;
    model->standardized = standardize;
    double ymean = 0.0;
    for (int i = 0; i < n; i++) ymean += y[i] / n;
    for (int j = 0; j < f; j++) {
        double m = 0.0, v = 0.0;
        for (int i = 0; i < n; i++) m += x[i * f + j] / n;
        for (int i = 0; i < n; i++) v += (x[i * f + j] - m) * (x[i * f + j] - m) / n;
        model->mean[j] = m;
        model->scale[j] = standardize && v > 1e-24 ? sqrt(v) : 1.0; /* a constant stays 0 */
    }
    /* (Z^T Z + lambda I) w = Z^T (y - ymean), Z the standardised features */
    double a[DT_RIDGE_MAX_FEATURES * DT_RIDGE_MAX_FEATURES] = {0}, b[DT_RIDGE_MAX_FEATURES] = {0};
    for (int i = 0; i < n; i++)
        for (int j = 0; j < f; j++) {
            double zj = (x[i * f + j] - model->mean[j]) / model->scale[j];
            b[j] += zj * (y[i] - ymean);
            for (int k = 0; k < f; k++)
                a[j * f + k] += zj * (x[i * f + k] - model->mean[k]) / model->scale[k];
        }
    for (int j = 0; j < f; j++) a[j * f + j] += lambda;
    if (solve(a, b, f)) return dt_error_set(err, "ridge: singular system (try a larger lambda)");
    for (int j = 0; j < f; j++) model->weight[j] = b[j];
    model->intercept = ymean;
    return 0;
}

double dt_ridge_predict(const dt_ridge *m, const double *features) {
    double s = m->intercept;
    for (int j = 0; j < m->n_features; j++)
        s += m->weight[j] * (features[j] - m->mean[j]) / m->scale[j];
    return s;
}

double dt_job_time(const dt_job *job, int workers, int servers) {
    return job->remaining_steps * dt_speed_step_time(&job->speed, workers, servers, job->batch);
}

int dt_allocate_greedy(dt_job *jobs, int n, int budget, dt_error *err) {
    if (budget < 2 * n)
        return dt_error_set(err,
                            "a budget of %d processes cannot give each of %d jobs a worker and a "
                            "server (needs %d)",
                            budget, n, 2 * n);
    for (int i = 0; i < n; i++) jobs[i].workers = jobs[i].servers = 1;
    for (int left = budget - 2 * n; left > 0; left--) {
        int best = -1, best_role = 0;
        double best_gain = 0.0;
        for (int i = 0; i < n; i++) {
            double now = dt_job_time(&jobs[i], jobs[i].workers, jobs[i].servers);
            double gain_w = now - dt_job_time(&jobs[i], jobs[i].workers + 1, jobs[i].servers);
            double gain_p = now - dt_job_time(&jobs[i], jobs[i].workers, jobs[i].servers + 1);
            if (gain_w > best_gain) best_gain = gain_w, best = i, best_role = 0;
            if (gain_p > best_gain) best_gain = gain_p, best = i, best_role = 1;
        }
        if (best < 0) break; /* nothing saves time any more */
        if (best_role == 0)
            jobs[best].workers++;
        else
            jobs[best].servers++;
    }
    return 0;
}

int dt_ridge_leave_one_out(const double *x, const double *y, int n, int f, double lambda,
                           double *pred, double *rel_err, int *ok, dt_error *err) {
    double *xs = malloc(sizeof(double) * (size_t)(n > 1 ? n - 1 : 1) * (size_t)f);
    double *ys = malloc(sizeof(double) * (size_t)(n > 1 ? n - 1 : 1));
    if (!xs || !ys) {
        free(xs);
        free(ys);
        return dt_error_set(err, "out of memory for the leave-one-out fits");
    }
    for (int i = 0; i < n; i++) { /* leave row i out */
        int r = 0;
        for (int o = 0; o < n; o++) {
            if (o == i) continue;
            memcpy(xs + (size_t)r * f, x + (size_t)o * f, sizeof(double) * (size_t)f);
            ys[r++] = y[o];
        }
        dt_ridge part;
        ok[i] = dt_ridge_fit(xs, ys, r, f, lambda, &part, NULL) == 0;
        pred[i] = ok[i] ? dt_ridge_predict(&part, x + (size_t)i * f) : 0;
        rel_err[i] = !ok[i] ? -1 : y[i] != 0 ? fabs(pred[i] - y[i]) / fabs(y[i]) : fabs(pred[i]);
    }
    free(xs);
    free(ys);
    return 0;
}

double dt_ridge_unscaled(const dt_ridge *m, double *coef) {
    double intercept = m->intercept;
    for (int j = 0; j < m->n_features; j++) {
        coef[j] = m->weight[j] / m->scale[j];
        intercept -= coef[j] * m->mean[j];
    }
    return intercept;
}

int dt_curve_model_fit(const double *x, const double *b, const int *train, int n, int f,
                       double lambda, dt_curve_model *model, dt_error *err) {
    return dt_curve_model_fit_scaled(x, b, train, n, f, lambda, 1, model, err);
}

int dt_curve_model_fit_scaled(const double *x, const double *b, const int *train, int n, int f,
                              double lambda, int standardize, dt_curve_model *model,
                              dt_error *err) {
    if (f < 1 || f > DT_RIDGE_MAX_FEATURES)
        return dt_error_set(err, "ridge: %d features (1..%d supported)", f, DT_RIDGE_MAX_FEATURES);
    int m = 0;
    for (int i = 0; i < n; i++) m += !train || train[i];
    if (m < 2) return dt_error_set(err, "ridge: too few jobs to fit (%d; need 2)", m);
    double *xs = malloc(sizeof(double) * (size_t)m * (size_t)f);
    double *ys = malloc(sizeof(double) * (size_t)m);
    if (!xs || !ys) {
        free(xs);
        free(ys);
        return dt_error_set(err, "out of memory for the curve regression");
    }
    int r = 0;
    for (int i = 0; i < n; i++)
        if (!train || train[i])
            memcpy(xs + (size_t)r++ * f, x + (size_t)i * f, sizeof(double) * (size_t)f);
    int rc = 0;
    for (int k = 0; k < 3 && rc == 0; k++) {
        r = 0;
        for (int i = 0; i < n; i++)
            if (!train || train[i]) ys[r++] = b[(size_t)i * 3 + k];
        if (dt_ridge_fit_scaled(xs, ys, m, f, lambda, standardize, &model->b[k], err)) rc = -1;
    }
    free(xs);
    free(ys);
    return rc;
}

dt_loss_fit dt_curve_model_predict(const dt_curve_model *model, const double *features) {
    return (dt_loss_fit){dt_ridge_predict(&model->b[0], features),
                         dt_ridge_predict(&model->b[1], features),
                         dt_ridge_predict(&model->b[2], features), 0};
}

int dt_curve_model_leave_one_out(const double *x, const double *b, const int *train, int n, int f,
                                 double lambda, dt_loss_fit *pred, int *ok, dt_error *err) {
    return dt_curve_model_leave_one_out_scaled(x, b, train, n, f, lambda, 1, pred, ok, err);
}

int dt_curve_model_leave_one_out_scaled(const double *x, const double *b, const int *train, int n,
                                        int f, double lambda, int standardize, dt_loss_fit *pred,
                                        int *ok, dt_error *err) {
    int *rest = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!rest) return dt_error_set(err, "out of memory for the leave-one-out fits");
    for (int i = 0; i < n; i++) {
        ok[i] = 0;
        pred[i] = (dt_loss_fit){0, 0, 0, 0};
        if (train && !train[i]) continue;
        for (int o = 0; o < n; o++) rest[o] = o != i && (!train || train[o]);
        dt_curve_model part;
        if (dt_curve_model_fit_scaled(x, b, rest, n, f, lambda, standardize, &part, NULL) == 0) {
            pred[i] = dt_curve_model_predict(&part, x + (size_t)i * f);
            ok[i] = 1;
        }
    }
    free(rest);
    return 0;
}
