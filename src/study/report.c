#include "study/report.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileset.h"
#include "core/outfile.h"
#include "study/plots.h"
#include "study/sweep.h"

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

/* The study of simulated rows, labelled so by plots.c. */
static void fill_study(dt_scale_study *s, const dt_profile *p, const dt_sim_config *c,
                       double dataset) {
    snprintf(s->model, sizeof s->model, "%s (simulated)", p->model);
    snprintf(s->data, sizeof s->data, "%s", "simulated"); /* plots.c labels its times so */
    snprintf(s->mode, sizeof s->mode, "%s",
             c->mode == DT_SIM_ALLREDUCE_NO_OVERLAP ? "allreduce" : dt_sim_mode_name(c->mode));
    s->servers = c->topology == DT_SIM_PS ? c->servers : 0;
    s->params = (double)p->params;
    s->dataset_size = dataset;
}

int dt_report_simulated(const dt_profile *p, const dt_sim_config *c, const dt_sim_result *res,
                        int n, double dataset, const char *table, const char *dir, int *plotted,
                        dt_error *plot_err, dt_error *err) {
    *plotted = 0;
    plot_err->msg[0] = 0;
    if (dt_make_dirs(dir, err)) return -1;
    char path[4200];
    dt_outfile o;
    snprintf(path, sizeof path, "%s/simulate.csv", dir);
    if (dt_outfile_open(&o, path, err)) return -1;
    fprintf(o.f, "workers,batch_size,step_ms,compute_ms,exposed_ms,comm_ms,speedup,efficiency,"
                 "images_per_s,epoch_s\n");
    for (int i = 0; i < n; i++) {
        const dt_sim_result *r = &res[i];
        const double sp = dt_sim_speedup(res, i);
        fprintf(o.f, "%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f,%.6f\n", r->workers, c->batch,
                1e3 * r->step_s, 1e3 * r->compute_s, 1e3 * r->exposed_s, 1e3 * r->comm_s, sp,
                sp / r->workers * res[0].workers, r->images_per_s,
                r->step_s * dataset / ((double)r->workers * c->batch));
    }
    if (dt_outfile_commit(&o, err)) return -1;

    /* The scaling study's plots from the simulated rows: epoch time = D / (N B) steps. */
    dt_scale_study s = {0};
    fill_study(&s, p, c, dataset);
    for (int i = 0; i < n; i++) {
        const dt_sim_result *r = &res[i];
        const double steps = dataset / ((double)r->workers * c->batch);
        const double t = r->step_s * steps;
        dt_scale_row row = dt_scale_row_unknown();
        row.procs = r->workers;
        row.batch = c->batch;
        row.t_train = row.t_epoch = row.t_train_min = row.t_train_max = t;
        row.t_epoch_min = row.t_epoch_max = t;
        row.t_data = 0;
        row.t_compute = r->compute_s * steps;
        row.t_comm = r->comm_s * steps;
        row.t_comm_exposed = r->exposed_s * steps;
        if (dt_scale_add_row(&s, &row, err)) {
            dt_scale_free(&s);
            return -1;
        }
    }
    char names[DT_MAX_PLOTS][64];
    int n_plots = 0;
    *plotted = dt_plots_write(&s, dir, names, &n_plots, plot_err) == 0;
    dt_scale_free(&s);

    snprintf(path, sizeof path, "%s/simulate.md", dir);
    if (dt_outfile_open(&o, path, err)) return -1;
    fprintf(o.f, "# Simulated scaling: %s\n\n```\n%s```\n", p->model, table);
    for (int i = 0; i < n_plots; i++) fprintf(o.f, "\n![%s](%s)\n", names[i], names[i]);
    if (dt_outfile_commit(&o, err)) return -1;
    return 0;
}
