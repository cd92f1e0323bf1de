/* `dtrain scale`'s studies on one grid: one study, or one per --bucket-sizes value (in
 * OUT/bucket_<MiB>) or per --modes mode (in OUT/<mode>, then compared: dtrain
 * compare), each swept and published; then, with a link, the link table over them. */
#ifndef DTRAIN_SCALE_STUDIES_H
#define DTRAIN_SCALE_STUDIES_H

#include <signal.h>
#include <stdio.h>

#include "dtrain/error.h"
#include "study/linkmodel.h"
#include "study/predict.h"
#include "study/sweep.h"

typedef struct dt_scale_studies {
    const dt_sweep_config *sweep; /* the grid and every run's settings */
    int cores;                    /* --cores, or 0: as the logs recorded */
    char (*modes)[32];            /* n_modes training modes, or none */
    int n_modes;
    const double *bucket_mb; /* n_buckets bucket sizes, or none */
    int n_buckets;
    double compare_target; /* --modes: the comparison's target test accuracy */
    const dt_link *link;   /* rate_bps 0: no link table */
    int ranks_per_host;    /* for the link table */
    const char *where;     /* where the runs went, for the link table */
    /* a signal the caller caught: no further study starts */
    const volatile sig_atomic_t *stop;
    /* writes a swept study's runs.csv, report and plots into dir; 0, or non-zero after
     * saying why */
    int (*publish)(dt_scale_study *study, const char *dir);
    dt_scale_network network; /* what the runs communicate over, for the predictions */
} dt_scale_studies;

/* Runs the studies: which one starts (unless quiet) and the files written go to
 * progress, the link table to tables. 0; -1 with err set; -2 when publish said why
 * or a stop was asked for (nothing more to say). */
int dt_scale_run_studies(const dt_scale_studies *s, FILE *tables, FILE *progress, dt_error *err);

#endif
