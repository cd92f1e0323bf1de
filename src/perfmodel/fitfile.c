#include "perfmodel/fitfile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/outfile.h"
#include "core/textfile.h"

/* Writes root (and frees it), whole or not at all. */
static int save(const char *path, cJSON *root, dt_error *err) {
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return dt_error_set(err, "cannot write %s: out of memory", path);
    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) {
        free(text);
        return -1;
    }
    fputs(text, out.f);
    free(text);
    return dt_outfile_commit(&out, err); /* checks every write */
}

/* The whole file parsed, or NULL with err set. A fit file is a few hundred bytes. */
enum { MAX_FIT_FILE_BYTES = 16 << 20 };

static cJSON *load(const char *path, dt_error *err) {
    char *text = dt_text_file_read(path, "", MAX_FIT_FILE_BYTES, err);
    if (!text) return NULL;
    cJSON *root = cJSON_ParseWithOpts(text, NULL, 1);
    free(text);
    if (!root) dt_error_set(err, "%s is not a fit file (JSON)", path);
    return root;
}

int dt_loss_fit_save(const char *path, const dt_loss_fit *fit, double last_step,
                     double converge_step, double target, double observed_step, dt_error *err) {
    cJSON *root = cJSON_CreateObject();
    if (root &&
        !(cJSON_AddStringToObject(root, "fit", "loss") &&
          cJSON_AddNumberToObject(root, "b0", fit->b0) &&
          cJSON_AddNumberToObject(root, "b1", fit->b1) &&
          cJSON_AddNumberToObject(root, "b2", fit->b2) &&
          cJSON_AddNumberToObject(root, "last_step", last_step) &&
          cJSON_AddNumberToObject(root, "converge_step", converge_step) &&
          (target <= 0 || (cJSON_AddNumberToObject(root, "target_loss", target) &&
                           cJSON_AddNumberToObject(root, "observed_step", observed_step))) &&
          (!dt_loss_fit_b1_at_bound(fit) || cJSON_AddTrueToObject(root, "b1_at_bound")))) {
        cJSON_Delete(root);
        root = NULL;
    }
    return save(path, root, err);
}

static double number_or(const cJSON *root, const char *key, double fallback) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsNumber(v) ? v->valuedouble : fallback;
}

int dt_loss_fit_load(const char *path, dt_loss_fit *fit, double *last_step, double *converge_step,
                     dt_error *err) {
    cJSON *root = load(path, err);
    if (!root) return -1;
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(root, "converge_step");
    const cJSON *last = cJSON_GetObjectItemCaseSensitive(root, "last_step");
    int rc = 0;
    if (!cJSON_IsNumber(conv) || !cJSON_IsNumber(last)) {
        rc = dt_error_set(err, "%s is not a loss fit (dtrain fit-loss --save)", path);
    } else {
        *converge_step = conv->valuedouble;
        *last_step = last->valuedouble;
        *fit = (dt_loss_fit){number_or(root, "b0", 0), number_or(root, "b1", 0),
                             number_or(root, "b2", 0), 0};
    }
    cJSON_Delete(root);
    return rc;
}

static const char *speed_kind_name(dt_speed_kind kind) {
    return kind == DT_SPEED_PS               ? "speed-ps"
           : kind == DT_SPEED_ALLREDUCE_SYNC ? "speed-allreduce-sync"
                                             : "speed-allreduce";
}

int dt_speed_fit_save(const char *path, const dt_speed_fit *fit, dt_error *err) {
    cJSON *root = cJSON_CreateObject();
    if (root && !(cJSON_AddStringToObject(root, "fit", speed_kind_name(fit->kind)) &&
                  cJSON_AddItemToObject(root, "theta",
                                        cJSON_CreateDoubleArray(fit->theta, fit->n_theta)))) {
        cJSON_Delete(root);
        root = NULL;
    }
    return save(path, root, err);
}

int dt_speed_fit_load(const char *path, dt_speed_fit *fit, dt_error *err) {
    cJSON *root = load(path, err);
    if (!root) return -1;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "fit");
    const cJSON *theta = cJSON_GetObjectItemCaseSensitive(root, "theta");
    memset(fit, 0, sizeof *fit);
    int ok = cJSON_IsString(kind) && cJSON_IsArray(theta);
    if (ok) {
        fit->kind = !strcmp(kind->valuestring, "speed-ps")               ? DT_SPEED_PS
                    : !strcmp(kind->valuestring, "speed-allreduce-sync") ? DT_SPEED_ALLREDUCE_SYNC
                                                                         : DT_SPEED_ALLREDUCE;
        double features[DT_SPEED_MAX_THETA];
        fit->n_theta = cJSON_GetArraySize(theta);
        ok = !strcmp(kind->valuestring, speed_kind_name(fit->kind)) &&
             fit->n_theta == dt_speed_features(fit->kind, 1, 1, 1, features);
        for (int i = 0; ok && i < fit->n_theta; i++) {
            const cJSON *t = cJSON_GetArrayItem(theta, i);
            ok = cJSON_IsNumber(t);
            if (ok) fit->theta[i] = t->valuedouble;
        }
    }
    cJSON_Delete(root);
    if (!ok) return dt_error_set(err, "%s is not a speed fit (dtrain fit-speed --save)", path);
    return 0;
}
