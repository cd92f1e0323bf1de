/* Plots of a scaling study, drawn by gnuplot (Debian's gnuplot-nox) as PNG and SVG:
 * speed-up vs processes (log2 axis, ideal line), epoch time vs batch size per process
 * count, compute / communication / data-wait stacked bars, and loss curves (from the
 * run logs in dir, when there are any). The data and the gnuplot script are written
 * next to the pictures so they can be redrawn or restyled by hand. */
#ifndef DTRAIN_PLOTS_H
#define DTRAIN_PLOTS_H

#include "dtrain/error.h"
#include "perfmodel/jobs.h"
#include "perfmodel/perfinput.h"
#include "perfmodel/perfmodel.h"
#include "study/scaling.h"

/* the study plots, then one utilisation plot per config (util_p<N>_b<B>.png: CPU and
 * MPI traffic over time, one line per rank, from the first repeat's sys records) */
enum { DT_MAX_PLOTS = 8 + 64 };

/* Writes the plots into dir; names (relative to dir) of the PNGs made go to
 * names[0..*n). Returns -1 if gnuplot is missing or fails (err says which). */
int dt_plots_write(const dt_scale_study *s, const char *dir, char names[][64], int *n,
                   dt_error *err);

/* Every file dt_plots_write may write into its folder for study s (data, script,
 * pictures, gnuplot.err), each name (relative to the folder) passed to visit, so a
 * caller can check them all before writing any; stops at the first non-zero visit
 * returns and returns it. */
int dt_plots_outputs(const dt_scale_study *s, int (*visit)(const char *name, void *ctx), void *ctx);

/* report --times with a model column: every model's strong speed-up T(1)/T(N) on one
 * figure, model i at batch[i] per process (speedup_models.png and .svg in dir, from
 * speedup_model_<i>.dat and speedup_models.gp). *drawn: 1 when gnuplot drew it. */
int dt_plots_models_speedup(const dt_scale_study *studies, const int *batch, int n, const char *dir,
                            int *drawn, dt_error *err);

/* Predicted time to convergence (remaining steps x step time of the speed fit) for
 * every allocation of up to procs_max processes: one row per server count (1 ..
 * procs_max-1 for a parameter-server fit, a single row with servers 0 for all-reduce)
 * with its best worker count. Writes dir/predict_p<servers>.dat (hours vs workers)
 * and dir/predict.gp (the first few server counts), then draws predict.png and .svg.
 * rows must hold procs_max entries; *drawn says whether gnuplot succeeded. */
typedef struct dt_predict_row {
    int servers, best_workers;
    double best_seconds;
} dt_predict_row;
int dt_plots_predict(const dt_speed_fit *fit, double remaining_steps, double batch, int procs_max,
                     const char *dir, dt_predict_row *rows, int *n_rows, int *drawn, dt_error *err);

/* fit-jobs --out: each job's own curve (its b's, solid) against the one the regression
 * predicts for it (leave-one-out or held out, dashed, same colour), the unseen job's
 * (dotted) and the target (when > 0): dir (made if missing)/jobs_curves.gp, drawn as
 * jobs_curves.png and .svg; *drawn says whether gnuplot succeeded. */
int dt_plots_job_curves(const dt_fit_jobs_result *r, double target, const char *dir, int *drawn,
                        dt_error *err);

/* fit-loss --out: every point of all (those from first to first + n_fit fitted, the
 * rest marked left out) and the fitted curve, x up to pred when it is within 10 times
 * the last point: dir/loss_fit.dat and .gp, drawn as loss_fit.png and .svg. */
int dt_plots_loss_fit(const dt_loss_points *all, int first, int n_fit, const dt_loss_fit *fit,
                      double pred, const char *dir, int *drawn, dt_error *err);

/* predict --theta --out: hours to convergence (steps x step time) for workers w_lo ..
 * w_hi and each server count: dir/predict.csv and predict.gp, drawn as predict.png and
 * .svg. */
int dt_plots_theta_table(const dt_speed_fit *fit, const int *servers, int n_servers, int w_lo,
                         int w_hi, double batch, double steps, const char *dir, int *drawn,
                         dt_error *err);

#endif
