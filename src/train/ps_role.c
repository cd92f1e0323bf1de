/* The server ranks of the parameter-server modes. */
#include <string.h>

#include "dtrain/dataset.h"
#include "dtrain/ps_server.h"
#include "dtrain/train_mode.h"
#include "dtrain/train_state.h"

/* Steps per epoch of each worker: the sampler gives it ceil(size / workers) samples. */
static long worker_steps_per_epoch(const dt_train_config *cfg, int workers) {
    dt_dataset ds;
    if (dt_dataset_open(&ds, cfg->data, 1, NULL)) return 1; /* the workers report it */
    long size = cfg->max_samples > 0 && cfg->max_samples < ds.size ? cfg->max_samples : ds.size;
    dt_dataset_close(&ds);
    return ((size + workers - 1) / workers + cfg->batch_size - 1) / cfg->batch_size;
}

int dt_ps_server_role(const dt_train_config *cfg, const dt_world *job, dt_error *err) {
    dt_train_state s;
    if (dt_train_state_init(&s, cfg->model, cfg->width, 1, cfg->seed, cfg->init_path, cfg->lr,
                            cfg->momentum, cfg->weight_decay, err))
        return -1;
    dt_ps_config ps = cfg->ps;
    const dt_train_mode *mode;
    int rc = dt_train_mode_of(cfg, &mode, err);
    if (rc == 0) {
        ps.mode = mode->ps_mode;
        /* the server's version counts updates; ps-sync makes one per step */
        const long steps = worker_steps_per_epoch(cfg, job->size - ps.servers);
        s.sched = (dt_lr_schedule){cfg->lr_schedule,   cfg->lr, 1.0,
                                   cfg->warmup_epochs, steps,   cfg->epochs};
        dt_ps_server_stats st;
        memset(&st, 0, sizeof st);
        rc = dt_ps_serve(job, &ps, &s.model, &s.opt, &s.sched, &st, err);
        if (rc == 0) dt_ps_send_stats(job, &st, ps.servers); /* to the first worker */
    }
    dt_train_state_free(&s);
    return rc;
}
