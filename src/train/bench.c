#include "train/bench.h"

#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/blas_core.h"
#include "core/cpu_isa.h"
#include "core/fileset.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/loader.h"
#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/dataset.h"
#include "dtrain/safetensors.h"
#include "dtrain/sgd.h"
#include "dtrain/transform.h"
#include "dtrain/train_state.h"
#include "dtrain/zoo.h"
#include "perfmodel/profile.h"
#include "quant/quant.h"
#include "train/inputs.h"

/* ---- the JSON line: one record, one field table per mode, one writer ---- */

typedef struct bench_record {
    const char *model, *mode, *dtype, *engine, *conv, *layouts, *precision, *blas_core, *isa;
    int width;
    size_t params;
    long batch_size, threads, steps;
    double images_per_s, ms_per_step, ms_per_batch, gflops, gops;
} bench_record;

typedef enum field_kind { F_STRING, F_INT, F_SIZE, F_LONG, F_REAL } field_kind;

typedef struct field {
    const char *name;
    field_kind kind;
    size_t offset;
    const char *real_format; /* F_REAL only */
} field;

#define FIELD(member, kind, format)                                                                \
    { #member, kind, offsetof(bench_record, member), format }

/* The historical order and formats (the scripts under bench/ parse them). */
static const field TRAIN_FIELDS[] = {
    FIELD(model, F_STRING, NULL),       FIELD(conv, F_STRING, NULL),
    FIELD(width, F_INT, NULL),          FIELD(params, F_SIZE, NULL),
    FIELD(batch_size, F_LONG, NULL),    FIELD(threads, F_LONG, NULL),
    FIELD(layouts, F_STRING, NULL),     FIELD(precision, F_STRING, NULL),
    FIELD(steps, F_LONG, NULL),         FIELD(images_per_s, F_REAL, "%.1f"),
    FIELD(ms_per_step, F_REAL, "%.3f"), FIELD(gflops, F_REAL, "%.2f"),
    FIELD(blas_core, F_STRING, NULL),   FIELD(isa, F_STRING, NULL),
};

static const field INFER_FIELDS[] = {
    FIELD(model, F_STRING, NULL),        FIELD(mode, F_STRING, NULL),
    FIELD(dtype, F_STRING, NULL),        FIELD(engine, F_STRING, NULL),
    FIELD(width, F_INT, NULL),           FIELD(batch_size, F_LONG, NULL),
    FIELD(threads, F_LONG, NULL),        FIELD(steps, F_LONG, NULL),
    FIELD(images_per_s, F_REAL, "%.1f"), FIELD(ms_per_batch, F_REAL, "%.3f"),
    FIELD(gops, F_REAL, "%.2f"),         FIELD(blas_core, F_STRING, NULL),
    FIELD(isa, F_STRING, NULL),
};

static int write_record(FILE *f, const field *fields, size_t n, const bench_record *r) {
    const char *base = (const char *)r;
    int rc = putc('{', f) == EOF;
    for (size_t i = 0; i < n && !rc; i++) {
        const void *at = base + fields[i].offset;
        rc = fprintf(f, i ? ",\"%s\":" : "\"%s\":", fields[i].name) < 0;
        if (rc) break;
        switch (fields[i].kind) {
        case F_STRING:
            rc = fprintf(f, "\"%s\"", *(const char *const *)at) < 0;
            break;
        case F_INT:
            rc = fprintf(f, "%d", *(const int *)at) < 0;
            break;
        case F_SIZE:
            rc = fprintf(f, "%zu", *(const size_t *)at) < 0;
            break;
        case F_LONG:
            rc = fprintf(f, "%ld", *(const long *)at) < 0;
            break;
        case F_REAL:
            rc = fprintf(f, fields[i].real_format, *(const double *)at) < 0;
            break;
        }
    }
    return rc || fputs("}\n", f) < 0 ? -1 : 0;
}

static int write_line(FILE *f, int infer, const bench_record *r, dt_error *err) {
    const int rc = infer ? write_record(f, INFER_FIELDS, sizeof INFER_FIELDS / sizeof(field), r)
                         : write_record(f, TRAIN_FIELDS, sizeof TRAIN_FIELDS / sizeof(field), r);
    return rc ? dt_error_set(err, "cannot write the result line") : 0;
}

/* ---- checks ---- */

int dt_bench_check(const dt_bench_options *o, dt_error *err) {
    if (o->precision == DT_PRECISION_BF16 && (o->infer || o->backend != DT_CONV_DNNL))
        return dt_error_set(
            err, "--precision bf16 times training on oneDNN: not with --infer or --conv im2col");
    if ((o->profile_out || o->profile_into) && o->infer)
        return dt_error_set(err, "--profile-out times training steps: drop --infer");
    if (o->profile_out) { /* before the steps, and never over the weights read */
        dt_fileset files;
        dt_fileset_init(&files);
        dt_fileset_input(&files, "--init", o->init);
        dt_train_inputs_add(&files, o->model, o->data);
        dt_fileset_output(&files, "--profile-out", o->profile_out);
        const int bad = dt_fileset_check(&files, err);
        dt_fileset_free(&files);
        if (bad) return -1;
    }
    if (o->int8 && !o->infer) return dt_error_set(err, "--int8 times inference: add --infer");
    if (o->feed && ((!o->data && !o->dataset) || o->infer))
        return dt_error_set(err, "--feed takes training batches from --data: give --data, "
                                 "without --infer");
    if (o->load && (o->infer || o->profile || o->profile_out || o->profile_into))
        return dt_error_set(err, "--load runs training steps until killed: not with --infer "
                                 "or a profile");
    return 0;
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- inference ---- */

/* Random standard-normal images, one batch: the calibration of --int8 without a file. */
typedef struct random_feed {
    size_t sample;
    uint64_t seed;
} random_feed;

static int feed_random(void *ctx, int index, float *x, int max_n, dt_error *err) {
    (void)err;
    const random_feed *f = ctx;
    if (index > 0) return 0;
    dt_rng rng = dt_rng_make(f->seed, 7);
    for (size_t i = 0; i < f->sample * (size_t)max_n; i++) x[i] = dt_rng_normal(&rng);
    return max_n;
}

/* The int8 network to time: --init's quantized file, or random weights quantized on
 * one batch of random images. */
static int int8_network(const dt_bench_options *a, const dt_model_spec *spec, dt_qnet *q,
                        dt_error *err) {
    if (a->init) {
        dt_safetensors st;
        if (dt_safetensors_read(&st, a->init, err)) return -1;
        int rc = dt_qnet_load(q, &st, spec, err);
        dt_safetensors_free(&st);
        return rc;
    }
    dt_model m;
    const int calib = a->batch < 32 ? a->batch : 32;
    if (dt_zoo_build(&m, spec, err)) return -1;
    int rc = dt_model_alloc(&m, calib, err);
    if (rc == 0) {
        dt_model_init_params(&m, 0);
        random_feed f = {dt_model_input_floats_per_sample(&m), 1};
        dt_quant_config cfg = {.scheme = DT_QUANT_SYMMETRIC,
                               .per_channel = 1,
                               .calib = {.method = DT_CALIB_MINMAX},
                               .reduce_range = dt_quant_reduce_range_here(DT_QUANT_SYMMETRIC)};
        rc = dt_qnet_build(q, &m, spec, DT_QUANT_SYMMETRIC, err);
        if (rc == 0 && (rc = dt_quantize(q, &m, &cfg, feed_random, &f, err))) dt_qnet_free(q);
    }
    dt_model_free(&m);
    return rc;
}

static void float_forward(void *ctx, int n) {
    dt_model_forward(ctx, n);
}

static void int8_forward(void *ctx, int n) {
    dt_qrun_forward(ctx, n);
}

/* Forward passes of a float model in eval mode or of an int8 network on random images. */
static int bench_infer(const dt_bench_options *a, const dt_model_spec *spec, FILE *out,
                       dt_error *err) {
    dt_model m;
    dt_qnet q;
    dt_qrun *run = NULL;
    int have_model = 0, have_q = 0, rc = 0;
    float *x;
    void (*forward)(void *, int);
    void *ctx;
    double macs;
    if (a->int8) {
        rc = int8_network(a, spec, &q, err);
        have_q = rc == 0;
        if (rc == 0) rc = dt_qrun_create(&run, &q, a->engine, a->batch, err);
        x = rc == 0 ? dt_qrun_input(run) : NULL;
        forward = int8_forward;
        ctx = run;
        macs = have_q ? dt_qnet_macs(&q) : 0.0;
    } else {
        memset(&m, 0, sizeof m);
        rc = dt_zoo_build(&m, spec, err);
        m.conv_backend = a->backend;
        if (rc == 0) rc = dt_model_alloc(&m, a->batch, err);
        if (rc == 0) dt_model_init_params(&m, 0);
        if (rc == 0 && a->init) rc = dt_checkpoint_load(&m, NULL, a->init, err);
        have_model = 1;
        m.training = 0;
        x = dt_model_input_data(&m);
        forward = float_forward;
        ctx = &m;
        macs = dt_model_forward_flops(&m, 1) / 2.0;
    }
    double *times = malloc(sizeof(double) * (size_t)a->span.steps);
    if (rc == 0 && !times) rc = dt_error_set(err, "out of memory");
    if (rc == 0) {
        const size_t count = (size_t)spec->in_c * spec->in_h * spec->in_w * (size_t)a->batch;
        dt_rng rng = dt_rng_make(1, 1);
        for (size_t i = 0; i < count; i++) x[i] = dt_rng_normal(&rng);
        double total = 0.0;
        for (long s = -3; s < a->span.steps; s++) {
            const double t0 = dt_now();
            forward(ctx, a->batch);
            const double dt = dt_now() - t0;
            if (s >= 0) {
                times[s] = dt;
                total += dt;
            }
        }
        qsort(times, (size_t)a->span.steps, sizeof(double), compare_double);
        const double median = times[a->span.steps / 2];
        const bench_record r = {.model = a->model,
                                .mode = "infer",
                                .dtype = a->int8 ? "int8" : "fp32",
                                .engine = a->int8
                                              ? dt_int8_engine_name(a->engine)
                                              : (a->backend == DT_CONV_DNNL ? "dnnl" : "im2col"),
                                .width = spec->width,
                                .batch_size = a->batch,
                                .threads = a->threads,
                                .steps = a->span.steps,
                                .images_per_s = a->batch * a->span.steps / total,
                                .ms_per_batch = 1e3 * median,
                                .gops = 2.0 * macs * a->batch / median * 1e-9,
                                .blas_core = dt_blas_core_loaded(),
                                .isa = dt_cpu_isa_name()};
        rc = write_line(out, 1, &r, err);
    }
    free(times);
    dt_qrun_destroy(run);
    if (have_q) dt_qnet_free(&q);
    if (have_model) dt_model_free(&m);
    return rc ? -1 : 0;
}

/* ---- training steps ---- */

/* --profile's table: the ops' mean times summed per layer kind, and the update. */
static int write_kinds(FILE *f, const dt_model *m, long steps, double t_sgd) {
    double fwd[DT_OP_COUNT] = {0}, bwd[DT_OP_COUNT] = {0};
    for (int i = 0; i < m->n_ops; i++) {
        fwd[m->ops[i].kind] += m->op_forward_s[i];
        bwd[m->ops[i].kind] += m->op_backward_s[i];
    }
    int rc = fprintf(f, "%-18s %12s %12s   (ms per step, mean of %ld)\n", "layer", "forward",
                     "backward", steps) < 0;
    for (int k = 0; k < DT_OP_COUNT && !rc; k++)
        if (fwd[k] + bwd[k] > 0)
            rc = fprintf(f, "%-18s %12.2f %12.2f\n", dt_op_kind_name((dt_op_kind)k),
                         1e3 * fwd[k] / steps, 1e3 * bwd[k] / steps) < 0;
    return rc || fprintf(f, "%-18s %12.2f\n", "sgd", 1e3 * t_sgd / steps) < 0 ? -1 : 0;
}

/* --feed: batches from the data through train's loader, in order, whole batches only,
 * epoch after epoch (the samples' order does not change the step's cost). */
typedef struct feed {
    dt_transform tf;
    dt_loader *loader;
    int *order, count, epoch;
} feed;

static int feed_open(feed *f, const dt_dataset *ds, int batch, int workers, dt_error *err) {
    memset(f, 0, sizeof *f);
    if (!ds) return 0;
    if (ds->size < batch)
        return dt_error_set(err, "--feed: the data has %d samples, fewer than a batch of %d",
                            ds->size, batch);
    f->count = ds->size - ds->size % batch;
    f->order = malloc(sizeof(int) * (size_t)f->count);
    if (!f->order) return dt_error_set(err, "out of memory for the samples' order");
    for (int i = 0; i < f->count; i++) f->order[i] = i;
    dt_transform_init(&f->tf, ds, ds->augment, 1);
    if (dt_loader_create(&f->loader, ds, &f->tf, batch, workers, 0, err)) {
        free(f->order);
        f->order = NULL;
        return -1;
    }
    dt_loader_start_epoch(f->loader, f->order, f->count, 0);
    return 0;
}

static void feed_close(feed *f) {
    if (f->loader) dt_loader_destroy(f->loader);
    free(f->order);
    memset(f, 0, sizeof *f);
}

/* The next batch into the model's input and labels, as train's step takes it. */
static void feed_step(feed *f, dt_model *m, int32_t *labels) {
    if (!f->loader) return;
    const float *x;
    const int32_t *y;
    int n = dt_loader_next(f->loader, &x, &y);
    if (n == 0) {
        dt_loader_start_epoch(f->loader, f->order, f->count, ++f->epoch);
        n = dt_loader_next(f->loader, &x, &y);
    }
    memcpy(dt_model_input_data(m), x, sizeof(float) * dt_model_input_floats_per_sample(m) * n);
    memcpy(labels, y, sizeof(int32_t) * n);
    dt_loader_release(f->loader);
}

/* One training step (trainer.c's train_step without the synchronisation and the run
 * log, and without the loader unless fed): batch, zero, forward, loss, backward, then
 * the update, whose start goes to *t_update. */
static void train_step(feed *f, dt_model *m, dt_sgd *opt, int32_t *labels, int batch,
                       double *t_update) {
    feed_step(f, m, labels);
    dt_model_zero_grad(m);
    dt_model_forward(m, batch);
    dt_model_loss(m, labels, batch, NULL);
    dt_model_backward(m, labels, batch);
    *t_update = dt_now();
    dt_sgd_step(opt, m->params, m->grads);
}

/* --load, once warm: says so, then runs steps until killed. A byte on stdin asks for
 * the median of the steps since the last ask (the last `room` of them, times[room];
 * "load: S" seconds), answered when the step under way ends: what this rank's step
 * took beside a measurement. Returns only when stdout is gone. */
static int run_load(feed *f, dt_model *m, dt_sgd *opt, int32_t *labels, int batch, double *times,
                    long room, dt_error *err) {
    if (puts("load: warm") != EOF && fflush(stdout) == 0)
        for (long done = 0;;) {
            double t0 = dt_now(), t_update;
            train_step(f, m, opt, labels, batch, &t_update);
            times[done++ % room] = dt_now() - t0;
            struct pollfd asked = {.fd = 0, .events = POLLIN};
            char byte;
            if (poll(&asked, 1, 0) <= 0 || read(0, &byte, 1) != 1) continue;
            const long n = done < room ? done : room;
            qsort(times, (size_t)n, sizeof(double), compare_double);
            if (printf("load: %.9g\n", times[n / 2]) < 0 || fflush(stdout)) break;
            done = 0;
        }
    return dt_error_set(err, "--load: cannot write to the standard output");
}

/* The timed steps' JSON line, and with a profile its table or file (times: the steps'
 * times, sorted here). */
static int write_results(const dt_bench_options *o, const dt_model_spec *spec, const dt_model *m,
                         double *times, long steps, double total, double t_sgd, FILE *out,
                         FILE *profile_table, dt_error *err) {
    const long batch = o->batch;
    qsort(times, (size_t)steps, sizeof(double), compare_double);
    double median = times[steps / 2];
    double flops = dt_model_train_flops(m, (int)batch);
    const bench_record r = {.model = o->model,
                            .conv = o->backend == DT_CONV_DNNL ? "dnnl" : "im2col",
                            .width = spec->width,
                            .params = m->n_params,
                            .batch_size = batch,
                            .threads = o->threads,
                            .layouts =
                                o->plain_layouts || o->backend != DT_CONV_DNNL ? "nchw" : "blocked",
                            .precision = dt_precision_name(o->precision),
                            .steps = steps,
                            .images_per_s = batch * steps / total,
                            .ms_per_step = 1e3 * median,
                            .gflops = flops / median * 1e-9,
                            .blas_core = dt_blas_core_loaded(),
                            .isa = dt_cpu_isa_name()};
    int rc = out ? write_line(out, 0, &r, err) : 0;
    if (rc == 0 && o->profile && m->op_forward_s && write_kinds(profile_table, m, steps, t_sgd))
        rc = dt_error_set(err, "cannot write the profile table");
    if (rc == 0 && (o->profile_out || o->profile_into)) {
        dt_profile p = {0};
        if (!m->op_forward_s ||
            dt_profile_from_model(&p, m, o->model, spec->width, (int)batch, o->threads, steps,
                                  total / (double)steps, median, t_sgd / (double)steps, err) ||
            (o->profile_out && dt_profile_write(&p, o->profile_out, err)))
            rc = -1;
        if (rc == 0 && o->profile_into) {
            *o->profile_into = p; /* the caller's now */
            memset(&p, 0, sizeof p);
        }
        dt_profile_free(&p);
    }
    return rc;
}

static int bench_train(const dt_bench_options *o, dt_model_spec *spec, const dt_dataset *ds,
                       FILE *out, FILE *profile_table, dt_error *err) {
    const long batch = o->batch;
    const dt_bench_span *span = &o->span;
    const long most =
        span->min_seconds > 0 && span->max_steps > span->steps ? span->max_steps : span->steps;
    long steps = 0; /* timed */
    dt_model m;
    dt_sgd opt_state = {0};
    spec->precision = o->precision;
    if (dt_zoo_build(&m, spec, err)) return -1;
    m.conv_backend = o->backend;
    m.plain_layouts = o->plain_layouts;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    double *times = malloc(sizeof(double) * (size_t)most);
    if (!labels || !times || dt_model_alloc(&m, (int)batch, err) ||
        /* the recipe's momentum and weight decay: the update bench times is the one
         * train does; the rate does not change its cost, and a small one keeps steps on
         * random labels finite */
        dt_sgd_init(&opt_state, m.n_params, 0.01f, o->momentum, o->weight_decay, err)) {
        if (!labels || !times) dt_error_set(err, "out of memory");
        free(labels);
        free(times);
        dt_model_free(&m);
        return -1;
    }
    dt_model_init_params(&m, 0);
    dt_rng rng = dt_rng_make(1, 1);
    float *x = dt_model_input_data(&m);
    size_t count = dt_model_input_floats_per_sample(&m) * (size_t)batch;
    for (size_t i = 0; i < count; i++) x[i] = dt_rng_normal(&rng);
    for (long i = 0; i < batch; i++) labels[i] = (int32_t)dt_rng_below(&rng, (uint32_t)m.classes);

    feed f;
    int rc = feed_open(&f, ds, (int)batch, o->loader_workers, err);
    const int profile = o->profile || o->profile_out || o->profile_into;
    double total = 0.0, t_sgd = 0.0;
    for (long s = -3; rc == 0 && (s < span->steps || (s < most && total < span->min_seconds));
         s++) {
        if (s == 0 && profile && dt_model_enable_profile(&m, err)) rc = -1;
        if (s == 0 && o->load)
            rc = run_load(&f, &m, &opt_state, labels, (int)batch, times, most, err);
        if (rc) break;
        double t0 = dt_now(), t_update;
        train_step(&f, &m, &opt_state, labels, (int)batch, &t_update);
        double dt = dt_now() - t0;
        if (s >= 0) {
            t_sgd += dt_now() - t_update;
            times[s] = dt;
            total += dt;
            steps = s + 1;
        }
    }
    if (rc == 0)
        rc = write_results(o, spec, &m, times, steps, total, t_sgd, out, profile_table, err);
    feed_close(&f);
    free(labels);
    free(times);
    dt_sgd_free(&opt_state);
    dt_model_free(&m);
    return rc;
}

int dt_bench_run(const dt_bench_options *o, FILE *out, FILE *profile_table, dt_error *err) {
    dt_model_spec spec = o->spec;
    dt_dataset opened;
    const dt_dataset *ds = o->dataset;
    if (!ds && o->data) {
        if (dt_dataset_open(&opened, o->data, 1, err)) return -1;
        ds = &opened;
    }
    int rc = ds ? dt_train_model_spec(&spec, o->model, o->width, ds, err) : 0;
    if (rc == 0)
        rc = o->infer ? bench_infer(o, &spec, out, err)
                      : bench_train(o, &spec, o->feed ? ds : NULL, out, profile_table, err);
    if (ds == &opened) dt_dataset_close(&opened);
    return rc;
}

int dt_bench_profile(dt_profile *p, const char *model, int width, const dt_dataset *data,
                     int loader_workers, int batch, const dt_bench_span *span, int threads,
                     dt_error *err) {
    dt_bench_options o = {.model = model,
                          .width = width,
                          .dataset = data,
                          .feed = data != NULL,
                          .loader_workers = loader_workers,
                          .backend = DT_CONV_DNNL,
                          .precision = DT_PRECISION_FP32,
                          .batch = batch,
                          .threads = threads,
                          .span = *span,
                          .profile_into = p};
    if (dt_zoo_spec_of(&o.spec, model, err)) return -1;
    if (width > 0) o.spec.width = width; /* as bench --width: scale's profile of --width runs */
    const dt_zoo_recipe *r = dt_zoo_recipe_of(model); /* the update train would do */
    o.momentum = r ? r->momentum : 0.9f;
    o.weight_decay = r ? r->weight_decay : 5e-4f;
    return dt_bench_run(&o, NULL, NULL, err);
}
