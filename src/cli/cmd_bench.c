#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/blas_core.h"
#include "dtrain/checkpoint.h"
#include "dtrain/model.h"
#include "dtrain/fileset.h"
#include "dtrain/outfile.h"
#include "dtrain/profile.h"
#include "dtrain/qrun.h"
#include "dtrain/quant.h"
#include "dtrain/safetensors.h"
#include "dtrain/rng.h"
#include "dtrain/sgd.h"
#include "dtrain/threads.h"
#include "dtrain/timer.h"
#include "dtrain/train_state.h"
#include "dtrain/zoo.h"

/* The training flags bench takes from the shared table. --model is its own: its
 * default differs from train's (resnet18, the model the performance docs time). */
static const char *const bench_shared[] = {"data", "width",     "batch-size", "threads",
                                           "init", "precision", NULL};

static void bench_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain bench [options]\n"
                 "\n"
                 "Times full training steps (forward, backward, SGD update) on random data and\n"
                 "prints one JSON line: model, batch_size, threads, steps, images_per_s,\n"
                 "ms_per_step (median), gflops (achieved, conv and linear multiply-adds x2).\n"
                 "With --data, the model takes that data's input shape and classes where it\n"
                 "can (the data is only opened for its shape; the samples stay random).\n"
                 "\n");
    fprintf(out,
            "  --model M            a zoo model: resnet18 (default), lenet5, resnet20, alexnet,\n"
            "                       ... (dtrain models lists them all); the SGD update\n"
            "                       uses the model's recipe (momentum, weight decay)\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "\n"
            "  --steps N            timed steps (default 20, after 3 warm-up steps)\n"
            "  --conv B             conv2d backend: dnnl (oneDNN, default) | im2col (OpenBLAS)\n"
            "  --layouts L          activations between oneDNN convs: blocked (default: nChw16c\n"
            "                       through BatchNorm, ReLU and adds where channels allow) |\n"
            "                       nchw (every activation NCHW, reordered at each conv)\n"
            "  --profile            also print time per layer kind (forward, backward) to stderr\n"
            "  --profile-out FILE   write each op's forward and backward time (means scaled to\n"
            "                       the median step) in execution order with the gradient range\n"
            "                       it writes, as JSON: the input of dtrain simulate\n"
            "  --infer              time inference instead: forward passes only, in eval mode;\n"
            "                       one JSON line: model, dtype, batch_size, threads, steps,\n"
            "                       images_per_s, ms_per_batch (median), gops (conv and linear\n"
            "                       multiply-adds x2 per second). --init gives the weights\n"
            "  --int8               with --infer: the int8 network of --init (a dtrain quantize\n"
            "                       file), or, without --init, random weights quantized on one\n"
            "                       batch of random images (symmetric, per-channel, minmax)\n"
            "  --int8-engine E      dnnl (default) | emulate\n"
            "  --help               this text\n");
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_infer_args {
    const char *cmd, *model, *init;
    int int8;
    dt_int8_engine engine;
    dt_conv_backend backend;
    int batch, threads;
    long steps;
} bench_infer_args;

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
static int int8_network(const bench_infer_args *a, const dt_model_spec *spec, dt_qnet *q,
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
        dt_quant_config cfg = {
            .scheme = DT_QUANT_SYMMETRIC, .per_channel = 1, .calib = {.method = DT_CALIB_MINMAX}};
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

/* dtrain bench --infer: forward passes of a float model in eval mode or of an int8
 * network on random images; 3 warm-up passes, then the median and the mean rate. */
static int bench_infer(const bench_infer_args *a, const dt_model_spec *spec) {
    dt_error err;
    dt_model m;
    dt_qnet q;
    dt_qrun *run = NULL;
    int have_model = 0, have_q = 0, rc = 0;
    float *x;
    void (*forward)(void *, int);
    void *ctx;
    double macs;
    if (a->int8) {
        rc = int8_network(a, spec, &q, &err);
        have_q = rc == 0;
        if (rc == 0) rc = dt_qrun_create(&run, &q, a->engine, a->batch, &err);
        x = rc == 0 ? dt_qrun_input(run) : NULL;
        forward = int8_forward;
        ctx = run;
        macs = have_q ? dt_qnet_macs(&q) : 0.0;
    } else {
        memset(&m, 0, sizeof m);
        rc = dt_zoo_build(&m, spec, &err);
        m.conv_backend = a->backend;
        if (rc == 0) rc = dt_model_alloc(&m, a->batch, &err);
        if (rc == 0) dt_model_init_params(&m, 0);
        if (rc == 0 && a->init) rc = dt_checkpoint_load(&m, NULL, a->init, &err);
        have_model = 1;
        m.training = 0;
        x = dt_model_input_data(&m);
        forward = float_forward;
        ctx = &m;
        macs = dt_model_forward_flops(&m, 1) / 2.0;
    }
    double *times = malloc(sizeof(double) * (size_t)a->steps);
    if (rc == 0 && !times) rc = dt_error_set(&err, "out of memory");
    if (rc == 0) {
        const size_t count = (size_t)spec->in_c * spec->in_h * spec->in_w * (size_t)a->batch;
        dt_rng rng = dt_rng_make(1, 1);
        for (size_t i = 0; i < count; i++) x[i] = dt_rng_normal(&rng);
        double total = 0.0;
        for (long s = -3; s < a->steps; s++) {
            const double t0 = dt_now();
            forward(ctx, a->batch);
            const double dt = dt_now() - t0;
            if (s >= 0) {
                times[s] = dt;
                total += dt;
            }
        }
        qsort(times, (size_t)a->steps, sizeof(double), compare_double);
        const double median = times[a->steps / 2];
        printf("{\"model\":\"%s\",\"mode\":\"infer\",\"dtype\":\"%s\",\"engine\":\"%s\","
               "\"width\":%d,\"batch_size\":%d,\"threads\":%d,\"steps\":%ld,"
               "\"images_per_s\":%.1f,\"ms_per_batch\":%.3f,\"gops\":%.2f,\"blas_core\":\"%s\"}\n",
               a->model, a->int8 ? "int8" : "fp32",
               a->int8 ? dt_int8_engine_name(a->engine)
                       : (a->backend == DT_CONV_DNNL ? "dnnl" : "im2col"),
               spec->width, a->batch, a->threads, a->steps, a->batch * a->steps / total,
               1e3 * median, 2.0 * macs * a->batch / median * 1e-9, dt_blas_core_loaded());
    }
    if (rc) cli_fail(a->cmd, "%s", err.msg);
    free(times);
    dt_qrun_destroy(run);
    if (have_q) dt_qnet_free(&q);
    if (have_model) dt_model_free(&m);
    return rc ? 1 : 0;
}

int cmd_bench(int argc, char **argv) {
    static const struct option own[] = {{"steps", required_argument, 0, 'n'},
                                        {"help", no_argument, 0, 'h'},
                                        {"profile", no_argument, 0, 'p'},
                                        {"profile-out", required_argument, 0, 'o'},
                                        {"conv", required_argument, 0, 'c'},
                                        {"infer", no_argument, 0, 'i'},
                                        {"int8", no_argument, 0, '8'},
                                        {"int8-engine", required_argument, 0, 'e'},
                                        {"layouts", required_argument, 0, 'l'},
                                        {"model", required_argument, 0, 'M'},
                                        {0, 0, 0, 0}};
    const char *cmd = "bench";
    dt_train_config cfg = dt_train_config_default();
    cfg.model = "resnet18";
    long steps = 20;
    int profile = 0, infer = 0, int8 = 0, plain_layouts = 0;
    const char *profile_out = NULL;
    dt_conv_backend backend = DT_CONV_DNNL;
    dt_int8_engine engine = DT_INT8_DNNL;
    cli_flags flags;
    cli_flags_init(&flags, cmd, bench_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'M':
            cfg.model = optarg;
            break;
        case 'n':
            if (cli_parse_int(cmd, "--steps", optarg, 1, 1000000, &steps)) return 2;
            break;
        case 'p':
            profile = 1;
            break;
        case 'o':
            profile_out = optarg;
            break;
        case 'c':
            if (!strcmp(optarg, "dnnl"))
                backend = DT_CONV_DNNL;
            else if (!strcmp(optarg, "im2col"))
                backend = DT_CONV_IM2COL;
            else {
                cli_fail(cmd, "--conv must be dnnl or im2col, got '%s'", optarg);
                return 2;
            }
            break;
        case 'l':
            if (!strcmp(optarg, "blocked") || !strcmp(optarg, "nchw"))
                plain_layouts = !strcmp(optarg, "nchw");
            else {
                cli_fail(cmd, "--layouts must be blocked or nchw, got '%s'", optarg);
                return 2;
            }
            break;
        case 'i':
            infer = 1;
            break;
        case '8':
            int8 = 1;
            break;
        case 'e':
            if (dt_int8_engine_parse(optarg, &engine)) {
                cli_fail(cmd, "--int8-engine must be dnnl or emulate, got '%s'", optarg);
                return 2;
            }
            break;
        case 'h':
            bench_usage(&flags, stdout);
            return 0;
        }
    }
    if (cfg.precision == DT_PRECISION_BF16 && (infer || backend != DT_CONV_DNNL)) {
        cli_fail(cmd,
                 "--precision bf16 times training on oneDNN: not with --infer or --conv im2col");
        return 2;
    }
    if (profile_out && infer) {
        cli_fail(cmd, "--profile-out times training steps: drop --infer");
        return 2;
    }
    if (profile_out) { /* before the steps, and never over the weights read */
        dt_error check;
        dt_fileset files;
        dt_fileset_init(&files);
        dt_fileset_input(&files, "--init", cfg.init_path);
        dt_fileset_output(&files, "--profile-out", profile_out);
        const int bad = dt_fileset_check(&files, &check);
        dt_fileset_free(&files);
        if (bad) {
            cli_fail(cmd, "%s", check.msg);
            return 2;
        }
    }
    if (int8 && !infer) {
        cli_fail(cmd, "--int8 times inference: add --infer");
        return 2;
    }
    const char *model_name = cfg.model;
    const long batch = cfg.batch_size, threads = cli_threads(cmd, cfg.threads);
    const int data_given = cfg.data != NULL;
    dt_model_spec spec;
    dt_error err;
    if (cli_model_and_data(cmd, &cfg, &spec)) return 2;
    if (dt_train_config_resolve(&cfg, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    if (cfg.width > 0) spec.width = cfg.width;
    dt_threads_set((int)threads);

    dt_model m;
    dt_sgd opt_state = {0};
    if (data_given) {
        dt_dataset ds;
        if (dt_dataset_open(&ds, cfg.data, 1, &err)) {
            cli_fail(cmd, "%s", err.msg);
            return 1;
        }
        int rc = dt_train_model_spec(&spec, cfg.model, cfg.width, &ds, &err);
        dt_dataset_close(&ds);
        if (rc) {
            cli_fail(cmd, "%s", err.msg);
            return 1;
        }
    }
    if (infer) {
        const bench_infer_args a = {cmd,     model_name, cfg.init_path, int8, engine,
                                    backend, (int)batch, (int)threads,  steps};
        return bench_infer(&a, &spec);
    }
    spec.precision = cfg.precision;
    if (dt_zoo_build(&m, &spec, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    m.conv_backend = backend;
    m.plain_layouts = plain_layouts;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)batch);
    double *times = malloc(sizeof(double) * (size_t)steps);
    if (!labels || !times || dt_model_alloc(&m, (int)batch, &err) ||
        /* the recipe's momentum and weight decay: the update bench times is the one
         * train does; the rate does not change its cost, and a small one keeps steps on
         * random labels finite */
        dt_sgd_init(&opt_state, m.n_params, 0.01f, cfg.momentum, cfg.weight_decay, &err)) {
        cli_fail(cmd, "%s", (!labels || !times) ? "out of memory" : err.msg);
        free(labels);
        free(times);
        dt_model_free(&m);
        return 1;
    }
    dt_model_init_params(&m, 0);
    dt_rng rng = dt_rng_make(1, 1);
    float *x = dt_model_input_data(&m);
    size_t count = dt_model_input_floats_per_sample(&m) * (size_t)batch;
    for (size_t i = 0; i < count; i++) x[i] = dt_rng_normal(&rng);
    for (long i = 0; i < batch; i++) labels[i] = (int32_t)dt_rng_below(&rng, (uint32_t)m.classes);

    double total = 0.0, t_sgd = 0.0;
    for (long s = -3; s < steps; s++) {
        if (s == 0 && (profile || profile_out) && dt_model_enable_profile(&m, &err)) break;
        double t0 = dt_now();
        dt_model_zero_grad(&m);
        dt_model_forward(&m, (int)batch);
        dt_model_loss(&m, labels, (int)batch, NULL);
        dt_model_backward(&m, labels, (int)batch);
        double t_update = dt_now();
        dt_sgd_step(&opt_state, m.params, m.grads);
        double dt = dt_now() - t0;
        if (s >= 0) {
            t_sgd += dt_now() - t_update;
            times[s] = dt;
            total += dt;
        }
    }
    qsort(times, (size_t)steps, sizeof(double), compare_double);
    double median = times[steps / 2];
    double flops = dt_model_train_flops(&m, (int)batch);
    printf("{\"model\":\"%s\",\"conv\":\"%s\",\"width\":%d,\"params\":%zu,\"batch_size\":%ld,"
           "\"threads\":%ld,\"layouts\":\"%s\",\"precision\":\"%s\","
           "\"steps\":%ld,\"images_per_s\":%.1f,\"ms_per_step\":%.3f,\"gflops\":%.2f,"
           "\"blas_core\":\"%s\"}\n",
           model_name, backend == DT_CONV_DNNL ? "dnnl" : "im2col", spec.width, m.n_params, batch,
           threads, plain_layouts || backend != DT_CONV_DNNL ? "nchw" : "blocked",
           dt_precision_name(cfg.precision), steps, batch * steps / total, 1e3 * median,
           flops / median * 1e-9, dt_blas_core_loaded());
    if (profile && m.op_forward_s) {
        double fwd[DT_OP_COUNT] = {0}, bwd[DT_OP_COUNT] = {0};
        for (int i = 0; i < m.n_ops; i++) {
            fwd[m.ops[i].kind] += m.op_forward_s[i];
            bwd[m.ops[i].kind] += m.op_backward_s[i];
        }
        fprintf(stderr, "%-18s %12s %12s   (ms per step, mean of %ld)\n", "layer", "forward",
                "backward", steps);
        for (int k = 0; k < DT_OP_COUNT; k++)
            if (fwd[k] + bwd[k] > 0)
                fprintf(stderr, "%-18s %12.2f %12.2f\n", dt_op_kind_name((dt_op_kind)k),
                        1e3 * fwd[k] / steps, 1e3 * bwd[k] / steps);
        fprintf(stderr, "%-18s %12.2f\n", "sgd", 1e3 * t_sgd / steps);
    }
    int rc = 0;
    if (profile_out) {
        dt_profile p = {0};
        if (!m.op_forward_s ||
            dt_profile_from_model(&p, &m, spec.width, (int)batch, (int)threads, steps,
                                  total / (double)steps, median, t_sgd / (double)steps, &err) ||
            dt_profile_write(&p, profile_out, &err))
            rc = cli_fail(cmd, "%s", err.msg);
        dt_profile_free(&p);
    }
    free(labels);
    free(times);
    dt_sgd_free(&opt_state);
    dt_model_free(&m);
    return rc ? 1 : 0;
}
