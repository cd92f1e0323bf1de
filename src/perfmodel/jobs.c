#include "perfmodel/jobs.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

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

double dt_loss_fit_param(const dt_loss_fit *c, int k) {
    return k == 0 ? c->b0 : k == 1 ? c->b1 : c->b2;
}

/* Splits "a,b,c" into at most max items of at most 63 characters; the count, or -1
 * for an empty item, a longer one or more than max. */
static int split_list(const char *text, char items[][64], int max) {
    int n = 0;
    for (const char *p = text;; n++) {
        size_t len = strcspn(p, ",");
        if (n == max || len == 0 || len >= 64) return -1;
        memcpy(items[n], p, len);
        items[n][len] = 0;
        if (!p[len]) return n + 1;
        p += len + 1;
    }
}

/* An error in an option's text (the command's usage), not in the file. */
static int flag_error(dt_fit_jobs_result *r, int rc) {
    r->bad_flag = 1;
    return rc;
}

/* The feature columns: --features', or every column but the reserved ones. */
static int pick_features(const dt_fit_jobs_opts *o, const int *b_col, dt_fit_jobs_result *r,
                         dt_error *err) {
    const dt_job_table *t = &r->table;
    r->n_features = 0;
    if (o->features) {
        char items[DT_JOBS_MAX_COLS][64];
        int n_items = split_list(o->features, items, DT_JOBS_MAX_COLS);
        if (n_items < 0)
            return flag_error(r, dt_error_set(err,
                                              "--features expects column names separated by "
                                              "commas, got '%s'",
                                              o->features));
        for (int j = 0; j < n_items; j++) {
            int c = dt_job_table_column(t, items[j]);
            int reserved =
                c == b_col[0] || c == b_col[1] || c == b_col[2] || !strcmp(items[j], "name");
            if (c < 0 || reserved)
                return dt_error_set(err, "--features: %s '%s' in %s",
                                    c < 0 ? "no column" : "not a feature:", items[j], o->path);
            for (int k = 0; k < r->n_features; k++)
                if (r->feat[k] == c)
                    return flag_error(r,
                                      dt_error_set(err, "--features names '%s' twice", items[j]));
            r->feat[r->n_features++] = c;
        }
    } else {
        for (int c = 0; c < t->n_cols; c++)
            if (c != b_col[0] && c != b_col[1] && c != b_col[2] && c != r->steps_col &&
                strcmp(t->header[c], "name"))
                r->feat[r->n_features++] = c;
    }
    if (r->n_features == 0 || r->n_features > DT_RIDGE_MAX_FEATURES)
        return dt_error_set(err, "%s: %d feature columns (1..%d supported)", o->path, r->n_features,
                            DT_RIDGE_MAX_FEATURES);
    return 0;
}

/* train[i] = 0 for the jobs --hold-out names. */
static int pick_training(const dt_fit_jobs_opts *o, dt_fit_jobs_result *r, dt_error *err) {
    const dt_job_table *t = &r->table;
    for (int i = 0; i < t->n_rows; i++) r->train[i] = 1;
    if (!o->hold_out) return 0;
    char items[DT_JOBS_MAX_ROWS][64];
    int n_items = split_list(o->hold_out, items, DT_JOBS_MAX_ROWS), rc = 0;
    if (n_items < 0)
        rc = flag_error(r, dt_error_set(err,
                                        "--hold-out expects job names separated by commas, got "
                                        "'%s'",
                                        o->hold_out));
    for (int j = 0; j < n_items && !rc; j++) {
        int found = 0;
        for (int i = 0; i < t->n_rows; i++)
            if (!strcmp(t->names[i], items[j])) found = 1, r->train[i] = 0;
        if (!found) rc = dt_error_set(err, "--hold-out: no job '%s' in %s", items[j], o->path);
    }
    return rc;
}

/* --predict's feature values, one per feature column. */
static int read_unseen(const dt_fit_jobs_opts *o, const dt_fit_jobs_result *r, double *unseen,
                       dt_error *err) {
    char values[DT_JOBS_MAX_COLS][64];
    int n = split_list(o->predict, values, DT_JOBS_MAX_COLS);
    dt_error perr;
    for (int j = 0; j < n; j++)
        if (isspace((unsigned char)values[j][0]) ||
            dt_parse_double("--predict", values[j], -1e300, 1e300, &unseen[j], &perr))
            n = -1;
    if (n < 0)
        return dt_error_set(err, "--predict expects numbers separated by commas, got '%s'",
                            o->predict);
    if (n != r->n_features)
        return dt_error_set(err, "--predict needs %d feature values, got %d", r->n_features, n);
    return 0;
}

int dt_fit_jobs(const dt_fit_jobs_opts *o, dt_fit_jobs_result *r, dt_error *err) {
    r->bad_flag = 0;
    r->has_unseen = 0;
    dt_job_table *t = &r->table;
    if (dt_job_table_read(o->path, t, err)) return -1;
    const int b_col[3] = {dt_job_table_column(t, "b0"), dt_job_table_column(t, "b1"),
                          dt_job_table_column(t, "b2")};
    r->steps_col = dt_job_table_column(t, "steps_to_target");
    for (int k = 0; k < 3; k++)
        if (b_col[k] < 0) return dt_error_set(err, "%s: missing column 'b%d'", o->path, k);
    if (pick_features(o, b_col, r, err) || pick_training(o, r, err)) return -1;
    double unseen[DT_JOBS_MAX_COLS];
    if (o->predict && read_unseen(o, r, unseen, err)) return flag_error(r, -1);
    const int n = t->n_rows, nf = r->n_features;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < nf; j++) r->x[i * nf + j] = t->v[i][r->feat[j]];
        for (int k = 0; k < 3; k++) r->b[i * 3 + k] = t->v[i][b_col[k]];
    }
    if (dt_curve_model_fit_scaled(r->x, r->b, r->train, n, nf, o->lambda, o->standardize, &r->model,
                                  err)) {
        if (o->hold_out) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            dt_error_set(err, "%s (after --hold-out)", msg);
        }
        return -1;
    }
    if (dt_curve_model_leave_one_out_scaled(r->x, r->b, r->train, n, nf, o->lambda, o->standardize,
                                            r->curve, r->ok, err))
        return -1;
    r->n_train = 0;
    for (int i = 0; i < n; i++) {
        if (!r->train[i])
            r->curve[i] = dt_curve_model_predict(&r->model, r->x + i * nf), r->ok[i] = 1;
        r->n_train += r->train[i];
    }
    if (o->predict) r->unseen = dt_curve_model_predict(&r->model, unseen), r->has_unseen = 1;
    return 0;
}

int dt_jobs_read(const char *path, dt_job *jobs, int *n, dt_error *err) {
    static const char *const need[7] = {"remaining_steps", "batch",  "theta0", "theta1",
                                        "theta2",          "theta3", "theta4"};
    dt_job_table *t = malloc(sizeof *t);
    if (!t) return dt_error_set(err, "out of memory");
    int col[7], rc = dt_job_table_read(path, t, err);
    for (int k = 0; k < 7 && !rc; k++)
        if ((col[k] = dt_job_table_column(t, need[k])) < 0)
            rc = dt_error_set(err, "%s: missing column '%s'", path, need[k]);
    for (int i = 0; i < t->n_rows && !rc; i++) {
        dt_job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        snprintf(j->name, sizeof j->name, "%s", t->names[i]);
        j->remaining_steps = t->v[i][col[0]];
        j->batch = t->v[i][col[1]];
        j->speed.kind = DT_SPEED_PS;
        j->speed.n_theta = 5;
        for (int k = 0; k < 5 && !rc; k++)
            if ((j->speed.theta[k] = t->v[i][col[2 + k]]) < 0)
                rc = dt_error_set(err, "%s: job %s has a negative theta%d", path, t->names[i], k);
        if (!rc && (j->remaining_steps < 0 || j->batch <= 0))
            rc = dt_error_set(err, "%s: job %s needs remaining_steps >= 0 and batch > 0", path,
                              t->names[i]);
    }
    *n = rc ? 0 : t->n_rows;
    free(t);
    return rc;
}
