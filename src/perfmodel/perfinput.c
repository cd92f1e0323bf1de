#define _GNU_SOURCE /* getline */
#include "dtrain/perfinput.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain/runlog.h"

int dt_loss_points_from_log(const char *path, long every, dt_loss_points *pts, dt_error *err) {
    memset(pts, 0, sizeof *pts);
    dt_runlog_contents log;
    if (dt_runlog_load(path, &log, err)) return -1;
    pts->steps_per_epoch = log.has_run && log.run.steps_per_epoch > 0 ? log.run.steps_per_epoch : 0;
    pts->truncated_lines = log.truncated_lines;
    if (every <= 0) every = pts->steps_per_epoch >= 10 ? pts->steps_per_epoch / 10 : 1;
    pts->every = every;
    snprintf(pts->unit, sizeof pts->unit, "step");
    long windows = log.n_steps / every + 1;
    pts->step = malloc(sizeof(double) * (size_t)windows);
    pts->loss = malloc(sizeof(double) * (size_t)windows);
    int rc = pts->step && pts->loss ? 0 : dt_error_set(err, "out of memory reading %s", path);
    double sum = 0.0;
    long in_window = 0;
    for (long i = 0; i < log.n_steps && rc == 0; i++) {
        const dt_step_record *s = &log.steps[i];
        if (s->rank != 0) continue;
        if (!isfinite(s->loss)) {
            rc =
                dt_error_set(err, "%s: the loss at step %ld is not a finite number", path, s->step);
            break;
        }
        sum += s->loss;
        if (++in_window == every) {
            pts->step[pts->n] = (double)s->step;
            pts->loss[pts->n] = sum / every;
            pts->n++;
            sum = 0.0;
            in_window = 0;
        }
    }
    dt_runlog_contents_free(&log);
    if (rc) dt_loss_points_free(pts);
    return rc;
}

void dt_loss_points_free(dt_loss_points *pts) {
    free(pts->step);
    free(pts->loss);
    pts->step = pts->loss = NULL;
    pts->n = 0;
}

/* ---- CSV ---- */

enum { MAX_FIELDS = 64 };

/* Splits line in place at every comma (empty fields kept) after cutting its line
 * end; returns the number of fields (0 for an empty line), or max + 1 if there are
 * more than max (an error for the caller, never a silent cut). */
static int split_fields(char *line, char **fields, int max) {
    line[strcspn(line, "\r\n")] = 0;
    if (!*line) return 0;
    int n = 0;
    for (char *p = line;; p++) {
        if (n < max) fields[n] = p;
        n++;
        p += strcspn(p, ",");
        if (!*p) break;
        *p = 0;
    }
    return n <= max ? n : max + 1;
}

/* A whole field that is a finite number. */
static int parse_number(const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

static int find(char **header, int n, const char *name) {
    for (int c = 0; c < n; c++)
        if (!strcmp(header[c], name)) return c;
    return -1;
}

int dt_loss_points_from_csv(const char *path, long every, dt_loss_points *pts, dt_error *err) {
    memset(pts, 0, sizeof *pts);
    if (every <= 0) every = 1;
    pts->every = every;
    FILE *f = fopen(path, "r");
    if (!f) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL, *field[MAX_FIELDS];
    size_t cap = 0;
    int rc = 0, lineno = 1, x_col = -1, l_col = -1, n_cols = 0;
    long cap_pts = 0;
    if (getline(&line, &cap, f) <= 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else {
        n_cols = split_fields(line, field, MAX_FIELDS);
        for (int c = 0; c < n_cols; c++) {
            if (!strcmp(field[c], "step") || !strcmp(field[c], "epoch")) {
                x_col = c;
                snprintf(pts->unit, sizeof pts->unit, "%s", field[c]);
            }
            if (!strcmp(field[c], "loss")) l_col = c;
        }
        if (x_col < 0 || l_col < 0)
            rc = dt_error_set(err,
                              "%s: the header must name the columns step,loss or epoch,loss "
                              "(got '%s')",
                              path, n_cols ? field[0] : "");
    }
    double sum_x = 0, sum_l = 0, last_x = -INFINITY;
    long in_window = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        int k = split_fields(line, field, MAX_FIELDS);
        if (k == 0) continue;
        double x = 0, l = 0;
        if (k != n_cols) {
            rc = dt_error_set(err, "%s line %d: %d fields, the header has %d", path, lineno, k,
                              n_cols);
        } else if (parse_number(field[x_col], &x) || parse_number(field[l_col], &l)) {
            rc = dt_error_set(err, "%s line %d: %s and loss must be finite numbers", path, lineno,
                              pts->unit);
        } else if (l < 0) {
            rc = dt_error_set(err, "%s line %d: a loss below zero (%g)", path, lineno, l);
        } else if (!(x > last_x)) {
            rc = dt_error_set(err, "%s line %d: the %s does not increase", path, lineno, pts->unit);
        }
        last_x = x;
        if (rc) break;
        /* windows of `every` rows, placed at the window's last row */
        sum_x = x;
        sum_l += l;
        if (++in_window < every) continue;
        if (pts->n == cap_pts) {
            long grown = cap_pts ? 2 * cap_pts : 256;
            double *s = realloc(pts->step, sizeof(double) * (size_t)grown);
            if (s) pts->step = s;
            double *ls = s ? realloc(pts->loss, sizeof(double) * (size_t)grown) : NULL;
            if (ls) pts->loss = ls;
            if (!s || !ls) {
                rc = dt_error_set(err, "out of memory reading %s", path);
                break;
            }
            cap_pts = grown;
        }
        pts->step[pts->n] = sum_x;
        pts->loss[pts->n] = sum_l / every;
        pts->n++;
        sum_l = 0;
        in_window = 0;
    }
    if (rc == 0 && ferror(f)) rc = dt_error_set(err, "cannot read %s", path);
    free(line);
    fclose(f);
    if (rc) dt_loss_points_free(pts);
    return rc;
}

int dt_loss_points_select(dt_loss_points *pts, long drop_last, long tail, dt_error *err) {
    long n = pts->n - (drop_last > 0 ? drop_last : 0);
    long first = tail > 0 && tail < n ? n - tail : 0;
    if (n - first < 3)
        return dt_error_set(err,
                            "too few points to fit: %ld of %d left (--drop-last %ld, "
                            "--tail %ld); the curve needs 3",
                            n - first < 0 ? 0 : n - first, pts->n, drop_last, tail);
    memmove(pts->step, pts->step + first, sizeof(double) * (size_t)(n - first));
    memmove(pts->loss, pts->loss + first, sizeof(double) * (size_t)(n - first));
    pts->n = (int)(n - first);
    return 0;
}

int dt_speed_points_read_csv(const char *path, dt_speed_kind kind, dt_speed_point *pts, int *n,
                             dt_error *err) {
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL, *header_line = NULL, *header[MAX_FIELDS], *field[MAX_FIELDS];
    size_t cap = 0;
    int n_cols = 0, rc = 0;
    if (getline(&line, &cap, f) > 0) {
        header_line = line; /* kept: header[] points into it */
        line = NULL;
        cap = 0;
        n_cols = split_fields(header_line, header, MAX_FIELDS);
        if (n_cols > MAX_FIELDS) {
            rc = dt_error_set(err, "%s: more than %d columns", path, MAX_FIELDS);
            n_cols = 0;
        }
    }
    static const char *const NAMES[4] = {"workers", "servers", "batch", "step_time"};
    /* dtrain scale's runs.csv: procs, batch_size (per process), t_train, iterations */
    static const char *const SWEEP_NAMES[4] = {"procs", "batch_size", "t_train", "iterations"};
    int col[4], sweep[4], from_sweep = kind == DT_SPEED_ALLREDUCE;
    for (int c = 0; c < 4; c++) {
        col[c] = find(header, n_cols, NAMES[c]);
        sweep[c] = find(header, n_cols, SWEEP_NAMES[c]);
        from_sweep &= sweep[c] >= 0;
    }
    from_sweep &= col[0] < 0;
    for (int c = 0; c < 4 && !from_sweep && rc == 0; c++)
        if (col[c] < 0 && !(c == 1 && kind == DT_SPEED_ALLREDUCE))
            rc = dt_error_set(err, "%s: missing column '%s'", path, NAMES[c]);
    const int *use = from_sweep ? sweep : col;
    const char *const *use_names = from_sweep ? SWEEP_NAMES : NAMES;
    int lineno = 1;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        int k = split_fields(line, field, MAX_FIELDS);
        if (k == 0) continue;
        if (k != n_cols) {
            rc = dt_error_set(err, "%s line %d: %d fields, the header has %d", path, lineno, k,
                              n_cols);
            break;
        }
        double v[4] = {0, 0, 0, 0};
        for (int c = 0; c < 4 && rc == 0; c++)
            if (use[c] >= 0 && parse_number(field[use[c]], &v[c]))
                rc = dt_error_set(err, "%s line %d: %s is not a number: '%s'", path, lineno,
                                  use_names[c], field[use[c]]);
        if (rc) break;
        if (*n == DT_SPEED_MAX_POINTS) {
            rc = dt_error_set(err, "%s: more than %d rows", path, DT_SPEED_MAX_POINTS);
            break;
        }
        if (from_sweep) /* global batch, time per iteration */
            pts[(*n)++] = (dt_speed_point){v[0], 0, v[0] * v[1], v[3] > 0 ? v[2] / v[3] : -1};
        else
            pts[(*n)++] = (dt_speed_point){v[0], v[1], v[2], v[3]};
    }
    if (rc == 0 && ferror(f)) rc = dt_error_set(err, "cannot read %s", path);
    free(line);
    free(header_line);
    fclose(f);
    return rc;
}

int dt_job_table_read(const char *path, dt_job_table *t, dt_error *err) {
    FILE *f = fopen(path, "r");
    if (!f) return dt_error_set(err, "cannot open %s: %s", path, strerror(errno));
    memset(t, 0, sizeof *t);
    char *line = NULL, *field[MAX_FIELDS];
    size_t cap = 0;
    int rc = 0, lineno = 1;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0 && line[0] == '#') /* comments above */
        lineno++;
    if (got <= 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else {
        int k = split_fields(line, field, MAX_FIELDS);
        if (k > DT_JOBS_MAX_COLS)
            rc = dt_error_set(err, "%s: %d columns (at most %d)", path, k, DT_JOBS_MAX_COLS);
        for (int c = 0; c < k && rc == 0; c++)
            snprintf(t->header[t->n_cols++], sizeof t->header[0], "%s", field[c]);
    }
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        lineno++;
        if (line[0] == '#') continue;
        int k = split_fields(line, field, MAX_FIELDS);
        if (k == 0) continue;
        if (k != t->n_cols) {
            rc = dt_error_set(err, "%s line %d: %d fields, the header has %d", path, lineno, k,
                              t->n_cols);
            break;
        }
        if (t->n_rows == DT_JOBS_MAX_ROWS) {
            rc = dt_error_set(err, "%s: more than %d jobs", path, DT_JOBS_MAX_ROWS);
            break;
        }
        for (int c = 0; c < k && rc == 0; c++) {
            if (!strcmp(t->header[c], "name"))
                snprintf(t->names[t->n_rows], sizeof t->names[0], "%s", field[c]);
            else if (parse_number(field[c], &t->v[t->n_rows][c]))
                rc = dt_error_set(err, "%s line %d: %s is not a number: '%s'", path, lineno,
                                  t->header[c], field[c]);
        }
        if (rc) break;
        if (!t->names[t->n_rows][0])
            snprintf(t->names[t->n_rows], sizeof t->names[0], "job%d", t->n_rows + 1);
        t->n_rows++;
    }
    if (rc == 0 && ferror(f)) rc = dt_error_set(err, "cannot read %s", path);
    free(line);
    fclose(f);
    return rc;
}

int dt_job_table_column(const dt_job_table *t, const char *name) {
    for (int c = 0; c < t->n_cols; c++)
        if (!strcmp(t->header[c], name)) return c;
    return -1;
}
