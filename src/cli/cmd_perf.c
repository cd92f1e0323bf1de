/* The performance-model commands: fit-loss, fit-speed, predict. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "dtrain/perfmodel.h"
#include "dtrain/sweep.h"

/* Fits are saved as small JSON files that dtrain predict reads back. */
static int save_json(const char *cmd, const char *path, cJSON *root) {
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    FILE *f = text ? fopen(path, "w") : NULL;
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    free(text);
    if (!ok) return cli_fail(cmd, "cannot write %s: %s", path, strerror(errno));
    fprintf(stderr, "fit saved to %s\n", path);
    return 0;
}

static cJSON *load_json(const char *cmd, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *root = cJSON_Parse(buf);
    if (!root) cli_fail(cmd, "%s is not a fit file (JSON)", path);
    return root;
}

/* Rank 0's step losses of a run log, smoothed: the mean of each window of `every`
 * steps, placed at the window's last step. */
static int read_loss_points(const char *cmd, const char *path, long every, double **k, double **l,
                            int *n, long *steps_per_epoch) {
    FILE *f = fopen(path, "r");
    if (!f) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, count = 0, room = 1024;
    double sum = 0.0;
    long in_window = 0, last_step = 0, bad_line = 0;
    *k = malloc(sizeof(double) * room);
    *l = malloc(sizeof(double) * room);
    *steps_per_epoch = 0;
    int rc = (*k && *l) ? 0 : cli_fail(cmd, "out of memory");
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        const char *spe = strstr(line, "\"steps_per_epoch\":");
        if (spe && strstr(line, "\"event\":\"run\"")) *steps_per_epoch = atol(spe + 18);
        if (!strstr(line, "\"event\":\"step\"") || !strstr(line, "\"rank\":0,")) continue;
        const char *s = strstr(line, "\"step\":"), *lo = strstr(line, "\"loss\":");
        if (!s || !lo) continue;
        char *end;
        double loss = strtod(lo + 7, &end);
        if (end == lo + 7 || !isfinite(loss)) {
            bad_line = atol(s + 7);
            rc = cli_fail(cmd, "%s: the loss at step %ld is not a finite number", path, bad_line);
            break;
        }
        last_step = atol(s + 7);
        sum += loss;
        if (++in_window == every) {
            if (count == room) {
                room *= 2;
                double *nk = realloc(*k, sizeof(double) * room),
                       *nl = realloc(*l, sizeof(double) * room);
                if (nk) *k = nk;
                if (nl) *l = nl;
                if (!nk || !nl) {
                    rc = cli_fail(cmd, "out of memory");
                    break;
                }
            }
            (*k)[count] = (double)last_step;
            (*l)[count] = sum / every;
            count++;
            sum = 0.0;
            in_window = 0;
        }
    }
    free(line);
    fclose(f);
    *n = (int)count;
    return rc;
}

static void fit_usage(FILE *out) {
    fprintf(out, "usage: dtrain fit-loss RUN.jsonl [--target-loss X | --converge-delta D]\n"
                 "                       [--every N] [--online]\n"
                 "\n"
                 "Fits the Optimus loss curve l(k) = 1/(b0 k + b1) + b2 (b >= 0) to the training\n"
                 "loss of a run log (rank 0's steps, averaged over windows of N steps, default a\n"
                 "tenth of an epoch) and predicts the step where the loss reaches X, or where it\n"
                 "falls by less than D per step (default D = 1e-5). --online refits after every\n"
                 "epoch and shows how the predicted step moves against the one observed.\n"
                 "--save FILE writes the fit for dtrain predict --loss-fit.\n");
}

int cmd_fit_loss(int argc, char **argv) {
    static const struct option opts[] = {{"save", required_argument, 0, 's'},
                                         {"target-loss", required_argument, 0, 't'},
                                         {"converge-delta", required_argument, 0, 'd'},
                                         {"every", required_argument, 0, 'e'},
                                         {"online", no_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "fit-loss", *save = NULL;
    double target = -1, delta = 1e-5;
    long every = 0, v;
    int online = 0, opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't':
            if (cli_parse_float(cmd, "--target-loss", optarg, 1e-12, 1e12, &target)) return 2;
            break;
        case 'd':
            if (cli_parse_float(cmd, "--converge-delta", optarg, 1e-15, 1e6, &delta)) return 2;
            break;
        case 'e':
            if (cli_parse_int(cmd, "--every", optarg, 1, 1000000, &v)) return 2;
            every = v;
            break;
        case 'o':
            online = 1;
            break;
        case 's':
            save = optarg;
            break;
        case 'h':
            fit_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind != argc - 1) {
        cli_fail(cmd, "give one run log (dtrain fit-loss RUN.jsonl)");
        return 2;
    }
    const char *path = argv[optind];
    double *k = NULL, *l = NULL;
    int n = 0;
    long spe = 0;
    /* first pass for steps_per_epoch, then the real windows */
    if (read_loss_points(cmd, path, 1, &k, &l, &n, &spe)) return free(k), free(l), 1;
    if (every == 0) every = spe >= 10 ? spe / 10 : 1;
    free(k), free(l);
    if (read_loss_points(cmd, path, every, &k, &l, &n, &spe)) return free(k), free(l), 1;
    dt_loss_fit fit;
    dt_error err;
    if (dt_loss_fit_points(k, l, n, &fit, &err)) {
        cli_fail(cmd, "%s: %s", path, err.msg);
        return free(k), free(l), 1;
    }
    printf("loss curve of %s (%d points, windows of %ld steps):\n", path, n, every);
    printf("  l(k) = 1 / (%.6g k + %.6g) + %.6g   RMSE %.4g\n", fit.b0, fit.b1, fit.b2, fit.rmse);
    double pred =
        target > 0 ? dt_loss_step_for_target(&fit, target) : dt_loss_step_converged(&fit, delta);
    if (target > 0 && pred < 0)
        printf("  never reaches %.4g (the curve's floor b2 is %.4g)\n", target, fit.b2);
    else if (target > 0)
        printf("  reaches loss %.4g at step %.0f\n", target, pred);
    else
        printf("  converges (|dl/dk| < %.3g) at step %.0f\n", delta, pred);
    if (save) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "fit", "loss");
        cJSON_AddNumberToObject(root, "b0", fit.b0);
        cJSON_AddNumberToObject(root, "b1", fit.b1);
        cJSON_AddNumberToObject(root, "b2", fit.b2);
        cJSON_AddNumberToObject(root, "last_step", k[n - 1]);
        cJSON_AddNumberToObject(root, "converge_step", pred);
        if (save_json(cmd, save, root)) return free(k), free(l), 1;
    }
    if (online && spe > 0) {
        /* the step observed: where the smoothed loss first reaches the target, else the
         * full fit's prediction stands in for it */
        double observed = -1;
        if (target > 0)
            for (int i = 0; i < n && observed < 0; i++)
                if (l[i] <= target) observed = k[i];
        if (observed < 0) observed = pred;
        printf("\n  online: refit after each epoch (observed step %.0f%s)\n", observed,
               target > 0 && observed == pred ? ", the full fit's, as the target was not reached"
                                              : "");
        printf("  %6s %10s %14s %10s\n", "epoch", "points", "predicted", "error");
        for (long e = 1; e * spe <= k[n - 1] + every; e++) {
            int m = 0;
            while (m < n && k[m] < e * spe) m++;
            dt_loss_fit part;
            if (m < 3 || dt_loss_fit_points(k, l, m, &part, &err)) {
                printf("  %6ld %10d %14s %10s\n", e, m, "(too few)", "");
                continue;
            }
            double p = target > 0 ? dt_loss_step_for_target(&part, target)
                                  : dt_loss_step_converged(&part, delta);
            if (p < 0)
                printf("  %6ld %10d %14s %10s\n", e, m, "never", "");
            else
                printf("  %6ld %10d %14.0f %9.1f%%\n", e, m, p, 100.0 * (p - observed) / observed);
        }
    }
    free(k);
    free(l);
    return 0;
}

static void speed_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain fit-speed FILE.csv [--allreduce]\n"
            "\n"
            "Fits the Optimus speed model to measured step times. The CSV's header names the\n"
            "columns: workers, servers, batch (global), step_time (seconds); with --allreduce\n"
            "servers is not needed (workers = processes), and dtrain scale's runs.csv is read\n"
            "as is (step time = t_train / iterations, batch = procs x batch_size).\n"
            "Parameter server:\n"
            "  t = th0 M/w + th1 + th2 w/p + th3 w + th4 p,  all th >= 0 (NNLS)\n"
            "all-reduce:\n"
            "  t = th0 M/w + th1 + th2 2(w-1)/w + th3 (w-1)\n"
            "Prints the thetas, the fit's RMSE and each row's leave-one-out prediction error.\n"
            "--save FILE writes the fit for dtrain predict --speed-fit.\n");
}

int cmd_fit_speed(int argc, char **argv) {
    static const struct option opts[] = {{"allreduce", no_argument, 0, 'a'},
                                         {"save", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "fit-speed", *save = NULL;
    dt_speed_kind kind = DT_SPEED_PS;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'a':
            kind = DT_SPEED_ALLREDUCE;
            break;
        case 's':
            save = optarg;
            break;
        case 'h':
            speed_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind != argc - 1) {
        cli_fail(cmd, "give one CSV file (dtrain fit-speed FILE.csv)");
        return 2;
    }
    const char *path = argv[optind];
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_fail(cmd, "cannot open %s: %s", path, strerror(errno));
        return 1;
    }
    char line[1024];
    int col[4] = {-1, -1, -1, -1}, n_cols = 0; /* workers, servers, batch, step_time */
    const char *names[4] = {"workers", "servers", "batch", "step_time"};
    /* dtrain scale's runs.csv: procs, batch_size (per process), t_train, iterations */
    int sweep[4] = {-1, -1, -1, -1};
    const char *sweep_names[4] = {"procs", "batch_size", "t_train", "iterations"};
    if (fgets(line, sizeof line, f))
        for (char *t = strtok(line, ",\n\r"); t; t = strtok(NULL, ",\n\r"), n_cols++)
            for (int c = 0; c < 4; c++) {
                if (!strcmp(t, names[c])) col[c] = n_cols;
                if (!strcmp(t, sweep_names[c])) sweep[c] = n_cols;
            }
    int from_sweep = kind == DT_SPEED_ALLREDUCE && col[0] < 0 && sweep[0] >= 0 && sweep[1] >= 0 &&
                     sweep[2] >= 0 && sweep[3] >= 0;
    for (int c = 0; c < 4 && !from_sweep; c++)
        if (col[c] < 0 && !(c == 1 && kind == DT_SPEED_ALLREDUCE)) {
            fclose(f);
            cli_fail(cmd, "%s: missing column '%s'", path, names[c]);
            return 1;
        }
    dt_speed_point pts[512];
    int n = 0, lineno = 1;
    while (fgets(line, sizeof line, f) && n < 512) {
        lineno++;
        double v[64];
        int k = 0;
        for (char *t = strtok(line, ",\n\r"); t && k < 64; t = strtok(NULL, ",\n\r"))
            v[k++] = strtod(t, NULL);
        if (k == 0) continue;
        if (k < n_cols) {
            fclose(f);
            cli_fail(cmd, "%s line %d: %d fields, the header has %d", path, lineno, k, n_cols);
            return 1;
        }
        if (from_sweep) /* global batch, time per iteration */
            pts[n++] = (dt_speed_point){v[sweep[0]], 0, v[sweep[0]] * v[sweep[1]],
                                        v[sweep[3]] > 0 ? v[sweep[2]] / v[sweep[3]] : -1};
        else
            pts[n++] =
                (dt_speed_point){v[col[0]], col[1] >= 0 ? v[col[1]] : 0, v[col[2]], v[col[3]]};
    }
    fclose(f);
    dt_speed_fit fit;
    dt_error err;
    if (dt_speed_fit_points(kind, pts, n, &fit, &err)) {
        cli_fail(cmd, "%s: %s", path, err.msg);
        return 1;
    }
    printf("%s speed model from %d points of %s:\n",
           kind == DT_SPEED_PS ? "parameter-server" : "all-reduce", n, path);
    for (int i = 0; i < fit.n_theta; i++) printf("  theta%d = %.6g\n", i, fit.theta[i]);
    printf("  RMSE %.4g s\n\n  %8s %8s %8s %12s %12s %9s\n", fit.rmse, "workers", "servers",
           "batch", "measured s", "LOO pred s", "error");
    double errs[512], sorted[512];
    int n_err = 0;
    for (int i = 0; i < n; i++) { /* leave-one-out: fit without row i, predict it */
        dt_speed_point rest[512];
        int m = 0;
        for (int j = 0; j < n; j++)
            if (j != i) rest[m++] = pts[j];
        dt_speed_fit part;
        errs[i] = -1;
        if (dt_speed_fit_points(kind, rest, m, &part, &err) == 0) {
            double p = dt_speed_step_time(&part, pts[i].w, pts[i].p, pts[i].batch);
            errs[i] = fabs(p - pts[i].step_time) / pts[i].step_time;
            printf("  %8g %8g %8g %12.4f %12.4f %8.1f%%\n", pts[i].w, pts[i].p, pts[i].batch,
                   pts[i].step_time, p, 100.0 * errs[i]);
            sorted[n_err++] = errs[i];
        } else {
            printf("  %8g %8g %8g %12.4f %12s\n", pts[i].w, pts[i].p, pts[i].batch,
                   pts[i].step_time, "(too few)");
        }
    }
    if (save) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "fit", kind == DT_SPEED_PS ? "speed-ps" : "speed-allreduce");
        cJSON_AddItemToObject(root, "theta", cJSON_CreateDoubleArray(fit.theta, fit.n_theta));
        if (save_json(cmd, save, root)) return 1;
    }
    for (int i = 1; i < n_err; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && sorted[j] < sorted[j - 1]; j--) {
            double t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    if (n_err > 0)
        printf("\n  leave-one-out error: median %.1f%%, worst %.1f%% (%d rows)\n",
               100.0 * (n_err % 2 ? sorted[n_err / 2]
                                  : 0.5 * (sorted[n_err / 2 - 1] + sorted[n_err / 2])),
               100.0 * sorted[n_err - 1], n_err);
    return 0;
}

static void predict_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain predict --theta t0,t1,t2,t3,t4 --batch M --steps-per-epoch S\n"
            "                      --epochs E --servers P1,P2,.. --workers LO..HI\n"
            "\n"
            "Time to convergence (S x E steps x step time) of a parameter-server job for every\n"
            "worker count and each server count, from given speed-model parameters, and the\n"
            "best worker count for each server count (the textbook Optimus exercise).\n");
}

/* Time to convergence for every allocation up to procs_max processes, from a saved
 * loss fit (remaining steps) and speed fit, with a plot of time vs workers. */
static int predict_from_fits(const char *cmd, const char *loss_path, const char *speed_path,
                             double batch, int procs_max, const char *out_dir) {
    if (!loss_path || !speed_path || batch <= 0 || procs_max < 2) {
        cli_fail(cmd, "--loss-fit, --speed-fit, --batch and --procs-max go together");
        return 2;
    }
    cJSON *lf = load_json(cmd, loss_path);
    if (!lf) return 1;
    cJSON *sf = load_json(cmd, speed_path);
    if (!sf) return cJSON_Delete(lf), 1;
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(lf, "converge_step");
    const cJSON *last = cJSON_GetObjectItemCaseSensitive(lf, "last_step");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(sf, "fit");
    const cJSON *theta = cJSON_GetObjectItemCaseSensitive(sf, "theta");
    dt_speed_fit fit = {DT_SPEED_PS, 0, {0}, 0};
    int rc = 0;
    if (!cJSON_IsNumber(conv) || !cJSON_IsNumber(last))
        rc = cli_fail(cmd, "%s is not a loss fit (dtrain fit-loss --save)", loss_path);
    else if (!cJSON_IsString(kind) || !cJSON_IsArray(theta))
        rc = cli_fail(cmd, "%s is not a speed fit (dtrain fit-speed --save)", speed_path);
    if (rc == 0) {
        fit.kind = strcmp(kind->valuestring, "speed-ps") ? DT_SPEED_ALLREDUCE : DT_SPEED_PS;
        fit.n_theta = cJSON_GetArraySize(theta);
        for (int i = 0; i < fit.n_theta && i < DT_SPEED_MAX_THETA; i++)
            fit.theta[i] = cJSON_GetArrayItem(theta, i)->valuedouble;
    }
    double remaining = rc == 0 ? conv->valuedouble - last->valuedouble : 0;
    cJSON_Delete(lf);
    cJSON_Delete(sf);
    if (rc) return 1;
    if (remaining < 0) remaining = 0;
    dt_error err;
    if (dt_make_dirs(out_dir, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    printf("remaining steps to convergence: %.0f; global batch %g; up to %d processes\n", remaining,
           batch, procs_max);
    int ps = fit.kind == DT_SPEED_PS, best_w = 1, best_p = ps ? 1 : 0;
    double best_t = INFINITY;
    char path[4200];
    snprintf(path, sizeof path, "%s/predict.gp", out_dir);
    FILE *gp = fopen(path, "w");
    if (!gp) return cli_fail(cmd, "cannot write %s: %s", path, strerror(errno)), 1;
    fputs("set grid\nset key outside right top box\nset xlabel 'workers'\n"
          "set ylabel 'time to convergence (hours)'\nset style data linespoints\n",
          gp);
    char plot[4096] = "";
    size_t used = 0;
    for (int p = ps ? 1 : 0; p <= (ps ? procs_max - 1 : 0); p++) {
        char dat[64];
        snprintf(dat, sizeof dat, "predict_p%d.dat", p);
        snprintf(path, sizeof path, "%s/%s", out_dir, dat);
        FILE *d = fopen(path, "w");
        if (!d) return fclose(gp), cli_fail(cmd, "cannot write %s", path), 1;
        int row_best = 1;
        double row_t = INFINITY;
        for (int w = 1; w + p <= procs_max; w++) {
            double t = remaining * dt_speed_step_time(&fit, w, p, batch);
            fprintf(d, "%d %.6g\n", w, t / 3600.0);
            if (t < row_t) row_t = t, row_best = w;
        }
        fclose(d);
        if (ps) printf("  %2d servers: best %3d workers, %.3f h\n", p, row_best, row_t / 3600.0);
        if (row_t < best_t) best_t = row_t, best_w = row_best, best_p = p;
        if (p <= 4 || !ps) { /* the first few server counts */
            char title[32];
            if (ps)
                snprintf(title, sizeof title, "%d server%s", p, p > 1 ? "s" : "");
            else
                snprintf(title, sizeof title, "all-reduce");
            used += (size_t)snprintf(plot + used, sizeof plot - used, "%s'%s' title '%s'",
                                     used ? ", " : "", dat, title);
        }
    }
    if (ps)
        printf("best allocation: %d workers + %d servers, %.3f hours to convergence\n", best_w,
               best_p, best_t / 3600.0);
    else
        printf("best: %d processes, %.3f hours to convergence\n", best_w, best_t / 3600.0);
    for (int t = 0; t < 2; t++)
        fprintf(gp,
                "set terminal %s\nset output 'predict.%s'\nset title 'Predicted time to "
                "convergence'\nplot %s\n",
                t ? "svg size 900,600" : "pngcairo size 900,600", t ? "svg" : "png", plot);
    fclose(gp);
    snprintf(path, sizeof path, "cd '%s' && gnuplot predict.gp 2>/dev/null", out_dir);
    if (system(path) == 0)
        printf("plot: %s/predict.png (and .svg)\n", out_dir);
    else
        printf("plot not drawn: gnuplot failed or is missing (data in %s)\n", out_dir);
    return 0;
}

int cmd_predict(int argc, char **argv) {
    static const struct option opts[] = {{"theta", required_argument, 0, 't'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"steps-per-epoch", required_argument, 0, 's'},
                                         {"epochs", required_argument, 0, 'e'},
                                         {"servers", required_argument, 0, 'p'},
                                         {"workers", required_argument, 0, 'w'},
                                         {"loss-fit", required_argument, 0, 'L'},
                                         {"speed-fit", required_argument, 0, 'F'},
                                         {"procs-max", required_argument, 0, 'N'},
                                         {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "predict";
    dt_speed_fit fit = {DT_SPEED_PS, 5, {0}, 0};
    double batch = 0, spe = 0, epochs = 0;
    int servers[32], n_servers = 0, w_lo = 1, w_hi = 0, have_theta = 0, opt;
    const char *loss_path = NULL, *speed_path = NULL, *out_dir = "runs/predict";
    long procs_max = 0;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't': {
            int k = 0;
            char *s = optarg, *end;
            while (*s && k < 5) {
                fit.theta[k++] = strtod(s, &end);
                if (end == s || fit.theta[k - 1] < 0) break;
                s = *end == ',' ? end + 1 : end;
            }
            if (k != 5 || *s) {
                cli_fail(cmd, "--theta expects 5 non-negative numbers, got '%s'", optarg);
                return 2;
            }
            have_theta = 1;
            break;
        }
        case 'b':
            if (cli_parse_float(cmd, "--batch", optarg, 1, 1e9, &batch)) return 2;
            break;
        case 's':
            if (cli_parse_float(cmd, "--steps-per-epoch", optarg, 1, 1e12, &spe)) return 2;
            break;
        case 'e':
            if (cli_parse_float(cmd, "--epochs", optarg, 1e-6, 1e9, &epochs)) return 2;
            break;
        case 'p':
            for (char *t = strtok(optarg, ","); t && n_servers < 32; t = strtok(NULL, ","))
                if ((servers[n_servers++] = atoi(t)) < 1) {
                    cli_fail(cmd, "--servers expects positive integers");
                    return 2;
                }
            break;
        case 'w':
            if (sscanf(optarg, "%d..%d", &w_lo, &w_hi) != 2 || w_lo < 1 || w_hi < w_lo) {
                cli_fail(cmd, "--workers expects a range LO..HI like 1..99, got '%s'", optarg);
                return 2;
            }
            break;
        case 'L':
            loss_path = optarg;
            break;
        case 'F':
            speed_path = optarg;
            break;
        case 'N':
            if (cli_parse_int(cmd, "--procs-max", optarg, 2, 4096, &procs_max)) return 2;
            break;
        case 'o':
            out_dir = optarg;
            break;
        case 'h':
            predict_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (loss_path || speed_path)
        return predict_from_fits(cmd, loss_path, speed_path, batch, (int)procs_max, out_dir);
    if (!have_theta || batch <= 0 || spe <= 0 || epochs <= 0 || n_servers == 0 || w_hi == 0) {
        cli_fail(cmd, "needs --theta, --batch, --steps-per-epoch, --epochs, --servers and "
                      "--workers (see dtrain predict --help)");
        return 2;
    }
    printf("time to convergence (hours) = %g steps x step time; rows: workers\n", spe * epochs);
    printf("%8s", "workers");
    for (int s = 0; s < n_servers; s++) printf("   servers=%-4d", servers[s]);
    putchar('\n');
    int best[32];
    for (int s = 0; s < n_servers; s++) best[s] = w_lo;
    for (int w = w_lo; w <= w_hi; w++) {
        printf("%8d", w);
        for (int s = 0; s < n_servers; s++) {
            double t = dt_speed_step_time(&fit, w, servers[s], batch);
            if (t < dt_speed_step_time(&fit, best[s], servers[s], batch)) best[s] = w;
            printf("   %12.3f", spe * epochs * t / 3600.0);
        }
        putchar('\n');
    }
    for (int s = 0; s < n_servers; s++) {
        double t = dt_speed_step_time(&fit, best[s], servers[s], batch);
        printf("optimum for %d servers: %d workers, step time %.4g s, time to convergence %.3f "
               "hours\n",
               servers[s], best[s], t, spe * epochs * t / 3600.0);
    }
    return 0;
}
