/* Commands across jobs: fit-jobs (ridge regression of loss-curve parameters on job
 * features) and allocate (greedy process allocation by marginal gain). */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>

#include "cli.h"
#include "perfmodel/jobs.h"
#include "study/plots.h"

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
    const dt_fit_jobs_opts o = {argv[optind], features, hold_out, predict, lambda, standardize};
    static dt_fit_jobs_result r;
    dt_error err;
    if (dt_fit_jobs(&o, &r, &err)) return cli_fail(cmd, "%s", err.msg), r.bad_flag ? 2 : 1;
    const dt_job_table *t = &r.table;
    const int nf = r.n_features;
    printf("regression of b0, b1, b2 on %d jobs of %s (lambda %g%s)\n", r.n_train, o.path, lambda,
           standardize ? "" : ", plain ridge: features centred, not standardised");
    for (int k = 0; k < 3; k++) {
        const dt_ridge *m = &r.model.b[k];
        printf("b%d = %.6g", k, m->intercept);
        for (int j = 0; j < nf; j++) printf(" %+.6g * z(%s)", m->weight[j], t->header[r.feat[j]]);
        printf(standardize ? "   (z: standardised feature)\n"
                           : "   (z: centred feature, x - mean; not standardised)\n");
        double coef[DT_RIDGE_MAX_FEATURES];
        printf("   = %.6g", dt_ridge_unscaled(m, coef));
        for (int j = 0; j < nf; j++) printf(" %+.6g * %s", coef[j], t->header[r.feat[j]]);
        printf("\n");
        double sum_err = 0.0;
        int counted = 0;
        for (int i = 0; i < t->n_rows; i++) {
            if (!r.ok[i]) continue;
            const double y = r.b[i * 3 + k], p = dt_loss_fit_param(&r.curve[i], k);
            const double rel = y != 0 ? fabs(p - y) / fabs(y) : fabs(p);
            printf("    %-9s %-12s b%d %.6g predicted %.6g (%.1f%%)\n",
                   r.train[i] ? "leave out" : "held out", t->names[i], k, y, p, 100.0 * rel);
            if (r.train[i]) sum_err += rel, counted++;
        }
        if (counted) printf("    mean leave-one-out error %.1f%%\n", 100.0 * sum_err / counted);
        if (r.has_unseen)
            printf("    unseen job: b%d = %.6g\n", k, dt_loss_fit_param(&r.unseen, k));
    }
    if (target > 0) {
        printf("\nsteps to loss %g, k = (1/(%g - b2) - b1) / b0 from the predicted b's:\n", target,
               target);
        printf("  %-14s %-14s %10s %12s %9s\n", "job", "predicted as", "observed", "predicted",
               "error");
        for (int i = 0; i < t->n_rows; i++)
            if (r.ok[i])
                print_steps(t->names[i], r.train[i] ? "leave-one-out" : "held out", &r.curve[i],
                            target, r.steps_col >= 0 ? t->v[i][r.steps_col] : -1);
        if (r.has_unseen) print_steps("unseen", "--predict", &r.unseen, target, -1);
    }
    if (!out_dir) return 0;
    int drawn;
    if (dt_plots_job_curves(&r, target, out_dir, &drawn, &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    if (drawn)
        fprintf(stderr, "plot: %s/jobs_curves.png (and .svg)\n", out_dir);
    else
        fprintf(stderr, "plot not drawn: gnuplot failed or is missing (script in %s)\n", out_dir);
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
    static dt_job jobs[DT_JOBS_MAX_ROWS];
    int n;
    dt_error err;
    if (dt_jobs_read(argv[optind], jobs, &n, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    if (dt_allocate_greedy(jobs, n, (int)budget, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    int used = 0;
    printf("%-16s %8s %8s %14s %14s\n", "job", "workers", "servers", "time (h)", "with 1+1 (h)");
    for (int i = 0; i < n; i++) {
        used += jobs[i].workers + jobs[i].servers;
        printf("%-16s %8d %8d %14.3f %14.3f\n", jobs[i].name, jobs[i].workers, jobs[i].servers,
               dt_job_time(&jobs[i], jobs[i].workers, jobs[i].servers) / 3600.0,
               dt_job_time(&jobs[i], 1, 1) / 3600.0);
    }
    printf("%d of %ld processes used%s\n", used, budget,
           used < budget ? " (no further process would save time)" : "");
    return 0;
}
