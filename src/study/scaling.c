#include "dtrain/scaling.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/outfile.h"
#include "dtrain/perfmodel.h"

int dt_scale_add_row(dt_scale_study *s, const dt_scale_row *row, dt_error *err) {
    /* the report's tables and plots hold 64 process counts and 64 batch sizes: more is
     * refused rather than some silently left out */
    int new_procs = 1, new_batch = 1, procs[64], batch[64];
    for (int i = 0; i < s->n_rows; i++) {
        new_procs &= s->rows[i].procs != row->procs;
        new_batch &= s->rows[i].batch != row->batch;
    }
    if ((new_procs && dt_scale_distinct(s, 0, procs) == 64) ||
        (new_batch && dt_scale_distinct(s, 1, batch) == 64))
        return dt_error_set(err, "more than 64 different %s (the report's limit)",
                            new_procs ? "process counts" : "batch sizes");
    if (s->n_rows == s->cap_rows) {
        int cap = s->cap_rows ? 2 * s->cap_rows : 16;
        dt_scale_row *p = realloc(s->rows, sizeof *p * (size_t)cap);
        if (!p) return dt_error_set(err, "out of memory for the study's rows");
        s->rows = p;
        s->cap_rows = cap;
    }
    s->rows[s->n_rows++] = *row;
    return 0;
}

void dt_scale_add_note(dt_scale_study *s, const char *fmt, ...) {
    if (s->n_notes >= 8) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->notes[s->n_notes++], sizeof s->notes[0], fmt, ap);
    va_end(ap);
}

void dt_scale_free(dt_scale_study *s) {
    free(s->rows);
    s->rows = NULL;
    s->n_rows = s->cap_rows = 0;
}

const dt_scale_row *dt_scale_find(const dt_scale_study *s, int procs, int batch, int lr_scaled) {
    for (int i = 0; i < s->n_rows; i++)
        if (s->rows[i].procs == procs && s->rows[i].batch == batch &&
            s->rows[i].lr_scaled == lr_scaled)
            return &s->rows[i];
    return NULL;
}

static double epoch_time(const dt_scale_row *r) {
    return r->t_epoch > 0 ? r->t_epoch : r->t_train;
}

/* Iterations per process per epoch with the dataset split over procs (-1: unknown). */
static double split_iterations(double dataset_size, int procs, int batch) {
    return dataset_size > 0 ? ceil(ceil(dataset_size / procs) / batch) : -1;
}

static double iterations(const dt_scale_study *s, const dt_scale_row *r) {
    if (r->iterations > 0) return (double)r->iterations;
    return split_iterations(s->dataset_size, r->procs, r->batch);
}

static const dt_scale_row *base_of(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_find(s, 1, r->batch, r->lr_scaled);
}

double dt_scale_strong_speedup(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    return b ? epoch_time(b) / epoch_time(r) : -1;
}

double dt_scale_weak_speedup(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    if (!b) return -1;
    double ib = iterations(s, b), ir = iterations(s, r);
    if (ib <= 0 || ir <= 0) return -1;
    return r->procs * (epoch_time(b) / ib) / (epoch_time(r) / ir);
}

double dt_scale_derived_comm(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    return b ? epoch_time(r) - epoch_time(b) / r->procs : -1;
}

double dt_scale_bandwidth(const dt_scale_study *s, const dt_scale_row *r, double t_comm) {
    double it = iterations(s, r);
    if (r->procs < 2 || it <= 0 || s->params <= 0 || t_comm <= 0) return -1;
    return it * 2.0 * (r->procs - 1) / r->procs * 4.0 * s->params / t_comm;
}

/* ---- CSV ---- */

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
    N_COLS
};
static const char *const COLUMNS[N_COLS] = {
    "procs",  "batch_size",     "t_train",    "t_epoch",    "iterations", "t_data",   "t_compute",
    "t_comm", "t_comm_exposed", "bytes_sent", "final_loss", "test_acc",   "lr_scaled"};

static char *trim(char *t) {
    while (*t == ' ' || *t == '\t') t++;
    size_t n = strlen(t);
    while (n && (t[n - 1] == ' ' || t[n - 1] == '\t' || t[n - 1] == '\r' || t[n - 1] == '\n'))
        t[--n] = 0;
    return t;
}

enum { MAX_CSV_FIELDS = 256, MAX_CSV_LINE = 1 << 20 };

/* Splits line in place at every comma, empty fields kept, each trimmed; the count, or
 * -1 if there are more than max. */
static int split_csv(char *line, char **fields, int max) {
    int n = 0;
    for (char *p = line;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (n == max) return -1;
        fields[n++] = trim(p);
        if (!comma) return n;
        p = comma + 1;
    }
}

/* The field of column c as a number: the whole field, finite; integers where the
 * column counts something. */
static int csv_number(const char *path, int lineno, int c, const char *text, double *out,
                      dt_error *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (!*text || end == text || *end || !isfinite(v))
        return dt_error_set(err, "%s line %d: %s is not a number: '%s'", path, lineno, COLUMNS[c],
                            text);
    const int counts = c == COL_PROCS || c == COL_BATCH || c == COL_ITER;
    const double max = c == COL_PROCS ? 1 << 20 : c == COL_BATCH ? 1 << 24 : 1e15;
    if (counts && (v != floor(v) || v < 0 || v > max))
        return dt_error_set(err, "%s line %d: %s must be a whole number from 0 to %.0f, got '%s'",
                            path, lineno, COLUMNS[c], max, text);
    *out = v;
    return 0;
}

int dt_scale_read_csv(dt_scale_study *s, const char *path, dt_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL, *fields[MAX_CSV_FIELDS];
    size_t cap = 0;
    int where[MAX_CSV_FIELDS], n_fields = 0, lineno = 1, rc = 0;
    ssize_t got = getline(&line, &cap, f);
    int have[N_COLS] = {0};
    if (got <= 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else if (got > MAX_CSV_LINE || (n_fields = split_csv(line, fields, MAX_CSV_FIELDS)) < 0) {
        rc = dt_error_set(err, "%s line 1: more than %d columns or %d bytes", path, MAX_CSV_FIELDS,
                          MAX_CSV_LINE);
    } else {
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
    while (rc == 0 && (got = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (got > MAX_CSV_LINE) {
            rc = dt_error_set(err, "%s line %d: longer than %d bytes", path, lineno, MAX_CSV_LINE);
            break;
        }
        if (!*trim(line)) continue;
        int k = split_csv(line, fields, MAX_CSV_FIELDS);
        if (k != n_fields) {
            rc = dt_error_set(err, "%s line %d: %d fields, the header has %d", path, lineno,
                              k < 0 ? MAX_CSV_FIELDS + 1 : k, n_fields);
            break;
        }
        dt_scale_row r = {.t_data = -1,
                          .t_compute = -1,
                          .t_comm = -1,
                          .t_comm_exposed = -1,
                          .bytes_sent = -1,
                          .final_loss = -1,
                          .test_acc = -1};
        for (int i = 0; i < k && rc == 0; i++) {
            if (where[i] < 0) continue;
            double v = 0;
            if (csv_number(path, lineno, where[i], fields[i], &v, err)) {
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
            }
        }
        if (rc) break;
        if (r.procs < 1 || r.batch < 1)
            rc = dt_error_set(err, "%s line %d: procs and batch_size must be positive", path,
                              lineno);
        else if (r.t_train <= 0 || (have[COL_T_EPOCH] && r.t_epoch <= 0))
            rc = dt_error_set(err, "%s line %d: times must be positive (t_train %g)", path, lineno,
                              r.t_train);
        else if (dt_scale_add_row(s, &r, err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            rc = dt_error_set(err, "%s line %d: %s", path, lineno, why);
        }
    }
    if (rc == 0 && ferror(f)) rc = dt_error_set(err, "cannot read %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (rc == 0 && s->n_rows == 0) rc = dt_error_set(err, "%s has no data rows", path);
    return rc;
}

int dt_scale_write_csv(const dt_scale_study *s, const char *path, dt_error *err) {
    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) return -1;
    FILE *f = out.f;
    fprintf(f, "model,params,dataset_size,procs,batch_size,lr_scaled,iterations,t_train,t_epoch,"
               "t_data,t_compute,t_comm,t_comm_exposed,bytes_sent,final_loss,test_acc\n");
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        fprintf(f, "%s,%.0f,%.0f,%d,%d,%d,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n",
                s->model, s->params, s->dataset_size, r->procs, r->batch, r->lr_scaled,
                iterations(s, r), r->t_train, r->t_epoch, r->t_data, r->t_compute, r->t_comm,
                r->t_comm_exposed, r->bytes_sent, r->final_loss, r->test_acc);
    }
    return dt_outfile_commit(&out, err);
}

/* ---- report ---- */

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

int dt_scale_distinct(const dt_scale_study *s, int batch, int out[64]) {
    int n = 0;
    for (int i = 0; i < s->n_rows; i++) {
        if (s->rows[i].lr_scaled) continue;
        int v = batch ? s->rows[i].batch : s->rows[i].procs, seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == v;
        if (!seen && n < 64) out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof(int), cmp_int);
    return n;
}

static void cell(FILE *out, double v, const char *fmt) {
    if (v < 0 || !isfinite(v))
        fprintf(out, " n/a |");
    else {
        fputc(' ', out);
        fprintf(out, fmt, v);
        fputs(" |", out);
    }
}

/* A table with one row per batch size and one column per process count. */
static void grid(FILE *out, const dt_scale_study *s, const int *procs, int np, const int *batch,
                 int nb, const char *fmt,
                 double (*value)(const dt_scale_study *, const dt_scale_row *)) {
    fputs("| batch per process |", out);
    for (int p = 0; p < np; p++) fprintf(out, " %d proc%s |", procs[p], procs[p] > 1 ? "s" : "");
    fputs("\n|---|", out);
    for (int p = 0; p < np; p++) fputs("---|", out);
    fputc('\n', out);
    for (int b = 0; b < nb; b++) {
        fprintf(out, "| %d |", batch[b]);
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            cell(out, r ? value(s, r) : -1, fmt);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
}

static double v_train(const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    return r->t_train;
}
static double v_epoch(const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    return r->t_epoch > 0 ? r->t_epoch : -1;
}
static double v_strong(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_strong_speedup(s, r);
}
static double v_strong_eff(const dt_scale_study *s, const dt_scale_row *r) {
    double x = dt_scale_strong_speedup(s, r);
    return x < 0 ? -1 : 100.0 * x / r->procs;
}
static double v_weak(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_weak_speedup(s, r);
}
static double v_weak_eff(const dt_scale_study *s, const dt_scale_row *r) {
    double x = dt_scale_weak_speedup(s, r);
    return x < 0 ? -1 : 100.0 * x / r->procs;
}

/* What every section of the report needs: the study, where to write, and the
 * distinct process counts and batch sizes in ascending order. */
typedef struct report {
    const dt_scale_study *s;
    FILE *out;
    int procs[64], batch[64];
    int np, nb;
} report;

static void report_header(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fprintf(out, "# Scaling study: %s on %s\n\n", s->model[0] ? s->model : "(model not given)",
            s->data[0] ? s->data : "(data not given)");
    fprintf(out, "%.0f parameters, %.0f training samples; process counts", s->params,
            s->dataset_size);
    for (int p = 0; p < rp->np; p++) fprintf(out, " %d", rp->procs[p]);
    fputs("; batch sizes per process", out);
    for (int b = 0; b < rp->nb; b++) fprintf(out, " %d", rp->batch[b]);
    fputs(".\n\n", out);
    if (s->servers > 0)
        fprintf(out,
                "Mode %s with %d parameter server%s on top of each process count: the "
                "process counts are workers.\n\n",
                s->mode[0] ? s->mode : "(parameter server)", s->servers, s->servers > 1 ? "s" : "");
    for (int i = 0; i < s->n_notes; i++) fprintf(out, "- **Note:** %s\n", s->notes[i]);
    if (s->n_notes) fputc('\n', out);
    fputs("Definitions. Epoch times are of the 2nd epoch (the 1st warms caches). *Training "
          "time* t_train excludes waits for the data loader; *running time* t_epoch is the "
          "whole training loop. Strong speed-up S = T(1)/T(N) (same per-process batch, the "
          "dataset split over N processes); efficiency S/N. Weak speed-up N t(1)/t(N) with t "
          "the time of one iteration (the same work per process per iteration); efficiency "
          "t(1)/t(N). When each process runs 1/N of the dataset, as here, the two coincide up "
          "to the rounding of iteration counts. T = t_epoch where measured, else t_train.\n\n",
          out);
}

static void report_grid(const report *rp, const char *fmt,
                        double (*value)(const dt_scale_study *, const dt_scale_row *)) {
    grid(rp->out, rp->s, rp->procs, rp->np, rp->batch, rp->nb, fmt, value);
}

/* Sections 1 and 2: times, speed-ups and efficiencies as grids. */
static void report_times_and_speedups(const report *rp) {
    FILE *out = rp->out;
    fputs("## 1. Training time and running time per epoch (s)\n\nTraining time t_train:\n\n", out);
    report_grid(rp, "%.2f", v_train);
    fputs("Running time t_epoch:\n\n", out);
    report_grid(rp, "%.2f", v_epoch);
    fputs("## 2. Speed-up and efficiency\n\nStrong scaling speed-up T(1)/T(N):\n\n", out);
    if (rp->np < 2 || rp->procs[0] != 1)
        fputs("Cannot compute: the study needs a 1-process run and at least one more process "
              "count.\n\n",
              out);
    report_grid(rp, "%.2f", v_strong);
    fputs("Strong scaling efficiency (%):\n\n", out);
    report_grid(rp, "%.0f", v_strong_eff);
    fputs("Weak scaling speed-up N t(1)/t(N):\n\n", out);
    report_grid(rp, "%.2f", v_weak);
    fputs("Weak scaling efficiency (%):\n\n", out);
    report_grid(rp, "%.0f", v_weak_eff);
}

/* The unscaled row of (batch b, procs p) by index, or NULL. */
static const dt_scale_row *report_row(const report *rp, int b, int p) {
    return dt_scale_find(rp->s, rp->procs[p], rp->batch[b], 0);
}

static void report_compute_vs_comm(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("## 3. Compute vs communication (s per epoch)\n\nMeasured per step and summed "
          "(means over ranks): compute (forward, backward, update), communication exposed "
          "(the step waited for it) and hidden (overlapped with backward); derived as in the "
          "classic analysis: T_comp = T(1)/N, T_comm = T(N) - T(1)/N.\n\n"
          "| procs | batch | measured compute | measured comm exposed | measured comm hidden | "
          "derived T_comp | derived T_comm |\n|---|---|---|---|---|---|---|\n",
          out);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r) continue;
            const dt_scale_row *base = dt_scale_find(s, 1, rp->batch[b], 0);
            fprintf(out, "| %d | %d |", r->procs, r->batch);
            cell(out, r->t_compute, "%.2f");
            cell(out, r->t_comm_exposed, "%.2f");
            cell(out, r->t_comm >= 0 && r->t_comm_exposed >= 0 ? r->t_comm - r->t_comm_exposed : -1,
                 "%.2f");
            cell(out, base ? epoch_time(base) / r->procs : -1, "%.2f");
            double dc = dt_scale_derived_comm(s, r);
            if (dc < 0 && base)
                fputs(" < 0 (faster than ideal) |", out);
            else
                cell(out, dc, "%.2f");
            fputc('\n', out);
        }
    fputc('\n', out);
}

static void report_bandwidth(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("## 4. All-reduce bandwidth utilisation\n\nBy the formula iterations x 2(P-1)/P x "
          "4 x params / T_comm with the derived T_comm, per process and aggregate (P times); "
          "beside it the measured bytes sent per process / measured all-reduce time.\n\n"
          "| procs | batch | iterations | formula per process (MB/s) | formula aggregate (MB/s) "
          "| measured bytes/time per process (MB/s) |\n|---|---|---|---|---|---|\n",
          out);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r || r->procs < 2) continue;
            double dc = dt_scale_derived_comm(s, r);
            double bw = dc > 0 ? dt_scale_bandwidth(s, r, dc) : -1;
            fprintf(out, "| %d | %d |", r->procs, r->batch);
            cell(out, iterations(s, r), "%.0f");
            cell(out, bw < 0 ? -1 : bw / 1e6, "%.1f");
            cell(out, bw < 0 ? -1 : bw * r->procs / 1e6, "%.1f");
            cell(out, r->bytes_sent > 0 && r->t_comm > 0 ? r->bytes_sent / r->t_comm / 1e6 : -1,
                 "%.1f");
            fputc('\n', out);
        }
    fputs("\n(n/a: no multi-process run, no derived communication time because the run was "
          "at or below the ideal T(1)/N, or no measured split in the input.)\n\n",
          out);
}

static void report_accuracy(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("## 5. Accuracy and loss vs batch size (large-batch effect)\n\n| procs | batch per "
          "process | global batch | linear LR scaling | final train loss | test accuracy "
          "|\n|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        fprintf(out, "| %d | %d | %lld | %s |", r->procs, r->batch, (long long)r->procs * r->batch,
                r->lr_scaled ? "yes" : "no");
        cell(out, r->final_loss, "%.4f");
        cell(out, r->test_acc >= 0 ? 100.0 * r->test_acc : -1, "%.2f%%");
        fputc('\n', out);
    }
    fputc('\n', out);
}

/* One line per multi-process config: speed-up, efficiency, exposed share, regime.
 * Returns whether it said anything. */
static int reading_per_config(const report *rp) {
    const dt_scale_study *s = rp->s;
    int said = 0;
    for (int b = 0; b < rp->nb; b++) {
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r || r->procs < 2) continue;
            double sp = dt_scale_strong_speedup(s, r);
            if (sp < 0) continue;
            double exposed_share =
                r->t_comm_exposed >= 0 && r->t_train > 0
                    ? r->t_comm_exposed / r->t_train
                    : (dt_scale_derived_comm(s, r) > 0 ? dt_scale_derived_comm(s, r) / epoch_time(r)
                                                       : 0);
            const char *regime = sp / r->procs >= 0.8  ? "scales well"
                                 : exposed_share > 0.3 ? "communication-bound"
                                 : sp < 1.0            ? "slower than one process"
                                                       : "scales partly";
            fprintf(rp->out,
                    "- Batch %d per process, %d processes: speed-up %.2f (efficiency %.0f%%); "
                    "%.0f%% of the training time waits for communication: %s.\n",
                    r->batch, r->procs, sp, 100.0 * sp / r->procs, 100.0 * exposed_share, regime);
            said = 1;
        }
    }
    return said;
}

/* Where scaling stops paying: the first added process count gaining under 5%, per
 * batch. Returns whether it said anything. */
static int reading_where_scaling_stops(const report *rp) {
    int said = 0;
    for (int b = 0; b < rp->nb; b++) {
        double prev = 1.0;
        int prev_p = 1;
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r || r->procs < 2) continue;
            double sp = dt_scale_strong_speedup(rp->s, r);
            if (sp < 0) continue;
            if (sp < prev * 1.05) {
                fprintf(rp->out,
                        "- At batch %d, going from %d to %d processes gains less than 5%% "
                        "(speed-up %.2f -> %.2f): scaling stops paying there.\n",
                        rp->batch[b], prev_p, r->procs, prev, sp);
                said = 1;
                break;
            }
            prev = sp;
            prev_p = r->procs;
        }
    }
    return said;
}

/* The speed-up at the largest process count, smallest vs largest batch. */
static int reading_batch_effect(const report *rp) {
    const int np = rp->np, nb = rp->nb;
    if (nb < 2) return 0;
    const dt_scale_row *lo = report_row(rp, 0, np - 1), *hi = report_row(rp, nb - 1, np - 1);
    if (!lo || !hi || rp->procs[np - 1] < 2) return 0;
    double a = dt_scale_strong_speedup(rp->s, lo), c = dt_scale_strong_speedup(rp->s, hi);
    if (a <= 0 || c <= 0) return 0;
    fprintf(rp->out,
            "- With %d processes, the speed-up goes from %.2f at batch %d to %.2f at "
            "batch %d: larger batches mean fewer all-reduces per epoch, so the "
            "%s.\n",
            rp->procs[np - 1], a, rp->batch[0], c, rp->batch[nb - 1],
            c > a ? "communication share falls and scaling improves"
                  : "gain is eaten by other costs (compute no longer dominates)");
    return 1;
}

static void report_reading(const report *rp) {
    fputs("## 6. Reading\n\n", rp->out);
    int said = reading_per_config(rp);
    said |= reading_where_scaling_stops(rp);
    said |= reading_batch_effect(rp);
    if (!said)
        fputs("Nothing to read: speed-ups need a 1-process run and at least one multi-process "
              "run of the same batch size.\n",
              rp->out);
}

/* The all-reduce speed model fitted to every measured config (time per iteration
 * against global batch and process count), each config's epoch time predicted from
 * it, and the process count the model would pick. */
static void report_model(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("\n## 7. Model vs measurement\n\n", out);
    dt_speed_point *pts = malloc(sizeof *pts * (size_t)(s->n_rows > 0 ? s->n_rows : 1));
    if (!pts) {
        fputs("No model: out of memory.\n", out);
        return;
    }
    int n = 0;
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        double it = iterations(s, r);
        if (r->lr_scaled || it <= 0) continue;
        pts[n++] = (dt_speed_point){r->procs, 0, (double)r->procs * r->batch, epoch_time(r) / it};
    }
    dt_speed_fit fit;
    dt_error err;
    const int failed = dt_speed_fit_points(DT_SPEED_ALLREDUCE, pts, n, &fit, &err);
    free(pts);
    if (failed) {
        fprintf(out, "No model: %s.\n", err.msg);
        return;
    }
    fprintf(out,
            "All-reduce speed model fitted by NNLS (relative residuals) to the %d "
            "configs: time per iteration = %.4g M/N + %.4g + %.4g 2(N-1)/N + %.4g (N-1) "
            "seconds (M global batch, N processes).\n\n| procs | batch | measured "
            "epoch (s) | model (s) | error |\n|---|---|---|---|---|\n",
            n, fit.theta[0], fit.theta[1], fit.theta[2], fit.theta[3]);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r || iterations(s, r) <= 0) continue;
            double pred = iterations(s, r) *
                          dt_speed_step_time(&fit, r->procs, 0, (double)r->procs * r->batch);
            fprintf(out, "| %d | %d | %.2f | %.2f | %+.1f%% |\n", r->procs, r->batch, epoch_time(r),
                    pred, 100.0 * (pred - epoch_time(r)) / epoch_time(r));
        }
    fputs("\nPredicted best process count per batch size (1 to 16 processes, epoch "
          "time = iterations x modelled time per iteration; beyond the measured counts "
          "this is extrapolation):\n\n",
          out);
    for (int b = 0; b < rp->nb; b++) {
        int best = 1;
        double best_t = INFINITY;
        for (int N = 1; N <= 16; N++) {
            double it = split_iterations(s->dataset_size, N, rp->batch[b]);
            if (it <= 0) break;
            double t = it * dt_speed_step_time(&fit, N, 0, (double)N * rp->batch[b]);
            if (t < best_t) best_t = t, best = N;
        }
        if (isfinite(best_t))
            fprintf(out, "- batch %d per process: %d processes (%.2f s per epoch)\n", rp->batch[b],
                    best, best_t);
    }
}

void dt_scale_write_report(const dt_scale_study *s, FILE *out, const char *const *plots,
                           int n_plots) {
    report rp = {.s = s, .out = out};
    rp.np = dt_scale_distinct(s, 0, rp.procs);
    rp.nb = dt_scale_distinct(s, 1, rp.batch);
    report_header(&rp);
    report_times_and_speedups(&rp);
    report_compute_vs_comm(&rp);
    report_bandwidth(&rp);
    report_accuracy(&rp);
    report_reading(&rp);
    report_model(&rp);
    if (n_plots > 0) {
        fputs("\n## Plots\n\n", out);
        for (int i = 0; i < n_plots; i++) fprintf(out, "![%s](%s)\n\n", plots[i], plots[i]);
    }
}
