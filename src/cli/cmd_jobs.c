/* Commands across jobs: fit-jobs (ridge regression of loss-curve parameters on job
 * features) and allocate (greedy process allocation by marginal gain). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/outfile.h"
#include "dtrain/jobs.h"
#include "dtrain/perfinput.h"
#include "dtrain/plots.h"
#include "dtrain/sweep.h"
#include "dtrain/train_flags.h"

enum { MAX_JOBS = DT_JOBS_MAX_ROWS, MAX_COLS = DT_JOBS_MAX_COLS };

/* Reads the jobs CSV; 0, or -1 after printing why. */
static int read_table(const char *cmd, const char *path, dt_job_table *t) {
    dt_error err;
    return dt_job_table_read(path, t, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
}

/* Splits "a,b,c" into at most max items of at most 63 characters; the count, or -1
 * for an empty item, a longer one or more than max. */
static int split_list(const char *text, char items[][64], int max) {
    int n = 0;
    for (const char *p = text;; n++) {
        size_t len = strcspn(p, ",");
        if (n == max || len == 0 || len >= 64) return -1;
        memcpy(items[n], p, len);
        items[n][len] = 0;
        if (!p[len]) return n + 1;
        p += len + 1;
    }
}

static void fit_jobs_usage(void) {
    printf("usage: dtrain fit-jobs FILE.csv [--lambda L] [--no-standardize]\n"
           "                       [--features c1,c2,...] [--hold-out name1,...]\n"
           "                       [--target-loss X] [--predict f1,f2,...]\n\n"
           "Ridge regression (standardised features, penalty L, default 1; 0 = least\n"
           "squares) of each job's loss-curve parameters b0, b1, b2 on its features: the\n"
           "columns --features names, by default every column other than name, b0, b1, b2\n"
           "and steps_to_target. Lines starting with '#' are comments. Prints the weights\n"
           "(per standardised feature z, and in the features' units), each trained job's\n"
           "leave-one-out error and the mean.\n"
           "--hold-out leaves the named jobs out of the fit and predicts them from their\n"
           "features against their fitted b's; --predict gives an unseen job's b's.\n"
           "--target-loss X: every predicted curve's steps to loss X,\n"
           "k = (1/(X - b2) - b1) / b0, against the column steps_to_target when the CSV has\n"
           "it (the step each job's smoothed loss first reached X: dtrain fit-loss\n"
           "--target-loss X --save).\n"
           "--no-standardize: plain ridge regression as scikit-learn's Ridge does it (alpha =\n"
           "L, features only centred, intercept not penalised): the penalty falls on the\n"
           "weights in the features' own units.\n"
           "--out DIR draws every job's own curve against the one predicted for it (and\n"
           "the unseen job's, with --predict): DIR/jobs_curves.png and .svg (gnuplot).\n");
}

static double param(const dt_loss_fit *c, int k) {
    return k == 0 ? c->b0 : k == 1 ? c->b1 : c->b2;
}

/* The steps to target of a predicted curve, against the observed step (< 0: none). */
static void print_steps(const char *job, const char *how, const dt_loss_fit *curve, double target,
                        double observed) {
    double k = dt_loss_step_for_target(curve, target);
    char obs[32] = "-", pred[32] = "never", err[32] = "";
    if (observed >= 0) snprintf(obs, sizeof obs, "%.0f", observed);
    if (k >= 0) snprintf(pred, sizeof pred, "%.1f", k);
    if (k >= 0 && observed > 0)
        snprintf(err, sizeof err, "%+.1f%%", 100.0 * (k - observed) / observed);
    printf("  %-14s %-14s %10s %12s %9s\n", job, how, obs, pred, err);
}

/* fit-jobs --out: each job's own curve (its fitted b's, solid) against the one the
 * regression predicts for it (leave-one-out or held out, dashed, same colour), and
 * the unseen job's (--predict, dotted): DIR/jobs_curves.png and .svg. */
static int draw_curves(const char *cmd, const dt_job_table *t, const double *b,
                       const dt_loss_fit *curve, const int *ok, const int *train,
                       const dt_loss_fit *unseen, double target, const char *dir) {
    dt_error err;
    if (dt_make_dirs(dir, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    double x_max = 0; /* where the slowest job's excess loss is a twentieth of its start */
    for (int i = 0; i < t->n_rows; i++) {
        const double b0 = b[i * 3], b1 = b[i * 3 + 1];
        if (b0 > 0 && b1 > 0 && 19 * b1 / b0 > x_max) x_max = 19 * b1 / b0;
    }
    if (!(x_max > 0) || !isfinite(x_max)) x_max = 1000;
    char path[4200];
    snprintf(path, sizeof path, "%s/jobs_curves.gp", dir);
    dt_outfile g; /* written whole or not at all; no symlink or device replaced */
    if (dt_outfile_open(&g, path, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    FILE *gp = g.f;
    for (int term = 0; term < 2; term++) {
        fprintf(gp,
                "set terminal %s\nset output 'jobs_curves.%s'\nset grid\nset key outside right "
                "top box\nset samples 400\nset xlabel 'step'\nset ylabel 'loss'\nset xrange "
                "[0:%g]\nset title 'Loss curves: fitted per job (solid), predicted by the "
                "regression (dashed)'\nplot ",
                term ? "svg size 1000,600 dynamic" : "pngcairo size 1000,600", term ? "svg" : "png",
                x_max);
        int n = 0;
        for (int i = 0; i < t->n_rows; i++) {
            if (!ok[i]) continue;
            const int colour = i % 8 + 1;
            fprintf(gp,
                    "%s1/(%.17g*x + %.17g) + %.17g lw 2 lc %d title '%s', "
                    "1/(%.17g*x + %.17g) + %.17g lw 2 dt 2 lc %d title '%s %s'",
                    n ? ", " : "", b[i * 3], b[i * 3 + 1], b[i * 3 + 2], colour, t->names[i],
                    curve[i].b0, curve[i].b1, curve[i].b2, colour, t->names[i],
                    train[i] ? "left out" : "held out");
            n++;
        }
        if (unseen)
            fprintf(gp, "%s1/(%.17g*x + %.17g) + %.17g lw 3 dt 3 lc rgb 'black' title 'unseen'",
                    n ? ", " : "", unseen->b0, unseen->b1, unseen->b2),
                n++;
        if (target > 0)
            fprintf(gp, "%s%g lc rgb 'gray40' dt 4 title 'target'", n ? ", " : "", target), n++;
        if (!n) fputs("1/0 notitle", gp);
        fputc('\n', gp);
    }
    if (dt_outfile_commit(&g, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    if (dt_gnuplot_run(dir, "jobs_curves.gp", "/dev/null") == 0)
        fprintf(stderr, "plot: %s/jobs_curves.png (and .svg)\n", dir);
    else
        fprintf(stderr, "plot not drawn: gnuplot failed or is missing (script in %s)\n", dir);
    return 0;
}

int cmd_fit_jobs(int argc, char **argv) {
    static const struct option opts[] = {{"lambda", required_argument, 0, 'l'},
                                         {"no-standardize", no_argument, 0, 'S'},
                                         {"predict", required_argument, 0, 'p'},
                                         {"features", required_argument, 0, 'f'},
                                         {"hold-out", required_argument, 0, 'o'},
                                         {"target-loss", required_argument, 0, 't'},
                                         {"out", required_argument, 0, 'O'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "fit-jobs", *predict = NULL, *features = NULL, *hold_out = NULL,
               *out_dir = NULL;
    double lambda = 1.0, target = -1;
    int standardize = 1;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'l':
            if (cli_parse_float(cmd, "--lambda", optarg, 0, 1e9, &lambda)) return 2;
            break;
        case 'S':
            standardize = 0;
            break;
        case 'O':
            out_dir = optarg;
            break;
        case 'p':
            predict = optarg;
            break;
        case 'f':
            features = optarg;
            break;
        case 'o':
            hold_out = optarg;
            break;
        case 't':
            if (cli_parse_float(cmd, "--target-loss", optarg, 1e-12, 1e12, &target)) return 2;
            break;
        case 'h':
            fit_jobs_usage();
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind != argc - 1) {
        cli_fail(cmd, "give one CSV file (dtrain fit-jobs FILE.csv)");
        return 2;
    }
    const char *path = argv[optind];
    static dt_job_table t;
    if (read_table(cmd, path, &t)) return 1;
    int target_col[3] = {dt_job_table_column(&t, "b0"), dt_job_table_column(&t, "b1"),
                         dt_job_table_column(&t, "b2")},
        steps_col = dt_job_table_column(&t, "steps_to_target"), feat[MAX_COLS], nf = 0;
    for (int k = 0; k < 3; k++)
        if (target_col[k] < 0) {
            cli_fail(cmd, "%s: missing column 'b%d'", path, k);
            return 1;
        }
    static char items[MAX_JOBS][64];
    if (features) {
        int n_items = split_list(features, items, MAX_COLS);
        if (n_items < 0) {
            cli_fail(cmd, "--features expects column names separated by commas, got '%s'",
                     features);
            return 2;
        }
        for (int j = 0; j < n_items; j++) {
            int c = dt_job_table_column(&t, items[j]);
            int reserved = c == target_col[0] || c == target_col[1] || c == target_col[2] ||
                           !strcmp(items[j], "name");
            if (c < 0 || reserved) {
                cli_fail(cmd, "--features: %s '%s' in %s",
                         c < 0 ? "no column" : "not a feature:", items[j], path);
                return 1;
            }
            for (int o = 0; o < nf; o++)
                if (feat[o] == c) {
                    cli_fail(cmd, "--features names '%s' twice", items[j]);
                    return 2;
                }
            feat[nf++] = c;
        }
    } else {
        for (int c = 0; c < t.n_cols; c++)
            if (c != target_col[0] && c != target_col[1] && c != target_col[2] && c != steps_col &&
                strcmp(t.header[c], "name"))
                feat[nf++] = c;
    }
    if (nf == 0 || nf > DT_RIDGE_MAX_FEATURES) {
        cli_fail(cmd, "%s: %d feature columns (1..%d supported)", path, nf, DT_RIDGE_MAX_FEATURES);
        return 1;
    }
    static int train[MAX_JOBS];
    for (int i = 0; i < t.n_rows; i++) train[i] = 1;
    if (hold_out) {
        int n_items = split_list(hold_out, items, MAX_JOBS);
        if (n_items < 0) {
            cli_fail(cmd, "--hold-out expects job names separated by commas, got '%s'", hold_out);
            return 2;
        }
        for (int j = 0; j < n_items; j++) {
            int found = 0;
            for (int i = 0; i < t.n_rows; i++)
                if (!strcmp(t.names[i], items[j])) found = 1, train[i] = 0;
            if (!found) {
                cli_fail(cmd, "--hold-out: no job '%s' in %s", items[j], path);
                return 1;
            }
        }
    }
    double unseen[MAX_COLS];
    int n_unseen = 0;
    if (predict) {
        static char values[MAX_COLS][64];
        n_unseen = split_list(predict, values, MAX_COLS);
        dt_error perr;
        for (int j = 0; j < n_unseen; j++)
            if (isspace((unsigned char)values[j][0]) ||
                dt_parse_double("--predict", values[j], -1e300, 1e300, &unseen[j], &perr))
                n_unseen = -1;
        if (n_unseen < 0) {
            cli_fail(cmd, "--predict expects numbers separated by commas, got '%s'", predict);
            return 2;
        }
        if (n_unseen != nf) {
            cli_fail(cmd, "--predict needs %d feature values, got %d", nf, n_unseen);
            return 2;
        }
    }
    static double x[MAX_JOBS * MAX_COLS], b[MAX_JOBS * 3];
    for (int i = 0; i < t.n_rows; i++) {
        for (int j = 0; j < nf; j++) x[i * nf + j] = t.v[i][feat[j]];
        for (int k = 0; k < 3; k++) b[i * 3 + k] = t.v[i][target_col[k]];
    }
    dt_error err;
    dt_curve_model model;
    if (dt_curve_model_fit_scaled(x, b, train, t.n_rows, nf, lambda, standardize, &model, &err)) {
        cli_fail(cmd, "%s%s", err.msg, hold_out ? " (after --hold-out)" : "");
        return 1;
    }
    /* each job's predicted curve: leave-one-out for a trained job (ok[i] = 0: none),
     * the model of the trained jobs for a held-out one */
    static dt_loss_fit curve[MAX_JOBS];
    static int ok[MAX_JOBS];
    if (dt_curve_model_leave_one_out_scaled(x, b, train, t.n_rows, nf, lambda, standardize, curve,
                                            ok, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    for (int i = 0; i < t.n_rows; i++)
        if (!train[i]) curve[i] = dt_curve_model_predict(&model, x + i * nf), ok[i] = 1;
    int n_train = 0;
    for (int i = 0; i < t.n_rows; i++) n_train += train[i];
    printf("regression of b0, b1, b2 on %d jobs of %s (lambda %g%s)\n", n_train, path, lambda,
           standardize ? "" : ", plain ridge: features centred, not standardised");
    dt_loss_fit unseen_curve = predict ? dt_curve_model_predict(&model, unseen) : (dt_loss_fit){0};
    for (int k = 0; k < 3; k++) {
        const dt_ridge *m = &model.b[k];
        printf("b%d = %.6g", k, m->intercept);
        for (int j = 0; j < nf; j++) printf(" %+.6g * z(%s)", m->weight[j], t.header[feat[j]]);
        printf(standardize ? "   (z: standardised feature)\n"
                           : "   (z: centred feature, x - mean; not standardised)\n");
        double coef[DT_RIDGE_MAX_FEATURES];
        printf("   = %.6g", dt_ridge_unscaled(m, coef));
        for (int j = 0; j < nf; j++) printf(" %+.6g * %s", coef[j], t.header[feat[j]]);
        printf("\n");
        double sum_err = 0.0;
        int counted = 0;
        for (int i = 0; i < t.n_rows; i++) {
            if (!ok[i]) continue;
            const double y = b[i * 3 + k], p = param(&curve[i], k);
            const double rel = y != 0 ? fabs(p - y) / fabs(y) : fabs(p);
            printf("    %-9s %-12s b%d %.6g predicted %.6g (%.1f%%)\n",
                   train[i] ? "leave out" : "held out", t.names[i], k, y, p, 100.0 * rel);
            if (train[i]) sum_err += rel, counted++;
        }
        if (counted) printf("    mean leave-one-out error %.1f%%\n", 100.0 * sum_err / counted);
        if (predict) printf("    unseen job: b%d = %.6g\n", k, param(&unseen_curve, k));
    }
    if (target > 0) {
        printf("\nsteps to loss %g, k = (1/(%g - b2) - b1) / b0 from the predicted b's:\n", target,
               target);
        printf("  %-14s %-14s %10s %12s %9s\n", "job", "predicted as", "observed", "predicted",
               "error");
        for (int i = 0; i < t.n_rows; i++)
            if (ok[i])
                print_steps(t.names[i], train[i] ? "leave-one-out" : "held out", &curve[i], target,
                            steps_col >= 0 ? t.v[i][steps_col] : -1);
        if (predict) print_steps("unseen", "--predict", &unseen_curve, target, -1);
    }
    if (out_dir)
        return draw_curves(cmd, &t, b, curve, ok, train, predict ? &unseen_curve : NULL, target,
                           out_dir);
    return 0;
}

int cmd_allocate(int argc, char **argv) {
    static const struct option opts[] = {
        {"budget", required_argument, 0, 'b'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *cmd = "allocate";
    long budget = 0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (cli_parse_int(cmd, "--budget", optarg, 1, 1000000, &budget)) return 2;
            break;
        case 'h':
            printf("usage: dtrain allocate JOBS.csv --budget N\n\n"
                   "Optimus' greedy allocation: every job gets one worker and one server, then\n"
                   "each remaining process goes to the job and role that saves the most time\n"
                   "(remaining steps x step-time decrease of its speed model). Columns: name,\n"
                   "remaining_steps, batch, theta0, theta1, theta2, theta3, theta4.\n");
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind != argc - 1 || budget == 0) {
        cli_fail(cmd, "give a jobs CSV and --budget N (see dtrain allocate --help)");
        return 2;
    }
    static dt_job_table t;
    if (read_table(cmd, argv[optind], &t)) return 1;
    const char *need[8] = {"remaining_steps", "batch",  "theta0", "theta1",
                           "theta2",          "theta3", "theta4", NULL};
    int col[7];
    for (int k = 0; k < 7; k++)
        if ((col[k] = dt_job_table_column(&t, need[k])) < 0) {
            cli_fail(cmd, "%s: missing column '%s'", argv[optind], need[k]);
            return 1;
        }
    static dt_job jobs[MAX_JOBS];
    for (int i = 0; i < t.n_rows; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        snprintf(jobs[i].name, sizeof jobs[i].name, "%s", t.names[i]);
        jobs[i].remaining_steps = t.v[i][col[0]];
        jobs[i].batch = t.v[i][col[1]];
        jobs[i].speed.kind = DT_SPEED_PS;
        jobs[i].speed.n_theta = 5;
        for (int k = 0; k < 5; k++) {
            jobs[i].speed.theta[k] = t.v[i][col[2 + k]];
            if (jobs[i].speed.theta[k] < 0) {
                cli_fail(cmd, "%s: job %s has a negative theta%d", argv[optind], t.names[i], k);
                return 1;
            }
        }
        if (jobs[i].remaining_steps < 0 || jobs[i].batch <= 0) {
            cli_fail(cmd, "%s: job %s needs remaining_steps >= 0 and batch > 0", argv[optind],
                     t.names[i]);
            return 1;
        }
    }
    dt_error err;
    if (dt_allocate_greedy(jobs, t.n_rows, (int)budget, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    int used = 0;
    printf("%-16s %8s %8s %14s %14s\n", "job", "workers", "servers", "time (h)", "with 1+1 (h)");
    for (int i = 0; i < t.n_rows; i++) {
        used += jobs[i].workers + jobs[i].servers;
        printf("%-16s %8d %8d %14.3f %14.3f\n", jobs[i].name, jobs[i].workers, jobs[i].servers,
               dt_job_time(&jobs[i], jobs[i].workers, jobs[i].servers) / 3600.0,
               dt_job_time(&jobs[i], 1, 1) / 3600.0);
    }
    printf("%d of %ld processes used%s\n", used, budget,
           used < budget ? " (no further process would save time)" : "");
    return 0;
}
