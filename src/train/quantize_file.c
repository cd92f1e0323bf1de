/* dtrain quantize as a library call (quantize_file.h). */
#define _GNU_SOURCE
#include "train/quantize_file.h"

#include <errno.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileset.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"
#include "quant/calib_auto.h"
#include "quant/quant_report.h"
#include "train/inputs.h"

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

/* The float model's top-1 class of each held-out image: what auto's int8 candidates are
 * scored against. */
static int float_top1(dt_model *model, feed_ctx *held, int32_t *top, dt_error *err) {
    const int saved = model->training, classes = model->classes;
    model->training = 0;
    float *x = dt_model_input_data(model);
    int rc = 0;
    for (int b = 0, seen = 0;; b++) {
        const int n = dataset_feed(held, b, x, model->max_batch, err);
        if (n <= 0) {
            rc = n;
            break;
        }
        dt_model_forward(model, n);
        const float *logits = dt_model_logits(model);
        for (int i = 0; i < n; i++, seen++) {
            const float *row = logits + (size_t)i * classes;
            int best = 0;
            for (int k = 1; k < classes; k++)
                if (row[k] > row[best]) best = k;
            top[seen] = best;
        }
    }
    model->training = saved;
    return rc;
}

/* --calib-method auto: the method whose int8 network agrees with the float model's top-1
 * on the most of the held-out second half of the calibration images, into qc->calib
 * (printed with every candidate's agreement). Agreement, not accuracy: on 256 held-out
 * images of a Fashion-MNIST CNN, entropy scored 87.50% right against minmax's 86.72%
 * (2 images) while it agreed with float32 on 92% of the test set against 99% (it clipped
 * the first layer's outputs), and cost 2 points of accuracy; agreement is the distortion
 * itself, without the labels' sampling noise. */
static int pick_calibration(const feed_ctx *all, dt_model *model, const dt_model_spec *spec,
                            dt_quant_config *qc, FILE *out, dt_error *err) {
    qc->calib = dt_calib_candidate(0);
    if (all->count < 2) return 0; /* nothing to hold out: the first candidate */
    feed_ctx calib = *all, held = *all;
    calib.count = all->count / 2;
    held.first = calib.count;
    held.count = all->count - calib.count;
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)held.count);
    int rc = labels ? 0 : dt_error_set(err, "out of memory for the held-out labels");
    if (rc == 0) rc = float_top1(model, &held, labels, err);
    dt_calib_trial trials[DT_CALIB_CANDIDATES];
    int best = 0;
    if (rc == 0)
        rc = dt_calib_auto(model, spec, qc, dataset_feed, &calib, dataset_feed, &held, labels,
                           held.count, DT_INT8_DNNL, model->max_batch, trials, &best, err);
    if (rc == 0) {
        fprintf(out, "calibration auto (%d images, %d held out, top-1 agreement with float32):",
                calib.count, held.count);
        for (int i = 0; i < DT_CALIB_CANDIDATES; i++) {
            char name[64];
            dt_calib_format(&trials[i].choice, name, sizeof name);
            fprintf(out, " %s %.2f%%%s", name, 100.0 * trials[i].right / held.count,
                    i + 1 < DT_CALIB_CANDIDATES ? "," : "");
        }
        char name[64];
        dt_calib_format(&trials[best].choice, name, sizeof name);
        fprintf(out, " -> %s\n", name);
        qc->calib = trials[best].choice;
    }
    free(labels);
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

int dt_quantize_file(const dt_quantize_file_options *o, FILE *out, dt_error *err) {
    const dt_train_config *cfg = o->cfg;
    dt_quant_config run_qc = o->qc; /* --calib-method auto sets its method */
    dt_quant_config *qc = &run_qc;
    /* 7-bit activations where this CPU's int8 (no VNNI) would saturate 8-bit ones */
    qc->reduce_range = dt_quant_reduce_range_here(qc->scheme);
    dt_model_spec spec;
    dt_fileset files; /* nothing written replaces the weights read, nor another output */
    dt_fileset_init(&files);
    dt_fileset_input(&files, "--init", cfg->init_path);
    dt_train_inputs_add(&files, cfg->model, cfg->data);
    dt_fileset_output(&files, "--out", o->out);
    int files_ok = !o->report_dir || dt_quant_report_files(&files, o->report_dir, err) == 0;
    files_ok = files_ok && dt_fileset_check(&files, err) == 0;
    dt_fileset_free(&files);
    char float_path[sizeof((dt_st_meta *)0)->value];
    struct stat float_st;
    files_ok = files_ok &&
               float_weights_of(cfg->init_path, float_path, sizeof float_path, &float_st, err) == 0;
    if (!files_ok) return -1;

    dt_dataset ds;
    dt_model model;
    dt_qnet q;
    feed_ctx feed = {0};
    if (dt_train_open_data(&ds, cfg->model, cfg->data, 1, o->calib_samples, err)) return -1;
    int rc = dt_train_model_spec(&spec, cfg->model, cfg->width, &ds, err);
    if (rc == 0)
        rc = dt_train_build_model(&model, &spec, cfg->batch_size, cfg->seed, cfg->init_path, err);
    if (rc) {
        dt_dataset_close(&ds);
        return -1;
    }
    feed.ds = &ds;
    feed.count = ds.size;
    dt_transform_init(&feed.tf, &ds, 0, cfg->seed);
    feed.pixels = malloc((size_t)ds.c * ds.h * ds.w * (size_t)omp_get_max_threads());
    char hash[32] = "";
    if (!feed.pixels) rc = dt_error_set(err, "out of memory for the calibration images");
    if (rc == 0 && o->autocal) rc = pick_calibration(&feed, &model, &spec, qc, out, err);
    if (rc == 0) rc = dt_qnet_build(&q, &model, &spec, qc->scheme, err);
    if (rc == 0) {
        rc = dt_quantize(&q, &model, qc, dataset_feed, &feed, err);
        if (rc == 0 && o->report_dir) rc = dt_quant_report_write(&q, o->report_dir, err);
        if (rc == 0)
            rc = dt_quant_file_hash(float_path, (long)float_st.st_size, hash, sizeof hash, err);
        if (rc == 0) {
            dt_st_meta meta[4] = {{"data", ""},
                                  {"float_weights", ""},
                                  {"float_weights_fnv1a64", ""},
                                  {"float_weights_bytes", ""}};
            snprintf(meta[0].value, sizeof meta[0].value, "%s", cfg->data);
            snprintf(meta[1].value, sizeof meta[1].value, "%s", float_path);
            snprintf(meta[2].value, sizeof meta[2].value, "%s", hash);
            snprintf(meta[3].value, sizeof meta[3].value, "%lld", (long long)float_st.st_size);
            rc = dt_qnet_save(&q, o->out, meta, 4, err);
        }
        if (rc == 0) {
            char method[64];
            dt_calib_format(&qc->calib, method, sizeof method);
            fprintf(
                out,
                "quantized %s (%s scheme, %s weights, %s calibration on %d images of "
                "%s%s) into %s%s%s\n",
                cfg->model, dt_quant_scheme_name(qc->scheme),
                qc->per_channel ? "per-channel" : "per-tensor", method, q.calib_samples, cfg->data,
                qc->reduce_range ? "; 7-bit activations: this CPU's int8 has no VNNI" : "", o->out,
                o->report_dir ? "; report in " : "", o->report_dir ? o->report_dir : "");
            char kept[512];
            if (dt_qnet_float_summary(&q, kept, sizeof kept))
                fprintf(out, "kept float: %s\n", kept);
        }
        dt_qnet_free(&q);
    }
    free(feed.pixels);
    dt_model_free(&model);
    dt_dataset_close(&ds);
    return rc;
}
