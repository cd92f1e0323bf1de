#include "dtrain/ps.h"

#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/timer.h"

enum {
    TAG_PULL = 11,
    TAG_VERSION = 12,
    TAG_PARAMS = 13,
    TAG_PUSH = 14,
    TAG_GRADS = 15,
    TAG_DONE = 16
};

int dt_ps_parse_mode(const char *name, dt_ps_mode *mode) {
    if (!strcmp(name, "ps-sync"))
        *mode = DT_PS_SYNC;
    else if (!strcmp(name, "ps-async"))
        *mode = DT_PS_ASYNC;
    else if (!strcmp(name, "ssp"))
        *mode = DT_PS_SSP;
    else
        return -1;
    return 0;
}

const char *dt_ps_mode_name(dt_ps_mode mode) {
    return mode == DT_PS_SYNC    ? "ps-sync"
           : mode == DT_PS_ASYNC ? "ps-async"
           : mode == DT_PS_SSP   ? "ssp"
                                 : "none";
}

void dt_ps_shard(size_t n_params, int servers, int s, size_t *offset, size_t *count) {
    size_t per = n_params / (size_t)servers, extra = n_params % (size_t)servers;
    *offset = (size_t)s * per + ((size_t)s < extra ? (size_t)s : extra);
    *count = per + ((size_t)s < extra ? 1 : 0);
}

static void send_shard(const dt_world *w, int to, long version, const float *data, size_t n,
                       dt_ps_server_stats *st) {
    int64_t v = version;
    MPI_Request r[2];
    DT_CHECK_MPI(MPI_Isend(&v, 1, MPI_INT64_T, to, TAG_VERSION, MPI_COMM_WORLD, &r[0]));
    DT_CHECK_MPI(MPI_Isend(data, (int)n, MPI_FLOAT, to, TAG_PARAMS, MPI_COMM_WORLD, &r[1]));
    dt_world_wait_all(w, 2, r, to, "parameter server: answering a pull");
    st->bytes_out += (long long)(n * sizeof(float) + sizeof v);
}

int dt_ps_serve(const dt_world *w, const dt_ps_config *cfg, dt_model *m, dt_sgd *opt,
                const dt_lr_schedule *sched, dt_ps_server_stats *st, dt_error *err) {
    const int workers = w->size - cfg->servers, s = w->rank;
    const int replicas = cfg->replicas > 0 && cfg->replicas <= workers ? cfg->replicas : workers;
    size_t off, n;
    dt_ps_shard(m->n_params, cfg->servers, s, &off, &n);
    memset(st, 0, sizeof *st);
    /* full-size buffers used at [off, off + n), so that SGD sees the same offsets as
     * the parameters and its momentum */
    float *grad = dt_alloc(sizeof(float) * m->n_params, "server gradient buffer", err);
    float *acc = dt_alloc(sizeof(float) * m->n_params, "server accumulator", err);
    long *last_pushed = calloc((size_t)workers, sizeof(long));
    long *clock = calloc((size_t)workers, sizeof(long));
    int *pending = calloc((size_t)workers, sizeof(int)),
        *done = calloc((size_t)workers, sizeof(int));
    if (!grad || !acc || !last_pushed || !clock || !pending || !done) {
        dt_free(grad), dt_free(acc), free(last_pushed), free(clock), free(pending), free(done);
        return dt_error_set(err, "parameter server %d: out of memory", s);
    }
    for (int i = 0; i < workers; i++) last_pushed[i] = -1;
    long version = 0, count = 0;
    int finished = 0;
    while (finished < workers) {
        int64_t header[3];
        MPI_Request req;
        MPI_Status status;
        DT_CHECK_MPI(
            MPI_Irecv(header, 3, MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req));
        /* not forever: a dead worker must not hang the server; and yield the core now
         * and then, which oversubscribed runs share */
        int flag = 0;
        long polls = 0;
        const double start = dt_now();
        while (!flag) {
            DT_CHECK_MPI(MPI_Test(&req, &flag, &status));
            if (flag || (++polls & 1023)) continue;
            if (dt_now() - start > w->timeout_s)
                dt_world_abort(w,
                               "parameter server %d: no message from any worker for %.0f s "
                               "(a worker died or hangs)",
                               s, w->timeout_s);
            sched_yield();
        }
        double t0 = dt_now();
        int from = status.MPI_SOURCE, wi = from - cfg->servers;
        if (status.MPI_TAG == TAG_DONE) {
            done[wi] = 1;
            clock[wi] = LONG_MAX; /* no longer holds the others back */
            finished++;
        } else if (status.MPI_TAG == TAG_PULL) {
            pending[wi] = 1;
        } else if (status.MPI_TAG == TAG_PUSH) {
            MPI_Request gr;
            DT_CHECK_MPI(
                MPI_Irecv(grad + off, (int)n, MPI_FLOAT, from, TAG_GRADS, MPI_COMM_WORLD, &gr));
            dt_world_wait_all(w, 1, &gr, from, "parameter server: receiving gradients");
            st->bytes_in += (long long)(n * sizeof(float) + sizeof header);
            long gv = (long)header[0];
            int ep = header[2] < 0                   ? 0
                     : header[2] >= DT_PS_MAX_EPOCHS ? DT_PS_MAX_EPOCHS - 1
                                                     : (int)header[2];
            last_pushed[wi] = gv;
            clock[wi] = (long)header[1];
            long stale = version - gv;
            if (cfg->mode == DT_PS_SYNC) {
                if (gv == version) {
                    for (size_t i = off; i < off + n; i++) acc[i] += grad[i];
                    if (++count == replicas) {
                        const float inv = 1.0f / (float)replicas;
                        for (size_t i = off; i < off + n; i++) acc[i] *= inv;
                        opt->lr = (float)dt_lr_at(sched, version);
                        dt_sgd_update_range(opt, m->params, acc, off, n);
                        opt->steps++;
                        memset(acc + off, 0, sizeof(float) * n);
                        count = 0;
                        version++;
                        st->updates++;
                    }
                    st->applied++;
                } else {
                    st->dropped++;
                    st->epoch_dropped[ep]++;
                }
            } else {
                opt->lr = (float)dt_lr_at(sched, version);
                dt_sgd_update_range(opt, m->params, grad, off, n);
                opt->steps++;
                version++;
                st->updates++;
                st->applied++;
            }
            if (cfg->mode != DT_PS_SYNC || stale == 0) { /* sync: only applied ones */
                int bin = stale < DT_PS_STALENESS_BINS - 1 ? (stale < 0 ? 0 : (int)stale)
                                                           : DT_PS_STALENESS_BINS - 1;
                st->staleness_hist[bin]++;
                st->epoch_hist[ep][bin]++;
            }
        }
        /* answer the pulls that may go now */
        long slowest = LONG_MAX;
        for (int i = 0; i < workers; i++)
            if (!done[i] && clock[i] < slowest) slowest = clock[i];
        for (int i = 0; i < workers; i++) {
            if (!pending[i]) continue;
            int ok = 1;
            if (cfg->mode == DT_PS_SYNC) ok = version > last_pushed[i];
            if (cfg->mode == DT_PS_SSP)
                ok = slowest == LONG_MAX || clock[i] - slowest <= cfg->staleness;
            if (!ok) continue;
            if (cfg->mode == DT_PS_SSP && slowest != LONG_MAX &&
                clock[i] - slowest > st->max_clock_gap)
                st->max_clock_gap = clock[i] - slowest;
            send_shard(w, cfg->servers + i, version, m->params + off, n, st);
            pending[i] = 0;
        }
        st->busy_s += dt_now() - t0;
    }
    dt_free(grad), dt_free(acc), free(last_pushed), free(clock), free(pending), free(done);
    return 0;
}

void dt_ps_client_init(dt_ps_client *c, const dt_world *w, const dt_ps_config *cfg, dt_model *m) {
    memset(c, 0, sizeof *c);
    c->world = w;
    c->cfg = *cfg;
    c->model = m;
}

void dt_ps_pull(dt_ps_client *c) {
    const int P = c->cfg.servers;
    int64_t dummy[3] = {0, c->clock, c->epoch}, versions[64];
    MPI_Request reqs[3 * 64];
    const double t0 = dt_now();
    for (int s = 0; s < P; s++)
        DT_CHECK_MPI(MPI_Isend(dummy, 3, MPI_INT64_T, s, TAG_PULL, MPI_COMM_WORLD, &reqs[s]));
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        DT_CHECK_MPI(
            MPI_Irecv(&versions[s], 1, MPI_INT64_T, s, TAG_VERSION, MPI_COMM_WORLD, &reqs[P + s]));
        DT_CHECK_MPI(MPI_Irecv(c->model->params + off, (int)n, MPI_FLOAT, s, TAG_PARAMS,
                               MPI_COMM_WORLD, &reqs[2 * P + s]));
        c->bytes_received += (long long)(n * sizeof(float));
    }
    /* the servers answer with the version first: until then the worker waits (sync,
     * ssp), after it the shard is in transfer */
    dt_world_wait_all(c->world, 2 * P, reqs, -1, "worker: waiting for the servers");
    c->last_wait_s = dt_now() - t0;
    dt_world_wait_all(c->world, P, reqs + 2 * P, -1, "worker: pulling parameters");
    for (int s = 0; s < P; s++) c->versions[s] = (long)versions[s];
}

void dt_ps_push(dt_ps_client *c) {
    const int P = c->cfg.servers;
    int64_t headers[64][3];
    MPI_Request reqs[2 * 64];
    c->clock++;
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        headers[s][0] = c->versions[s];
        headers[s][1] = c->clock;
        DT_CHECK_MPI(
            MPI_Isend(headers[s], 2, MPI_INT64_T, s, TAG_PUSH, MPI_COMM_WORLD, &reqs[2 * s]));
        DT_CHECK_MPI(MPI_Isend(c->model->grads + off, (int)n, MPI_FLOAT, s, TAG_GRADS,
                               MPI_COMM_WORLD, &reqs[2 * s + 1]));
        c->bytes_sent += (long long)(n * sizeof(float) + sizeof headers[s]);
    }
    dt_world_wait_all(c->world, 2 * P, reqs, -1, "worker: pushing gradients");
}

void dt_ps_done(dt_ps_client *c) {
    int64_t dummy[3] = {0, 0, 0};
    for (int s = 0; s < c->cfg.servers; s++)
        DT_CHECK_MPI(MPI_Send(dummy, 3, MPI_INT64_T, s, TAG_DONE, MPI_COMM_WORLD));
}
