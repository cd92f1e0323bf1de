#include "study/scaling.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"

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

int dt_scale_add_role(dt_scale_study *s, const dt_scale_role *role, dt_error *err) {
    if (s->n_roles == s->cap_roles) {
        int cap = s->cap_roles ? 2 * s->cap_roles : 16;
        dt_scale_role *p = realloc(s->roles, sizeof *p * (size_t)cap);
        if (!p) return dt_error_set(err, "out of memory for the study's roles");
        s->roles = p;
        s->cap_roles = cap;
    }
    s->roles[s->n_roles++] = *role;
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
    free(s->tta);
    s->tta = NULL;
    free(s->predicted);
    s->predicted = NULL;
    s->n_predicted = 0;
    free(s->rows);
    free(s->roles);
    s->roles = NULL;
    s->n_roles = s->cap_roles = 0;
    s->rows = NULL;
    s->n_rows = s->cap_rows = 0;
}

/* Median of the known (>= 0) values of one field over a config's rows; -1 if none.
 * v: room for n values. */
static double median_of(const dt_scale_row *const *g, int n, size_t offset, double *v, double *lo,
                        double *hi) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        const double x = *(const double *)((const char *)g[i] + offset);
        if (x >= 0 && isfinite(x)) v[k++] = x;
    }
    if (lo) *lo = k ? INFINITY : -1;
    if (hi) *hi = k ? -INFINITY : -1;
    if (k == 0) return -1;
    const double median = dt_median(v, k);
    if (lo) *lo = v[0];
    if (hi) *hi = v[k - 1];
    return median;
}

int dt_scale_combine(dt_scale_study *s, dt_error *err) {
    if (s->n_rows == 0) return 0;
    dt_scale_row *out = malloc(sizeof *out * (size_t)s->n_rows);
    const dt_scale_row **g = malloc(sizeof *g * (size_t)s->n_rows);
    double *values = malloc(sizeof *values * (size_t)s->n_rows); /* a config's, for medians */
    char *used = calloc((size_t)s->n_rows, 1);
    if (!out || !g || !values || !used) {
        free(out);
        free(g);
        free(values);
        free(used);
        return dt_error_set(err, "out of memory for the study's rows");
    }
    int n_out = 0;
    for (int i = 0; i < s->n_rows; i++) {
        if (used[i]) continue;
        const dt_scale_row *a = &s->rows[i];
        int n = 0;
        for (int j = i; j < s->n_rows; j++) {
            const dt_scale_row *b = &s->rows[j];
            if (!used[j] && b->procs == a->procs && b->batch == a->batch &&
                b->lr_scaled == a->lr_scaled) {
                used[j] = 1;
                g[n++] = b;
            }
        }
        dt_scale_row r = *a;
        /* an already combined row (read back) keeps its own spread */
        r.repeats = 0;
        for (int k = 0; k < n; k++) r.repeats += g[k]->repeats > 0 ? g[k]->repeats : 1;
#define MEDIAN(f, lo, hi) r.f = median_of(g, n, offsetof(dt_scale_row, f), values, lo, hi)
        MEDIAN(t_train, &r.t_train_min, &r.t_train_max);
        MEDIAN(t_epoch, &r.t_epoch_min, &r.t_epoch_max);
        MEDIAN(t_data, NULL, NULL);
        MEDIAN(t_compute, NULL, NULL);
        MEDIAN(t_comm, NULL, NULL);
        MEDIAN(t_comm_exposed, NULL, NULL);
        MEDIAN(bytes_sent, NULL, NULL);
        MEDIAN(final_loss, NULL, NULL);
        MEDIAN(test_acc, NULL, NULL);
        MEDIAN(cpu_pct, NULL, NULL);
        MEDIAN(rss_mb, NULL, NULL);
        MEDIAN(mpi_mbs, NULL, NULL);
        MEDIAN(net_mbs, NULL, NULL);
        MEDIAN(disk_read_mbs, NULL, NULL);
        MEDIAN(disk_write_mbs, NULL, NULL);
        MEDIAN(sys_other_cores, NULL, NULL);
        r.sys_samples = 0;
        for (int k = 0; k < n; k++) r.sys_samples += g[k]->sys_samples > 0 ? g[k]->sys_samples : 0;
#undef MEDIAN
        if (n == 1 && a->repeats > 1) { /* keep a combined row's recorded spread */
            r.t_train_min = a->t_train_min, r.t_train_max = a->t_train_max;
            r.t_epoch_min = a->t_epoch_min, r.t_epoch_max = a->t_epoch_max;
        }
        if (r.t_epoch < 0) r.t_epoch = 0; /* 0 = unknown, as in a single row */
        r.other_cores = -1;
        for (int k = 0; k < n; k++)
            if (g[k]->other_cores > r.other_cores) r.other_cores = g[k]->other_cores;
        r.throttled = -1;
        for (int k = 0; k < n; k++)
            if (g[k]->throttled > r.throttled) r.throttled = g[k]->throttled;
        r.unfaithful = r.throttled > DT_SCALE_THROTTLED_MAX;
        r.host_cpus = -1;
        for (int k = 0; k < n; k++)
            if (g[k]->host_cpus > r.host_cpus) r.host_cpus = g[k]->host_cpus;
        r.busy = r.other_cores > DT_SCALE_BUSY_CORES || r.unfaithful;
        out[n_out++] = r;
    }
    free(g);
    free(values);
    free(used);
    free(s->rows);
    s->rows = out;
    s->n_rows = s->cap_rows = n_out;
    return 0;
}

const dt_scale_row *dt_scale_find(const dt_scale_study *s, int procs, int batch, int lr_scaled) {
    for (int i = 0; i < s->n_rows; i++)
        if (s->rows[i].procs == procs && s->rows[i].batch == batch &&
            s->rows[i].lr_scaled == lr_scaled)
            return &s->rows[i];
    return NULL;
}

/* The time speed-ups and the derived communication use: the training time (without
 * waits for the data loader, which are not communication), else the running time. */
static double epoch_time(const dt_scale_row *r) {
    return r->t_train > 0 ? r->t_train : r->t_epoch > 0 ? r->t_epoch : -1;
}

double dt_scale_time(const dt_scale_row *r) {
    return epoch_time(r);
}

/* Iterations per process per epoch with the dataset split over procs (-1: unknown). */
double dt_scale_split_iterations(double dataset_size, int procs, int batch) {
    return dataset_size > 0 ? ceil(ceil(dataset_size / procs) / batch) : -1;
}

double dt_scale_iterations(const dt_scale_study *s, const dt_scale_row *r) {
    if (r->iterations > 0) return (double)r->iterations;
    return dt_scale_split_iterations(s->dataset_size, r->procs, r->batch);
}

static const dt_scale_row *base_of(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_find(s, 1, r->batch, r->lr_scaled);
}

double dt_scale_strong_speedup(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    return b && epoch_time(b) > 0 && epoch_time(r) > 0 ? epoch_time(b) / epoch_time(r) : -1;
}

/* The spread of the time epoch_time() uses; a single run's is the run itself. */
static void time_range(const dt_scale_row *r, double *lo, double *hi) {
    const int use_epoch = !(r->t_train > 0);
    *lo = use_epoch ? r->t_epoch_min : r->t_train_min;
    *hi = use_epoch ? r->t_epoch_max : r->t_train_max;
    if (r->repeats <= 1 || *lo <= 0 || *hi <= 0) *lo = *hi = epoch_time(r);
}

int dt_scale_strong_speedup_range(const dt_scale_study *s, const dt_scale_row *r, double *lo,
                                  double *hi) {
    const dt_scale_row *b = base_of(s, r);
    *lo = *hi = -1;
    if (!b) return -1;
    double b_lo, b_hi, r_lo, r_hi;
    time_range(b, &b_lo, &b_hi);
    time_range(r, &r_lo, &r_hi);
    if (b_lo <= 0 || r_lo <= 0) return -1;
    *lo = b_lo / r_hi;
    *hi = b_hi / r_lo;
    return 0;
}

int dt_scale_speedup_busy(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    return r->busy || (b && b->busy);
}

double dt_scale_weak_speedup(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    if (!b) return -1;
    double ib = dt_scale_iterations(s, b), ir = dt_scale_iterations(s, r);
    if (ib <= 0 || ir <= 0 || !(epoch_time(b) > 0) || !(epoch_time(r) > 0)) return -1;
    return r->procs * (epoch_time(b) / ib) / (epoch_time(r) / ir);
}

double dt_scale_derived_comm(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = base_of(s, r);
    if (b && !(epoch_time(b) > 0 && epoch_time(r) > 0)) return NAN; /* a time unknown */
    return b ? epoch_time(r) - epoch_time(b) / r->procs : -1;
}

double dt_scale_bandwidth(const dt_scale_study *s, const dt_scale_row *r, double t_comm) {
    double it = dt_scale_iterations(s, r);
    if (r->procs < 2 || it <= 0 || s->params <= 0 || t_comm <= 0) return -1;
    return it * 2.0 * (r->procs - 1) / r->procs * 4.0 * s->params / t_comm;
}

/* ---- CSV ---- */

dt_scale_row dt_scale_row_unknown(void) {
    return (dt_scale_row){.t_data = -1,
                          .t_compute = -1,
                          .t_comm = -1,
                          .t_comm_exposed = -1,
                          .bytes_sent = -1,
                          .final_loss = -1,
                          .test_acc = -1,
                          .repeats = 1,
                          .t_train_min = -1,
                          .t_train_max = -1,
                          .t_epoch_min = -1,
                          .t_epoch_max = -1,
                          .other_cores = -1,
                          .throttled = -1,
                          .host_cpus = -1,
                          .cpu_pct = -1,
                          .rss_mb = -1,
                          .mpi_mbs = -1,
                          .net_mbs = -1,
                          .disk_read_mbs = -1,
                          .disk_write_mbs = -1,
                          .sys_other_cores = -1};
}

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

void dt_scale_log_path(char *out, size_t size, const char *dir, int procs, int batch, int scaled,
                       int repeat) {
    char rep[16] = "";
    if (repeat > 0) snprintf(rep, sizeof rep, "_r%d", repeat + 1);
    snprintf(out, size, "%s/run_p%d_b%d%s%s.jsonl", dir, procs, batch, scaled ? "_lrlinear" : "",
             rep);
}
