/* Across jobs (Optimus-style cluster studies): ridge regression of a job's loss-curve
 * parameters on its features, to predict an unseen job, and the greedy allocation of
 * a process budget by marginal gain (time saved per added worker or server). */
#ifndef DTRAIN_JOBS_H
#define DTRAIN_JOBS_H

#include "dtrain/error.h"
#include "perfmodel/perfinput.h"
#include "perfmodel/perfmodel.h"

enum { DT_RIDGE_MAX_FEATURES = 15 };

typedef struct dt_ridge {
    int n_features;
    double lambda;
    double mean[DT_RIDGE_MAX_FEATURES], scale[DT_RIDGE_MAX_FEATURES]; /* standardisation */
    int standardized; /* 0: scale 1, features only centred (plain ridge) */
    double weight[DT_RIDGE_MAX_FEATURES], intercept;
} dt_ridge;

/* x: [n, f] row-major, y: [n]. Features are standardised; the intercept is not
 * penalised. Needs n >= 2. */
int dt_ridge_fit(const double *x, const double *y, int n, int f, double lambda, dt_ridge *model,
                 dt_error *err);
/* The same with standardize 0: plain ridge regression as scikit-learn's Ridge does it
 * (features centred only, so the unpenalised intercept is the mean; the penalty is on
 * the weights in the features' own units). */
int dt_ridge_fit_scaled(const double *x, const double *y, int n, int f, double lambda,
                        int standardize, dt_ridge *model, dt_error *err);
double dt_ridge_predict(const dt_ridge *model, const double *features);

/* Leave-one-out: for each row i, the model fitted without it predicts y[i]: pred[i]
 * with relative error rel_err[i] (|pred - y| / |y|, or |pred| when y is 0); ok[i] = 0
 * when the other rows cannot be fitted. */
int dt_ridge_leave_one_out(const double *x, const double *y, int n, int f, double lambda,
                           double *pred, double *rel_err, int *ok, dt_error *err);

/* A ridge model in its features' own units: y = intercept + sum_j coef[j] x[j]. Returns
 * the intercept; coef: [n_features]. */
double dt_ridge_unscaled(const dt_ridge *model, double *coef);

/* Loss curves across jobs (Optimus): each job's fitted b0, b1, b2 regressed on its
 * features, one ridge model per parameter, to predict an unseen job's curve. */
typedef struct dt_curve_model {
    dt_ridge b[3];
} dt_curve_model;

/* x: [n, f] the jobs' features, b: [n, 3] their b0, b1, b2. Fits the rows i with
 * train[i] != 0 (every row if train is NULL); needs 2 of them. */
int dt_curve_model_fit(const double *x, const double *b, const int *train, int n, int f,
                       double lambda, dt_curve_model *model, dt_error *err);
/* With standardize 0: plain ridge (dt_ridge_fit_scaled). */
int dt_curve_model_fit_scaled(const double *x, const double *b, const int *train, int n, int f,
                              double lambda, int standardize, dt_curve_model *model, dt_error *err);
/* The curve of a job with these features: the regressed b's as they are (a b below 0
 * is not clamped; dt_loss_step_for_target then says whether a target is reached). */
dt_loss_fit dt_curve_model_predict(const dt_curve_model *model, const double *features);
/* Leave-one-out over the training rows: for each, pred[i] is its curve from the model
 * of the other training rows, ok[i] = 1; ok[i] = 0 for a row not trained on or when
 * the others cannot be fitted (fewer than 2). */
int dt_curve_model_leave_one_out(const double *x, const double *b, const int *train, int n, int f,
                                 double lambda, dt_loss_fit *pred, int *ok, dt_error *err);
int dt_curve_model_leave_one_out_scaled(const double *x, const double *b, const int *train, int n,
                                        int f, double lambda, int standardize, dt_loss_fit *pred,
                                        int *ok, dt_error *err);

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

/* dtrain fit-jobs: the b0, b1, b2 of a jobs CSV regressed on its features; each trained
 * job predicted by the model of the others (leave-one-out), each held-out job by the
 * model of the trained ones, an unseen job from its feature values. */
typedef struct dt_fit_jobs_opts {
    const char *path;     /* the jobs CSV (dt_job_table_read) */
    const char *features; /* "c1,c2,..", or NULL: every column but name, b0, b1, b2 and
                             steps_to_target */
    const char *hold_out; /* "name1,name2,..": left out of the fit and predicted, or NULL */
    const char *predict;  /* "f1,f2,..": an unseen job's features, or NULL */
    double lambda;
    int standardize; /* 0: plain ridge (dt_ridge_fit_scaled) */
} dt_fit_jobs_opts;

typedef struct dt_fit_jobs_result {
    dt_job_table table;
    int feat[DT_JOBS_MAX_COLS], n_features;        /* the feature columns of table */
    int steps_col;                                 /* steps_to_target, or -1 */
    double x[DT_JOBS_MAX_ROWS * DT_JOBS_MAX_COLS]; /* [n_rows, n_features] */
    double b[DT_JOBS_MAX_ROWS * 3];                /* each job's own b0, b1, b2 */
    int train[DT_JOBS_MAX_ROWS], n_train;          /* 0: held out */
    dt_curve_model model;                          /* of the trained jobs */
    dt_loss_fit curve[DT_JOBS_MAX_ROWS];           /* each job's predicted curve, where ok[i] */
    int ok[DT_JOBS_MAX_ROWS];
    int has_unseen;
    dt_loss_fit unseen; /* --predict's curve */
    int bad_flag;       /* after a failure: 1 if an option's text is at fault, not the file */
} dt_fit_jobs_result;

int dt_fit_jobs(const dt_fit_jobs_opts *opts, dt_fit_jobs_result *r, dt_error *err);
/* b0, b1 or b2 (k = 0, 1, 2) of a curve. */
double dt_loss_fit_param(const dt_loss_fit *c, int k);

/* dtrain allocate's jobs from a jobs CSV (columns name, remaining_steps, batch, theta0
 * .. theta4: each a parameter-server speed model); jobs holds DT_JOBS_MAX_ROWS. */
int dt_jobs_read(const char *path, dt_job *jobs, int *n, dt_error *err);

#endif
