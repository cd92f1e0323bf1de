/* The server ranks of the parameter-server modes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/dataset.h"
#include "dtrain/train_state.h"
#include "metrics/sysmon.h"
#include "parallel/ps_server.h"
#include "parallel/sys_records.h"
#include "train/resume.h"
#include "train/train_mode.h"

/* The model spec and the steps per epoch of each worker (the sampler gives it
 * ceil(size / workers) samples), from the training data. If the data cannot be
 * opened or the model does not take it, the workers report it: the server then
 * serves the model at its default shape until they end the job. */
static long model_and_steps(const dt_train_config *cfg, int workers, dt_model_spec *spec,
                            long *samples, dt_error *err) {
    dt_dataset ds;
    long steps = 1;
    *samples = 0; /* unknown */
    if (dt_dataset_open(&ds, cfg->data, 1, NULL) == 0) {
        long size = cfg->max_samples > 0 && cfg->max_samples < ds.size ? cfg->max_samples : ds.size;
        *samples = size;
        steps = ((size + workers - 1) / workers + cfg->batch_size - 1) / cfg->batch_size;
        int rc = dt_train_model_spec(spec, cfg->model, cfg->width, &ds, NULL);
        dt_dataset_close(&ds);
        if (rc == 0) return steps;
    }
    if (dt_zoo_spec_of(spec, cfg->model, err)) return -1;
    if (cfg->width > 0) spec->width = cfg->width;
    return steps;
}

int dt_ps_server_role(const dt_train_config *cfg, const dt_world *job, dt_error *err) {
    dt_train_state s;
    dt_model_spec spec;
    long samples;
    const long steps = model_and_steps(cfg, job->size - cfg->ps.servers, &spec, &samples, err);
    spec.reinit = cfg->reinit;
    if (steps < 0 || dt_train_state_init(&s, &spec, 1, cfg->seed, cfg->init_path, cfg->lr,
                                         cfg->momentum, cfg->weight_decay, err))
        return -1;
    dt_ps_config ps = cfg->ps;
    const dt_train_mode *mode;
    int rc = dt_train_mode_of(cfg, &mode, err);
    if (rc == 0) {
        ps.mode = mode->ps_mode;
        ps.comm_dtype = cfg->comm_dtype;
        /* the server's version counts updates; ps-sync makes one per step */
        s.sched = (dt_lr_schedule){cfg->lr_schedule,   cfg->lr, 1.0,
                                   cfg->warmup_epochs, steps,   cfg->epochs};
        /* a resumed run: the servers continue from the checkpoint's parameters,
         * momentum and update count */
        dt_resume_point at = {0};
        const dt_resume_run run = {cfg->epochs, samples, cfg->batch_size};
        if (cfg->resume_dir && samples > 0) /* else the workers report the data */
            rc = dt_resume_load(cfg->resume_dir, cfg, &run, &s.model, &s.opt, &at, err);
        if (rc == 0 && cfg->resume_dir && samples > 0 &&
            dt_resume_finished(&at, cfg->epochs, cfg->max_steps)) {
            dt_train_state_free(&s); /* the workers say so and end too */
            return 0;
        }
        dt_ps_server_stats st;
        memset(&st, 0, sizeof st);
        /* the server's resources too: its sys records follow its statistics */
        dt_sysmon mon;
        dt_error ignored; /* without a sampler the server still serves, with no records */
        dt_sysmon_start(&mon, job->rank, cfg->sys_interval > 0 ? cfg->sys_interval : 1.0, &ignored);
        if (rc == 0) rc = dt_ps_serve(job, &ps, &s.model, &s.opt, &s.sched, at.opt_steps, &st, err);
        dt_sys_record *recs = NULL;
        long n = 0;
        if (rc == 0 && dt_sysmon_take(&mon, &recs, &n)) n = 0; /* out of memory: none */
        dt_sysmon_stop(&mon);
        if (rc == 0) {
            dt_ps_send_stats(job, &st, ps.servers); /* to the first worker */
            for (long i = 0; i < n; i++) snprintf(recs[i].role, sizeof recs[i].role, "server");
            dt_sys_records_send(job, ps.servers, recs, n);
        }
        free(recs);
    }
    dt_train_state_free(&s);
    return rc;
}
