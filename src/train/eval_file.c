/* dtrain eval as a library call (eval_file.h): saved weights, float or quantized, on a
 * test split, written as text or one JSON line. */
#include "train/eval_file.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cpu_isa.h"
#include "core/fileset.h"
#include "core/parse.h"
#include "dtrain/evaluate.h"
#include "dtrain/safetensors.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"
#include "dtrain/zoo.h"
#include "quant/int8_dnnl.h"
#include "quant/quant.h"
#include "train/inputs.h"

/* What eval says about a quantized file, beside the usual figures. */
typedef struct int8_info {
    const dt_qnet *q;
    dt_int8_engine engine;
    const char *float_path;   /* the float weights compared with, or NULL */
    const char *why_no_float; /* why there are none */
    char why_buf[512];        /* why_no_float when it names sizes */
    double float_accuracy, agreement;
} int8_info;

/* The data's class names if it has them for these classes, else NULL (numbers only). */
static const char *const *class_names(const dt_dataset *ds, const dt_eval_result *r) {
    return ds->class_names && ds->classes == r->classes ? ds->class_names : NULL;
}

static void print_text(FILE *out, const dt_train_config *cfg, const dt_eval_result *r,
                       const int8_info *i8, const char *const *names) {
    if (i8) {
        char method[64];
        dt_calib_format(&i8->q->cfg.calib, method, sizeof method);
        fprintf(out,
                "evaluated %s int8 (%s scheme, %s weights, %s calibration; engine %s; file %s) "
                "on the %s test split: %ld samples, loss %.4f, accuracy %.2f%%\n",
                cfg->model, dt_quant_scheme_name(i8->q->cfg.scheme),
                i8->q->cfg.per_channel ? "per-channel" : "per-tensor", method,
                dt_int8_engine_name(i8->engine), cfg->init_path, cfg->data, r->samples, r->loss,
                100.0 * r->accuracy);
        if (i8->float_path)
            fprintf(out,
                    "float32 weights %s: accuracy %.2f%%; int8 - float32 %+.2f points; top-1 "
                    "agreement %.2f%%\n\n",
                    i8->float_path, 100.0 * i8->float_accuracy,
                    100.0 * (r->accuracy - i8->float_accuracy), 100.0 * i8->agreement);
        else
            fprintf(out, "no comparison with float32: %s\n\n", i8->why_no_float);
    } else {
        fprintf(out,
                "evaluated %s (weights %s) on the %s test split: %ld samples, loss %.4f, "
                "accuracy %.2f%%\n\n",
                cfg->model, cfg->init_path, cfg->data, r->samples, r->loss, 100.0 * r->accuracy);
    }
    int wide = 0; /* the longest name, for the column */
    for (int c = 0; names && c < r->classes; c++)
        if ((int)strlen(names[c]) > wide) wide = (int)strlen(names[c]);
    const int name_w = names ? wide + 2 : 0;
    fprintf(out, "class  %-*s samples  accuracy\n", name_w, names ? "name" : "");
    for (int c = 0; c < r->classes; c++) {
        long total = 0;
        for (int k = 0; k < r->classes; k++) total += r->confusion[(size_t)c * r->classes + k];
        fprintf(out, "%5d  %-*s %7ld  %7.2f%%\n", c, name_w, names ? names[c] : "", total,
                100.0 * dt_eval_class_accuracy(r, c));
    }
    fprintf(out, "\nconfusion matrix (rows: true class, columns: predicted class)\n%*s", 5 + name_w,
            "");
    for (int k = 0; k < r->classes; k++) fprintf(out, " %6d", k);
    for (int c = 0; c < r->classes; c++) {
        fprintf(out, "\n%5d  %-*s", c, name_w - 2 > 0 ? name_w - 2 : 0, names ? names[c] : "");
        for (int k = 0; k < r->classes; k++)
            fprintf(out, " %6ld", r->confusion[(size_t)c * r->classes + k]);
    }
    fprintf(out, "\n");
}

/* Appends item to array; on failure frees it (nothing else owns it) and returns 0. */
static int append(cJSON *array, cJSON *item) {
    if (item && cJSON_AddItemToArray(array, item)) return 1;
    cJSON_Delete(item);
    return 0;
}

/* The JSON line, built with cJSON so the model and data names are escaped. */
static int print_json(FILE *out, const dt_train_config *cfg, const dt_eval_result *r,
                      const int8_info *i8, const char *const *names) {
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "event", "eval") &&
             cJSON_AddStringToObject(o, "model", cfg->model) &&
             cJSON_AddStringToObject(o, "data", cfg->data) &&
             cJSON_AddNumberToObject(o, "samples", (double)r->samples) &&
             cJSON_AddNumberToObject(o, "loss", r->loss) &&
             cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
    if (ok && i8) {
        char method[64];
        dt_calib_format(&i8->q->cfg.calib, method, sizeof method);
        ok = cJSON_AddBoolToObject(o, "int8", 1) &&
             cJSON_AddStringToObject(o, "engine", dt_int8_engine_name(i8->engine)) &&
             cJSON_AddStringToObject(o, "scheme", dt_quant_scheme_name(i8->q->cfg.scheme)) &&
             cJSON_AddStringToObject(o, "weights",
                                     i8->q->cfg.per_channel ? "per-channel" : "per-tensor") &&
             cJSON_AddStringToObject(o, "calib_method", method);
        /* without float weights: null, as cJSON writes NaN */
        if (ok)
            ok = cJSON_AddNumberToObject(o, "float_accuracy",
                                         i8->float_path ? i8->float_accuracy : NAN) &&
                 cJSON_AddNumberToObject(o, "agreement", i8->float_path ? i8->agreement : NAN);
    }
    /* the names of the classes where the data has them, else null */
    cJSON *named = NULL;
    if (ok && names) {
        named = cJSON_AddArrayToObject(o, "class_names");
        ok = named != NULL;
        for (int c = 0; ok && c < r->classes; c++) ok = append(named, cJSON_CreateString(names[c]));
    } else if (ok) {
        ok = cJSON_AddNullToObject(o, "class_names") != NULL;
    }
    cJSON *classes = ok ? cJSON_AddArrayToObject(o, "class_accuracy") : NULL;
    cJSON *confusion = classes ? cJSON_AddArrayToObject(o, "confusion") : NULL;
    ok = confusion != NULL;
    for (int c = 0; ok && c < r->classes; c++) {
        /* a class without samples has no accuracy: NaN, which cJSON writes as null */
        cJSON *row = cJSON_CreateArray();
        ok = append(classes, cJSON_CreateNumber(dt_eval_class_accuracy(r, c))) &&
             append(confusion, row);
        for (int k = 0; ok && k < r->classes; k++)
            ok = append(row, cJSON_CreateNumber((double)r->confusion[(size_t)c * r->classes + k]));
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    ok = text && fprintf(out, "%s\n", text) > 0;
    cJSON_free(text);
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

/* Every sample's logits and label, for scripts that compare them with another
 * implementation. */
static int save_logits(const char *path, const float *logits, const dt_dataset *ds, int classes,
                       dt_error *err) {
    int32_t *labels = malloc(sizeof(int32_t) * (size_t)ds->size);
    uint8_t *px = malloc((size_t)ds->c * ds->h * ds->w);
    if (!labels || !px) {
        free(labels), free(px);
        return dt_error_set(err, "out of memory writing %s", path);
    }
    for (int i = 0; i < ds->size; i++) labels[i] = dt_dataset_sample(ds, i, px);
    dt_st_entry e[2] = {{"logits", "F32", 2, {ds->size, classes}, logits},
                        {"labels", "I32", 1, {ds->size}, labels}};
    int rc = dt_safetensors_write(path, e, 2, NULL, 0, err);
    free(labels), free(px);
    return rc;
}

static float *alloc_logits(const char *path, const dt_dataset *ds, int classes, dt_error *err) {
    if (!path) return NULL;
    return dt_alloc(sizeof(float) * (size_t)ds->size * (size_t)classes, "logits", err);
}

static void qrun_forward(void *ctx, int n) {
    dt_qrun_forward(ctx, n);
}

static const float *qrun_logits(void *ctx) {
    return dt_qrun_logits(ctx);
}

/* The sizes a safetensors file of spec's float weights can have: its tensors as F32
 * (and BatchNorm's I64 counts) at least; at most those, the momentum of a checkpoint
 * and a header of 1 MiB plus 1 KiB a tensor. From the network, never from the file
 * that names the weights. */
static int float_weights_bounds(const dt_model_spec *spec, long long *least, long long *most,
                                dt_error *err) {
    dt_model m;
    if (dt_zoo_build(&m, spec, err)) return -1; /* the graph only: nothing allocated */
    long long counts = 0;
    for (int i = 0; i < m.n_ops; i++) counts += m.ops[i].kind == DT_OP_BATCHNORM2D;
    const long long data = 4 * (long long)(m.n_params + m.n_buffers) + 8 * counts;
    *least = 8 + data;
    *most = *least + 4 * (long long)m.n_params + (1 << 20) +
            1024 * (2 * (long long)m.n_tensors + counts);
    dt_model_free(&m);
    return 0;
}

/* The float weights a quantized file is compared with: --compare, else those named in
 * its metadata if that file is still the one quantized: a regular file of the recorded
 * size and hash (a path read from a file is not trusted to be one; files written before
 * the size was recorded are checked by their hash alone). A size that the network's
 * float weights cannot have is a note (in why_buf) before any byte is read: the file
 * could be of any size, and hashing it all of its time; the int8 eval still runs. */
static int float_weights(const dt_safetensors *st, const char *given, const dt_model_spec *spec,
                         const char **path_out, const char **why, char *why_buf, size_t why_size,
                         dt_error *err) {
    *path_out = NULL;
    if (given) {
        *path_out = given;
        return 0;
    }
    const char *path = dt_safetensors_meta(st, "float_weights");
    const char *want = dt_safetensors_meta(st, "float_weights_fnv1a64");
    const char *bytes = dt_safetensors_meta(st, "float_weights_bytes");
    char hash[32];
    long expect = -1;
    dt_error ignored;
    if (!path || !*path || !want) {
        *why = "the file names no float weights (give --compare FILE)";
        return 0;
    }
    if (bytes && dt_parse_long("float_weights_bytes", bytes, 0, LONG_MAX, &expect, &ignored)) {
        *why = "its float_weights_bytes is not a byte count (give --compare FILE)";
        return 0;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        *why = "the float weights it was made from are gone (give --compare FILE)";
        return 0;
    }
    if (!S_ISREG(sb.st_mode)) {
        *why = "the float weights it names are not a regular file (give --compare FILE)";
        return 0;
    }
    long long least, most;
    if (float_weights_bounds(spec, &least, &most, err)) return -1;
    if ((long long)sb.st_size < least || (long long)sb.st_size > most) {
        snprintf(why_buf, why_size,
                 "its float weights %s are not %s's size: %lld bytes, not %lld to %lld; not "
                 "read (give --compare FILE)",
                 path, spec->name, (long long)sb.st_size, least, most);
        *why = why_buf;
        return 0;
    }
    if (dt_quant_file_hash(path, expect, hash, sizeof hash, &ignored) || strcmp(hash, want)) {
        *why = "the float weights it was made from have changed since (give --compare FILE)";
        return 0;
    }
    *path_out = path;
    return 0;
}

/* Evaluates a quantized file: int8, and beside it the float weights if there are any. */
static int eval_int8(const dt_train_config *cfg, const dt_safetensors *st, const char *compare,
                     dt_int8_engine engine, int engine_given, int json, const char *logits_path,
                     FILE *out, dt_error *err) {
    dt_dataset test;
    dt_model_spec spec;
    if (dt_train_open_data(&test, cfg->model, cfg->data, 0, cfg->max_test_samples, err)) return -1;
    dt_qnet q;
    dt_qrun *run = NULL;
    dt_model fm;
    int have_float = 0;
    int8_info info = {.engine = engine, .q = &q, .why_no_float = ""};
    int rc = dt_train_model_spec(&spec, cfg->model, cfg->width, &test, err);
    if (rc == 0) rc = dt_qnet_load(&q, st, &spec, err);
    if (rc) {
        dt_dataset_close(&test);
        return -1;
    }
    char why[160];
    /* the default engine only: one given by --int8-engine is refused by dt_qrun_create */
    if (engine == DT_INT8_DNNL && !engine_given && !dt_int8_dnnl_exact_here(&q, why, sizeof why)) {
        /* the emulation computes the file's integers exactly, only slower */
        fprintf(stderr,
                "dtrain eval: note: int8 on oneDNN is not exact on this CPU (%s, no "
                "AVX512-VNNI) for %s: %s; running the emulation (quantize again here for "
                "oneDNN)\n",
                dt_cpu_isa_name(), st->path, why);
        engine = info.engine = DT_INT8_EMULATE;
    }
    rc = dt_qrun_create(&run, &q, engine, cfg->batch_size, err);
    if (rc == 0)
        rc = float_weights(st, compare, &spec, &info.float_path, &info.why_no_float, info.why_buf,
                           sizeof info.why_buf, err);
    if (rc == 0 && info.float_path) {
        rc = dt_train_build_model(&fm, &spec, cfg->batch_size, cfg->seed, info.float_path, err);
        have_float = rc == 0;
    }
    dt_eval_target targets[2];
    dt_eval_result results[2];
    int n = 0;
    if (have_float) targets[n++] = dt_eval_target_of_model(&fm);
    targets[n++] = (dt_eval_target){.input = run ? dt_qrun_input(run) : NULL,
                                    .max_batch = cfg->batch_size,
                                    .classes = spec.classes,
                                    .forward = qrun_forward,
                                    .logits = qrun_logits,
                                    .ctx = run};
    float *kept = NULL;
    if (rc == 0 && logits_path && !(kept = alloc_logits(logits_path, &test, spec.classes, err)))
        rc = -1;
    targets[n - 1].keep_logits = kept;
    dt_transform tf;
    dt_transform_init(&tf, &test, 0, cfg->seed);
    if (rc == 0)
        rc = dt_evaluate_targets(targets, n, &test, &tf, NULL, results, &info.agreement, err);
    if (rc == 0) {
        const dt_eval_result *r8 = &results[n - 1];
        if (have_float) info.float_accuracy = results[0].accuracy;
        if (json) {
            if (print_json(out, cfg, r8, &info, class_names(&test, r8)))
                rc = dt_error_set(err, "cannot write the JSON line");
        } else {
            print_text(out, cfg, r8, &info, class_names(&test, r8));
        }
        for (int k = 0; k < n; k++) dt_eval_result_free(&results[k]);
        if (rc == 0 && kept) rc = save_logits(logits_path, kept, &test, spec.classes, err);
    }
    dt_free(kept);
    if (have_float) dt_model_free(&fm);
    dt_qrun_destroy(run);
    dt_qnet_free(&q);
    dt_dataset_close(&test);
    return rc;
}

int dt_eval_file(const dt_eval_file_options *o, FILE *out, dt_error *err) {
    const dt_train_config *cfg = o->cfg;
    dt_fileset files; /* --logits replaces neither weights file */
    dt_fileset_init(&files);
    dt_fileset_input(&files, "--init", cfg->init_path);
    dt_fileset_input(&files, "--compare", o->compare);
    dt_train_inputs_add(&files, cfg->model, cfg->data);
    dt_fileset_output(&files, "--logits", o->logits);
    const int files_ok = dt_fileset_check(&files, err) == 0;
    dt_fileset_free(&files);
    if (!files_ok) return -1;
    dt_safetensors st;
    if (dt_safetensors_read(&st, cfg->init_path, err)) return -1;
    const int quantized = dt_qnet_file_is_quantized(&st);
    const char *named = quantized ? dt_safetensors_meta(&st, "float_weights") : NULL;
    if (named && *named && o->logits && !o->compare) { /* read too, unless --compare */
        dt_fileset_init(&files);
        dt_fileset_input(&files, "--init's float weights", named);
        dt_fileset_output(&files, "--logits", o->logits);
        const int bad = dt_fileset_check(&files, err);
        dt_fileset_free(&files);
        if (bad) {
            dt_safetensors_free(&st);
            return -1;
        }
    }
    if (quantized) {
        int rc = eval_int8(cfg, &st, o->compare, o->engine, o->engine_given, o->json, o->logits,
                           out, err);
        dt_safetensors_free(&st);
        return rc;
    }
    dt_safetensors_free(&st);

    dt_dataset test;
    dt_model model;
    dt_model_spec spec;
    if (dt_train_open_data(&test, cfg->model, cfg->data, 0, cfg->max_test_samples, err)) return -1;
    if (dt_train_model_spec(&spec, cfg->model, cfg->width, &test, err) ||
        dt_train_build_model(&model, &spec, cfg->batch_size, cfg->seed, cfg->init_path, err)) {
        dt_dataset_close(&test);
        return -1;
    }
    dt_transform tf;
    dt_transform_init(&tf, &test, 0, cfg->seed);
    dt_eval_result result = {0};
    dt_eval_target target = dt_eval_target_of_model(&model);
    int rc = 0;
    if (o->logits && !(target.keep_logits = alloc_logits(o->logits, &test, spec.classes, err)))
        rc = -1;
    if (rc == 0) rc = dt_evaluate_targets(&target, 1, &test, &tf, NULL, &result, NULL, err);
    if (rc == 0 && target.keep_logits)
        rc = save_logits(o->logits, target.keep_logits, &test, spec.classes, err);
    dt_free(target.keep_logits);
    if (rc == 0 && o->json) {
        if (print_json(out, cfg, &result, NULL, class_names(&test, &result)))
            rc = dt_error_set(err, "cannot write the JSON line");
    } else if (rc == 0) {
        print_text(out, cfg, &result, NULL, class_names(&test, &result));
    }
    dt_eval_result_free(&result);
    dt_model_free(&model);
    dt_dataset_close(&test);
    return rc;
}
