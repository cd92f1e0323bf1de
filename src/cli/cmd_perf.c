/* The performance-model commands: fit-loss, fit-speed, predict. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "perfmodel/fitfile.h"
#include "perfmodel/perfinput.h"
#include "perfmodel/perfmodel.h"
#include "study/plots.h"
#include "study/sweep.h"

static void fit_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain fit-loss RUN.jsonl|LOSS.csv [--target-loss X | --converge-delta D]\n"
            "                       [--every N] [--drop-last K] [--tail N] [--online]\n"
            "                       [--save FILE] [--out DIR]\n"
            "\n"
            "Fits the Optimus loss curve l(k) = 1/(b0 k + b1) + b2 (b >= 0) to the training\n"
            "loss of a run log (rank 0's steps, averaged over windows of N steps, default a\n"
            "tenth of an epoch) and predicts the step where the loss reaches X, or where it\n"
            "falls by less than D per step (default D = 1e-5). --online refits after every\n"
            "epoch (at most 10000) and shows how the predicted step moves: against the step\n"
            "observed with --target-loss (no error if the log never reaches X), else against\n"
            "the full fit's own prediction. A fit with b1 = 0 (on its bound: l(0) infinite,\n"
            "no finite start) is flagged, and marked in the --save file.\n"
            "With --target-loss, also the step observed: the first whose smoothed loss is\n"
            "<= X. --save FILE writes the fit (and with --target-loss, X and the observed\n"
            "step) for dtrain predict --loss-fit.\n"
            "A file ending in .csv is a loss curve as users have it: a header naming the\n"
            "columns step,loss or epoch,loss (required; other columns ignored), then a row\n"
            "per point (--every N averages windows of N rows; default 1); with epoch,loss\n"
            "the fit and its predictions are in epochs.\n"
            "--drop-last K leaves the last K points out of the fit (a learning-rate drop\n"
            "at the end, a spike); --tail N then fits only the last N points (the curve\n"
            "late in training). --out DIR draws the observed points (those left out\n"
            "marked) and the fitted curve: DIR/loss_fit.png and .svg (gnuplot).\n");
}

int cmd_fit_loss(int argc, char **argv) {
    static const struct option opts[] = {{"save", required_argument, 0, 's'},
                                         {"target-loss", required_argument, 0, 't'},
                                         {"converge-delta", required_argument, 0, 'd'},
                                         {"every", required_argument, 0, 'e'},
                                         {"online", no_argument, 0, 'o'},
                                         {"drop-last", required_argument, 0, 'D'},
                                         {"tail", required_argument, 0, 'T'},
                                         {"out", required_argument, 0, 'O'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "fit-loss", *save = NULL, *out_dir = NULL;
    double target = -1, delta = 1e-5;
    long every = 0, v, drop_last = 0, tail = 0;
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
        case 'D':
            if (cli_parse_int(cmd, "--drop-last", optarg, 0, 100000000, &drop_last)) return 2;
            break;
        case 'T':
            if (cli_parse_int(cmd, "--tail", optarg, 3, 100000000, &tail)) return 2;
            break;
        case 'O':
            out_dir = optarg;
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
        cli_fail(cmd, "give one run log or loss CSV (dtrain fit-loss RUN.jsonl|LOSS.csv)");
        return 2;
    }
    const char *path = argv[optind];
    const dt_fit_loss_opts o = {path, every, drop_last, tail, target, delta, online};
    dt_fit_loss_result r;
    dt_error err;
    const int failed = dt_fit_loss(&o, &r, &err);
    if (r.truncated_lines)
        fprintf(stderr,
                "note: the last line of %s is cut short (a run stopped while writing); "
                "left out\n",
                path);
    if (failed) return cli_fail(cmd, "%s", err.msg), r.bad_flag ? 2 : 1;
    const double *k = r.pts.step, *l = r.pts.loss;
    const int n = r.pts.n;
    const long spe = r.pts.steps_per_epoch;
    every = r.pts.every;
    const dt_loss_fit fit = r.fit;
    const char *unit = r.pts.unit;
    const double pred = r.predicted, seen = r.observed;
    if (r.csv)
        printf("loss curve of %s (%d points of %d, %s,loss", path, n, r.all.n, unit);
    else
        printf("loss curve of %s (%d points of %d, windows of %ld steps", path, n, r.all.n, every);
    if (drop_last > 0) printf("; the last %ld left out", drop_last);
    if (tail > 0) printf("; the last %d before them fitted", n);
    printf("):\n");
    printf("  l(k) = 1 / (%.6g k + %.6g) + %.6g   RMSE %.4g\n", fit.b0, fit.b1, fit.b2, fit.rmse);
    if (dt_loss_fit_b1_at_bound(&fit))
        printf("  b1 at its bound: the fit has no finite start; treat with care\n");
    if (target > 0 && pred < 0)
        printf("  never reaches %.4g (the curve's floor b2 is %.4g)\n", target, fit.b2);
    else if (target > 0)
        printf("  reaches loss %.4g at %s %.0f\n", target, unit, pred);
    else
        printf("  converges (|dl/dk| < %.3g) at %s %.0f\n", delta, unit, pred);
    /* the step observed: where the smoothed loss first reaches the target */
    if (target > 0 && seen >= 0)
        printf("  observed: the smoothed loss first reaches %.4g at %s %.0f\n", target, unit, seen);
    else if (target > 0)
        printf("  observed: the smoothed loss never reaches %.4g (lowest window %.4g)\n", target,
               r.lowest);
    if (save) {
        if (dt_loss_fit_save(save, &fit, k[n - 1], pred, target, seen, &err))
            return cli_fail(cmd, "%s", err.msg), dt_fit_loss_free(&r), 1;
        fprintf(stderr, "fit saved to %s\n", save);
    }
    if (online && spe > 0 && (k[n - 1] + every) / spe > 10000) { /* a line per epoch */
        cli_fail(cmd, "%s: --online would print %.0f epochs of %g steps (at most 10000)", path,
                 (k[n - 1] + every) / spe, (double)spe);
        return dt_fit_loss_free(&r), 1;
    }
    if (online && spe > 0) {
        /* what each refit is set against: with a target, the step observed (none when the
         * log never reaches it); without one nothing is observed, so the full fit's own
         * prediction, said so */
        const double ref = target > 0 ? seen : pred;
        const char *col = target > 0 ? "error" : "vs full fit";
        if (target > 0 && seen >= 0)
            printf("\n  online: refit after each epoch; error against the step observed (%.0f)\n",
                   seen);
        else if (target > 0)
            printf("\n  online: refit after each epoch; the smoothed loss never reaches %.4g in "
                   "this log: no step observed, no error\n",
                   target);
        else if (pred > 0)
            printf("\n  online: refit after each epoch; nothing observed (no target): set against "
                   "the full fit's predicted step %.0f, from all %d points\n",
                   pred, n);
        else
            printf("\n  online: refit after each epoch; nothing observed (no target), and the "
                   "full fit does not converge: predictions only\n");
        if (ref > 0)
            printf("  %6s %10s %14s %11s\n", "epoch", "points", "predicted", col);
        else
            printf("  %6s %10s %14s\n", "epoch", "points", "predicted");
        dt_loss_refit *rows;
        int n_rows;
        if (dt_loss_refit_per_epoch(k, l, n, spe, every, target, delta, &rows, &n_rows, &err))
            return cli_fail(cmd, "%s", err.msg), dt_fit_loss_free(&r), 1;
        for (int i = 0; i < n_rows; i++) {
            const dt_loss_refit *r = &rows[i];
            const double p = r->predicted;
            const char *bound = r->b1_at_bound ? "  (b1 at its bound)" : "";
            if (!r->fitted)
                printf("  %6ld %10d %14s\n", r->epoch, r->points, "(too few)");
            else if (p < 0)
                printf("  %6ld %10d %14s%s\n", r->epoch, r->points, "never", bound);
            else if (ref > 0)
                printf("  %6ld %10d %14.0f %10.1f%%%s\n", r->epoch, r->points, p,
                       100.0 * (p - ref) / ref, bound);
            else
                printf("  %6ld %10d %14.0f%s\n", r->epoch, r->points, p, bound);
        }
        free(rows);
    }
    int rc = 0, drawn = 0;
    if (out_dir && dt_plots_loss_fit(&r.all, r.first, n, &fit, pred, out_dir, &drawn, &err))
        rc = (cli_fail(cmd, "%s", err.msg), 1);
    else if (out_dir && drawn)
        fprintf(stderr, "plot: %s/loss_fit.png (and .svg)\n", out_dir);
    else if (out_dir)
        fprintf(stderr, "plot not drawn: gnuplot failed or is missing (data in %s)\n", out_dir);
    dt_fit_loss_free(&r);
    return rc;
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
    static dt_speed_point pts[DT_SPEED_MAX_POINTS];
    int n = 0;
    dt_error err;
    if (dt_speed_points_read_csv(path, kind, pts, &n, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    dt_speed_fit fit;
    if (dt_speed_fit_points(kind, pts, n, &fit, &err)) {
        cli_fail(cmd, "%s: %s", path, err.msg);
        return 1;
    }
    printf("%s speed model from %d points of %s:\n",
           kind == DT_SPEED_PS ? "parameter-server" : "all-reduce", n, path);
    for (int i = 0; i < fit.n_theta; i++) printf("  theta%d = %.6g\n", i, fit.theta[i]);
    printf("  RMSE %.4g s\n\n  %8s %8s %8s %12s %12s %9s\n", fit.rmse, "workers", "servers",
           "batch", "measured s", "LOO pred s", "error");
    static double pred[DT_SPEED_MAX_POINTS], rel_err[DT_SPEED_MAX_POINTS];
    dt_loo_summary loo;
    if (dt_speed_leave_one_out(kind, pts, n, pred, rel_err, &loo, &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    for (int i = 0; i < n; i++) {
        if (rel_err[i] >= 0)
            printf("  %8g %8g %8g %12.4f %12.4f %8.1f%%\n", pts[i].w, pts[i].p, pts[i].batch,
                   pts[i].step_time, pred[i], 100.0 * rel_err[i]);
        else
            printf("  %8g %8g %8g %12.4f %12s\n", pts[i].w, pts[i].p, pts[i].batch,
                   pts[i].step_time, "(too few)");
    }
    if (save) {
        if (dt_speed_fit_save(save, &fit, &err)) return cli_fail(cmd, "%s", err.msg), 1;
        fprintf(stderr, "fit saved to %s\n", save);
    }
    if (loo.n > 0)
        printf("\n  leave-one-out error: median %.1f%%, worst %.1f%% (%d rows)\n",
               100.0 * loo.median, 100.0 * loo.worst, loo.n);
    return 0;
}

static void predict_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain predict --theta t0,t1,t2,t3,t4 --batch M --steps-per-epoch S\n"
            "                      --epochs E --servers P1,P2,.. --workers LO..HI\n"
            "\n"
            "Time to convergence (S x E steps x step time) of a parameter-server job for every\n"
            "worker count and each server count, from given speed-model parameters, and the\n"
            "best worker count for each server count (the textbook Optimus exercise).\n"
            "A range covers at most 65536 worker counts (a line each).\n"
            "With --out DIR, also writes DIR/predict.csv (the table) and DIR/predict.png\n"
            "and .svg (hours vs workers, one line per server count; gnuplot).\n");
}

/* Time to convergence for every allocation up to procs_max processes, from a saved
 * loss fit (remaining steps) and speed fit, with a plot of time vs workers. */
static int predict_from_fits(const char *cmd, const char *loss_path, const char *speed_path,
                             double batch, int procs_max, const char *out_dir) {
    if (!loss_path || !speed_path || batch <= 0 || procs_max < 2) {
        cli_fail(cmd, "--loss-fit, --speed-fit, --batch and --procs-max go together");
        return 2;
    }
    dt_loss_fit loss;
    dt_speed_fit fit;
    double last_step, converge_step;
    dt_error err;
    if (dt_loss_fit_load(loss_path, &loss, &last_step, &converge_step, &err) ||
        dt_speed_fit_load(speed_path, &fit, &err) || dt_make_dirs(out_dir, &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    double remaining = converge_step - last_step;
    if (remaining < 0) remaining = 0;
    printf("remaining steps to convergence: %.0f; global batch %g; up to %d processes\n", remaining,
           batch, procs_max);
    dt_predict_row *rows = malloc(sizeof *rows * (size_t)procs_max);
    int n_rows = 0, drawn = 0;
    if (!rows) return cli_fail(cmd, "out of memory"), 1;
    if (dt_plots_predict(&fit, remaining, batch, procs_max, out_dir, rows, &n_rows, &drawn, &err))
        return free(rows), cli_fail(cmd, "%s", err.msg), 1;
    const int ps = fit.kind == DT_SPEED_PS;
    dt_predict_row best = {ps ? 1 : 0, 1, INFINITY};
    for (int i = 0; i < n_rows; i++) {
        if (ps)
            printf("  %2d servers: best %3d workers, %.3f h\n", rows[i].servers,
                   rows[i].best_workers, rows[i].best_seconds / 3600.0);
        if (rows[i].best_seconds < best.best_seconds) best = rows[i];
    }
    free(rows);
    if (ps)
        printf("best allocation: %d workers + %d servers, %.3f hours to convergence\n",
               best.best_workers, best.servers, best.best_seconds / 3600.0);
    else
        printf("best: %d processes, %.3f hours to convergence\n", best.best_workers,
               best.best_seconds / 3600.0);
    if (drawn)
        printf("plot: %s/predict.png (and .svg)\n", out_dir);
    else
        printf("plot not drawn: gnuplot failed or is missing (data in %s)\n", out_dir);
    return 0;
}

/* A whole positive int starting at text; *end after it. -1 if there is none. */
static int positive_int(const char *text, char **end, int *out) {
    errno = 0;
    long v = strtol(text, end, 10);
    if (*end == text || errno || v < 1 || v > 1 << 24 || !isdigit((unsigned char)*text)) return -1;
    *out = (int)v;
    return 0;
}

/* "2,4,8" -> counts (at most max); -1 on anything else. */
static int parse_counts(const char *text, int *out, int max) {
    int n = 0;
    for (const char *p = text;; p++) {
        char *end;
        if (n == max || positive_int(p, &end, &out[n++])) return -1;
        if (!*end) return n;
        if (*end != ',') return -1;
        p = end;
    }
}

/* "LO..HI" with 1 <= LO <= HI. */
static int parse_range(const char *text, int *lo, int *hi) {
    char *end;
    if (positive_int(text, &end, lo) || strncmp(end, "..", 2)) return -1;
    if (positive_int(end + 2, &end, hi) || *end || *hi < *lo) return -1;
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
    int out_given = 0;
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
                if (end == s || !(fit.theta[k - 1] >= 0) || !isfinite(fit.theta[k - 1])) break;
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
            if ((n_servers = parse_counts(optarg, servers, 32)) < 0) {
                cli_fail(cmd, "--servers expects positive integers");
                return 2;
            }
            break;
        case 'w':
            if (parse_range(optarg, &w_lo, &w_hi)) {
                cli_fail(cmd, "--workers expects a range LO..HI like 1..99, got '%s'", optarg);
                return 2;
            }
            if (w_hi - w_lo >= 65536) { /* a table line per count */
                cli_fail(cmd, "--workers %s: at most 65536 worker counts", optarg);
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
            out_given = 1;
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
    if (!out_given) return 0;
    int drawn = 0;
    dt_error err;
    if (dt_plots_theta_table(&fit, servers, n_servers, w_lo, w_hi, batch, spe * epochs, out_dir,
                             &drawn, &err))
        return cli_fail(cmd, "%s", err.msg), 1;
    printf("table: %s/predict.csv; %s\n", out_dir,
           drawn ? "plot: predict.png (and .svg)" : "plot not drawn: gnuplot failed or is missing");
    return 0;
}
