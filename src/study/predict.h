/* `dtrain scale` predicts before it measures: every config's step and epoch time from
 * the model's per-op profile taken here, at the config's batch size per process and
 * the threads each run gets (dt_bench_profile), and the step simulator
 * (perfmodel/simulate.h) on the study's network: this machine's shared memory, or the
 * emulated hosts' link. Written to OUT/predicted.csv before the first run; the report
 * sets each prediction beside the measured step (`report` rebuilds it from the folder). */
#ifndef DTRAIN_PREDICT_H
#define DTRAIN_PREDICT_H

#include <stdio.h>

#include "dtrain/error.h"
#include "study/scaling.h"
#include "study/sweep.h"

typedef struct dt_scale_predicted {
    int procs, batch, threads;
    int beyond;       /* 1: past the machine (the predict network below), not one of the grid's */
    double step_s;    /* simulated step: compute + exposed communication */
    double compute_s; /* forward, backward and update, from the profile */
    double comm_s;    /* the step's all-reduces, hidden or not */
    double exposed_s; /* communication not hidden behind backward */
} dt_scale_predicted;

/* The network a study's runs communicate over, for the simulator. */
typedef struct dt_scale_network {
    int hosts;          /* 0: every rank on this machine (shared memory) */
    int ranks_per_host; /* with hosts */
    double rate_bps;    /* the hosts' link (bit/s) and its one-way delay */
    double delay_s;
    /* Past the machine: every batch size also on 1, 2, 4, .. beyond_workers workers,
     * each a host of its own on this link (beyond_per_host > 1: that many workers a
     * host on shared memory, a tree); 0 workers: none. */
    int beyond_workers, beyond_per_host;
    double beyond_rate_bps, beyond_delay_s;
} dt_scale_network;

/* scale's defaults for the past-the-machine curves: 10 Gbit/s, 20 us, up to 64 workers. */
#define DT_PREDICT_BEYOND_RATE_BPS 10e9
#define DT_PREDICT_BEYOND_DELAY_S  20e-6
#define DT_PREDICT_BEYOND_WORKERS  64

/* Profiles cfg's model at each batch size of the grid and simulates every (procs,
 * batch) config of an all-reduce mode; writes OUT/predicted.csv (whole or not at all).
 * A line per profile to progress unless cfg->quiet. ps-sync and ps-async are simulated
 * on the ps:S topology (cfg's servers, on hosts of their own past the machine); ssp gets
 * no prediction (0, nothing written, a line saying so). */
int dt_scale_predict(const dt_sweep_config *cfg, const dt_scale_network *net, FILE *progress,
                     dt_error *err);

/* Profiles cfg's model alone again at each batch size (as the prediction's 1-process
 * profile was taken) before repeat pass `pass` (0-based, >= 1) and writes OUT/drift.csv
 * (pass, batch, step_ms, factor: the step against the prediction's own 1-process one),
 * replacing that pass's rows; dt_scale_read_predictions then scales each config's
 * predicted compute by the mean factor over the passes (the machine's speed drifts
 * between the profile and the runs). Nothing without predictions. -1 with err. */
int dt_scale_profile_drift(const dt_sweep_config *cfg, int pass, FILE *progress, dt_error *err);

/* report --times's what-if: predicts the configs of s (times measured elsewhere) and
 * 1, 2, 4, .. beyond_workers workers from a profile taken here (`bench --profile-out`),
 * its compute rescaled at each batch size by the 1-process step measured there (a
 * batch without one: the median factor of the others), the all-reduce overlapped on a
 * link of rate_bps bit/s and delay_s a message, one worker a host. Writes
 * dir/predicted.csv and reads it into s; -1 with err (no 1-process row, a bad
 * profile). */
int dt_scale_predict_times(dt_scale_study *s, const char *profile_path, double rate_bps,
                           double delay_s, int beyond_workers, const char *dir, dt_error *err);

/* Reads DIR/predicted.csv into s (replacing what s held): 1 when read, 0 when there is
 * none, -1 with err (a file that is there but bad). */
int dt_scale_read_predictions(dt_scale_study *s, const char *dir, dt_error *err);

/* The measured step of a config: its measured epoch's time / its steps (-1: unknown). */
double dt_scale_measured_step(const dt_scale_study *s, const dt_scale_row *r);

/* The grid's predictions against the configs measured on a quiet machine with a core
 * for each process: median and worst |error| (-1 when none), how many, and how many
 * were left out as busy or as running more processes than cores (any pointer may be
 * NULL). */
void dt_scale_prediction_error(const dt_scale_study *s, double *median, double *worst, int *n,
                               int *busy, int *oversubscribed);

/* The report's section: each config predicted beside measured, the error, and the
 * median |error| over the configs not measured on a busy machine. Nothing without
 * predictions. */
void dt_scale_write_predictions(const dt_scale_study *s, FILE *out);

#endif
