#include "study/scale_studies.h"

#include <stdlib.h>
#include <string.h>

#include "study/compare.h"

/* One study: every config predicted, the sweep, then its report, plots and runs.csv. */
static int sweep_and_report(const dt_scale_studies *s, const dt_sweep_config *cfg, FILE *progress,
                            dt_error *err) {
    dt_scale_study study;
    memset(&study, 0, sizeof study);
    study.cores = s->cores;
    study.cores_given = s->cores > 0;
    int rc = *s->stop ? -2 : 0;
    if (rc == 0 && dt_scale_predict(cfg, &s->network, progress, err)) rc = -1;
    dt_sweep_config with_network = *cfg; /* for the profiles between repeat passes */
    with_network.network = &s->network;
    if (rc == 0 && dt_sweep_run(&with_network, &study, err)) rc = -1;
    if (rc == 0 && dt_scale_read_predictions(&study, cfg->out_dir, err) < 0) rc = -1;
    if (rc == 0 && s->publish(&study, cfg->out_dir)) rc = -2;
    dt_scale_free(&study);
    return rc;
}

/* Study i of n of a --bucket-sizes or --modes sweep, announced as `what`; stops
 * before it if a signal asked to. */
static int sweep_one_of(const dt_scale_studies *s, const dt_sweep_config *one, const char *what,
                        int i, int n, FILE *progress, dt_error *err) {
    if (!one->quiet) fprintf(progress, "%s (%d of %d):\n", what, i + 1, n);
    return *s->stop ? -2 : sweep_and_report(s, one, progress, err);
}

/* The link table of the studies in dirs (swept at bucket_mb[i] MiB), into out_dir and
 * printed. */
static int link_table(const dt_scale_studies *s, const char *const *dirs, const double *bucket_mb,
                      int n, FILE *tables, FILE *progress, dt_error *err) {
    const char *out_dir = s->sweep->out_dir;
    if (dt_link_report(dirs, bucket_mb, n, s->link, s->ranks_per_host, s->where, out_dir, tables,
                       err))
        return -1;
    fprintf(progress, "network: %s/network.md, network.csv\n", out_dir);
    return 0;
}

/* Study k of a --bucket-sizes or --modes sweep: its settings, folder and name. */
static void study_k(const dt_scale_studies *s, int k, dt_sweep_config *one, char *dir,
                    size_t dir_size, char *what, size_t what_size) {
    *one = *s->sweep;
    if (s->n_buckets > 0) {
        one->train.bucket_mb = s->bucket_mb[k];
        snprintf(dir, dir_size, "%s/bucket_%g", s->sweep->out_dir, s->bucket_mb[k]);
        snprintf(what, what_size, "bucket size %g MiB", s->bucket_mb[k]);
    } else {
        one->train.mode = s->modes[k];
        snprintf(dir, dir_size, "%s/%s", s->sweep->out_dir, s->modes[k]);
        snprintf(what, what_size, "mode %s", s->modes[k]);
    }
    one->out_dir = dir;
}

int dt_scale_run_studies(const dt_scale_studies *s, FILE *tables, FILE *progress, dt_error *err) {
    const dt_sweep_config *cfg = s->sweep;
    const int linked = s->link->rate_bps > 0;
    int rc;
    if (s->n_modes == 0 && s->n_buckets == 0) {
        if ((rc = sweep_and_report(s, cfg, progress, err))) return rc;
        const double mb = cfg->train.bucket_mb > 0 ? cfg->train.bucket_mb : 25;
        const char *dir = cfg->out_dir;
        return linked ? link_table(s, &dir, &mb, 1, tables, progress, err) : 0;
    }
    /* one study per bucket size in OUT/bucket_<MiB>, or per mode in OUT/<mode> */
    const int n = s->n_buckets > 0 ? s->n_buckets : s->n_modes;
    char dirs[16][4200];
    const char *dir_ptrs[16];
    for (int k = 0; k < n; k++) {
        dt_sweep_config one;
        char what[64];
        study_k(s, k, &one, dirs[k], sizeof dirs[k], what, sizeof what);
        dir_ptrs[k] = dirs[k];
        if ((rc = sweep_one_of(s, &one, what, k, n, progress, err))) return rc;
    }
    if (s->n_buckets > 0)
        return linked ? link_table(s, dir_ptrs, s->bucket_mb, n, tables, progress, err) : 0;
    /* the modes, on the same grid, compared */
    dt_compare_run *runs = malloc(sizeof *runs * 512);
    int n_runs = 0;
    if (!runs) return dt_error_set(err, "out of memory");
    rc = dt_compare_studies(dir_ptrs, s->n_modes, s->compare_target, cfg->out_dir, runs, 512,
                            &n_runs, err);
    free(runs);
    if (rc) return -1;
    fprintf(progress, "compare: %s/compare.md, compare.csv, accuracy_time.png\n", cfg->out_dir);
    return 0;
}
