#include "dtrain/trainer.h"

#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dtrain/checkpoint.h"
#include "dtrain/dataset.h"
#include "dtrain/ddp.h"
#include "dtrain/loader.h"
#include "dtrain/model.h"
#include "dtrain/runlog.h"
#include "dtrain/sampler.h"
#include "dtrain/sgd.h"
#include "dtrain/threads.h"
#include "dtrain/timer.h"
#include "dtrain/transform.h"
#include "dtrain/zoo.h"

typedef struct trainer {
    int rank, size; /* among the ranks that train (workers, in PS mode) */
    int ps;         /* parameter-server mode: no collectives among workers */
    dt_ps_client client;
    const dt_world *world; /* NULL: one process, no MPI */
    dt_model model;
    dt_sgd opt;
    dt_dataset train, test;
    dt_transform train_tf, test_tf;
    dt_sampler sampler;
    dt_loader *loader;
    dt_ddp *ddp;
    dt_runlog log;
    int32_t *labels;      /* [batch] */
    uint8_t *eval_pixels; /* one sample per thread for evaluation */
} trainer;

static void trainer_free(trainer *t) {
    dt_ddp_destroy(t->ddp);
    dt_loader_destroy(t->loader);
    dt_sampler_free(&t->sampler);
    free(t->eval_pixels);
    dt_model_free(&t->model);
    dt_sgd_free(&t->opt);
    dt_dataset_close(&t->train);
    dt_dataset_close(&t->test);
    free(t->labels);
    dt_runlog_close(&t->log, NULL);
}

/* Sums `n` doubles over the ranks, in place (no-op on one process). */
static void sum_over_ranks(const trainer *t, double *v, int n) {
    if (t->world && t->size > 1 && !t->ps) dt_world_allreduce_doubles(t->world, v, n, MPI_SUM);
}

/* Every rank evaluates every size-th test sample from its rank; the sums are
 * combined, so the figure is over the whole test set. */
static void evaluate(trainer *t, double *loss, double *acc) {
    dt_model *m = &t->model;
    int saved = m->training;
    m->training = 0;
    double sums[2] = {0.0, 0.0}; /* loss * n, correct */
    const size_t sample = dt_model_input_floats_per_sample(m);
    /* in PS mode each worker evaluates the whole test set on its own copy */
    const int e_rank = t->ps ? 0 : t->rank, e_size = t->ps ? 1 : t->size;
    const int mine = (t->test.size - e_rank + e_size - 1) / e_size;
    for (int i = 0; i < mine; i += m->max_batch) {
        int n = mine - i < m->max_batch ? mine - i : m->max_batch;
        float *x = dt_model_input_data(m);
#pragma omp parallel for schedule(static)
        for (int k = 0; k < n; k++) {
            int index = e_rank + (i + k) * e_size;
            uint8_t *px = t->eval_pixels + (size_t)omp_get_thread_num() * sample;
            t->labels[k] = dt_dataset_sample(&t->test, index, px);
            dt_transform_apply(&t->test_tf, px, 0, index, x + (size_t)k * sample);
        }
        dt_model_forward(m, n);
        int hits = 0;
        sums[0] += dt_model_loss(m, t->labels, n, &hits) * n;
        sums[1] += hits;
    }
    m->training = saved;
    sum_over_ranks(t, sums, 2);
    *loss = sums[0] / t->test.size;
    *acc = sums[1] / t->test.size;
}

static int setup(trainer *t, const dt_train_config *cfg, dt_error *err) {
    dt_model_spec spec;
    if (dt_zoo_default_spec(&spec, cfg->model))
        return dt_error_set(err, "unknown model '%s' (known: %s)", cfg->model, dt_zoo_names());
    if (cfg->width > 0) spec.width = cfg->width;
    if (dt_dataset_open(&t->train, cfg->data, 1, err) ||
        dt_dataset_open(&t->test, cfg->data, 0, err))
        return -1;
    if (t->train.c != spec.in_c || t->train.h != spec.in_h || t->train.w != spec.in_w)
        return dt_error_set(err, "model %s takes %dx%dx%d inputs but %s has %dx%dx%d images",
                            cfg->model, spec.in_c, spec.in_h, spec.in_w, cfg->data, t->train.c,
                            t->train.h, t->train.w);
    if (cfg->max_samples > 0 && cfg->max_samples < t->train.size)
        t->train.size = (int)cfg->max_samples;
    if (cfg->max_test_samples > 0 && cfg->max_test_samples < t->test.size)
        t->test.size = (int)cfg->max_test_samples;
    if (dt_zoo_build(&t->model, &spec, err) || dt_model_alloc(&t->model, cfg->batch_size, err))
        return -1;
    dt_model_init_params(&t->model, cfg->seed);
    if (dt_sgd_init(&t->opt, t->model.n_params, cfg->lr, cfg->momentum, cfg->weight_decay, err))
        return -1;
    if (cfg->init_path && dt_checkpoint_load(&t->model, NULL, cfg->init_path, err)) return -1;
    t->labels = malloc(sizeof(int32_t) * (size_t)cfg->batch_size);
    t->eval_pixels =
        malloc(dt_model_input_floats_per_sample(&t->model) * (size_t)omp_get_max_threads());
    if (!t->labels || !t->eval_pixels) return dt_error_set(err, "out of memory for the loader");
    dt_transform_init(&t->train_tf, &t->train, cfg->augment < 0 ? t->train.augment : cfg->augment,
                      cfg->seed);
    dt_transform_init(&t->test_tf, &t->test, 0, cfg->seed);
    if (dt_sampler_init(&t->sampler, t->train.size, t->rank, t->size, 1, cfg->seed, err) ||
        dt_loader_create(&t->loader, &t->train, &t->train_tf, cfg->batch_size, cfg->loader_workers,
                         0, err))
        return -1;
    if (t->ps) {
        dt_ps_client_init(&t->client, t->world, &cfg->ps, &t->model);
    } else if (t->world && t->size > 1) {
        if (dt_ddp_create(&t->ddp, t->world, &t->model, cfg->allreduce,
                          cfg->bucket_mb > 0 ? cfg->bucket_mb : 25.0, !cfg->no_overlap, err))
            return -1;
        dt_ddp_broadcast_model(t->ddp); /* every rank starts from rank 0's weights */
    }
    return t->rank == 0 ? dt_runlog_open(&t->log, cfg->log_path, err) : 0;
}

/* Per-rank sums of an epoch, reduced to max and mean over ranks for the record. */
enum { E_T_LOOP, E_T_TRAIN, E_T_DATA, E_T_COMPUTE, E_T_COMM, E_T_EXPOSED, E_COUNT };

static void log_run(trainer *t, const dt_train_config *cfg, long steps_per_epoch) {
    dt_run_record r = {.params = (long long)t->model.n_params,
                       .procs = t->ps ? t->world->size : t->size,
                       .batch_size = cfg->batch_size,
                       .global_batch = cfg->batch_size * t->size,
                       .dataset_size = t->train.size,
                       .steps_per_epoch = steps_per_epoch,
                       .epochs = cfg->epochs,
                       .lr = cfg->lr,
                       .warmup_epochs = cfg->warmup_epochs,
                       .momentum = cfg->momentum,
                       .weight_decay = cfg->weight_decay,
                       .threads = cfg->threads,
                       .loader_workers = cfg->loader_workers,
                       .bucket_mb = cfg->bucket_mb > 0 ? cfg->bucket_mb : 25.0,
                       .buckets = t->ddp ? dt_ddp_bucket_count(t->ddp) : 0,
                       .overlap = t->ddp && !cfg->no_overlap,
                       .seed = (unsigned long long)cfg->seed,
                       .workers = t->size,
                       .servers = t->ps ? cfg->ps.servers : 0};
    snprintf(r.model, sizeof r.model, "%s", cfg->model);
    snprintf(r.mode, sizeof r.mode, "%s",
             t->ps         ? dt_ps_mode_name(cfg->ps.mode)
             : t->size > 1 ? "allreduce"
                           : "single");
    snprintf(r.data, sizeof r.data, "%s", cfg->data);
    snprintf(r.lr_scaling, sizeof r.lr_scaling, "%s", cfg->lr_scaling_linear ? "linear" : "none");
    snprintf(r.allreduce, sizeof r.allreduce, "%s", dt_allreduce_name(cfg->allreduce));
    dt_runlog_run(&t->log, &r);
}

/* A parameter-server rank: the model's parameters (same seed, so the same initial
 * values as the workers) and the optimizer state, no data. Its statistics go to the
 * first worker, which logs them. */
static int serve(const dt_train_config *cfg, const dt_world *world, dt_error *err) {
    dt_model_spec spec;
    dt_model m;
    dt_sgd opt = {0};
    if (dt_zoo_default_spec(&spec, cfg->model))
        return dt_error_set(err, "unknown model '%s' (known: %s)", cfg->model, dt_zoo_names());
    if (cfg->width > 0) spec.width = cfg->width;
    if (dt_zoo_build(&m, &spec, err)) return -1;
    int rc = dt_model_alloc(&m, 1, err);
    if (rc == 0) {
        dt_model_init_params(&m, cfg->seed);
        rc = dt_sgd_init(&opt, m.n_params, cfg->lr, cfg->momentum, cfg->weight_decay, err);
    }
    if (rc == 0 && cfg->init_path) rc = dt_checkpoint_load(&m, NULL, cfg->init_path, err);
    dt_ps_server_stats st;
    memset(&st, 0, sizeof st);
    if (rc == 0) {
        dt_dataset ds;
        long steps = 1;
        if (dt_dataset_open(&ds, cfg->data, 1, NULL) == 0) {
            long size =
                cfg->max_samples > 0 && cfg->max_samples < ds.size ? cfg->max_samples : ds.size;
            int workers = world->size - cfg->ps.servers;
            steps = ((size + workers - 1) / workers + cfg->batch_size - 1) / cfg->batch_size;
            dt_dataset_close(&ds);
        }
        /* the server's version counts updates; ps-sync makes one per step */
        dt_lr_schedule sched = {cfg->lr_schedule,   cfg->lr, 1.0,
                                cfg->warmup_epochs, steps,   cfg->epochs};
        rc = dt_ps_serve(world, &cfg->ps, &m, &opt, &sched, &st, err);
    }
    if (rc == 0)
        DT_CHECK_MPI(MPI_Send(&st, (int)sizeof st, MPI_BYTE, cfg->ps.servers, 99, MPI_COMM_WORLD));
    dt_sgd_free(&opt);
    dt_model_free(&m);
    return rc;
}

static void log_server_stats(trainer *t, const dt_train_config *cfg) {
    _Static_assert((int)DT_PS_STALENESS_BINS == (int)DT_RUNLOG_STALENESS_BINS,
                   "histogram sizes differ");
    for (int s = 0; s < cfg->ps.servers; s++) {
        dt_ps_server_stats st;
        MPI_Request req;
        DT_CHECK_MPI(MPI_Irecv(&st, (int)sizeof st, MPI_BYTE, s, 99, MPI_COMM_WORLD, &req));
        dt_world_wait_all(t->world, 1, &req, s, "collecting server statistics");
        dt_ps_server_record r = {s,           st.updates,   st.applied,       st.dropped, st.busy_s,
                                 st.bytes_in, st.bytes_out, st.max_clock_gap, {0}};
        memcpy(r.staleness_hist, st.staleness_hist, sizeof r.staleness_hist);
        dt_runlog_ps_server(&t->log, &r);
        for (int e = 0; e < cfg->epochs && e < DT_PS_MAX_EPOCHS; e++) {
            dt_ps_epoch_record pe = {s, e, st.epoch_dropped[e], {0}};
            memcpy(pe.staleness_hist, st.epoch_hist[e], sizeof pe.staleness_hist);
            dt_runlog_ps_epoch(&t->log, &pe);
        }
    }
}

int dt_train(const dt_train_config *cfg, const dt_world *world, dt_progress_fn progress,
             void *progress_ctx, dt_train_result *result, dt_error *err) {
    trainer t;
    memset(&t, 0, sizeof t);
    t.world = world;
    t.rank = world ? world->rank : 0;
    t.size = world ? world->size : 1;
    if (cfg->ps.mode != DT_PS_NONE) {
        if (!world || cfg->ps.servers < 1 || world->size <= cfg->ps.servers)
            return dt_error_set(err, "%s needs more processes than --servers %d (got %d)",
                                dt_ps_mode_name(cfg->ps.mode), cfg->ps.servers,
                                world ? world->size : 1);
        if (world->rank < cfg->ps.servers) return serve(cfg, world, err);
        t.ps = 1;
        t.rank = world->rank - cfg->ps.servers; /* index among the workers */
        t.size = world->size - cfg->ps.servers;
    }
    dt_threads_set(cfg->threads);
    if (setup(&t, cfg, err)) {
        trainer_free(&t);
        return -1;
    }
    dt_model *m = &t.model;
    const long steps_per_epoch = (t.sampler.num_samples + cfg->batch_size - 1) / cfg->batch_size;
    log_run(&t, cfg, steps_per_epoch);
    dt_lr_schedule sched = {
        cfg->lr_schedule,   cfg->lr,         cfg->lr_scaling_linear ? t.size : 1.0,
        cfg->warmup_epochs, steps_per_epoch, cfg->epochs};
    long global_step = 0;
    double last_loss = NAN, images_per_s = 0.0, test_acc = NAN;
    int rc = 0, stop = 0;
    const size_t sample = dt_model_input_floats_per_sample(m);
    for (int epoch = 0; epoch < cfg->epochs && !stop && rc == 0; epoch++) {
        dt_loader_start_epoch(t.loader, dt_sampler_epoch(&t.sampler, epoch), t.sampler.num_samples,
                              epoch);
        double e[E_COUNT] = {0}, loss_sum = 0.0, correct = 0.0, images = 0.0;
        long long bytes = 0;
        const double epoch_start = dt_now();
        for (long step = 0; step < steps_per_epoch; step++) {
            const double t0 = dt_now();
            const float *bx;
            const int32_t *by;
            int n = dt_loader_next(t.loader, &bx, &by);
            const double t1 = dt_now(); /* t_data: the wait; the copy is t_train's */
            memcpy(dt_model_input_data(m), bx, sizeof(float) * sample * n);
            memcpy(t.labels, by, sizeof(int32_t) * n);
            dt_loader_release(t.loader);
            const double lr = dt_lr_at(&sched, global_step);
            t.opt.lr = (float)lr;
            dt_model_zero_grad(m);
            if (t.ddp) dt_ddp_begin_step(t.ddp);
            double t_pull = 0.0;
            if (t.ps) { /* the step computes on the servers' current parameters */
                double tp = dt_now();
                t.client.epoch = epoch;
                dt_ps_pull(&t.client);
                t_pull = dt_now() - tp;
            }
            dt_model_forward(m, n);
            int hits = 0;
            double loss = dt_model_loss(m, t.labels, n, &hits);
            if (!isfinite(loss)) {
                rc = dt_error_set(err,
                                  "loss is %s at epoch %d step %ld on rank %d (learning rate %g "
                                  "too high?); stopping without saving",
                                  isnan(loss) ? "NaN" : "infinite", epoch, step, t.rank, lr);
                break;
            }
            dt_model_backward(m, t.labels, n);
            if (cfg->delay_ms > 0 && t.rank == cfg->delay_worker) {
                struct timespec ts = {cfg->delay_ms / 1000, (cfg->delay_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
            }
            dt_comm_stats cs = {0, 0, 0};
            if (t.ddp) dt_ddp_finish_step(t.ddp, &cs);
            double t_push = 0.0;
            if (t.ps) { /* the servers apply the update */
                double tp = dt_now();
                long long before = t.client.bytes_sent;
                dt_ps_push(&t.client);
                t_push = dt_now() - tp;
                cs.t_comm = cs.t_comm_exposed = t_pull + t_push;
                cs.bytes_sent = t.client.bytes_sent - before;
            } else {
                dt_sgd_step(&t.opt, m->params, m->grads);
            }
            const double t2 = dt_now();
            e[E_T_DATA] += t1 - t0;
            e[E_T_TRAIN] += t2 - t1;
            e[E_T_COMPUTE] += t2 - t1 - cs.t_comm_exposed;
            e[E_T_COMM] += cs.t_comm;
            e[E_T_EXPOSED] += cs.t_comm_exposed;
            bytes += cs.bytes_sent;
            loss_sum += loss * n;
            correct += hits;
            images += n;
            last_loss = loss;
            dt_step_record rec = {.rank = t.rank,
                                  .epoch = epoch,
                                  .step = global_step,
                                  .loss = loss,
                                  .lr = lr,
                                  .t_data = t1 - t0,
                                  .t_compute = t2 - t1 - cs.t_comm_exposed,
                                  .t_comm = cs.t_comm,
                                  .t_comm_exposed = cs.t_comm_exposed,
                                  .bytes_sent = cs.bytes_sent,
                                  .t_pull = t_pull,
                                  .t_push = t_push,
                                  .t_wait = t.ps ? t.client.last_wait_s : 0,
                                  .bytes_received =
                                      t.ps ? (long long)(sizeof(float) * m->n_params) : 0};
            dt_runlog_step(&t.log, &rec);
            global_step++;
            const double elapsed = dt_now() - epoch_start;
            images_per_s = images * t.size / elapsed;
            if (progress && t.rank == 0) {
                dt_train_progress p = {
                    epoch, cfg->epochs, step + 1, steps_per_epoch, loss, images_per_s, 0, 0, 0,
                    0,     0,           0};
                long left = (cfg->epochs - epoch) * steps_per_epoch - step - 1;
                p.eta_s = elapsed / (step + 1) * left;
                progress(progress_ctx, &p);
            }
            if (cfg->max_steps > 0 && global_step >= cfg->max_steps) {
                stop = 1;
                break;
            }
        }
        if (rc) break;
        e[E_T_LOOP] = dt_now() - epoch_start;
        double mean[E_COUNT], max[E_COUNT], totals[4] = {loss_sum, correct, images, (double)bytes};
        memcpy(mean, e, sizeof e);
        memcpy(max, e, sizeof e);
        if (t.world && t.size > 1 && !t.ps) {
            dt_world_allreduce_doubles(t.world, max, E_COUNT, MPI_MAX);
            sum_over_ranks(&t, mean, E_COUNT);
            for (int i = 0; i < E_COUNT; i++) mean[i] /= t.size;
            sum_over_ranks(&t, totals, 4);
        }
        double test_loss;
        const double eval_start = dt_now();
        evaluate(&t, &test_loss, &test_acc);
        dt_epoch_record er = {.epoch = epoch,
                              .train_loss = totals[0] / (totals[2] > 0 ? totals[2] : 1),
                              .train_acc = totals[1] / (totals[2] > 0 ? totals[2] : 1),
                              .test_loss = test_loss,
                              .test_acc = test_acc,
                              .t_epoch = max[E_T_LOOP],
                              .t_train = max[E_T_TRAIN],
                              .t_data = max[E_T_DATA],
                              .t_compute = max[E_T_COMPUTE],
                              .t_comm = max[E_T_COMM],
                              .t_comm_exposed = max[E_T_EXPOSED],
                              .t_epoch_mean = mean[E_T_LOOP],
                              .t_train_mean = mean[E_T_TRAIN],
                              .t_data_mean = mean[E_T_DATA],
                              .t_compute_mean = mean[E_T_COMPUTE],
                              .t_comm_mean = mean[E_T_COMM],
                              .t_comm_exposed_mean = mean[E_T_EXPOSED],
                              .t_eval = dt_now() - eval_start,
                              .bytes_sent = (long long)totals[3],
                              .images = (long long)totals[2]};
        dt_runlog_epoch(&t.log, &er);
        if (progress && t.rank == 0) {
            dt_train_progress p = {
                epoch, cfg->epochs, steps_per_epoch, steps_per_epoch, er.train_loss, images_per_s,
                0,     1,           test_loss,       test_acc,        er.train_acc,  er.t_epoch};
            progress(progress_ctx, &p);
        }
    }
    if (t.ps && rc) { /* the CLI aborts the job: the servers must not wait for us */
        trainer_free(&t);
        return rc;
    }
    if (t.ps) { /* evaluation and saving use the servers' final parameters */
        dt_ps_pull(&t.client);
        if (t.rank == 0) {
            double test_loss;
            evaluate(&t, &test_loss, &test_acc);
        }
        dt_ps_done(&t.client);
        if (t.rank == 0) log_server_stats(&t, cfg);
    }
    if (rc == 0 && cfg->save_path && t.rank == 0) {
        dt_st_meta meta[2] = {{"model", ""}, {"step", ""}};
        snprintf(meta[0].value, sizeof meta[0].value, "%s", cfg->model);
        snprintf(meta[1].value, sizeof meta[1].value, "%ld", global_step);
        rc = dt_checkpoint_save(m, NULL, meta, 2, cfg->save_path, err);
    }
    if (rc == 0) rc = dt_runlog_close(&t.log, err);
    if (result) {
        result->steps = global_step;
        result->final_loss = last_loss;
        result->test_acc = test_acc;
        result->images_per_s = images_per_s;
    }
    trainer_free(&t);
    return rc;
}
