#include "perfmodel/perfmodel.h"

#include <math.h>
#include <stdlib.h>

#include "core/stats.h"
#include "perfmodel/nnls.h"

double dt_loss_at(const dt_loss_fit *f, double k) {
    return 1.0 / (f->b0 * k + f->b1) + f->b2;
}

/* For a fixed b2: NNLS of 1/(l - b2) = b0 k + b1, weighted so the residual is in loss
 * units (d(1/y) = -dy / y^2, so rows are scaled by (l - b2)^2). Returns the RMSE. */
static double fit_for_b2(const double *k, const double *l, int n, double b2, dt_loss_fit *out) {
    double *a = malloc(sizeof(double) * 2 * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    double rmse = INFINITY;
    if (!a || !b) goto out;
    for (int i = 0; i < n; i++) {
        double y = l[i] - b2, wgt = y * y;
        a[2 * i] = k[i] * wgt;
        a[2 * i + 1] = wgt;
        b[i] = wgt / y;
    }
    double x[2];
    if (dt_nnls(a, b, n, 2, x, NULL) == 0 && (x[0] > 0 || x[1] > 0)) {
        dt_loss_fit f = {x[0], x[1], b2, 0};
        double s = 0.0;
        for (int i = 0; i < n; i++) {
            double d = dt_loss_at(&f, k[i]) - l[i];
            s += d * d;
        }
        rmse = sqrt(s / n);
        f.rmse = rmse;
        *out = f;
    }
out:
    free(a);
    free(b);
    return rmse;
}

int dt_loss_fit_points(const double *k, const double *l, int n, dt_loss_fit *fit, dt_error *err) {
    if (n < 3) return dt_error_set(err, "too few points to fit the loss curve (%d; need 3)", n);
    double lmin = INFINITY;
    for (int i = 0; i < n; i++) {
        if (!isfinite(k[i]) || !isfinite(l[i]))
            return dt_error_set(err, "loss point %d is not finite (NaN or infinite loss)", i);
        if (l[i] <= 0) return dt_error_set(err, "loss point %d is %g: losses must be > 0", i, l[i]);
        if (l[i] < lmin) lmin = l[i];
    }
    if (!(l[n - 1] < l[0]))
        return dt_error_set(err,
                            "the loss does not decrease (%g at the start, %g at the end): "
                            "nothing to fit",
                            l[0], l[n - 1]);
    /* golden-section search of b2 in [0, lmin): the RMSE is unimodal in practice */
    double lo = 0.0, hi = lmin * (1.0 - 1e-9), g = (sqrt(5.0) - 1.0) / 2.0;
    dt_loss_fit f1, f2, best;
    double x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    double e1 = fit_for_b2(k, l, n, x1, &f1), e2 = fit_for_b2(k, l, n, x2, &f2);
    double e_best = fit_for_b2(k, l, n, 0.0, &best);
    for (int it = 0; it < 80; it++) {
        if (e1 < e2) {
            hi = x2, x2 = x1, e2 = e1, f2 = f1;
            x1 = hi - g * (hi - lo);
            e1 = fit_for_b2(k, l, n, x1, &f1);
        } else {
            lo = x1, x1 = x2, e1 = e2, f1 = f2;
            x2 = lo + g * (hi - lo);
            e2 = fit_for_b2(k, l, n, x2, &f2);
        }
    }
    if (e1 < e_best) e_best = e1, best = f1;
    if (e2 < e_best) e_best = e2, best = f2;
    if (!isfinite(e_best)) return dt_error_set(err, "the loss curve could not be fitted");
    *fit = best;
    return 0;
}

double dt_loss_step_for_target(const dt_loss_fit *f, double target) {
    if (target <= f->b2 || f->b0 <= 0) return -1;
    double k = (1.0 / (target - f->b2) - f->b1) / f->b0;
    return k > 0 ? k : 0;
}

double dt_loss_step_converged(const dt_loss_fit *f, double delta) {
    /* dl/dk = -b0 / (b0 k + b1)^2 ; |dl/dk| < delta  <=>  b0 k + b1 > sqrt(b0 / delta) */
    if (f->b0 <= 0 || delta <= 0) return -1;
    double k = (sqrt(f->b0 / delta) - f->b1) / f->b0;
    return k > 0 ? k : 0;
}

double dt_loss_step_observed(const double *k, const double *l, int n, double target) {
    for (int i = 0; i < n; i++)
        if (l[i] <= target) return k[i];
    return -1;
}

int dt_loss_fit_b1_at_bound(const dt_loss_fit *f) {
    return f->b1 <= 0;
}

int dt_loss_refit_per_epoch(const double *k, const double *l, int n, long spe, long every,
                            double target, double delta, dt_loss_refit **rows, int *n_rows,
                            dt_error *err) {
    *rows = NULL;
    *n_rows = 0;
    if (n < 1 || spe < 1) return 0;
    const long count = (long)((k[n - 1] + every) / spe) + 2; /* room for rounding */
    dt_loss_refit *r = malloc(sizeof *r * (size_t)count);
    if (!r) return dt_error_set(err, "out of memory for %ld refits", count);
    int used = 0;
    for (long e = 1; e * spe <= k[n - 1] + every && used < count; e++) {
        dt_loss_refit *row = &r[used++];
        int m = 0;
        while (m < n && k[m] < e * spe) m++;
        dt_loss_fit part;
        dt_error ferr;
        *row = (dt_loss_refit){e, m, 0, -1, 0};
        if (m < 3 || dt_loss_fit_points(k, l, m, &part, &ferr)) continue;
        row->fitted = 1;
        row->predicted = target > 0 ? dt_loss_step_for_target(&part, target)
                                    : dt_loss_step_converged(&part, delta);
        row->b1_at_bound = dt_loss_fit_b1_at_bound(&part);
    }
    *rows = r;
    *n_rows = used;
    return 0;
}

int dt_speed_features(dt_speed_kind kind, double w, double p, double batch, double *f) {
    if (kind == DT_SPEED_PS) {
        f[0] = batch / w, f[1] = 1.0, f[2] = w / p, f[3] = w, f[4] = p;
        return 5;
    }
    f[0] = batch / w, f[1] = 1.0, f[2] = 2.0 * (w - 1) / w, f[3] = w - 1;
    if (kind == DT_SPEED_ALLREDUCE_SYNC) {
        f[4] = (w - 1) / w * (batch / w);
        return 5;
    }
    return 4;
}

int dt_speed_fit_points(dt_speed_kind kind, const dt_speed_point *pts, int n, dt_speed_fit *fit,
                        dt_error *err) {
    double f[DT_SPEED_MAX_THETA];
    int nt = dt_speed_features(kind, 1, 1, 1, f);
    if (n < nt)
        return dt_error_set(err, "too few points to fit the speed model (%d; need %d)", n, nt);
    double *a = malloc(sizeof(double) * (size_t)n * nt), *b = malloc(sizeof(double) * (size_t)n);
    if (!a || !b) {
        free(a);
        free(b);
        return dt_error_set(err, "out of memory");
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const dt_speed_point *q = &pts[i];
        if (!(q->w >= 1 && q->p >= (kind == DT_SPEED_PS ? 1 : 0) && q->batch > 0 &&
              q->step_time > 0 && isfinite(q->step_time)))
            rc = dt_error_set(err,
                              "speed point %d: workers, servers, batch and step time must be "
                              "positive (got w %g, p %g, batch %g, t %g)",
                              i, q->w, q->p, q->batch, q->step_time);
        /* relative residuals: rows scaled by 1/t, so configs whose steps take 3 ms count
         * as much as those taking 1 s (step times span orders of magnitude) */
        dt_speed_features(kind, q->w, q->p, q->batch, a + (size_t)i * nt);
        for (int j = 0; j < nt; j++) a[(size_t)i * nt + j] /= q->step_time;
        b[i] = 1.0;
    }
    double res;
    if (rc == 0 && dt_nnls(a, b, n, nt, fit->theta, &res))
        rc = dt_error_set(err, "the speed model could not be fitted (degenerate points)");
    if (rc == 0) {
        fit->kind = kind;
        fit->n_theta = nt;
        double s = 0.0; /* RMSE in seconds */
        for (int i = 0; i < n; i++) {
            double d = dt_speed_step_time(fit, pts[i].w, pts[i].p, pts[i].batch) - pts[i].step_time;
            s += d * d;
        }
        fit->rmse = sqrt(s / n);
        (void)res;
    }
    free(a);
    free(b);
    return rc;
}

double dt_speed_step_time(const dt_speed_fit *fit, double w, double p, double batch) {
    double f[DT_SPEED_MAX_THETA], t = 0.0;
    int nt = dt_speed_features(fit->kind, w, p, batch, f);
    for (int i = 0; i < nt; i++) t += fit->theta[i] * f[i];
    return t;
}

int dt_speed_leave_one_out(dt_speed_kind kind, const dt_speed_point *pts, int n, double *pred,
                           double *rel_err, dt_loo_summary *summary, dt_error *err) {
    dt_speed_point *rest = malloc(sizeof *rest * (size_t)(n > 1 ? n - 1 : 1));
    double *sorted = malloc(sizeof *sorted * (size_t)(n > 0 ? n : 1));
    if (!rest || !sorted) {
        free(rest);
        free(sorted);
        return dt_error_set(err, "out of memory for the leave-one-out fits");
    }
    int n_ok = 0;
    for (int i = 0; i < n; i++) { /* fit without row i, predict it */
        int m = 0;
        for (int j = 0; j < n; j++)
            if (j != i) rest[m++] = pts[j];
        dt_speed_fit part;
        pred[i] = rel_err[i] = -1;
        if (dt_speed_fit_points(kind, rest, m, &part, NULL) == 0) {
            pred[i] = dt_speed_step_time(&part, pts[i].w, pts[i].p, pts[i].batch);
            rel_err[i] = fabs(pred[i] - pts[i].step_time) / pts[i].step_time;
            sorted[n_ok++] = rel_err[i];
        }
    }
    summary->n = n_ok;
    summary->median = dt_median(sorted, n_ok); /* sorts them */
    summary->worst = n_ok > 0 ? sorted[n_ok - 1] : -1;
    free(rest);
    free(sorted);
    return 0;
}
