#define _GNU_SOURCE /* getline */
#include "perfmodel/perfinput.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/textfile.h"
#include "metrics/runlog.h"

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

/* ---- CSV (read through textfile.h's dt_csv: one set of limits for every CSV) ---- */

static int find(char *const *header, int n, const char *name) {
    for (int c = 0; c < n; c++)
        if (!strcmp(header[c], name)) return c;
    return -1;
}

int dt_loss_points_from_csv(const char *path, long every, dt_loss_points *pts, dt_error *err) {
    memset(pts, 0, sizeof *pts);
    if (every <= 0) every = 1;
    pts->every = every;
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    char **field = csv.field;
    int rc = 0, x_col = -1, l_col = -1, n_cols = 0, got = dt_csv_next(&csv, err);
    long cap_pts = 0;
    if (got < 0) {
        rc = -1;
    } else if (got == 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else {
        n_cols = csv.n;
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
                              path, field[0]);
    }
    double sum_x = 0, sum_l = 0, last_x = -INFINITY;
    long in_window = 0;
    while (rc == 0 && (got = dt_csv_next(&csv, err)) != 0) {
        const long lineno = csv.in.lineno;
        const int k = csv.n;
        double x = 0, l = 0;
        if (got < 0) {
            rc = -1;
        } else if (k != n_cols) {
            rc = dt_error_set(err, "%s line %ld: %d fields, the header has %d", path, lineno, k,
                              n_cols);
        } else if (dt_csv_number(field[x_col], -DBL_MAX, DBL_MAX, &x) ||
                   dt_csv_number(field[l_col], -DBL_MAX, DBL_MAX, &l)) {
            rc = dt_error_set(err, "%s line %ld: %s and loss must be finite numbers", path, lineno,
                              pts->unit);
        } else if (l < 0) {
            rc = dt_error_set(err, "%s line %ld: a loss below zero (%g)", path, lineno, l);
        } else if (!(x > last_x)) {
            rc =
                dt_error_set(err, "%s line %ld: the %s does not increase", path, lineno, pts->unit);
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
    dt_csv_close(&csv);
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
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int rc = 0, got = dt_csv_next(&csv, err), n_cols = got > 0 ? csv.n : 0;
    if (got < 0) rc = -1;
    static const char *const NAMES[4] = {"workers", "servers", "batch", "step_time"};
    /* dtrain scale's runs.csv: procs, batch_size (per process), t_train, iterations */
    static const char *const SWEEP_NAMES[4] = {"procs", "batch_size", "t_train", "iterations"};
    int col[4], sweep[4], from_sweep = kind == DT_SPEED_ALLREDUCE;
    for (int c = 0; c < 4; c++) {
        col[c] = find(csv.field, n_cols, NAMES[c]); /* the header row, before the next */
        sweep[c] = find(csv.field, n_cols, SWEEP_NAMES[c]);
        from_sweep &= sweep[c] >= 0;
    }
    from_sweep &= col[0] < 0;
    for (int c = 0; c < 4 && !from_sweep && rc == 0; c++)
        if (col[c] < 0 && !(c == 1 && kind == DT_SPEED_ALLREDUCE))
            rc = dt_error_set(err, "%s: missing column '%s'", path, NAMES[c]);
    const int *use = from_sweep ? sweep : col;
    const char *const *use_names = from_sweep ? SWEEP_NAMES : NAMES;
    while (rc == 0 && (got = dt_csv_next(&csv, err)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        if (csv.n != n_cols) {
            rc = dt_error_set(err, "%s line %ld: %d fields, the header has %d", path, csv.in.lineno,
                              csv.n, n_cols);
            break;
        }
        double v[4] = {0, 0, 0, 0};
        for (int c = 0; c < 4 && rc == 0; c++)
            if (use[c] >= 0)
                rc = dt_csv_field_number(&csv, use_names[c], csv.field[use[c]], -DBL_MAX, DBL_MAX,
                                         &v[c], err);
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
    dt_csv_close(&csv);
    return rc;
}

int dt_job_table_read(const char *path, dt_job_table *t, dt_error *err) {
    memset(t, 0, sizeof *t);
    dt_csv csv;
    if (dt_csv_open(&csv, path, err)) return -1;
    int rc = 0, got = dt_csv_next(&csv, err); /* '#' comments skipped by dt_csv */
    if (got < 0) {
        rc = -1;
    } else if (got == 0) {
        rc = dt_error_set(err, "%s is empty", path);
    } else {
        if (csv.n > DT_JOBS_MAX_COLS)
            rc = dt_error_set(err, "%s: %d columns (at most %d)", path, csv.n, DT_JOBS_MAX_COLS);
        for (int c = 0; c < csv.n && rc == 0; c++)
            snprintf(t->header[t->n_cols++], sizeof t->header[0], "%s", csv.field[c]);
    }
    while (rc == 0 && (got = dt_csv_next(&csv, err)) != 0) {
        if (got < 0) {
            rc = -1;
            break;
        }
        const int k = csv.n;
        if (k != t->n_cols) {
            rc = dt_error_set(err, "%s line %ld: %d fields, the header has %d", path, csv.in.lineno,
                              k, t->n_cols);
            break;
        }
        if (t->n_rows == DT_JOBS_MAX_ROWS) {
            rc = dt_error_set(err, "%s: more than %d jobs", path, DT_JOBS_MAX_ROWS);
            break;
        }
        for (int c = 0; c < k && rc == 0; c++) {
            if (!strcmp(t->header[c], "name"))
                snprintf(t->names[t->n_rows], sizeof t->names[0], "%s", csv.field[c]);
            else
                rc = dt_csv_field_number(&csv, t->header[c], csv.field[c], -DBL_MAX, DBL_MAX,
                                         &t->v[t->n_rows][c], err);
        }
        if (rc) break;
        if (!t->names[t->n_rows][0])
            snprintf(t->names[t->n_rows], sizeof t->names[0], "job%d", t->n_rows + 1);
        t->n_rows++;
    }
    dt_csv_close(&csv);
    return rc;
}

int dt_job_table_column(const dt_job_table *t, const char *name) {
    for (int c = 0; c < t->n_cols; c++)
        if (!strcmp(t->header[c], name)) return c;
    return -1;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

void dt_fit_loss_free(dt_fit_loss_result *r) {
    dt_loss_points_free(&r->all);
    dt_loss_points_free(&r->pts);
}

int dt_fit_loss(const dt_fit_loss_opts *o, dt_fit_loss_result *r, dt_error *err) {
    memset(r, 0, sizeof *r);
    dt_loss_points *pts = &r->pts, *all = &r->all;
    r->csv = ends_with(o->path, ".csv");
    if (r->csv ? dt_loss_points_from_csv(o->path, o->every, pts, err)
               : dt_loss_points_from_log(o->path, o->every, pts, err))
        return -1;
    int rc = 0;
    if (o->online && r->csv) {
        r->bad_flag = 1;
        rc = dt_error_set(err, "--online refits per epoch of a run log; %s is a CSV", o->path);
    }
    /* all the points, for the plot; pts keeps those to fit */
    *all = *pts;
    all->step = all->loss = NULL;
    const size_t bytes = sizeof(double) * (size_t)(pts->n > 0 ? pts->n : 1);
    if (!rc && (!(all->step = malloc(bytes)) || !(all->loss = malloc(bytes))))
        rc = dt_error_set(err, "out of memory");
    if (!rc) {
        memcpy(all->step, pts->step, sizeof(double) * (size_t)pts->n);
        memcpy(all->loss, pts->loss, sizeof(double) * (size_t)pts->n);
    }
    const long kept_end = pts->n - o->drop_last;
    dt_error why;
    if (!rc && dt_loss_points_select(pts, o->drop_last, o->tail, &why))
        rc = dt_error_set(err, "%s: %s", o->path, why.msg);
    if (!rc) {
        r->first = (int)(kept_end - pts->n);
        r->truncated_lines = pts->truncated_lines;
    }
    if (!rc && dt_loss_fit_points(pts->step, pts->loss, pts->n, &r->fit, &why))
        rc = dt_error_set(err, "%s: %s", o->path, why.msg);
    if (rc) {
        const long truncated = r->truncated_lines;
        const int bad_flag = r->bad_flag;
        dt_fit_loss_free(r);
        r->truncated_lines = truncated, r->bad_flag = bad_flag;
        return -1;
    }
    const double *k = pts->step, *l = pts->loss;
    r->predicted = o->target > 0 ? dt_loss_step_for_target(&r->fit, o->target)
                                 : dt_loss_step_converged(&r->fit, o->delta);
    r->observed = o->target > 0 ? dt_loss_step_observed(k, l, pts->n, o->target) : -1;
    r->lowest = INFINITY;
    for (int i = 0; i < pts->n; i++)
        if (l[i] < r->lowest) r->lowest = l[i];
    return 0;
}
