/* Across jobs (Optimus-style cluster studies): ridge regression of a job's loss-curve
 * parameters on its features, to predict an unseen job, and the greedy allocation of
 * a process budget by marginal gain (time saved per added worker or server). */
#ifndef DTRAIN_JOBS_H
#define DTRAIN_JOBS_H

#include "dtrain/error.h"
#include "dtrain/perfmodel.h"

enum { DT_RIDGE_MAX_FEATURES = 15 };

typedef struct dt_ridge {
    int n_features;
    double lambda;
    double mean[DT_RIDGE_MAX_FEATURES], scale[DT_RIDGE_MAX_FEATURES]; /* standardisation */
    double weight[DT_RIDGE_MAX_FEATURES], intercept;
} dt_ridge;

/* x: [n, f] row-major, y: [n]. Features are standardised; the intercept is not
 * penalised. Needs n >= 2. */
int dt_ridge_fit(const double *x, const double *y, int n, int f, double lambda, dt_ridge *model,
                 dt_error *err);
double dt_ridge_predict(const dt_ridge *model, const double *features);

/* Leave-one-out: for each row i, the model fitted without it predicts y[i]: pred[i]
 * with relative error rel_err[i] (|pred - y| / |y|, or |pred| when y is 0); ok[i] = 0
 * when the other rows cannot be fitted. */
int dt_ridge_leave_one_out(const double *x, const double *y, int n, int f, double lambda,
                           double *pred, double *rel_err, int *ok, dt_error *err);

typedef struct dt_job {
    char name[64];
    double remaining_steps;
    dt_speed_fit speed; /* parameter-server model */
    double batch;
    int workers, servers; /* the allocation (output) */
} dt_job;

/* Gives every job 1 worker and 1 server, then hands out the rest of the budget one
 * process at a time to the job and role (worker or server) that saves the most time
 * (remaining steps x step-time decrease); stops early when nothing saves time. Returns
 * -1 if the budget cannot give every job its first worker and server. */
int dt_allocate_greedy(dt_job *jobs, int n, int budget, dt_error *err);
double dt_job_time(const dt_job *job, int workers, int servers);

#endif
