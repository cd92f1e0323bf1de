/* dtrain report: a scaling study (read from a study's folder or a CSV of times)
 * written out as runs.csv, the plots and report.md, every output checked before any is
 * written: absent or a regular file (outfile.h), and none the same file as what the
 * report reads (fileset.h): the --times CSV, the run logs of the study's folder and of
 * the output folder (the plots read run_*.jsonl there). */
#ifndef DTRAIN_REPORT_H
#define DTRAIN_REPORT_H

#include <stdio.h>

#include "dtrain/error.h"
#include "perfmodel/simulate.h"
#include "study/scaling.h"

/* A study from a CSV of times measured with any framework (dt_scale_read_csv):
 * params, dataset (<= 0: unknown, said in a note) and model (NULL: none) as given. On
 * failure s holds the rows read before the bad line (dt_scale_free it). */
int dt_report_read_times(dt_scale_study *s, const char *times, double params, double dataset,
                         const char *model, dt_error *err);

typedef struct dt_report_opts {
    const char *dir;      /* where to write (made if missing) */
    const char *times;    /* the --times CSV read, or NULL */
    const char *from_dir; /* the study folder read, or NULL */
    FILE *tables;         /* also the report's tables here, or NULL */
} dt_report_opts;

/* Checks every output, then writes dir/runs.csv, the plots (not drawn: a note in the
 * report) and dir/report.md; *n_plots: the plots drawn. */
int dt_report_publish(dt_scale_study *s, const dt_report_opts *opts, int *n_plots, dt_error *err);

/* report --times on a CSV whose model column names several models (names[0..n)): one
 * report per model in dir/<model> (its name with characters other than letters,
 * digits, '.', '_' and '-' as '_'), then dir/models.md (each model's speed-ups at the
 * batch size with the most process counts) and one figure of every model's speed-up,
 * dir/speedup_models.png/.svg. *n_plots: 1 when drawn. */
int dt_report_models(const char *times, char (*names)[64], int n, double params, double dataset,
                     int cores, const char *dir, int *n_plots, dt_error *err);

/* simulate --out: dir/simulate.csv (a row per worker count of res[0..n)), the scaling
 * study's plots of the simulated rows (an epoch: dataset / (workers x batch) steps) and
 * dir/simulate.md (table, the sweep's text, and the plots). Every output is checked
 * before any is written, as dt_report_simulated_check, plots included. Plots not drawn
 * are no failure: plot_err then says why (else its msg is empty), *plotted is 0. */
int dt_report_simulated(const dt_profile *p, const dt_sim_config *c, const dt_sim_result *res,
                        int n, double dataset, const char *table, const char *dir,
                        const char *profile, int *plotted, dt_error *plot_err, dt_error *err);

/* Before simulate profiles or simulates anything: -1 with one line when dir holds a
 * scaling study (run logs, runs.csv or report.md: the simulated plots have its plots'
 * names), or simulate.csv / simulate.md could not be written there or would replace
 * profile (the --profile read, or NULL). */
int dt_report_simulated_check(const char *dir, const char *profile, dt_error *err);

#endif
