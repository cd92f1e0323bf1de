/* Commands across jobs: fit-jobs (ridge regression of loss-curve parameters on job
 * features) and allocate (greedy process allocation by marginal gain). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dtrain/jobs.h"
#include "dtrain/perfinput.h"

enum { MAX_JOBS = DT_JOBS_MAX_ROWS, MAX_COLS = DT_JOBS_MAX_COLS };

/* Reads the jobs CSV; 0, or -1 after printing why. */
static int read_table(const char *cmd, const char *path, dt_job_table *t) {
    dt_error err;
    return dt_job_table_read(path, t, &err) ? cli_fail(cmd, "%s", err.msg) : 0;
}

int cmd_fit_jobs(int argc, char **argv) {
    static const struct option opts[] = {{"lambda", required_argument, 0, 'l'},
                                         {"predict", required_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "fit-jobs", *predict = NULL;
    double lambda = 1.0;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'l':
            if (cli_parse_float(cmd, "--lambda", optarg, 0, 1e9, &lambda)) return 2;
            break;
        case 'p':
            predict = optarg;
            break;
        case 'h':
            printf("usage: dtrain fit-jobs FILE.csv [--lambda L] [--predict f1,f2,...]\n\n"
                   "Ridge regression (standardised features, penalty L, default 1) of each job's\n"
                   "loss-curve parameters b0, b1, b2 on its features: every column of the CSV\n"
                   "other than name, b0, b1, b2. Prints the weights and each job's leave-one-out\n"
                   "error; --predict gives an unseen job's parameters from its features.\n");
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind != argc - 1) {
        cli_fail(cmd, "give one CSV file (dtrain fit-jobs FILE.csv)");
        return 2;
    }
    static dt_job_table t;
    if (read_table(cmd, argv[optind], &t)) return 1;
    int target[3] = {dt_job_table_column(&t, "b0"), dt_job_table_column(&t, "b1"),
                     dt_job_table_column(&t, "b2")},
        feat[MAX_COLS], nf = 0;
    for (int k = 0; k < 3; k++)
        if (target[k] < 0) {
            cli_fail(cmd, "%s: missing column 'b%d'", argv[optind], k);
            return 1;
        }
    for (int c = 0; c < t.n_cols; c++)
        if (c != target[0] && c != target[1] && c != target[2] && strcmp(t.header[c], "name"))
            feat[nf++] = c;
    if (nf == 0 || nf > DT_RIDGE_MAX_FEATURES) {
        cli_fail(cmd, "%s: %d feature columns (1..%d supported)", argv[optind], nf,
                 DT_RIDGE_MAX_FEATURES);
        return 1;
    }
    static double x[MAX_JOBS * MAX_COLS], y[MAX_JOBS];
    for (int i = 0; i < t.n_rows; i++)
        for (int j = 0; j < nf; j++) x[i * nf + j] = t.v[i][feat[j]];
    dt_error err;
    double unseen[MAX_COLS];
    int n_unseen = 0;
    for (const char *p = predict; p && n_unseen < MAX_COLS;) { /* strict: f1,f2,... */
        char *end;
        unseen[n_unseen++] = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !isfinite(unseen[n_unseen - 1])) {
            cli_fail(cmd, "--predict expects numbers separated by commas, got '%s'", predict);
            return 2;
        }
        p = *end ? end + 1 : NULL;
    }
    if (predict && n_unseen != nf) {
        cli_fail(cmd, "--predict needs %d feature values, got %d", nf, n_unseen);
        return 2;
    }
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < t.n_rows; i++) y[i] = t.v[i][target[k]];
        dt_ridge m;
        if (dt_ridge_fit(x, y, t.n_rows, nf, lambda, &m, &err)) {
            cli_fail(cmd, "b%d: %s", k, err.msg);
            return 1;
        }
        printf("b%d = %.6g", k, m.intercept);
        for (int j = 0; j < nf; j++) printf(" %+.6g * z(%s)", m.weight[j], t.header[feat[j]]);
        printf("   (z: standardised feature, lambda %g)\n", lambda);
        static double pred[MAX_JOBS], rel_err[MAX_JOBS];
        static int ok[MAX_JOBS];
        if (dt_ridge_leave_one_out(x, y, t.n_rows, nf, lambda, pred, rel_err, ok, &err)) {
            cli_fail(cmd, "%s", err.msg);
            return 1;
        }
        double sum_err = 0.0;
        int counted = 0;
        for (int i = 0; i < t.n_rows; i++) {
            if (!ok[i]) continue;
            printf("    leave out %-12s b%d %.6g predicted %.6g (%.1f%%)\n", t.names[i], k, y[i],
                   pred[i], 100.0 * rel_err[i]);
            sum_err += rel_err[i];
            counted++;
        }
        if (counted) printf("    mean leave-one-out error %.1f%%\n", 100.0 * sum_err / counted);
        if (predict) printf("    unseen job: b%d = %.6g\n", k, dt_ridge_predict(&m, unseen));
    }
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
