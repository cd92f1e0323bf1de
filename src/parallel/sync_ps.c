/* A parameter-server worker (ps.h): each step pulls the servers' parameters,
 * computes gradients on its shard of the data and pushes them; the servers apply the
 * update. At the end every worker pulls the servers' final state, and the first
 * worker collects the servers' statistics into the run log. */
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "parallel/sync.h"
#include "parallel/sys_records.h"

static int ps_create(dt_sync *s, dt_error *err) {
    dt_ps_client *c = calloc(1, sizeof *c);
    if (!c) return dt_error_set(err, "out of memory for the parameter-server client");
    if (dt_ps_client_init(c, s->setup.job, &s->setup.ps, s->setup.model, err)) {
        free(c);
        return -1;
    }
    s->impl = c;
    return 0;
}

static void ps_destroy(dt_sync *s) {
    if (s->impl) dt_ps_client_free(s->impl);
    free(s->impl);
}

static void ps_step_begin(dt_sync *s, int epoch, dt_step_comm *c) {
    dt_ps_client *client = s->impl;
    const double t0 = dt_now();
    client->epoch = epoch;
    dt_ps_pull(client);
    const double t1 = dt_now();
    c->t_pull = t1 - t0;
    dt_trace_add(s->setup.trace, DT_TRACK_COMM, DT_SPAN_PULL, t0, t1,
                 s->setup.trace ? s->setup.trace->step : 0, 0, 0);
    c->t_wait = client->last_wait_s;
    c->bytes_received = (long long)(sizeof(float) * s->setup.model->n_params);
}

static void ps_after_backward(dt_sync *s, dt_step_comm *c) {
    dt_ps_client *client = s->impl;
    const double t0 = dt_now();
    const long long before = client->bytes_sent;
    dt_ps_push(client);
    const double t1 = dt_now();
    c->t_push = t1 - t0;
    dt_trace_add(s->setup.trace, DT_TRACK_COMM, DT_SPAN_PUSH, t0, t1,
                 s->setup.trace ? s->setup.trace->step : 0, 0, client->bytes_sent - before);
    c->t_comm = c->t_comm_exposed = c->t_pull + c->t_push; /* nothing overlaps */
    c->bytes_sent = client->bytes_sent - before;
}

_Static_assert((int)DT_PS_STALENESS_BINS == (int)DT_RUNLOG_STALENESS_BINS,
               "histogram sizes differ");

/* A server's "ps_server" record and its "ps_epoch" records of epochs 0..epochs-1. */
static void log_server(dt_runlog *log, int server, const dt_ps_server_stats *st, int epochs) {
    dt_ps_server_record r = {server,        st->updates,       st->applied,
                             st->dropped,   st->busy_s,        st->bytes_in,
                             st->bytes_out, st->max_clock_gap, {0}};
    memcpy(r.staleness_hist, st->staleness_hist, sizeof r.staleness_hist);
    dt_runlog_ps_server(log, &r);
    for (int e = 0; e < epochs && e < DT_PS_MAX_EPOCHS; e++) {
        dt_ps_epoch_record pe = {server, e, st->epoch_dropped[e], {0}};
        memcpy(pe.staleness_hist, st->epoch_hist[e], sizeof pe.staleness_hist);
        dt_runlog_ps_epoch(log, &pe);
    }
}

static int ps_finish(dt_sync *s, dt_runlog *log, int *params_replaced, dt_error *err) {
    dt_ps_client *client = s->impl;
    const dt_world *job = s->setup.job;
    /* every worker's last push has reached the servers before anyone takes the final
     * parameters, so all workers end with (and save, evaluate) the same model */
    dt_world_barrier(s->setup.workers, "waiting for every worker's last push");
    dt_ps_pull(client);
    *params_replaced = 1;
    dt_ps_done(client);
    if (s->setup.workers->rank != 0) return 0;
    for (int server = 0; server < s->setup.ps.servers; server++) {
        dt_ps_server_stats st;
        dt_ps_recv_stats(job, &st, server);
        log_server(log, server, &st, s->setup.epochs);
        dt_sys_record *recs; /* the server's resource samples follow its statistics */
        long n;
        if (dt_sys_records_recv(job, server, &recs, &n, err)) return -1;
        for (long i = 0; i < n; i++) dt_runlog_sys(log, &recs[i]);
        free(recs);
    }
    return 0;
}

/* The first worker takes the servers' parameters and momentum for the checkpoint. */
static int ps_collect(dt_sync *s, dt_error *err) {
    (void)err;
    if (s->setup.workers->rank != 0) return 0;
    long version;
    dt_ps_fetch_state(s->impl, s->setup.model->params, s->setup.opt->velocity, &version,
                      &s->setup.opt->steps);
    return 0;
}

/* The trainer evaluates after each epoch: silence the servers must not take for death. */
static void ps_epoch_end(dt_sync *s, int epoch) {
    (void)epoch;
    dt_ps_busy(s->impl);
}

const dt_sync_kind dt_sync_ps_worker = {.name = "ps-worker",
                                        .create = ps_create,
                                        .destroy = ps_destroy,
                                        .step_begin = ps_step_begin,
                                        .after_backward = ps_after_backward,
                                        .epoch_end = ps_epoch_end,
                                        .finish = ps_finish,
                                        .collect = ps_collect};
