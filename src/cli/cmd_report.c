#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "dtrain/outfile.h"
#include "dtrain/plots.h"
#include "dtrain/scaling.h"
#include "dtrain/sweep.h"

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain report DIR\n"
            "       dtrain report --times FILE.csv --params N --dataset-size D --out DIR\n"
            "\n"
            "Builds the scaling report from a study's run logs (DIR/run_*.jsonl, as written\n"
            "by dtrain scale): DIR/runs.csv, DIR/report.md and plots (PNG and SVG, drawn by\n"
            "gnuplot). With --times, from a CSV of epoch times measured with any framework\n"
            "(columns procs,batch_size,t_train and optionally t_epoch, iterations, t_compute,\n"
            "t_comm, t_comm_exposed, t_data, bytes_sent, final_loss, test_acc); the tables are\n"
            "also printed.\n"
            "\n"
            "  --times FILE     the CSV of measured times\n"
            "  --params N       model parameters (for the bandwidth formula)\n"
            "  --dataset-size D training samples per epoch (for iteration counts)\n"
            "  --model NAME     shown in the report's title\n"
            "  --cores N        the cores the speed model divides compute over and may\n"
            "                   recommend up to (default: as the logs recorded; unknown\n"
            "                   for --times: compute per process, recommendations within\n"
            "                   the measured process counts)\n"
            "  --out DIR        where to write (default: the CSV's folder, refused if the\n"
            "                   report would overwrite the CSV itself)\n"
            "  --help           this text\n");
}

/* The files a report reads: the --times CSV, the run logs of the study's folder and
 * of the output folder (the plots read run_*.jsonl there), each by device and inode. */
typedef struct report_inputs {
    struct input {
        dev_t dev;
        ino_t ino;
        char path[4200];
    } * at;
    int n, cap;
} report_inputs;

static int add_input(report_inputs *in, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* a missing input is the reader's error */
    if (in->n == in->cap) {
        const int cap = in->cap ? 2 * in->cap : 16;
        struct input *p = realloc(in->at, sizeof *p * (size_t)cap);
        if (!p) return -1;
        in->at = p, in->cap = cap;
    }
    in->at[in->n] = (struct input){.dev = st.st_dev, .ino = st.st_ino};
    snprintf(in->at[in->n].path, sizeof in->at[in->n].path, "%s", path);
    in->n++;
    return 0;
}

static int add_run_logs(report_inputs *in, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int rc = 0;
    char path[4200];
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "run_", 4) || n < 7 || strcmp(e->d_name + n - 6, ".jsonl")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = add_input(in, path);
    }
    closedir(d);
    return rc;
}

/* Which input the file at path is (the same device and inode: a hard link or another
 * spelling of the path counts), or NULL. The one "same file" test of the report, to be
 * folded into the general helper. */
static const char *same_as_input(const report_inputs *in, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return NULL;
    for (int i = 0; i < in->n; i++)
        if (in->at[i].dev == st.st_dev && in->at[i].ino == st.st_ino) return in->at[i].path;
    return NULL;
}

typedef struct output_check {
    const char *dir;
    const report_inputs *inputs;
} output_check;

/* One output of the report: a regular file or absent, never one of the inputs; says
 * why not in one line, and -1. */
static int check_output(const char *name, void *ctx) {
    const output_check *c = ctx;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    dt_error err;
    if (dt_outfile_check(path, &err)) return cli_fail("report", "%s", err.msg);
    const char *input = same_as_input(c->inputs, path);
    if (input)
        return cli_fail("report", "%s would be overwritten by the report's %s (give --out DIR)",
                        input, strcmp(c->dir, ".") ? path : name);
    return 0;
}

/* Every file the report writes into dir (runs.csv, report.md, the plots' data,
 * scripts and pictures, gnuplot.err) checked before any is written: absent or a
 * regular file, and none the same file as an input (times: the --times CSV or NULL;
 * the run logs of from_dir, and of dir, which the plots read). 0, or -1 after saying
 * which. */
static int check_outputs(const dt_scale_study *s, const char *dir, const char *times,
                         const char *from_dir) {
    struct stat st;
    if (stat(dir, &st) != 0) return 0; /* a new folder: nothing in it to replace */
    report_inputs in = {0};
    int rc = (times ? add_input(&in, times) : 0) || (from_dir ? add_run_logs(&in, from_dir) : 0) ||
             add_run_logs(&in, dir);
    if (rc) {
        free(in.at);
        return cli_fail("report", "out of memory");
    }
    output_check c = {.dir = dir, .inputs = &in};
    rc = check_output("runs.csv", &c) || check_output("report.md", &c) ||
         dt_plots_outputs(s, check_output, &c);
    free(in.at);
    return rc ? -1 : 0;
}

int cli_publish_study(dt_scale_study *s, const char *dir, int print_tables) {
    if (check_outputs(s, dir, NULL, NULL)) return -1;
    dt_error err;
    char path[4200];
    if (dt_make_dirs(dir, &err)) return cli_fail("report", "%s", err.msg);
    snprintf(path, sizeof path, "%s/runs.csv", dir);
    if (dt_scale_write_csv(s, path, &err)) return cli_fail("report", "%s", err.msg);
    char names[DT_MAX_PLOTS][64];
    const char *plots[DT_MAX_PLOTS];
    int n_plots = 0;
    if (dt_plots_write(s, dir, names, &n_plots, &err)) {
        dt_scale_add_note(s, "plots not drawn: %s", err.msg);
        n_plots = 0;
    }
    for (int i = 0; i < n_plots; i++) plots[i] = names[i];
    snprintf(path, sizeof path, "%s/report.md", dir);
    dt_outfile out;
    if (dt_outfile_open(&out, path, &err)) return cli_fail("report", "%s", err.msg);
    dt_scale_write_report(s, out.f, plots, n_plots);
    if (dt_outfile_commit(&out, &err)) return cli_fail("report", "%s", err.msg);
    if (print_tables) dt_scale_write_report(s, stdout, plots, 0);
    fprintf(stderr, "report: %s/report.md, runs.csv, %d plot%s (PNG + SVG)\n", dir, n_plots,
            n_plots == 1 ? "" : "s");
    return 0;
}

int cmd_report(int argc, char **argv) {
    static const struct option opts[] = {{"times", required_argument, 0, 't'},
                                         {"params", required_argument, 0, 'p'},
                                         {"dataset-size", required_argument, 0, 'd'},
                                         {"model", required_argument, 0, 'm'},
                                         {"cores", required_argument, 0, 'c'},
                                         {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "report", *times = NULL, *out = NULL, *model = NULL;
    double params = 0, dataset = 0;
    long cores = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't':
            times = optarg;
            break;
        case 'p':
            if (cli_parse_float(cmd, "--params", optarg, 1, 1e13, &params)) return 2;
            break;
        case 'd':
            if (cli_parse_float(cmd, "--dataset-size", optarg, 1, 1e12, &dataset)) return 2;
            break;
        case 'm':
            model = optarg;
            break;
        case 'c':
            if (cli_parse_int(cmd, "--cores", optarg, 1, 1 << 20, &cores)) return 2;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            report_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    s.cores = (int)cores;
    s.cores_given = cores > 0;
    dt_error err;
    if (times) {
        if (optind < argc) return cli_no_extra_args(cmd, argc, argv, optind);
        s.params = params;
        s.dataset_size = dataset;
        if (model) snprintf(s.model, sizeof s.model, "%s", model);
        snprintf(s.data, sizeof s.data, "times from %s", times);
        if (dt_scale_read_csv(&s, times, &err)) {
            cli_fail(cmd, "%s", err.msg);
            dt_scale_free(&s); /* the rows read before the bad line */
            return 1;
        }
        if (params <= 0) dt_scale_add_note(&s, "--params not given: no bandwidth figures");
        if (dataset <= 0)
            dt_scale_add_note(&s, "--dataset-size not given: iteration counts only from the CSV");
        char dir[4096];
        if (!out) { /* beside the CSV, which then must not be one of the outputs */
            snprintf(dir, sizeof dir, "%s", times);
            char *slash = strrchr(dir, '/');
            if (slash)
                *slash = 0;
            else
                snprintf(dir, sizeof dir, ".");
            out = dir;
        }
        int rc = check_outputs(&s, out, times, NULL) || cli_publish_study(&s, out, 1);
        dt_scale_free(&s);
        return rc ? 1 : 0;
    }
    if (optind != argc - 1) {
        cli_fail(cmd, "give a study folder (dtrain report DIR) or --times FILE.csv");
        return 2;
    }
    const char *dir = argv[optind];
    if (dt_scale_read_dir(dir, &s, &err)) {
        cli_fail(cmd, "%s", err.msg);
        dt_scale_free(&s);
        return 1;
    }
    int rc =
        check_outputs(&s, out ? out : dir, NULL, dir) || cli_publish_study(&s, out ? out : dir, 0);
    dt_scale_free(&s);
    return rc ? 1 : 0;
}
