/* dtrain quantize: float weights + calibration images -> an int8 network (safetensors),
 * optionally with the per-layer report. */
#define _GNU_SOURCE
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "dtrain/calib_auto.h"
#include "dtrain/fileset.h"
#include "dtrain/quant.h"
#include "dtrain/quant_report.h"
#include "dtrain/threads.h"
#include "dtrain/train_flags.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"

static const char *const quantize_shared[] = {"model",   "width", "data", "batch-size",
                                              "threads", "init",  NULL};

static void quantize_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain quantize --init W.safetensors --out Q.safetensors [options]\n"
                 "\n"
                 "Post-training int8 quantization: runs the first N training images of the data\n"
                 "through the float model, chooses every activation's range from them, and\n"
                 "writes int8 weights, int32 biases and the scales as a safetensors file that\n"
                 "dtrain eval and dtrain bench --infer --int8 run. BatchNorm is folded into the\n"
                 "convolution before it; ReLU and residual adds are fused into their layer.\n"
                 "docs/quantization.md describes the schemes and the file.\n"
                 "\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "\n"
            "  --out FILE           the quantized network (required; written atomically)\n"
            "  --calib-samples N    calibration images: the first N of the training split\n"
            "                       (default 512)\n"
            "  --scheme S           symmetric (default): symmetric int8 weights, activations\n"
            "                       s8 or u8 after ReLU, float logits | lab: the course lab's\n"
            "                       arithmetic (step = (max - min) / 127 per layer, chained\n"
            "                       output scales, int8 logits)\n"
            "  --weights G          per-channel (default for symmetric) | per-tensor (the\n"
            "                       lab's, its only one)\n"
            "  --calib-method M     how activation ranges are chosen: minmax | percentile:P\n"
            "                       (e.g. percentile:99.99) | 3sigma | entropy (TensorRT's\n"
            "                       KL-divergence search) | auto: each of entropy,\n"
            "                       percentile:99.99, minmax, 3sigma calibrates on the first\n"
            "                       half of the images and runs as int8 on the second; the\n"
            "                       most right there wins (a tie: the earlier) and\n"
            "                       calibrates on all (printed). Default auto (symmetric),\n"
            "                       minmax (lab)\n"
            "  --report DIR         per-layer table (report.md, layers.csv) and histograms\n"
            "                       (weights.png/svg, activations.png/svg) in DIR\n"
            "  --help               this text\n");
}

/* The calibration images: the first `count` samples of a split, decoded without
 * augmentation, batch by batch. */
typedef struct feed_ctx {
    const dt_dataset *ds;
    dt_transform tf;
    int first, count; /* samples first .. first + count - 1 */
    uint8_t *pixels;  /* one sample per thread */
} feed_ctx;

static int dataset_feed(void *ctx, int index, float *x, int max_n, dt_error *err) {
    (void)err;
    feed_ctx *f = ctx;
    const long start = (long)index * max_n;
    if (start >= f->count) return 0;
    const int n = f->count - start < max_n ? (int)(f->count - start) : max_n;
    const size_t sample = (size_t)f->ds->c * f->ds->h * f->ds->w;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < n; k++) {
        uint8_t *px = f->pixels + (size_t)omp_get_thread_num() * sample;
        const int i = f->first + (int)start + k;
        dt_dataset_sample(f->ds, i, px);
        dt_transform_apply(&f->tf, px, 0, i, x + (size_t)k * sample);
    }
    return n;
}

/* --calib-method auto: the method that gets the most of the held-out second half of the
 * calibration images right, into qc->calib (printed with every candidate's score). */
static int pick_calibration(const feed_ctx *all, dt_model *model, const dt_model_spec *spec,
                            dt_quant_config *qc, dt_error *err) {
    qc->calib = dt_calib_candidate(0);
    if (all->count < 2) return 0; /* nothing to hold out: the first candidate */
    feed_ctx calib = *all, held = *all;
    calib.count = all->count / 2;
    held.first = calib.count;
    held.count = all->count - calib.count;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)held.count);
    uint8_t *px = malloc((size_t)all->ds->c * all->ds->h * all->ds->w);
    int rc = labels && px ? 0 : dt_error_set(err, "out of memory for the held-out labels");
    for (int i = 0; rc == 0 && i < held.count; i++)
        labels[i] = dt_dataset_sample(all->ds, held.first + i, px);
    dt_calib_trial trials[DT_CALIB_CANDIDATES];
    int best = 0;
    if (rc == 0)
        rc = dt_calib_auto(model, spec, qc, dataset_feed, &calib, dataset_feed, &held, labels,
                           held.count, DT_INT8_DNNL, model->max_batch, trials, &best, err);
    if (rc == 0) {
        printf("calibration auto (%d images, %d held out):", calib.count, held.count);
        for (int i = 0; i < DT_CALIB_CANDIDATES; i++) {
            char name[64];
            dt_calib_format(&trials[i].choice, name, sizeof name);
            printf(" %s %.2f%%%s", name, 100.0 * trials[i].right / held.count,
                   i + 1 < DT_CALIB_CANDIDATES ? "," : "");
        }
        char name[64];
        dt_calib_format(&trials[best].choice, name, sizeof name);
        printf(" -> %s\n", name);
        qc->calib = trials[best].choice;
    }
    free(labels);
    free(px);
    return rc;
}

/* The float weights as the quantized file names them: an absolute path (eval may run
 * elsewhere) that fits the metadata whole, and the file's size. */
static int float_weights_of(const char *init, char *out, size_t size, struct stat *st,
                            dt_error *err) {
    char *abs = realpath(init, NULL);
    int rc = 0;
    if (!abs || stat(abs, st) != 0)
        rc = dt_error_set(err, "cannot read %s: %s", init, strerror(errno));
    else if (strlen(abs) >= size)
        rc = dt_error_set(err,
                          "cannot record --init %s in the quantized file: its absolute path has "
                          "%zu bytes, at most %zu",
                          init, strlen(abs), size - 1);
    else
        snprintf(out, size, "%s", abs);
    free(abs);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    static const struct option own[] = {{"out", required_argument, 0, 'o'},
                                        {"calib-samples", required_argument, 0, 'n'},
                                        {"scheme", required_argument, 0, 's'},
                                        {"weights", required_argument, 0, 'w'},
                                        {"calib-method", required_argument, 0, 'm'},
                                        {"report", required_argument, 0, 'r'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
    const char *cmd = "quantize";
    dt_train_config cfg = dt_train_config_default();
    const char *out_path = NULL, *report_dir = NULL;
    long calib_samples = 512;
    dt_quant_config qc = {.scheme = DT_QUANT_SYMMETRIC};
    int weights_given = 0, method_given = 0, autocal = 0;
    dt_error err;
    cli_flags flags;
    cli_flags_init(&flags, cmd, quantize_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'o':
            out_path = optarg;
            break;
        case 'r':
            report_dir = optarg;
            break;
        case 'n':
            if (cli_parse_int(cmd, "--calib-samples", optarg, 1, 1L << 30, &calib_samples))
                return 2;
            break;
        case 's':
            if (dt_quant_scheme_parse(optarg, &qc.scheme)) {
                cli_fail(cmd, "--scheme must be symmetric or lab, got '%s'", optarg);
                return 2;
            }
            break;
        case 'w':
            if (strcmp(optarg, "per-tensor") && strcmp(optarg, "per-channel")) {
                cli_fail(cmd, "--weights must be per-tensor or per-channel, got '%s'", optarg);
                return 2;
            }
            qc.per_channel = !strcmp(optarg, "per-channel");
            weights_given = 1;
            break;
        case 'm':
            autocal = !strcmp(optarg, "auto");
            if (!autocal && dt_calib_parse(optarg, &qc.calib, &err)) {
                if (strncmp(optarg, "percentile:", 11)) /* the library's list lacks auto */
                    cli_fail(cmd,
                             "--calib-method must be auto, minmax, percentile:P, 3sigma or "
                             "entropy, got '%s'",
                             optarg);
                else
                    cli_fail(cmd, "%s", err.msg);
                return 2;
            }
            method_given = 1;
            break;
        case 'h':
            quantize_usage(&flags, stdout);
            return 0;
        }
    }
    if (!weights_given) qc.per_channel = qc.scheme == DT_QUANT_SYMMETRIC;
    if (!method_given) {
        qc.calib.method = DT_CALIB_MINMAX; /* the lab's */
        autocal = qc.scheme == DT_QUANT_SYMMETRIC;
    }
    qc.report = report_dir != NULL;
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg, &spec)) return 2;
    if (!cfg.init_path) {
        cli_fail(cmd, "--init FILE is required: the float weights to quantize");
        return 2;
    }
    if (!out_path) {
        cli_fail(cmd, "--out FILE is required: where to write the quantized network");
        return 2;
    }
    if (qc.scheme == DT_QUANT_LAB && qc.per_channel) {
        cli_fail(cmd, "--scheme lab quantizes weights per layer; --weights per-channel needs "
                      "--scheme symmetric");
        return 2;
    }
    dt_threads_set(cli_threads(cmd, cfg.threads));
    dt_fileset files; /* nothing written replaces the weights read, nor another output */
    dt_fileset_init(&files);
    dt_fileset_input(&files, "--init", cfg.init_path);
    dt_fileset_output(&files, "--out", out_path);
    int files_ok = !report_dir || dt_quant_report_files(&files, report_dir, &err) == 0;
    files_ok = files_ok && dt_fileset_check(&files, &err) == 0;
    dt_fileset_free(&files);
    char float_path[sizeof((dt_st_meta *)0)->value];
    struct stat float_st;
    files_ok = files_ok &&
               float_weights_of(cfg.init_path, float_path, sizeof float_path, &float_st, &err) == 0;
    if (!files_ok) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }

    dt_dataset ds;
    dt_model model;
    dt_qnet q;
    feed_ctx feed = {0};
    if (dt_train_open_data(&ds, cfg.model, cfg.data, 1, calib_samples, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    int rc = dt_train_model_spec(&spec, cfg.model, cfg.width, &ds, &err);
    if (rc == 0)
        rc = dt_train_build_model(&model, &spec, cfg.batch_size, cfg.seed, cfg.init_path, &err);
    if (rc) {
        cli_fail(cmd, "%s", err.msg);
        dt_dataset_close(&ds);
        return 1;
    }
    feed.ds = &ds;
    feed.count = ds.size;
    dt_transform_init(&feed.tf, &ds, 0, cfg.seed);
    feed.pixels = malloc((size_t)ds.c * ds.h * ds.w * (size_t)omp_get_max_threads());
    char hash[32] = "";
    if (!feed.pixels) rc = dt_error_set(&err, "out of memory for the calibration images");
    if (rc == 0 && autocal) rc = pick_calibration(&feed, &model, &spec, &qc, &err);
    if (rc == 0) rc = dt_qnet_build(&q, &model, &spec, qc.scheme, &err);
    if (rc == 0) {
        rc = dt_quantize(&q, &model, &qc, dataset_feed, &feed, &err);
        if (rc == 0 && report_dir) rc = dt_quant_report_write(&q, report_dir, &err);
        if (rc == 0)
            rc = dt_quant_file_hash(float_path, (long)float_st.st_size, hash, sizeof hash, &err);
        if (rc == 0) {
            dt_st_meta meta[4] = {{"data", ""},
                                  {"float_weights", ""},
                                  {"float_weights_fnv1a64", ""},
                                  {"float_weights_bytes", ""}};
            snprintf(meta[0].value, sizeof meta[0].value, "%s", cfg.data);
            snprintf(meta[1].value, sizeof meta[1].value, "%s", float_path);
            snprintf(meta[2].value, sizeof meta[2].value, "%s", hash);
            snprintf(meta[3].value, sizeof meta[3].value, "%lld", (long long)float_st.st_size);
            rc = dt_qnet_save(&q, out_path, meta, 4, &err);
        }
        if (rc == 0) {
            char method[64];
            dt_calib_format(&qc.calib, method, sizeof method);
            printf("quantized %s (%s scheme, %s weights, %s calibration on %d images of %s) "
                   "into %s%s%s\n",
                   cfg.model, dt_quant_scheme_name(qc.scheme),
                   qc.per_channel ? "per-channel" : "per-tensor", method, q.calib_samples, cfg.data,
                   out_path, report_dir ? "; report in " : "", report_dir ? report_dir : "");
        }
        dt_qnet_free(&q);
    }
    if (rc) cli_fail(cmd, "%s", err.msg);
    free(feed.pixels);
    dt_model_free(&model);
    dt_dataset_close(&ds);
    return rc ? 1 : 0;
}
