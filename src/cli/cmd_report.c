#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "study/netns.h"
#include "study/predict.h"
#include "study/report.h"
#include "study/scale_csv.h"
#include "study/scaling.h"
#include "study/sweep.h"

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
            "  --profile FILE   with --times, what if: predict every config and 1 to 64\n"
            "                   workers from this profile taken here (dtrain bench\n"
            "                   --profile-out), its compute rescaled at each batch size by\n"
            "                   the 1-process time in the CSV (needs one), the\n"
            "                   all-reduce on --link; written to DIR/predicted.csv, set\n"
            "                   beside the measured steps in the report\n"
            "  --link RATE[,DELAY]  the network the times were measured on, for --profile\n"
            "                   (default 10gbit,20us; units as scale's --link)\n"
            "  --target-loss L  the time to target's training loss (default: 90%% of the\n"
            "                   way from the first step's loss to the lowest final loss of\n"
            "                   any run; needs the run logs)\n"
            "  --out DIR        where to write (default: the CSV's folder, refused if the\n"
            "                   report would overwrite the CSV itself)\n"
            "  --help           this text\n");
}

/* The study written into dir (scale's, after its runs): runs.csv, plots, report.md,
 * and the tables to stdout if asked; 0, or -1 after printing the error. */
static int publish(dt_scale_study *s, const dt_report_opts *o) {
    dt_error err;
    int n_plots;
    if (dt_report_publish(s, o, &n_plots, &err)) return cli_fail("report", "%s", err.msg);
    fprintf(stderr, "report: %s/report.md, runs.csv, %d plot%s (PNG + SVG)\n", o->dir, n_plots,
            n_plots == 1 ? "" : "s");
    return 0;
}

int cli_publish_study(dt_scale_study *s, const char *dir, int print_tables) {
    const dt_report_opts o = {.dir = dir, .tables = print_tables ? stdout : NULL};
    return publish(s, &o);
}

int cmd_report(int argc, char **argv) {
    static const struct option opts[] = {{"times", required_argument, 0, 't'},
                                         {"params", required_argument, 0, 'p'},
                                         {"dataset-size", required_argument, 0, 'd'},
                                         {"model", required_argument, 0, 'm'},
                                         {"cores", required_argument, 0, 'c'},
                                         {"out", required_argument, 0, 'o'},
                                         {"target-loss", required_argument, 0, 'L'},
                                         {"profile", required_argument, 0, 'P'},
                                         {"link", required_argument, 0, 'l'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "report", *times = NULL, *out = NULL, *model = NULL, *profile = NULL;
    dt_link link = {.rate_bps = DT_PREDICT_BEYOND_RATE_BPS, .delay_s = DT_PREDICT_BEYOND_DELAY_S};
    int link_given = 0;
    double params = 0, dataset = 0, target_loss = 0;
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
        case 'L':
            if (cli_parse_float(cmd, "--target-loss", optarg, 1e-9, 1e9, &target_loss)) return 2;
            break;
        case 'P':
            profile = optarg;
            break;
        case 'l': {
            dt_error lerr;
            if (dt_link_parse(optarg, &link, &lerr))
                return cli_fail(cmd, "--link: %s", lerr.msg), 2;
            link_given = 1;
            break;
        }
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
    s.target_loss = target_loss;
    dt_error err;
    if (times) {
        if (optind < argc) return cli_no_extra_args(cmd, argc, argv, optind);
        char models[64][64];
        int n_models = 0;
        if (dt_scale_csv_models(times, models, 64, &n_models, &err))
            return cli_fail(cmd, "%s", err.msg), 1;
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
        if (n_models > 1) { /* one report per model and one figure of them all */
            if (profile)
                return cli_fail(cmd, "--profile is one model's, but %s has %d in its model column",
                                times, n_models),
                       2;
            if (model)
                return cli_fail(cmd,
                                "--model names one model, but %s has %d in its model "
                                "column",
                                times, n_models),
                       2;
            int drawn;
            if (dt_report_models(times, models, n_models, params, dataset, (int)cores, out, &drawn,
                                 &err))
                return cli_fail(cmd, "%s", err.msg), 1;
            fprintf(stderr, "report: %d models: %s/models.md%s, a report per model in %s/<model>\n",
                    n_models, out, drawn ? ", speedup_models.png (+ SVG)" : "", out);
            return 0;
        }
        if (dt_report_read_times(&s, times, params, dataset, model, &err)) {
            cli_fail(cmd, "%s", err.msg);
            dt_scale_free(&s); /* the rows read before the bad line */
            return 1;
        }
        if (profile && dt_scale_predict_times(&s, profile, link.rate_bps, link.delay_s,
                                              DT_PREDICT_BEYOND_WORKERS, out, &err)) {
            cli_fail(cmd, "%s", err.msg);
            dt_scale_free(&s);
            return 1;
        }
        const dt_report_opts o = {.dir = out, .times = times, .tables = stdout};
        int rc = publish(&s, &o);
        dt_scale_free(&s);
        return rc ? 1 : 0;
    }
    if (profile || link_given)
        return cli_fail(cmd, "--profile and --link go with --times (a study folder has scale's "
                             "own predictions)"),
               2;
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
    const dt_report_opts o = {.dir = out ? out : dir, .from_dir = dir};
    int rc = publish(&s, &o);
    dt_scale_free(&s);
    return rc ? 1 : 0;
}
