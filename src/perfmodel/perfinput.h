/* The performance model's inputs, read from files: rank 0's training loss from a run
 * log (through the run-log reader), averaged over windows of steps; speed points from
 * a CSV of measured step times or from dtrain scale's runs.csv; and the jobs CSV of
 * fit-jobs and allocate. CSV files: a header naming the columns, then one row per
 * line, fields split at every comma; the columns used must hold finite numbers. */
#ifndef DTRAIN_PERFINPUT_H
#define DTRAIN_PERFINPUT_H

#include "dtrain/error.h"
#include "perfmodel/perfmodel.h"

/* Smoothed loss: the mean of each window of `every` rank-0 steps, placed at the
 * window's last step (a last, partial window is left out). */
typedef struct dt_loss_points {
    double *step, *loss; /* [n] */
    int n;
    long every;           /* the window used */
    long steps_per_epoch; /* from the run record; 0 = unknown */
    long truncated_lines; /* a cut-short last line was skipped (see runlog.h) */
    char unit[8];         /* what step[] counts: "step" or "epoch" (a CSV's epoch,loss) */
} dt_loss_points;

/* every <= 0: a tenth of an epoch (1 if the epoch is shorter than 10 steps or
 * unknown). A non-finite loss is an error naming its step. */
int dt_loss_points_from_log(const char *path, long every, dt_loss_points *pts, dt_error *err);
void dt_loss_points_free(dt_loss_points *pts);

/* A loss curve as users have it: a CSV whose header names the columns step,loss or
 * epoch,loss (other columns ignored; a header is required), one finite row per line,
 * the step or epoch increasing. every > 1 averages windows of that many rows, as for
 * a log. */
int dt_loss_points_from_csv(const char *path, long every, dt_loss_points *pts, dt_error *err);
/* Keeps the points to fit: drops the last drop_last, then keeps the last tail
 * (0 = all). -1 with err if fewer than 3 would remain. */
int dt_loss_points_select(dt_loss_points *pts, long drop_last, long tail, dt_error *err);

/* dtrain fit-loss: the loss curve of a run log, or of a CSV when path ends in .csv,
 * fitted on the points dt_loss_points_select keeps, its predicted step (for target when
 * > 0, else where |dl/dk| < delta) and, with a target, the step observed. */
typedef struct dt_fit_loss_opts {
    const char *path;
    long every, drop_last, tail;
    double target, delta;
    int online; /* refused for a CSV (no epochs) */
} dt_fit_loss_opts;

typedef struct dt_fit_loss_result {
    dt_loss_points all, pts; /* every point read; those fitted, from all's point first */
    int csv, first;
    long truncated_lines; /* set once the points are selected (a note to give) */
    dt_loss_fit fit;
    double predicted, observed; /* < 0: never, none */
    double lowest;              /* the lowest loss fitted */
    int bad_flag;               /* after a failure: 1 if the options are at fault */
} dt_fit_loss_result;

/* 0 with r to free with dt_fit_loss_free; -1 with err (r then holds nothing). */
int dt_fit_loss(const dt_fit_loss_opts *opts, dt_fit_loss_result *r, dt_error *err);
void dt_fit_loss_free(dt_fit_loss_result *r);

enum { DT_SPEED_MAX_POINTS = 512 };

/* Columns workers, servers (not for all-reduce), batch (global), step_time; or, for
 * all-reduce, runs.csv's procs, batch_size (per process), t_train, iterations (step
 * time = t_train / iterations, batch = procs x batch_size). At most
 * DT_SPEED_MAX_POINTS rows. */
int dt_speed_points_read_csv(const char *path, dt_speed_kind kind, dt_speed_point *pts, int *n,
                             dt_error *err);

enum { DT_JOBS_MAX_ROWS = 256, DT_JOBS_MAX_COLS = 32 };

/* A jobs CSV: the column "name" may hold text (default job1, job2, ...), every other
 * column is a number. Lines starting with '#' are comments (how the file was made),
 * before the header or between rows. */
typedef struct dt_job_table {
    char header[DT_JOBS_MAX_COLS][64];
    int n_cols;
    char names[DT_JOBS_MAX_ROWS][64];
    double v[DT_JOBS_MAX_ROWS][DT_JOBS_MAX_COLS];
    int n_rows;
} dt_job_table;

int dt_job_table_read(const char *path, dt_job_table *t, dt_error *err);
/* The index of a column, or -1. */
int dt_job_table_column(const dt_job_table *t, const char *name);

#endif
