/* Synchronisation strategies: what happens around a training step so that the
 * workers train one model. The training loop calls, every step,
 *   step_begin      before forward          (ps: pull the servers' parameters)
 *   -- backward --  m->on_grads_ready fires as gradients appear (allreduce: start a
 *                   bucket; the strategy hooks itself in at create)
 *   after_backward  gradients exchanged     (allreduce: wait for the buckets;
 *                                            ps: push them to the servers)
 *   update          the optimizer step      (local SGD; ps: none, the servers did it)
 * then epoch_end after each epoch's training steps and finish once at the end.
 * A hook may be NULL (nothing to do). One file per strategy (sync_local.c,
 * sync_allreduce.c, sync_ps.c); a training mode (train_mode.h) names the strategy its
 * workers use. */
#ifndef DTRAIN_SYNC_H
#define DTRAIN_SYNC_H

#include "dtrain/error.h"
#include "dtrain/model.h"
#include "dtrain/sgd.h"
#include "dtrain/world.h"
#include "metrics/runlog.h"
#include "metrics/trace.h"
#include "parallel/allreduce.h"
#include "parallel/overlap.h"
#include "parallel/ps.h"

/* Communication of one step, as the run log's step record counts it. */
typedef struct dt_step_comm {
    double t_comm;         /* time spent communicating */
    double t_comm_exposed; /* the part the step waited for (not hidden behind compute) */
    long long bytes_sent;
    double t_pull, t_push, t_wait; /* parameter server: pull, push, wait to be served */
    long long bytes_received;
} dt_step_comm;

typedef struct dt_sync_setup {
    const dt_world *job;     /* every process of the run (NULL: one process, no MPI) */
    const dt_world *workers; /* the ranks that train (NULL: one process) */
    dt_model *model;
    dt_sgd *opt;
    dt_allreduce_algo allreduce;
    dt_comm_dtype comm_dtype; /* allreduce's wire format (ps: in ps.comm_dtype) */
    double bucket_mb;         /* 0: the default; < 0: auto (measured; ddp.h) */
    dt_overlap_mode overlap;
    dt_ps_config ps;
    int epochs;      /* of the run: per-epoch statistics */
    dt_trace *trace; /* train --trace: the comm track's spans (NULL: none) */
} dt_sync_setup;

typedef struct dt_sync dt_sync;

typedef struct dt_sync_kind {
    const char *name; /* the run record's "mode" */
    int (*create)(dt_sync *s, dt_error *err);
    void (*destroy)(dt_sync *s);
    void (*step_begin)(dt_sync *s, int epoch, dt_step_comm *c);
    void (*after_backward)(dt_sync *s, dt_step_comm *c);
    void (*update)(dt_sync *s, dt_step_comm *c);
    void (*epoch_end)(dt_sync *s, int epoch);
    /* Ends training. Sets *params_replaced when the model's parameters changed since
     * the last step (ps: the servers' final state), so the caller evaluates again. */
    int (*finish)(dt_sync *s, dt_runlog *log, int *params_replaced, dt_error *err);
    /* Before a checkpoint, on every worker at a step boundary: brings the whole
     * training state (parameters, momentum, optimizer steps) into the first worker's
     * model and optimizer (ps: from the servers). NULL: it is there already. */
    int (*collect)(dt_sync *s, dt_error *err);
    /* What the strategy measured and chose so far, into the epoch record (allreduce:
     * with --allreduce auto per bucket size each algorithm's time and the choice, with
     * --bucket-mb auto each size's step and the choice). NULL: nothing to say. */
    void (*describe)(const dt_sync *s, dt_epoch_record *er);
} dt_sync_kind;

struct dt_sync {
    const dt_sync_kind *kind;
    dt_sync_setup setup;
    void *impl;              /* the strategy's own state */
    int buckets;             /* for the run record: gradient buckets (allreduce) */
    int overlap;             /* 1 if communication overlaps backward */
    char overlap_why[160];   /* how --overlap was decided (allreduce; for the run record) */
    char allreduce_used[96]; /* the all-reduce that runs and why (allreduce; ditto) */
};

extern const dt_sync_kind dt_sync_local;     /* one worker: plain SGD */
extern const dt_sync_kind dt_sync_allreduce; /* DDP: bucketed all-reduce, overlapped */
extern const dt_sync_kind dt_sync_ps_worker; /* parameter-server worker: pull, push */

int dt_sync_create(dt_sync *s, const dt_sync_kind *kind, const dt_sync_setup *setup, dt_error *err);
void dt_sync_destroy(dt_sync *s);
void dt_sync_step_begin(dt_sync *s, int epoch, dt_step_comm *c);
void dt_sync_after_backward(dt_sync *s, dt_step_comm *c);
void dt_sync_update(dt_sync *s, dt_step_comm *c);
void dt_sync_epoch_end(dt_sync *s, int epoch);
int dt_sync_finish(dt_sync *s, dt_runlog *log, int *params_replaced, dt_error *err);
int dt_sync_collect(dt_sync *s, dt_error *err);
void dt_sync_describe(const dt_sync *s, dt_epoch_record *er);

#endif
