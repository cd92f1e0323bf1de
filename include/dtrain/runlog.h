/* The run log: JSON Lines, one object per event ("run", "step", "epoch"), written
 * by rank 0. Field names are fixed by docs (DESIGN.md, "Run log"). */
#ifndef DTRAIN_RUNLOG_H
#define DTRAIN_RUNLOG_H

#include <stdio.h>

#include "dtrain/error.h"
#include "dtrain/ps.h"

typedef struct dt_runlog {
    FILE *file; /* NULL: logging off */
} dt_runlog;

typedef struct dt_step_record {
    int rank, epoch;
    long step;
    double loss, lr;
    double t_data, t_compute, t_comm, t_comm_exposed;
    long long bytes_sent;
    /* parameter-server mode: pull and push times (t_comm = their sum, all exposed) and
     * bytes received with the pull; 0 otherwise */
    double t_pull, t_push, t_wait; /* t_wait: the part of t_pull spent waiting to be served */
    long long bytes_received;
} dt_step_record;

/* Times are per-epoch sums; across ranks the plain names hold the maximum (the
 * critical path) and *_mean the mean. */
typedef struct dt_epoch_record {
    int epoch;
    double train_loss, train_acc, test_loss, test_acc;
    double t_epoch, t_train, t_data, t_compute, t_comm, t_comm_exposed;
    double t_epoch_mean, t_train_mean, t_data_mean, t_compute_mean, t_comm_mean,
        t_comm_exposed_mean;
    double t_eval;        /* evaluation on the test set, after (not in) t_epoch */
    long long bytes_sent; /* all ranks */
    long long images;     /* all ranks */
} dt_epoch_record;

/* path NULL or "" turns logging off. */
int dt_runlog_open(dt_runlog *log, const char *path, dt_error *err);
/* Writes a complete "run" line from a JSON fragment of key/values (no braces). */
void dt_runlog_run(dt_runlog *log, const char *fields_json);
void dt_runlog_step(dt_runlog *log, const dt_step_record *r);
void dt_runlog_epoch(dt_runlog *log, const dt_epoch_record *r);
/* A parameter server's "ps_server" record and its "ps_epoch" records for epochs
 * 0..epochs-1. */
void dt_runlog_ps_server(dt_runlog *log, int server, const dt_ps_server_stats *st, int epochs);
int dt_runlog_close(dt_runlog *log, dt_error *err);

#endif
