/* The Optimus performance model (Peng et al., EuroSys 2018), fitted with NNLS.
 *
 * Loss curve: l(k) = 1 / (b0 k + b1) + b2, b >= 0, k the step. For a fixed b2 the
 * curve is linear in (b0, b1) after 1/(l - b2), so b2 is searched (golden section on
 * the RMSE of l) with an NNLS solve for (b0, b1) inside.
 *
 * Speed of a parameter-server job with w workers, p servers, global batch M:
 *   step time = th0 M/w + th1 + th2 w/p + th3 w + th4 p          (th >= 0)
 * and of an all-reduce job with w processes:
 *   step time = th0 M/w + th1 + th2 2(w-1)/w + th3 (w-1)         (th >= 0)
 * Speed fits minimise relative residuals (rows scaled by 1 / measured time).
 * Time to convergence = remaining steps x step time. */
#ifndef DTRAIN_PERFMODEL_H
#define DTRAIN_PERFMODEL_H

#include "dtrain/error.h"

typedef struct dt_loss_fit {
    double b0, b1, b2;
    double rmse;
} dt_loss_fit;

/* Fits n points (k[i], l[i]); needs n >= 3 finite points with l > 0 and loss
 * decreasing overall. */
int dt_loss_fit_points(const double *k, const double *l, int n, dt_loss_fit *fit, dt_error *err);
double dt_loss_at(const dt_loss_fit *fit, double k);
/* The step where the curve reaches `target` (-1 if never: target <= b2). */
double dt_loss_step_for_target(const dt_loss_fit *fit, double target);
/* The step where the loss falls by less than `delta` per step (|dl/dk| < delta). */
double dt_loss_step_converged(const dt_loss_fit *fit, double delta);
/* The step observed: the first k[i] whose (smoothed) loss l[i] is <= target; -1 if
 * none is. */
double dt_loss_step_observed(const double *k, const double *l, int n, double target);
/* Non-zero when b1 sits on its bound 0: l(0) = 1/b1 + b2 is infinite, the curve has
 * no finite start (NNLS clamped b1, so the points fall faster than 1/k early on). */
int dt_loss_fit_b1_at_bound(const dt_loss_fit *fit);

/* fit-loss --online: the fit refitted after each epoch e = 1, 2, .. (while e x
 * steps_per_epoch <= k[n-1] + every) on the points k < e x steps_per_epoch, and the
 * step it predicts: for target when > 0, else where |dl/dk| < delta. *rows is
 * allocated (free it); *n_rows of them. */
typedef struct dt_loss_refit {
    long epoch;
    int points;       /* the points fitted */
    int fitted;       /* 0: fewer than 3 points, or they cannot be fitted */
    double predicted; /* < 0: never */
    int b1_at_bound;
} dt_loss_refit;
int dt_loss_refit_per_epoch(const double *k, const double *l, int n, long steps_per_epoch,
                            long every, double target, double delta, dt_loss_refit **rows,
                            int *n_rows, dt_error *err);

/* DT_SPEED_ALLREDUCE_SYNC: the all-reduce model plus th4 (w-1)/w x batch/w, a wait
 * for the slowest worker that grows with the compute per step (scaling.c: the form
 * that fits dtrain's own studies, where the plain one fails). */
typedef enum dt_speed_kind {
    DT_SPEED_PS,
    DT_SPEED_ALLREDUCE,
    DT_SPEED_ALLREDUCE_SYNC
} dt_speed_kind;

enum { DT_SPEED_MAX_THETA = 5 };

typedef struct dt_speed_point {
    double w, p, batch, step_time;
} dt_speed_point;

typedef struct dt_speed_fit {
    dt_speed_kind kind;
    int n_theta;
    double theta[DT_SPEED_MAX_THETA];
    double rmse;
} dt_speed_fit;

/* The model's features of one point (n_theta of them). */
int dt_speed_features(dt_speed_kind kind, double w, double p, double batch, double *f);
int dt_speed_fit_points(dt_speed_kind kind, const dt_speed_point *pts, int n, dt_speed_fit *fit,
                        dt_error *err);
double dt_speed_step_time(const dt_speed_fit *fit, double w, double p, double batch);

/* Leave-one-out check of a speed fit: for each point i, the fit of the other points
 * predicts its step time, pred[i], with relative error rel_err[i] (both -1 when the
 * other points cannot be fitted); summary: over the points that could be. */
typedef struct dt_loo_summary {
    int n;                /* points predicted */
    double median, worst; /* relative errors; -1 if n == 0 */
} dt_loo_summary;
int dt_speed_leave_one_out(dt_speed_kind kind, const dt_speed_point *pts, int n, double *pred,
                           double *rel_err, dt_loo_summary *summary, dt_error *err);

#endif
