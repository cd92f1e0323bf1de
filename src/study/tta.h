/* Time to a target loss against the worker count: the scaling study's runs give the
 * steps each global batch needs to reach the target (their training-loss curves), an
 * empirical model carries that to other global batches, and the predicted step time
 * past the machine (predict.h) turns steps into time.
 *
 *   steps to target  S(G) = S_min + E_min / G          (G = workers x batch per worker)
 *
 * McCandlish et al., "An Empirical Model of Large-Batch Training" (2018): the samples
 * needed, E(G) = G S(G) = E_min (1 + G / B_noise), grow once the batch passes the
 * gradient noise scale, and the steps fall to S_min. Fitted (NNLS, relative residuals)
 * to the runs that reached the target; each run's own Optimus loss curve (perfmodel.h,
 * 1 / (b0 k + b1) + b2) is fitted too and shown beside it, since Optimus predicts a
 * job's steps from its own curve. The model's error: leave-one-out over the runs that
 * reached the target; a run that did not reach it contradicts the model when S(G) is
 * below its steps. */
#ifndef DTRAIN_TTA_H
#define DTRAIN_TTA_H

#include <stdio.h>

#include "dtrain/error.h"
#include "perfmodel/perfmodel.h"
#include "study/scaling.h"

/* The default target: this share of the way down from the loss at the first step
 * (the runs' median) to the lowest final loss of any run. */
#define DT_TTA_DEFAULT_PROGRESS 0.9
/* The error each model is held to before the report recommends from them: the
 * simulator's step (median |error| over the grid) and the steps-to-target model
 * (median leave-one-out |error|). */
#define DT_TTA_SPEED_ERROR 0.10
#define DT_TTA_STEPS_ERROR 0.20

/* A loss curve has at most 80 windows: 1/40 of the steps each, rounded down. */
enum { DT_TTA_MAX_RUNS = 128, DT_TTA_MAX_POINTS = 64 * 16, DT_TTA_CURVE_POINTS = 80 };

typedef struct dt_tta_run {
    int procs, batch;
    double global_batch;
    int seeds;               /* repeats whose curves were averaged (each its own seed) */
    long steps;              /* steps run (rank 0's) */
    double final_loss;       /* the last window's mean */
    double observed;         /* first step whose window mean is <= target; -1: not reached */
    double curve;            /* the run's own Optimus curve's step for the target; -1: none */
    double model;            /* S(G): leave-one-out for a run that reached the target, else the
                                fit of all; -1 when not fitted */
    double error;            /* (model - observed) / observed; for a run that did not reach the
                                target, (steps - model) / steps where model < steps, else 0; -1 */
    double step_s;           /* measured step (s) of the config; -1 unknown */
    double predicted_step_s; /* the simulator's step on the study's network; -1 none */
} dt_tta_run;

typedef struct dt_tta_point {
    int workers, batch; /* batch per worker */
    double steps, step_s, time_s;
    int extrapolated; /* the global batch lies outside those that reached the target */
} dt_tta_point;

typedef struct dt_scale_tta {
    double target, first_loss, lowest_final;
    int target_given; /* --target-loss; else the default rule */
    dt_tta_run runs[DT_TTA_MAX_RUNS];
    int n_runs, n_reached;
    int fitted;           /* S(G) fitted (2 or more runs reached the target) */
    double s_min, e_min;  /* steps, samples */
    double g_lo, g_hi;    /* global batches of the runs that reached the target */
    int n_errors;         /* runs that reached the target with a leave-one-out S(G) */
    double median, worst; /* |error| over those; -1 when none */
    int n_early;          /* runs that did not reach it where S(G) < their steps */
    double worst_early;   /* the largest (steps - S(G)) / steps of those; 0 */
    double speed_median;  /* the simulator's median |error| on the grid; -1 unknown */
    dt_tta_point points[DT_TTA_MAX_POINTS];
    int n_points;
    int best, best_in_range; /* indices into points: fastest, fastest not extrapolated; -1 */
    int recommend;           /* both models within their stated error */
} dt_scale_tta;

/* The training-loss curve of one run log: the mean of rank 0's losses over each 1/40
 * of its steps, at the window's middle step (k[i], l[i], at most DT_TTA_CURVE_POINTS;
 * *n of them); *first: the first step's loss; *steps: rank 0's. 1 if a curve was read, 0 if there
 * is no log or no step, -1 on error. */
int dt_tta_loss_curve(const char *log, double *k, double *l, int *n, double *first, long *steps,
                      dt_error *err);

/* Reads the logs of each config's repeats in dir (run_p<N>_b<B>.jsonl, then
 * run_p<N>_b<B>_r2.jsonl ...: each repeat a seed of its own), averages their loss
 * curves, and works out everything above for s (its predictions: past-the-machine rows give the
 * worker counts and step times). target <= 0: the default rule. *out is NULL when no log has a loss
 * curve; else allocated (free it). */
int dt_scale_tta_compute(const dt_scale_study *s, const char *dir, double target,
                         dt_scale_tta **out, dt_error *err);

/* The report's section. */
void dt_scale_tta_write(const dt_scale_tta *t, FILE *out);

#endif
