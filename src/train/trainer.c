#include "dtrain/trainer.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/checkpoint.h"
#include "dtrain/dataset.h"
#include "dtrain/loader.h"
#include "dtrain/model.h"
#include "dtrain/rng.h"
#include "dtrain/runlog.h"
#include "dtrain/sampler.h"
#include "dtrain/sgd.h"
#include "dtrain/threads.h"
#include "dtrain/timer.h"
#include "dtrain/transform.h"
#include "dtrain/zoo.h"

typedef struct trainer {
    dt_model model;
    dt_sgd opt;
    dt_dataset train, test;
    dt_transform train_tf, test_tf;
    dt_sampler sampler;
    dt_loader *loader;
    dt_runlog log;
    int32_t *labels;      /* [batch] */
    uint8_t *eval_pixels; /* one sample per thread for evaluation */
} trainer;

static void trainer_free(trainer *t) {
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

static void evaluate(trainer *t, double *loss, double *acc) {
    dt_model *m = &t->model;
    int saved = m->training;
    m->training = 0;
    double total = 0.0;
    long correct = 0;
    for (int i = 0; i < t->test.size; i += m->max_batch) {
        int n = t->test.size - i < m->max_batch ? t->test.size - i : m->max_batch;
        const size_t sample = dt_model_input_floats_per_sample(m);
        float *x = dt_model_input_data(m);
#pragma omp parallel for schedule(static)
        for (int k = 0; k < n; k++) {
            uint8_t *px = t->eval_pixels + (size_t)omp_get_thread_num() * sample;
            t->labels[k] = dt_dataset_sample(&t->test, i + k, px);
            dt_transform_apply(&t->test_tf, px, 0, i + k, x + (size_t)k * sample);
        }
        dt_model_forward(m, n);
        int hits = 0;
        total += dt_model_loss(m, t->labels, n, &hits) * n;
        correct += hits;
    }
    m->training = saved;
    *loss = total / t->test.size;
    *acc = (double)correct / t->test.size;
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
    if (dt_sampler_init(&t->sampler, t->train.size, 0, 1, 1, cfg->seed, err) ||
        dt_loader_create(&t->loader, &t->train, &t->train_tf, cfg->batch_size, cfg->loader_workers,
                         0, err))
        return -1;
    return dt_runlog_open(&t->log, cfg->log_path, err);
}

int dt_train(const dt_train_config *cfg, dt_progress_fn progress, void *progress_ctx,
             dt_train_result *result, dt_error *err) {
    trainer t;
    memset(&t, 0, sizeof t);
    dt_threads_set(cfg->threads);
    if (setup(&t, cfg, err)) {
        trainer_free(&t);
        return -1;
    }
    dt_model *m = &t.model;
    char run_fields[512];
    snprintf(run_fields, sizeof run_fields,
             "\"model\":\"%s\",\"params\":%zu,\"procs\":1,\"mode\":\"single\",\"batch_size\":%d,"
             "\"data\":\"%s\",\"dataset_size\":%d,\"epochs\":%d,\"lr\":%g,\"momentum\":%g,"
             "\"weight_decay\":%g,\"threads\":%d,\"seed\":%llu",
             cfg->model, m->n_params, cfg->batch_size, cfg->data, t.train.size, cfg->epochs,
             cfg->lr, cfg->momentum, cfg->weight_decay, cfg->threads,
             (unsigned long long)cfg->seed);
    dt_runlog_run(&t.log, run_fields);

    const long steps_per_epoch = (t.sampler.num_samples + cfg->batch_size - 1) / cfg->batch_size;
    long global_step = 0;
    dt_lr_schedule sched = {cfg->lr_schedule,   cfg->lr,         1.0,
                            cfg->warmup_epochs, steps_per_epoch, cfg->epochs};
    double last_loss = NAN, images_per_s = 0.0, test_acc = NAN;
    int rc = 0, stop = 0;
    for (int epoch = 0; epoch < cfg->epochs && !stop && rc == 0; epoch++) {
        dt_loader_start_epoch(t.loader, dt_sampler_epoch(&t.sampler, epoch), t.sampler.num_samples,
                              epoch);
        double epoch_start = dt_now(), t_data = 0.0, t_compute = 0.0, loss_sum = 0.0;
        long correct = 0, images = 0;
        for (long step = 0; step < steps_per_epoch; step++) {
            double t0 = dt_now();
            const float *bx;
            const int32_t *by;
            int n = dt_loader_next(t.loader, &bx, &by);
            double t1 = dt_now(); /* t_data: waiting for the loader; the copy is t_train's */
            memcpy(dt_model_input_data(m), bx,
                   sizeof(float) * dt_model_input_floats_per_sample(m) * n);
            memcpy(t.labels, by, sizeof(int32_t) * n);
            dt_loader_release(t.loader);
            const double lr = dt_lr_at(&sched, global_step);
            t.opt.lr = (float)lr;
            dt_model_zero_grad(m);
            dt_model_forward(m, n);
            int hits = 0;
            double loss = dt_model_loss(m, t.labels, n, &hits);
            if (!isfinite(loss)) {
                rc = dt_error_set(err,
                                  "loss is %s at epoch %d step %ld (learning rate %g too high?); "
                                  "stopping without saving",
                                  isnan(loss) ? "NaN" : "infinite", epoch, step, cfg->lr);
                break;
            }
            dt_model_backward(m, t.labels, n);
            dt_sgd_step(&t.opt, m->params, m->grads);
            double t2 = dt_now();
            t_data += t1 - t0;
            t_compute += t2 - t1;
            loss_sum += loss * n;
            correct += hits;
            images += n;
            last_loss = loss;
            dt_step_record rec = {0, epoch, global_step, loss, lr, t1 - t0, t2 - t1, 0, 0, 0};
            dt_runlog_step(&t.log, &rec);
            global_step++;
            double elapsed = dt_now() - epoch_start;
            images_per_s = images / elapsed;
            if (progress) {
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
        double t_loop = dt_now() - epoch_start, test_loss;
        evaluate(&t, &test_loss, &test_acc);
        dt_epoch_record er = {.epoch = epoch,
                              .train_loss = loss_sum / (images ? images : 1),
                              .train_acc = (double)correct / (images ? images : 1),
                              .test_loss = test_loss,
                              .test_acc = test_acc,
                              .t_epoch = t_loop,
                              .t_train = t_compute,
                              .t_data = t_data,
                              .t_compute = t_compute,
                              .t_comm = 0.0,
                              .t_eval = dt_now() - epoch_start - t_loop,
                              .images = images};
        dt_runlog_epoch(&t.log, &er);
        if (progress) {
            dt_train_progress p = {
                epoch, cfg->epochs, steps_per_epoch, steps_per_epoch, er.train_loss, images_per_s,
                0,     1,           test_loss,       test_acc,        er.train_acc,  er.t_epoch};
            progress(progress_ctx, &p);
        }
    }
    if (rc == 0 && cfg->save_path) {
        char steps[32];
        snprintf(steps, sizeof steps, "%ld", global_step);
        dt_st_meta meta[2] = {{"model", ""}, {"step", ""}};
        snprintf(meta[0].value, sizeof meta[0].value, "%s", cfg->model);
        snprintf(meta[1].value, sizeof meta[1].value, "%s", steps);
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
