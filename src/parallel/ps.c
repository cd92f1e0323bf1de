#include "dtrain/ps.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/timer.h"
#include "world_mpi.h"

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

void dt_ps_pull(dt_ps_client *c) {
    const int P = c->cfg.servers;
    int64_t dummy[3] = {0, c->clock, c->epoch}, versions[64];
    MPI_Request reqs[3 * 64];
    const double t0 = dt_now();
    for (int s = 0; s < P; s++)
        DT_CHECK_MPI(
            MPI_Isend(dummy, 3, MPI_INT64_T, s, DT_PS_TAG_PULL, dt_world_mpi(c->world), &reqs[s]));
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        DT_CHECK_MPI(MPI_Irecv(&versions[s], 1, MPI_INT64_T, s, DT_PS_TAG_VERSION,
                               dt_world_mpi(c->world), &reqs[P + s]));
        DT_CHECK_MPI(MPI_Irecv(c->model->params + off, (int)n, MPI_FLOAT, s, DT_PS_TAG_PARAMS,
                               dt_world_mpi(c->world), &reqs[2 * P + s]));
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
        /* version, clock, epoch: all three, the server counts the push in the epoch's
         * staleness histogram (it once got two and read a previous message's epoch) */
        headers[s][0] = c->versions[s];
        headers[s][1] = c->clock;
        headers[s][2] = c->epoch;
        DT_CHECK_MPI(MPI_Isend(headers[s], 3, MPI_INT64_T, s, DT_PS_TAG_PUSH,
                               dt_world_mpi(c->world), &reqs[2 * s]));
        if (c->wire) {
            dt_comm_pack(c->cfg.comm_dtype, c->wire + off, c->model->grads + off, n);
            DT_CHECK_MPI(MPI_Isend(c->wire + off, (int)n, MPI_UINT16_T, s, DT_PS_TAG_GRADS,
                                   dt_world_mpi(c->world), &reqs[2 * s + 1]));
        } else {
            DT_CHECK_MPI(MPI_Isend(c->model->grads + off, (int)n, MPI_FLOAT, s, DT_PS_TAG_GRADS,
                                   dt_world_mpi(c->world), &reqs[2 * s + 1]));
        }
        c->bytes_sent += (long long)(n * dt_comm_dtype_size(c->cfg.comm_dtype) + sizeof headers[s]);
    }
    dt_world_wait_all(c->world, 2 * P, reqs, -1, "worker: pushing gradients");
}

void dt_ps_fetch_state(dt_ps_client *c, float *params, float *velocity, long *version,
                       long *opt_steps) {
    const int P = c->cfg.servers;
    int64_t request[3] = {0, c->clock, c->epoch}, state[64][2];
    MPI_Request reqs[4 * 64];
    for (int s = 0; s < P; s++) {
        size_t off, n;
        dt_ps_shard(c->model->n_params, P, s, &off, &n);
        DT_CHECK_MPI(MPI_Isend(request, 3, MPI_INT64_T, s, DT_PS_TAG_STATE_REQ,
                               dt_world_mpi(c->world), &reqs[4 * s]));
        DT_CHECK_MPI(MPI_Irecv(state[s], 2, MPI_INT64_T, s, DT_PS_TAG_STATE, dt_world_mpi(c->world),
                               &reqs[4 * s + 1]));
        DT_CHECK_MPI(MPI_Irecv(params + off, (int)n, MPI_FLOAT, s, DT_PS_TAG_STATE_PARAMS,
                               dt_world_mpi(c->world), &reqs[4 * s + 2]));
        DT_CHECK_MPI(MPI_Irecv(velocity + off, (int)n, MPI_FLOAT, s, DT_PS_TAG_STATE_MOMENTUM,
                               dt_world_mpi(c->world), &reqs[4 * s + 3]));
    }
    dt_world_wait_all(c->world, 4 * P, reqs, -1, "worker: fetching the servers' state");
    *version = (long)state[0][0];
    *opt_steps = (long)state[0][1];
}

void dt_ps_busy(dt_ps_client *c) {
    int64_t dummy[3] = {0, 0, 0};
    for (int s = 0; s < c->cfg.servers; s++)
        DT_CHECK_MPI(MPI_Send(dummy, 3, MPI_INT64_T, s, DT_PS_TAG_BUSY, dt_world_mpi(c->world)));
}

void dt_ps_done(dt_ps_client *c) {
    int64_t dummy[3] = {0, 0, 0};
    for (int s = 0; s < c->cfg.servers; s++)
        DT_CHECK_MPI(MPI_Send(dummy, 3, MPI_INT64_T, s, DT_PS_TAG_DONE, dt_world_mpi(c->world)));
}

void dt_ps_send_stats(const dt_world *job, const dt_ps_server_stats *st, int to) {
    dt_world_send_bytes(job, st, sizeof *st, to, DT_PS_TAG_STATS,
                        "parameter server: sending its statistics");
}

void dt_ps_recv_stats(const dt_world *job, dt_ps_server_stats *st, int from) {
    dt_world_recv_bytes(job, st, sizeof *st, from, DT_PS_TAG_STATS, "collecting server statistics");
}
