#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
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

/* Whether writing the report into dir would replace the input CSV (a user's
 * runs.csv with columns of their own): said in one line, and 1. */
static int overwrites_input(const char *input, const char *dir) {
    static const char *const outputs[] = {"runs.csv", "report.md", "plots.gp"};
    struct stat in, o;
    if (stat(input, &in) != 0) return 0;
    for (size_t i = 0; i < sizeof outputs / sizeof *outputs; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, outputs[i]);
        if (stat(path, &o) == 0 && o.st_dev == in.st_dev && o.st_ino == in.st_ino) {
            cli_fail("report", "%s would be overwritten by the report's %s (give --out DIR)", input,
                     outputs[i]);
            return 1;
        }
    }
    return 0;
}

int cli_publish_study(dt_scale_study *s, const char *dir, int print_tables) {
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
        int rc = overwrites_input(times, out) || cli_publish_study(&s, out, 1);
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
    int rc = cli_publish_study(&s, out ? out : dir, 0);
    dt_scale_free(&s);
    return rc ? 1 : 0;
}
