#include "parallel/ps.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"

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

int dt_ps_client_init(dt_ps_client *c, const dt_world *w, const dt_ps_config *cfg, dt_model *m,
                      dt_error *err) {
    memset(c, 0, sizeof *c);
    c->world = w;
    c->cfg = *cfg;
    c->model = m;
    if (cfg->comm_dtype == DT_COMM_FP32) return 0;
    c->wire = dt_alloc(sizeof(uint16_t) * m->n_params, "packed gradient buffer", err);
    return c->wire ? 0 : -1;
}

void dt_ps_client_free(dt_ps_client *c) {
    dt_free(c->wire);
    c->wire = NULL;
}

/* A worker's waits nap (dt_world_wait_idle) as the server's do: a worker waiting for
 * the server spun on the CPU the server (or another worker) needed, where they share
 * one (emulated hosts): lenet5's ps step 13.1 ms with the pull nap alone, 11.4 with
 * every wait napping (docs/scaling.md). */
void dt_ps_pull(dt_ps_client *c) {
    const int P = c->cfg.servers;
    int64_t dummy[3] = {0, c->clock, c->epoch}, versions[64];
    dt_request reqs[3 * 64];
    const double t0 = dt_now();
    for (int s = 0; s < P; s++)
        dt_world_isend(c->world, dummy, 3, DT_S64, s, DT_PS_TAG_PULL, &reqs[s]);
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        dt_world_irecv(c->world, &versions[s], 1, DT_S64, s, DT_PS_TAG_VERSION, &reqs[P + s]);
        dt_world_irecv(c->world, c->model->params + off, n, DT_F32, s, DT_PS_TAG_PARAMS,
                       &reqs[2 * P + s]);
        c->bytes_received += (long long)(n * sizeof(float));
    }
    /* the servers answer with the version first: until then the worker waits (sync,
     * ssp), after it the shard is in transfer */
    dt_world_wait_idle(c->world, 2 * P, reqs, -1, "worker: waiting for the servers");
    c->last_wait_s = dt_now() - t0;
    dt_world_wait_idle(c->world, P, reqs + 2 * P, -1, "worker: pulling parameters");
    for (int s = 0; s < P; s++) c->versions[s] = (long)versions[s];
}

void dt_ps_push(dt_ps_client *c) {
    const int P = c->cfg.servers;
    int64_t headers[64][3];
    dt_request reqs[2 * 64];
    c->clock++;
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        /* version, clock, epoch: all three, the server counts the push in the epoch's
         * staleness histogram (it once got two and read a previous message's epoch) */
        headers[s][0] = c->versions[s];
        headers[s][1] = c->clock;
        headers[s][2] = c->epoch;
        dt_world_isend(c->world, headers[s], 3, DT_S64, s, DT_PS_TAG_PUSH, &reqs[2 * s]);
        if (c->wire) {
            dt_comm_pack(c->cfg.comm_dtype, c->wire + off, c->model->grads + off, n);
            dt_world_isend(c->world, c->wire + off, n, DT_BF16, s, DT_PS_TAG_GRADS,
                           &reqs[2 * s + 1]);
        } else {
            dt_world_isend(c->world, c->model->grads + off, n, DT_F32, s, DT_PS_TAG_GRADS,
                           &reqs[2 * s + 1]);
        }
        c->bytes_sent += (long long)(n * dt_comm_dtype_size(c->cfg.comm_dtype) + sizeof headers[s]);
    }
    dt_world_wait_idle(c->world, 2 * P, reqs, -1, "worker: pushing gradients");
}

void dt_ps_fetch_state(dt_ps_client *c, float *params, float *velocity, long *version,
                       long *opt_steps) {
    const int P = c->cfg.servers;
    int64_t request[3] = {0, c->clock, c->epoch}, state[64][2];
    dt_request reqs[4 * 64];
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        dt_world_isend(c->world, request, 3, DT_S64, s, DT_PS_TAG_STATE_REQ, &reqs[4 * s]);
        dt_world_irecv(c->world, state[s], 2, DT_S64, s, DT_PS_TAG_STATE, &reqs[4 * s + 1]);
        dt_world_irecv(c->world, params + off, n, DT_F32, s, DT_PS_TAG_STATE_PARAMS,
                       &reqs[4 * s + 2]);
        dt_world_irecv(c->world, velocity + off, n, DT_F32, s, DT_PS_TAG_STATE_MOMENTUM,
                       &reqs[4 * s + 3]);
    }
    dt_world_wait_idle(c->world, 4 * P, reqs, -1, "worker: fetching the servers' state");
    *version = (long)state[0][0];
    *opt_steps = (long)state[0][1];
}

/* A header alone to server s, waited for with the world's timeout. */
static void send_header(dt_ps_client *c, const int64_t header[3], int s, int tag,
                        const char *what) {
    dt_request req;
    dt_world_isend(c->world, header, 3, DT_S64, s, tag, &req);
    dt_world_wait_idle(c->world, 1, &req, s, what);
}

void dt_ps_busy(dt_ps_client *c) {
    int64_t dummy[3] = {0, 0, 0};
    for (int s = 0; s < c->cfg.servers; s++)
        send_header(c, dummy, s, DT_PS_TAG_BUSY, "worker: announcing an evaluation");
}

void dt_ps_done(dt_ps_client *c) {
    int64_t dummy[3] = {0, 0, 0};
    for (int s = 0; s < c->cfg.servers; s++)
        send_header(c, dummy, s, DT_PS_TAG_DONE, "worker: saying it is done");
}

void dt_ps_send_stats(const dt_world *job, const dt_ps_server_stats *st, int to) {
    dt_world_send_bytes(job, st, sizeof *st, to, DT_PS_TAG_STATS,
                        "parameter server: sending its statistics");
}

void dt_ps_recv_stats(const dt_world *job, dt_ps_server_stats *st, int from) {
    dt_world_recv_bytes(job, st, sizeof *st, from, DT_PS_TAG_STATS, "collecting server statistics");
}
