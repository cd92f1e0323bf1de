/* Synchronous data parallelism (PyTorch DDP): every worker starts from rank 0's
 * weights; gradients are summed in buckets during backward (ddp.h) and averaged;
 * every worker then applies the same SGD step. */
#include "dtrain/ddp.h"
#include "dtrain/sync.h"

static int allreduce_create(dt_sync *s, dt_error *err) {
    const dt_sync_setup *u = &s->setup;
    dt_ddp *ddp;
    if (dt_ddp_create(&ddp, u->workers, u->model, u->allreduce, u->comm_dtype,
                      u->bucket_mb > 0 ? u->bucket_mb : 25.0, u->overlap, err))
        return -1;
    dt_ddp_broadcast_model(ddp);
    s->impl = ddp;
    s->buckets = dt_ddp_bucket_count(ddp);
    s->overlap = u->overlap;
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

const dt_sync_kind dt_sync_allreduce = {.name = "allreduce",
                                        .create = allreduce_create,
                                        .destroy = allreduce_destroy,
                                        .step_begin = allreduce_step_begin,
                                        .after_backward = allreduce_after_backward,
                                        .update = allreduce_update};
