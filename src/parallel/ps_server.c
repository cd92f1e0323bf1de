#include "dtrain/ps_server.h"

#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/timer.h"

static void send_shard(const dt_world *w, int to, long version, const float *data, size_t n,
                       dt_ps_server_stats *st) {
    int64_t v = version;
    MPI_Request r[2];
    DT_CHECK_MPI(MPI_Isend(&v, 1, MPI_INT64_T, to, DT_PS_TAG_VERSION, w->comm, &r[0]));
    DT_CHECK_MPI(MPI_Isend(data, (int)n, MPI_FLOAT, to, DT_PS_TAG_PARAMS, w->comm, &r[1]));
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
        DT_CHECK_MPI(MPI_Irecv(header, 3, MPI_INT64_T, MPI_ANY_SOURCE, MPI_ANY_TAG, w->comm, &req));
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
        if (status.MPI_TAG == DT_PS_TAG_DONE) {
            done[wi] = 1;
            clock[wi] = LONG_MAX; /* no longer holds the others back */
            finished++;
        } else if (status.MPI_TAG == DT_PS_TAG_PULL) {
            pending[wi] = 1;
        } else if (status.MPI_TAG == DT_PS_TAG_PUSH) {
            MPI_Request gr;
            DT_CHECK_MPI(
                MPI_Irecv(grad + off, (int)n, MPI_FLOAT, from, DT_PS_TAG_GRADS, w->comm, &gr));
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
