/* Synchronous data parallelism (PyTorch DDP): every worker starts from rank 0's
 * weights; gradients are summed in buckets during backward (ddp.h) and averaged;
 * every worker then applies the same SGD step. */
#include <stdio.h>

#include "core/threads.h"
#include "dtrain/world.h"
#include "parallel/ddp.h"
#include "parallel/sync.h"

/* --overlap auto: decided per host, then on only if every rank's host says on (the
 * ranks then run the same schedule). */
static int choose_overlap(dt_sync *s) {
    const dt_sync_setup *u = &s->setup;
    if (u->overlap != DT_OVERLAP_AUTO) {
        snprintf(s->overlap_why, sizeof s->overlap_why, "%s: asked (--overlap %s)",
                 u->overlap == DT_OVERLAP_ON ? "on" : "off", dt_overlap_mode_name(u->overlap));
        return u->overlap == DT_OVERLAP_ON;
    }
    int local_ranks = 1, spans_hosts = 0;
    dt_world_hosts(u->workers, &local_ranks, &spans_hosts);
    int on = dt_overlap_auto(dt_overlap_host_cores(), dt_overlap_own_cores(), local_ranks,
                             dt_threads_get(), spans_hosts, s->overlap_why, sizeof s->overlap_why);
    double all = on;
    dt_world_allreduce_doubles(u->workers, &all, 1, DT_REDUCE_MIN);
    if (on && !all)
        snprintf(s->overlap_why, sizeof s->overlap_why,
                 "off: another host's ranks have no core to spare");
    return all > 0;
}

static int allreduce_create(dt_sync *s, dt_error *err) {
    const dt_sync_setup *u = &s->setup;
    const int overlap = choose_overlap(s);
    dt_ddp *ddp;
    if (dt_ddp_create(&ddp, u->workers, u->model, u->allreduce, u->comm_dtype, u->bucket_mb,
                      overlap, err))
        return -1;
    dt_ddp_broadcast_model(ddp);
    dt_ddp_set_trace(ddp, u->trace);
    s->impl = ddp;
    s->buckets = dt_ddp_bucket_count(ddp);
    s->overlap = overlap;
    snprintf(s->allreduce_used, sizeof s->allreduce_used, "%s", dt_ddp_allreduce_used(ddp));
    return 0;
}

static void allreduce_destroy(dt_sync *s) {
    dt_ddp_destroy(s->impl);
}

static void allreduce_step_begin(dt_sync *s, int epoch, dt_step_comm *c) {
    (void)epoch, (void)c;
    dt_ddp_begin_step(s->impl);
}

static void allreduce_after_backward(dt_sync *s, dt_step_comm *c) {
    dt_comm_stats cs = {0, 0, 0};
    dt_ddp_finish_step(s->impl, &cs);
    c->t_comm += cs.t_comm;
    c->t_comm_exposed += cs.t_comm_exposed;
    c->bytes_sent += cs.bytes_sent;
}

static void allreduce_update(dt_sync *s, dt_step_comm *c) {
    (void)c;
    dt_sgd_step(s->setup.opt, s->setup.model->params, s->setup.model->grads);
}

static void allreduce_describe(const dt_sync *s, dt_epoch_record *er) {
    if (s->setup.allreduce == DT_ALLREDUCE_AUTO)
        dt_ddp_allreduce_report(s->impl, er->allreduce_auto, sizeof er->allreduce_auto);
    dt_ddp_bucket_report(s->impl, er->bucket_auto, sizeof er->bucket_auto);
}

const dt_sync_kind dt_sync_allreduce = {.name = "allreduce",
                                        .create = allreduce_create,
                                        .destroy = allreduce_destroy,
                                        .step_begin = allreduce_step_begin,
                                        .after_backward = allreduce_after_backward,
                                        .update = allreduce_update,
                                        .describe = allreduce_describe};
