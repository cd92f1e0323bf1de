#include "study/scale_csv.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/outfile.h"
#include "core/textfile.h"

enum {
    COL_PROCS,
    COL_BATCH,
    COL_T_TRAIN,
    COL_T_EPOCH,
    COL_ITER,
    COL_T_DATA,
    COL_T_COMPUTE,
    COL_T_COMM,
    COL_T_EXPOSED,
    COL_BYTES,
    COL_LOSS,
    COL_ACC,
    COL_SCALED,
    COL_REPEATS,
    COL_TT_MIN,
    COL_TT_MAX,
    COL_TE_MIN,
    COL_TE_MAX,
    COL_OTHER,
    COL_MODEL, /* text: one model per report */
    N_COLS
};
static const char *const COLUMNS[N_COLS] = {
    "procs",       "batch_size",  "t_train",     "t_epoch",        "iterations",
    "t_data",      "t_compute",   "t_comm",      "t_comm_exposed", "bytes_sent",
    "final_loss",  "test_acc",    "lr_scaled",   "repeats",        "t_train_min",
    "t_train_max", "t_epoch_min", "t_epoch_max", "other_cores",    "model"};

/* The field of column c as a number: the whole field, finite; integers where the
 * column counts something. */
static int csv_number(const dt_csv *csv, int c, const char *text, double *out, dt_error *err) {
    const int counts = c == COL_PROCS || c == COL_BATCH || c == COL_ITER;
    const double max = c == COL_PROCS ? 1 << 20 : c == COL_BATCH ? 1 << 24 : 1e15;
    const int rc = dt_csv_number(text, -DBL_MAX, DBL_MAX, out);
    if (counts && rc != DT_CSV_NOT_A_NUMBER &&
        (rc || *out != floor(*out) || *out < 0 || *out > max))
        return dt_error_set(err, "%s line %ld: %s must be a whole number from 0 to %.0f, got '%s'",
                            csv->in.path, csv->in.lineno, COLUMNS[c], max, text);
    return dt_csv_field_number(csv, COLUMNS[c], text, -DBL_MAX, DBL_MAX, out, err);
}

int dt_scale_read_csv(dt_scale_study *s, const char *path, dt_error *err) {
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    char **fields = csv.field;
    int where[DT_CSV_MAX_FIELDS], n_fields = 0, rc = 0, got = dt_csv_next(&csv, err);
    int have[N_COLS] = {0};
    if (got < 0) {
        rc = -1;
    } else if (got == 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else {
        n_fields = csv.n;
        for (int k = 0; k < n_fields && rc == 0; k++) {
            where[k] = -1;
            for (int c = 0; c < N_COLS; c++)
                if (!strcmp(fields[k], COLUMNS[c])) {
                    if (have[c])
                        rc = dt_error_set(err, "%s: column '%s' appears twice", path, COLUMNS[c]);
                    where[k] = c, have[c] = 1;
                }
        }
        for (int c = COL_PROCS; c <= COL_T_TRAIN && rc == 0; c++)
            if (!have[c])
                rc = dt_error_set(err, "%s: missing column '%s' (need procs,batch_size,t_train)",
                                  path, COLUMNS[c]);
    }
    char first_model[64] = "";
    while (rc == 0 && (got = dt_csv_next(&csv, err)) != 0) {
        const long lineno = csv.in.lineno;
        const int k = csv.n;
        if (got < 0) {
            rc = -1;
            break;
        }
        if (k != n_fields) {
            rc = dt_error_set(err, "%s line %ld: %d fields, the header has %d", path, lineno, k,
                              n_fields);
            break;
        }
        dt_scale_row r = dt_scale_row_unknown();
        int skip = 0; /* another model's row (model_only) */
        for (int i = 0; i < k && rc == 0 && !skip; i++) {
            if (where[i] < 0) continue;
            if (where[i] == COL_MODEL) { /* one curve per model would mix studies: refuse */
                const char *m = fields[i];
                if (s->model_only[0]) {
                    if (strcmp(m, s->model_only)) skip = 1;
                    continue;
                }
                if (!first_model[0]) {
                    snprintf(first_model, sizeof first_model, "%s", m);
                    if (!s->model[0]) snprintf(s->model, sizeof s->model, "%s", m);
                } else if (strcmp(first_model, m)) {
                    rc = dt_error_set(err,
                                      "%s line %ld: model '%s' after '%s': report --times makes "
                                      "one report per model; split the CSV by its model column",
                                      path, lineno, m, first_model);
                    break;
                }
                continue;
            }
            double v = 0;
            if (csv_number(&csv, where[i], fields[i], &v, err)) {
                rc = -1;
                break;
            }
            switch (where[i]) {
            case COL_PROCS:
                r.procs = (int)v;
                break;
            case COL_BATCH:
                r.batch = (int)v;
                break;
            case COL_T_TRAIN:
                r.t_train = v;
                break;
            case COL_T_EPOCH:
                r.t_epoch = v;
                break;
            case COL_ITER:
                r.iterations = (long)v;
                break;
            case COL_T_DATA:
                r.t_data = v;
                break;
            case COL_T_COMPUTE:
                r.t_compute = v;
                break;
            case COL_T_COMM:
                r.t_comm = v;
                break;
            case COL_T_EXPOSED:
                r.t_comm_exposed = v;
                break;
            case COL_BYTES:
                r.bytes_sent = v;
                break;
            case COL_LOSS:
                r.final_loss = v;
                break;
            case COL_ACC:
                r.test_acc = v;
                break;
            case COL_SCALED:
                r.lr_scaled = v != 0;
                break;
            case COL_REPEATS:
                r.repeats = v >= 1 && v <= 1e6 ? (int)v : 1;
                break;
            case COL_TT_MIN:
                r.t_train_min = v;
                break;
            case COL_TT_MAX:
                r.t_train_max = v;
                break;
            case COL_TE_MIN:
                r.t_epoch_min = v;
                break;
            case COL_TE_MAX:
                r.t_epoch_max = v;
                break;
            case COL_OTHER:
                r.other_cores = v;
                break;
            }
        }
        if (rc) break;
        if (skip) continue;
        if (r.procs < 1 || r.batch < 1)
            rc = dt_error_set(err, "%s line %ld: procs and batch_size must be positive", path,
                              lineno);
        else if (r.t_train <= 0 || (have[COL_T_EPOCH] && r.t_epoch <= 0))
            rc = dt_error_set(err, "%s line %ld: times must be positive (t_train %g)", path, lineno,
                              r.t_train);
        else if (dt_scale_add_row(s, &r, err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            rc = dt_error_set(err, "%s line %ld: %s", path, lineno, why);
        }
    }
    dt_csv_close(&csv);
    if (rc == 0 && s->n_rows == 0) rc = dt_error_set(err, "%s has no data rows", path);
    return rc ? rc : dt_scale_combine(s, err);
}

int dt_scale_csv_models(const char *path, char (*names)[64], int max, int *n, dt_error *err) {
    *n = 0;
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int got = dt_csv_next(&csv, err), col = -1, rc = got < 0 ? -1 : 0;
    for (int k = 0; got > 0 && k < csv.n; k++)
        if (!strcmp(csv.field[k], COLUMNS[COL_MODEL])) col = k;
    while (rc == 0 && col >= 0 && (got = dt_csv_next(&csv, err)) != 0) {
        if (got < 0 || col >= csv.n) { /* a short row: the reader's error */
            rc = got < 0 ? -1 : 0;
            break;
        }
        const char *m = csv.field[col];
        int seen = 0;
        for (int i = 0; i < *n && !seen; i++) seen = !strcmp(names[i], m);
        if (seen) continue;
        if (strlen(m) >= 64 || !*m)
            rc = dt_error_set(err, "%s line %ld: a model name must have 1 to 63 characters", path,
                              csv.in.lineno);
        else if (*n == max)
            rc = dt_error_set(err, "%s: more than %d models", path, max);
        else
            snprintf(names[(*n)++], 64, "%s", m);
    }
    dt_csv_close(&csv);
    return rc;
}

int dt_scale_write_csv(const dt_scale_study *s, const char *path, dt_error *err) {
    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) return -1;
    FILE *f = out.f;
    fprintf(f, "model,params,dataset_size,procs,batch_size,lr_scaled,iterations,t_train,t_epoch,"
               "t_data,t_compute,t_comm,t_comm_exposed,bytes_sent,final_loss,test_acc,repeats,"
               "t_train_min,t_train_max,t_epoch_min,t_epoch_max,other_cores,busy\n");
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        fprintf(f,
                "%s,%.0f,%.0f,%d,%d,%d,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%.6g,"
                "%.6g,%.6g,%.6g,%.3g,%d\n",
                s->model, s->params, s->dataset_size, r->procs, r->batch, r->lr_scaled,
                dt_scale_iterations(s, r), r->t_train, r->t_epoch, r->t_data, r->t_compute,
                r->t_comm, r->t_comm_exposed, r->bytes_sent, r->final_loss, r->test_acc,
                r->repeats > 0 ? r->repeats : 1, r->t_train_min, r->t_train_max, r->t_epoch_min,
                r->t_epoch_max, r->other_cores, r->busy);
    }
    return dt_outfile_commit(&out, err);
}

/* ---- report ---- */
