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

enum { MAX_JOBS = 256, MAX_COLS = 32 };

typedef struct table {
    char header[MAX_COLS][64];
    int n_cols;
    char names[MAX_JOBS][64]; /* the "name" column, if any */
    double v[MAX_JOBS][MAX_COLS];
    int n_rows;
} table;

/* Reads a CSV with a header; the column "name" may hold text, every other must be a
 * number. */
static int read_table(const char *cmd, const char *path, table *t) {
    FILE *f = fopen(path, "r");
    if (!f) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
    char line[4096];
    memset(t, 0, sizeof *t);
    if (!fgets(line, sizeof line, f)) {
        fclose(f);
        return cli_fail(cmd, "%s is empty", path);
    }
    for (char *tok = strtok(line, ",\n\r"); tok && t->n_cols < MAX_COLS;
         tok = strtok(NULL, ",\n\r"))
        snprintf(t->header[t->n_cols++], 64, "%s", tok);
    int lineno = 1;
    while (fgets(line, sizeof line, f) && t->n_rows < MAX_JOBS) {
        lineno++;
        if (line[0] == '\n' || line[0] == 0) continue;
        int c = 0;
        char *save = NULL;
        for (char *tok = strtok_r(line, ",\n\r", &save); tok && c < t->n_cols;
             tok = strtok_r(NULL, ",\n\r", &save), c++) {
            if (!strcmp(t->header[c], "name")) {
                snprintf(t->names[t->n_rows], 64, "%s", tok);
                continue;
            }
            char *end;
            t->v[t->n_rows][c] = strtod(tok, &end);
            if (end == tok || *end || !isfinite(t->v[t->n_rows][c])) {
                fclose(f);
                return cli_fail(cmd, "%s line %d: %s is not a number: '%s'", path, lineno,
                                t->header[c], tok);
            }
        }
        if (c != t->n_cols) {
            fclose(f);
            return cli_fail(cmd, "%s line %d: %d fields, the header has %d", path, lineno, c,
                            t->n_cols);
        }
        if (!t->names[t->n_rows][0]) snprintf(t->names[t->n_rows], 64, "job%d", t->n_rows + 1);
        t->n_rows++;
    }
    fclose(f);
    return 0;
}

static int column(const table *t, const char *name) {
    for (int c = 0; c < t->n_cols; c++)
        if (!strcmp(t->header[c], name)) return c;
    return -1;
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
    static table t;
    if (read_table(cmd, argv[optind], &t)) return 1;
    int target[3] = {column(&t, "b0"), column(&t, "b1"), column(&t, "b2")}, feat[MAX_COLS], nf = 0;
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
    static double x[MAX_JOBS * MAX_COLS], y[MAX_JOBS], xs[MAX_JOBS * MAX_COLS], ys[MAX_JOBS];
    for (int i = 0; i < t.n_rows; i++)
        for (int j = 0; j < nf; j++) x[i * nf + j] = t.v[i][feat[j]];
    dt_error err;
    double unseen[MAX_COLS];
    int n_unseen = 0;
    if (predict)
        for (char *tok = strtok((char *)predict, ","); tok && n_unseen < MAX_COLS;
             tok = strtok(NULL, ","))
            unseen[n_unseen++] = strtod(tok, NULL);
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
        double sum_err = 0.0;
        int counted = 0;
        for (int i = 0; i < t.n_rows; i++) { /* leave job i out */
            int r = 0;
            for (int o = 0; o < t.n_rows; o++) {
                if (o == i) continue;
                memcpy(xs + r * nf, x + o * nf, sizeof(double) * nf);
                ys[r++] = y[o];
            }
            dt_ridge part;
            if (dt_ridge_fit(xs, ys, r, nf, lambda, &part, &err)) continue;
            double p = dt_ridge_predict(&part, x + i * nf);
            double e = y[i] != 0 ? fabs(p - y[i]) / fabs(y[i]) : fabs(p);
            printf("    leave out %-12s b%d %.6g predicted %.6g (%.1f%%)\n", t.names[i], k, y[i], p,
                   100.0 * e);
            sum_err += e;
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
    static table t;
    if (read_table(cmd, argv[optind], &t)) return 1;
    const char *need[8] = {"remaining_steps", "batch",  "theta0", "theta1",
                           "theta2",          "theta3", "theta4", NULL};
    int col[7];
    for (int k = 0; k < 7; k++)
        if ((col[k] = column(&t, need[k])) < 0) {
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
