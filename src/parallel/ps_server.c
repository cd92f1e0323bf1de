#include "parallel/ps_server.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"

/* One server's state while it serves. */
typedef struct server {
    const dt_world *job;
    const dt_ps_config *cfg;
    dt_model *model;
    dt_sgd *opt;
    const dt_lr_schedule *sched;
    dt_ps_server_stats *st;
    int workers, replicas;
    size_t off, n; /* the shard: params[off .. off + n) */
    /* full-size buffers used at [off, off + n), so that SGD sees the same offsets as
     * the parameters and its momentum */
    float *grad, *acc;
    uint16_t *wire; /* [n] a pushed gradient with a 16-bit comm_dtype, else NULL */
    /* Standing receives: workers 0 .. inboxes - 1 each have a receive of their next
     * gradient posted into inbox + i * inbox_bytes, so that every worker's transfer runs
     * at once instead of one worker's after another's (below) */
    char *inbox;
    size_t inbox_bytes;
    int inboxes;
    dt_request *inbox_req; /* [inboxes] */
    dt_request *answer;    /* [3 * workers] the sends of one answer_pulls */
    int64_t head[2];       /* what those sends say: version, optimizer steps */
    long *last_pushed;     /* [workers] version of each worker's last push */
    long *clock;           /* [workers] steps pushed; LONG_MAX once done */
    int *pending;          /* [workers] a pull (1) or a state request (2) waits */
    int *busy;             /* [workers] in an announced long phase (evaluation) */
    long version;          /* updates applied to the shard */
    long count;            /* ps-sync: gradients accumulated for the current version */
} server;

static void server_free(server *sv) {
    dt_free(sv->grad), dt_free(sv->acc), dt_free(sv->wire), dt_free(sv->inbox);
    free(sv->last_pushed), free(sv->clock), free(sv->pending), free(sv->busy);
    free(sv->inbox_req), free(sv->answer);
}

/* Waits for the next message header from any worker, napping as every wait of the
 * server does (dt_world_wait_idle: it may share a CPU with a worker); not forever: a
 * dead worker must not hang the server, unless some worker announced a long phase
 * (dt_ps_busy). */
static void wait_for_message(const server *sv, int64_t header[3], dt_message *msg) {
    int busy = 0;
    for (int i = 0; i < sv->workers; i++) busy |= sv->busy[i];
    const dt_world *w = sv->job;
    dt_request req;
    dt_world_irecv(w, header, 3, DT_S64, DT_ANY_SOURCE, DT_ANY_TAG, &req);
    while (!dt_world_wait_message_idle(w, &req, msg, w->timeout_s))
        if (!busy)
            dt_world_abort(w,
                           "parameter server %d: no message from any worker for %g s "
                           "(a worker died or hangs)",
                           w->rank, w->timeout_s);
}

static void apply(server *sv, float *gradient) {
    sv->opt->lr = (float)dt_lr_at(sv->sched, sv->version);
    dt_sgd_update_range(sv->opt, sv->model->params, gradient, sv->off, sv->n);
    sv->opt->steps++;
    sv->version++;
    sv->st->updates++;
}

/* The standing receives take at most this much memory (a shard a worker): past it,
 * the workers without one are received one after another as they come. */
#define DT_PS_INBOX_BUDGET ((size_t)1 << 30)

static void post_inbox(server *sv, int wi) {
    dt_world_irecv(sv->job, sv->inbox + (size_t)wi * sv->inbox_bytes, sv->n,
                   sv->wire ? DT_BF16 : DT_F32, sv->cfg->servers + wi, DT_PS_TAG_GRADS,
                   &sv->inbox_req[wi]);
}

/* Worker wi's pushed gradient for the shard, [n] values from its standing receive (or
 * received now), unpacked to fp32 where the wire is 16-bit. Valid until repost(). */
static const float *receive_gradient(server *sv, int from, int wi) {
    const size_t off = sv->off, n = sv->n;
    const char *what = "parameter server: receiving gradients";
    if (wi < sv->inboxes) {
        const char *box = sv->inbox + (size_t)wi * sv->inbox_bytes;
        dt_world_wait_idle(sv->job, 1, &sv->inbox_req[wi], from, what);
        if (!sv->wire) return (const float *)box;
        dt_comm_unpack(sv->cfg->comm_dtype, sv->grad + off, (const uint16_t *)box, n);
        return sv->grad + off;
    }
    dt_request req;
    if (sv->wire)
        dt_world_irecv(sv->job, sv->wire, n, DT_BF16, from, DT_PS_TAG_GRADS, &req);
    else
        dt_world_irecv(sv->job, sv->grad + off, n, DT_F32, from, DT_PS_TAG_GRADS, &req);
    dt_world_wait_idle(sv->job, 1, &req, from, what);
    if (sv->wire) dt_comm_unpack(sv->cfg->comm_dtype, sv->grad + off, sv->wire, n);
    return sv->grad + off;
}

/* A push: the gradient of worker wi computed on version header[0], its clock
 * header[1] and epoch header[2]. ps-sync averages `replicas` gradients of the current
 * version and drops older ones; the other modes apply each on arrival. */
static void handle_push(server *sv, int from, int wi, const int64_t header[3]) {
    const size_t off = sv->off, n = sv->n;
    dt_ps_server_stats *st = sv->st;
    const float *g = receive_gradient(sv, from, wi);
    st->bytes_in += (long long)(n * dt_comm_dtype_size(sv->cfg->comm_dtype) + 3 * sizeof(int64_t));
    const long gv = (long)header[0];
    const int ep = header[2] < 0                   ? 0
                   : header[2] >= DT_PS_MAX_EPOCHS ? DT_PS_MAX_EPOCHS - 1
                                                   : (int)header[2];
    sv->last_pushed[wi] = gv;
    sv->clock[wi] = (long)header[1];
    const long stale = sv->version - gv;
    if (sv->cfg->mode == DT_PS_SYNC) {
        if (gv != sv->version) {
            st->dropped++;
            st->epoch_dropped[ep]++;
            if (wi < sv->inboxes) post_inbox(sv, wi);
            return; /* sync: only applied gradients enter the histogram */
        }
        for (size_t i = 0; i < n; i++) sv->acc[off + i] += g[i];
        if (wi < sv->inboxes) post_inbox(sv, wi);
        if (++sv->count == sv->replicas) {
            const float inv = 1.0f / (float)sv->replicas;
            for (size_t i = off; i < off + n; i++) sv->acc[i] *= inv;
            apply(sv, sv->acc);
            memset(sv->acc + off, 0, sizeof(float) * n);
            sv->count = 0;
        }
    } else {
        if (g != sv->grad + off) memcpy(sv->grad + off, g, sizeof(float) * n);
        if (wi < sv->inboxes) post_inbox(sv, wi);
        apply(sv, sv->grad);
    }
    st->applied++;
    const int bin =
        stale < DT_PS_STALENESS_BINS - 1 ? (stale < 0 ? 0 : (int)stale) : DT_PS_STALENESS_BINS - 1;
    st->staleness_hist[bin]++;
    st->epoch_hist[ep][bin]++;
}

/* The sends of a pull's answer (version, shard) or of a checkpoint's view of the shard
 * (version and optimizer steps, parameters, momentum) to rank `to`, into reqs: how
 * many. The values sent stay untouched until answer_pulls has waited for them. */
static int post_shard(server *sv, int to, dt_request *reqs) {
    dt_world_isend(sv->job, sv->head, 1, DT_S64, to, DT_PS_TAG_VERSION, &reqs[0]);
    dt_world_isend(sv->job, sv->model->params + sv->off, sv->n, DT_F32, to, DT_PS_TAG_PARAMS,
                   &reqs[1]);
    sv->st->bytes_out += (long long)(sv->n * sizeof(float) + sizeof sv->head[0]);
    return 2;
}

static int post_state(server *sv, int to, dt_request *reqs) {
    dt_world_isend(sv->job, sv->head, 2, DT_S64, to, DT_PS_TAG_STATE, &reqs[0]);
    dt_world_isend(sv->job, sv->model->params + sv->off, sv->n, DT_F32, to, DT_PS_TAG_STATE_PARAMS,
                   &reqs[1]);
    dt_world_isend(sv->job, sv->opt->velocity + sv->off, sv->n, DT_F32, to,
                   DT_PS_TAG_STATE_MOMENTUM, &reqs[2]);
    return 3;
}

/* Answers the pending pulls that may go now: ps-sync once the version moved past the
 * worker's last push, ssp while the worker is at most `staleness` steps ahead of the
 * slowest live worker, ps-async at once. */
static void answer_pulls(server *sv) {
    const dt_ps_config *cfg = sv->cfg;
    long slowest = LONG_MAX;
    int sent = 0;
    sv->head[0] = sv->version;
    sv->head[1] = sv->opt->steps;
    for (int i = 0; i < sv->workers; i++)
        if (sv->clock[i] < slowest) slowest = sv->clock[i];
    for (int i = 0; i < sv->workers; i++) {
        if (!sv->pending[i]) continue;
        int ok = 1;
        if (cfg->mode == DT_PS_SYNC) ok = sv->version > sv->last_pushed[i];
        if (cfg->mode == DT_PS_SSP)
            ok = slowest == LONG_MAX || sv->clock[i] - slowest <= cfg->staleness;
        if (!ok) continue;
        if (cfg->mode == DT_PS_SSP && slowest != LONG_MAX &&
            sv->clock[i] - slowest > sv->st->max_clock_gap)
            sv->st->max_clock_gap = sv->clock[i] - slowest;
        sent += sv->pending[i] == 2 ? post_state(sv, cfg->servers + i, sv->answer + sent)
                                    : post_shard(sv, cfg->servers + i, sv->answer + sent);
        sv->pending[i] = 0;
    }
    /* every answer at once: one worker's transfer no longer waits for another's */
    if (sent)
        dt_world_wait_idle(sv->job, sent, sv->answer, -1, "parameter server: answering pulls");
}

int dt_ps_serve(const dt_world *job, const dt_ps_config *cfg, dt_model *m, dt_sgd *opt,
                const dt_lr_schedule *sched, long version, dt_ps_server_stats *st, dt_error *err) {
    server sv = {.job = job, .cfg = cfg, .model = m, .opt = opt, .sched = sched, .st = st};
    sv.version = version;
    sv.workers = job->size - cfg->servers;
    sv.replicas = cfg->replicas > 0 && cfg->replicas <= sv.workers ? cfg->replicas : sv.workers;
    dt_ps_shard(m->n_params, cfg->servers, job->rank, &sv.off, &sv.n);
    memset(st, 0, sizeof *st);
    sv.grad = dt_alloc(sizeof(float) * m->n_params, "server gradient buffer", err);
    sv.acc = dt_alloc(sizeof(float) * m->n_params, "server accumulator", err);
    sv.last_pushed = calloc((size_t)sv.workers, sizeof(long));
    sv.clock = calloc((size_t)sv.workers, sizeof(long));
    sv.pending = calloc((size_t)sv.workers, sizeof(int));
    sv.busy = calloc((size_t)sv.workers, sizeof(int));
    /* setting up (loading data, allocating the model) is a long phase too: a worker is
     * busy until its first message */
    for (int i = 0; sv.busy && i < sv.workers; i++) sv.busy[i] = 1;
    if (cfg->comm_dtype != DT_COMM_FP32)
        sv.wire = dt_alloc(sizeof(uint16_t) * (sv.n ? sv.n : 1), "server packed gradient", err);
    sv.answer = calloc((size_t)sv.workers * 3, sizeof(dt_request));
    sv.inbox_bytes = sv.n * (cfg->comm_dtype != DT_COMM_FP32 ? sizeof(uint16_t) : sizeof(float));
    if (sv.inbox_bytes > 0) {
        const size_t fit = DT_PS_INBOX_BUDGET / sv.inbox_bytes;
        sv.inboxes = fit < (size_t)sv.workers ? (int)fit : sv.workers;
    }
    if (sv.inboxes > 0) {
        sv.inbox = dt_alloc(sv.inbox_bytes * (size_t)sv.inboxes, "server gradient inboxes", err);
        sv.inbox_req = calloc((size_t)sv.inboxes, sizeof(dt_request));
    }
    if (!sv.grad || !sv.acc || !sv.last_pushed || !sv.clock || !sv.pending || !sv.busy ||
        !sv.answer || (sv.inboxes > 0 && (!sv.inbox || !sv.inbox_req)) ||
        (cfg->comm_dtype != DT_COMM_FP32 && !sv.wire)) {
        server_free(&sv);
        return dt_error_set(err, "parameter server %d: out of memory", job->rank);
    }
    for (int i = 0; i < sv.workers; i++) sv.last_pushed[i] = -1;
    for (int i = 0; i < sv.inboxes; i++) post_inbox(&sv, i);
    for (int finished = 0; finished < sv.workers;) {
        int64_t header[3];
        dt_message msg;
        wait_for_message(&sv, header, &msg);
        const double t0 = dt_now();
        const int from = msg.source, wi = from - cfg->servers;
        const int values = (int)(msg.bytes / sizeof(int64_t));
        if (values != 3) /* every worker message has a 3-value header (ps.c) */
            dt_world_abort(job,
                           "parameter server %d: a message (tag %d) from rank %d had %d header "
                           "values, 3 expected",
                           job->rank, msg.tag, from, values);
        sv.busy[wi] = msg.tag == DT_PS_TAG_BUSY; /* any other message ends it */
        if (msg.tag == DT_PS_TAG_DONE) {
            sv.clock[wi] = LONG_MAX; /* no longer holds the others back */
            finished++;
        } else if (msg.tag == DT_PS_TAG_PULL) {
            sv.pending[wi] = 1;
        } else if (msg.tag == DT_PS_TAG_STATE_REQ) {
            sv.pending[wi] = 2;
        } else if (msg.tag == DT_PS_TAG_PUSH) {
            handle_push(&sv, from, wi, header);
        }
        answer_pulls(&sv);
        st->busy_s += dt_now() - t0;
    }
    /* a worker says it is done after its last push was taken: nothing will match */
    for (int i = 0; i < sv.inboxes; i++) dt_world_cancel(job, &sv.inbox_req[i]);
    server_free(&sv);
    return 0;
}
