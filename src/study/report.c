#include "study/report.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileset.h"
#include "core/outfile.h"
#include "study/plots.h"
#include "study/scale_csv.h"
#include "study/scale_report.h"
#include "study/sweep.h"
#include "study/tta.h"

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
    if (!s->tta) { /* the run logs' loss curves: time to the target loss */
        dt_error terr;
        if (dt_scale_tta_compute(s, o->from_dir ? o->from_dir : o->dir, s->target_loss, &s->tta,
                                 &terr))
            dt_scale_add_note(s, "no time to target: %s", terr.msg);
    }
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

/* A folder name for a model: letters, digits, '.', '_' and '-' kept, the rest '_';
 * never "." or "..". */
static void model_folder(const char *model, char *out, size_t size) {
    size_t o = 0;
    for (const char *c = model; *c && o + 1 < size; c++)
        out[o++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-') ? *c : '_';
    out[o] = 0;
    if (!strcmp(out, ".") || !strcmp(out, "..")) snprintf(out, size, "model_%zu", o);
}

/* The batch size of s with the most process counts measured (the smallest of a tie). */
static int busiest_batch(const dt_scale_study *s) {
    int batches[64], procs[64], best = 0, best_count = -1;
    const int nb = dt_scale_distinct(s, 1, batches), np = dt_scale_distinct(s, 0, procs);
    for (int b = 0; b < nb; b++) {
        int count = 0;
        for (int p = 0; p < np; p++) count += dt_scale_find(s, procs[p], batches[b], 0) != NULL;
        if (count > best_count) best = batches[b], best_count = count;
    }
    return best;
}

static int write_models_md(const dt_scale_study *st, const int *batch, const char (*folders)[64],
                           int n, int drawn, const char *times, const char *dir, dt_error *err) {
    int procs[64], np = 0; /* every model's process counts, ascending */
    for (int i = 0; i < n; i++) {
        int mine[64];
        const int k = dt_scale_distinct(&st[i], 0, mine);
        for (int j = 0; j < k; j++) {
            int at = 0;
            while (at < np && procs[at] < mine[j]) at++;
            if (at < np && procs[at] == mine[j]) continue;
            if (np == 64) break;
            memmove(procs + at + 1, procs + at, sizeof *procs * (size_t)(np - at));
            procs[at] = mine[j], np++;
        }
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models.md", dir);
    dt_outfile o;
    if (dt_outfile_open(&o, path, err)) return -1;
    fprintf(o.f,
            "# Strong scaling of %d models\n\nFrom %s. Speed-up T(1)/T(N) of the training time "
            "at each model's batch size per process with the most process counts measured; "
            "each model's full report is in its folder.\n\n| model | batch | ",
            n, times);
    for (int p = 0; p < np; p++) fprintf(o.f, "N = %d | ", procs[p]);
    fputs("report |\n|---|---|", o.f);
    for (int p = 0; p < np; p++) fputs("---|", o.f);
    fputs("---|\n", o.f);
    for (int i = 0; i < n; i++) {
        fprintf(o.f, "| %s | %d |", st[i].model, batch[i]);
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(&st[i], procs[p], batch[i], 0);
            const double sp = r ? dt_scale_strong_speedup(&st[i], r) : -1;
            if (sp > 0)
                fprintf(o.f, " %.2f%s |", sp, r->busy ? " (busy)" : "");
            else
                fputs(" |", o.f);
        }
        fprintf(o.f, " [%s/report.md](%s/report.md) |\n", folders[i], folders[i]);
    }
    if (drawn) fputs("\n![speedup_models](speedup_models.png)\n", o.f);
    return dt_outfile_commit(&o, err);
}

int dt_report_models(const char *times, char (*names)[64], int n, double params, double dataset,
                     int cores, const char *dir, int *n_plots, dt_error *err) {
    *n_plots = 0;
    if (n < 1 || n > 64)
        return dt_error_set(err, "%s: %d models (1 to 64 on one figure)", times, n);
    dt_scale_study *st = calloc((size_t)n, sizeof *st);
    int *batch = calloc((size_t)n, sizeof *batch);
    char(*folders)[64] = calloc((size_t)n, sizeof *folders);
    int rc = st && batch && folders ? 0 : dt_error_set(err, "out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        model_folder(names[i], folders[i], sizeof folders[i]);
        for (int j = 0; j < i && rc == 0; j++)
            if (!strcmp(folders[i], folders[j]))
                rc = dt_error_set(err, "%s: models '%s' and '%s' would share the folder %s/%s",
                                  times, names[j], names[i], dir, folders[i]);
    }
    if (rc == 0) { /* the figure's files and models.md: never the CSV read, all writable */
        if (dt_make_dirs(dir, err)) rc = -1;
        dt_fileset files;
        dt_fileset_init(&files);
        dt_fileset_input(&files, "--times", times);
        static const char *const outs[] = {"models.md", "speedup_models.gp", "speedup_models.png",
                                           "speedup_models.svg", "gnuplot.err"};
        enum { N_OUTS = sizeof outs / sizeof *outs };
        char paths[N_OUTS + 64][4200];
        for (int k = 0; k < N_OUTS + n; k++) {
            if (k < N_OUTS)
                snprintf(paths[k], sizeof paths[k], "%s/%s", dir, outs[k]);
            else
                snprintf(paths[k], sizeof paths[k], "%s/speedup_model_%d.dat", dir, k - N_OUTS + 1);
            dt_fileset_output(&files, "report", paths[k]);
        }
        if (rc == 0 && dt_fileset_check(&files, err)) rc = -1;
        dt_fileset_free(&files);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        st[i].cores = cores;
        st[i].cores_given = cores > 0;
        snprintf(st[i].model_only, sizeof st[i].model_only, "%s", names[i]);
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/%s", dir, folders[i]);
        const dt_report_opts o = {.dir = sub, .times = times};
        int plots;
        if (dt_report_read_times(&st[i], times, params, dataset, names[i], err) ||
            dt_report_publish(&st[i], &o, &plots, err))
            rc = -1;
        else
            batch[i] = busiest_batch(&st[i]);
    }
    int drawn = 0;
    if (rc == 0) {
        dt_error perr;
        if (dt_plots_models_speedup(st, batch, n, dir, &drawn, &perr)) drawn = 0;
        rc = write_models_md(st, batch, (const char(*)[64])folders, n, drawn, times, dir, err);
    }
    *n_plots = drawn;
    for (int i = 0; st && i < n; i++) dt_scale_free(&st[i]);
    free(st);
    free(batch);
    free(folders);
    return rc;
}

/* The file of dir that makes it a scaling study's folder (runs.csv, report.md, else a
 * run log), copied into found; 0 when there is none. */
static int holds_study(const char *dir, char *found, size_t size) {
    static const char *const names[] = {"runs.csv", "report.md"};
    char path[4200];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (lstat(path, &st) == 0) return snprintf(found, size, "%s", names[i]), 1;
    }
    DIR *d = opendir(dir);
    if (!d) return 0;
    int hit = 0;
    for (struct dirent *e; !hit && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        hit = !strncmp(e->d_name, "run_", 4) && n >= 7 && !strcmp(e->d_name + n - 6, ".jsonl");
        if (hit) snprintf(found, size, "%s", e->d_name);
    }
    closedir(d);
    return hit;
}

/* What simulate --out may not do: write into a study's folder (its plots have the
 * names of the simulated ones), or over the profile it read. The plots' own names
 * (given a study of the simulated rows) are checked too when s is not NULL. */
static int check_simulated_outputs(const dt_scale_study *s, const char *dir, const char *profile,
                                   dt_error *err) {
    char found[300];
    struct stat st;
    if (stat(dir, &st) != 0) return 0; /* a new folder: nothing in it to replace */
    if (holds_study(dir, found, sizeof found))
        return dt_error_set(err,
                            "--out %s holds a scaling study (%s): the simulated plots would "
                            "replace its own; give another --out",
                            dir, found);
    dt_fileset in;
    dt_fileset_init(&in);
    dt_fileset_input(&in, "--profile", profile);
    int rc = in.overflow ? dt_error_set(err, "out of memory") : 0;
    output_check c = {.dir = dir, .inputs = &in, .err = err};
    if (!rc)
        rc = check_output("simulate.csv", &c) || check_output("simulate.md", &c) ||
             (s && dt_plots_outputs(s, check_output, &c));
    dt_fileset_free(&in);
    return rc ? -1 : 0;
}

int dt_report_simulated_check(const char *dir, const char *profile, dt_error *err) {
    return check_simulated_outputs(NULL, dir, profile, err);
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
                        int n, double dataset, const char *table, const char *dir,
                        const char *profile, int *plotted, dt_error *plot_err, dt_error *err) {
    *plotted = 0;
    plot_err->msg[0] = 0;
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
    char path[4200];
    dt_outfile o;
    snprintf(path, sizeof path, "%s/simulate.csv", dir);
    /* every output checked before any is written */
    if (check_simulated_outputs(&s, dir, profile, err) || dt_make_dirs(dir, err) ||
        dt_outfile_open(&o, path, err)) {
        dt_scale_free(&s);
        return -1;
    }
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
    if (dt_outfile_commit(&o, err)) {
        dt_scale_free(&s);
        return -1;
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
