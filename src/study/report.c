#include "dtrain/report.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dtrain/fileset.h"
#include "dtrain/outfile.h"
#include "dtrain/plots.h"
#include "dtrain/sweep.h"

int dt_report_read_times(dt_scale_study *s, const char *times, double params, double dataset,
                         const char *model, dt_error *err) {
    s->params = params;
    s->dataset_size = dataset;
    if (model) snprintf(s->model, sizeof s->model, "%s", model);
    snprintf(s->data, sizeof s->data, "times from %s", times);
    if (dt_scale_read_csv(s, times, err)) return -1;
    if (params <= 0) dt_scale_add_note(s, "--params not given: no bandwidth figures");
    if (dataset <= 0)
        dt_scale_add_note(s, "--dataset-size not given: iteration counts only from the CSV");
    return 0;
}

/* The run logs of dir (run_*.jsonl) as inputs. */
static void add_run_logs(dt_fileset *in, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "run_", 4) || n < 7 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
        dt_fileset_add_in(in, "run log", dir, e->d_name, 0);
    }
    closedir(d);
}

typedef struct output_check {
    const char *dir;
    const dt_fileset *inputs;
    dt_error *err;
} output_check;

/* One output of the report: a regular file or absent, never one of the inputs; -1
 * with why in one line. */
static int check_output(const char *name, void *ctx) {
    const output_check *c = ctx;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    if (dt_outfile_check(path, c->err)) return -1;
    const char *input = dt_fileset_same_input(c->inputs, path);
    if (input)
        return dt_error_set(c->err, "%s would be overwritten by the report's %s (give --out DIR)",
                            input, strcmp(c->dir, ".") ? path : name);
    return 0;
}

/* Every file the report writes into dir (runs.csv, report.md, the plots' data,
 * scripts and pictures, gnuplot.err), checked before any is written. */
static int check_outputs(const dt_scale_study *s, const dt_report_opts *o, dt_error *err) {
    struct stat st;
    if (stat(o->dir, &st) != 0) return 0; /* a new folder: nothing in it to replace */
    dt_fileset in;
    dt_fileset_init(&in);
    if (o->times && stat(o->times, &st) == 0) /* a missing input is the reader's error */
        dt_fileset_input(&in, "--times", o->times);
    if (o->from_dir) add_run_logs(&in, o->from_dir);
    add_run_logs(&in, o->dir);
    int rc = in.overflow ? dt_error_set(err, "out of memory") : 0;
    output_check c = {.dir = o->dir, .inputs = &in, .err = err};
    if (!rc)
        rc = check_output("runs.csv", &c) || check_output("report.md", &c) ||
             dt_plots_outputs(s, check_output, &c);
    dt_fileset_free(&in);
    return rc ? -1 : 0;
}

int dt_report_publish(dt_scale_study *s, const dt_report_opts *o, int *n_plots, dt_error *err) {
    *n_plots = 0;
    if (check_outputs(s, o, err) || dt_make_dirs(o->dir, err)) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/runs.csv", o->dir);
    if (dt_scale_write_csv(s, path, err)) return -1;
    char names[DT_MAX_PLOTS][64];
    const char *plots[DT_MAX_PLOTS];
    dt_error perr;
    if (dt_plots_write(s, o->dir, names, n_plots, &perr)) {
        dt_scale_add_note(s, "plots not drawn: %s", perr.msg);
        *n_plots = 0;
    }
    for (int i = 0; i < *n_plots; i++) plots[i] = names[i];
    snprintf(path, sizeof path, "%s/report.md", o->dir);
    dt_outfile out;
    if (dt_outfile_open(&out, path, err)) return -1;
    dt_scale_write_report(s, out.f, plots, *n_plots);
    if (dt_outfile_commit(&out, err)) return -1;
    if (o->tables) dt_scale_write_report(s, o->tables, plots, 0);
    return 0;
}
