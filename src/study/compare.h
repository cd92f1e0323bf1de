/* `dtrain compare DIR...`: several scaling studies (typically one per training mode:
 * all-reduce, ps-sync, ps-async, on the same grid) side by side - the table of the
 * classic sync-vs-async study, computed from the run logs: per run, the training time
 * to a target test accuracy, the final accuracy, the epoch time, the bytes each role
 * moved per epoch and the CPU use; and a plot of test accuracy against training time,
 * one line per run. Reads each folder as `dtrain report DIR` does (repeats combined:
 * medians); accuracy curves and time to target come from each config's first repeat
 * (its eval records when the run had --eval-every, else its epoch records). */
#ifndef DTRAIN_COMPARE_H
#define DTRAIN_COMPARE_H

#include "dtrain/error.h"

typedef struct dt_compare_run {
    char label[64]; /* the study's mode, else its folder's name */
    int workers, servers, batch;
    double target_time;  /* training seconds (evaluation excluded) to the target; -1 never */
    long target_step;    /* steps done then; -1 */
    int from_evals;      /* the curve is of eval records (1) or epoch records (0) */
    long eval_samples;   /* test samples each eval record evaluated; -1 unknown */
    double final_acc;    /* last epoch's test accuracy, -1 unknown */
    double t_train;      /* median training time of the measured epoch */
    double worker_mb;    /* MB a worker sent per epoch (mean over ranks); -1 */
    double worker_in_mb; /* MB a worker received per epoch (parameter servers); -1 */
    double server_mb;    /* MB all servers moved (in + out) per epoch; -1 */
    double cpu_pct;      /* mean CPU per rank, % of a core; -1 */
} dt_compare_run;

/* Reads the studies and writes out_dir/compare.md, compare.csv and the accuracy plot
 * (accuracy_time.png and .svg; gnuplot). Fills runs[0..*n) (at most max). */
int dt_compare_studies(const char *const *dirs, int n_dirs, double target, const char *out_dir,
                       dt_compare_run *runs, int max, int *n, dt_error *err);

#endif
