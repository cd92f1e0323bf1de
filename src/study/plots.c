#include "dtrain/plots.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dtrain/runlog.h"

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

static int values(const dt_scale_study *s, int batch, int *out) {
    int n = 0;
    for (int i = 0; i < s->n_rows; i++) {
        if (s->rows[i].lr_scaled) continue;
        int v = batch ? s->rows[i].batch : s->rows[i].procs, seen = 0;
        for (int k = 0; k < n; k++) seen |= out[k] == v;
        if (!seen && n < 64) out[n++] = v;
    }
    qsort(out, (size_t)n, sizeof(int), cmp_int);
    return n;
}

static FILE *open_in(const char *dir, const char *name, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) dt_error_set(err, "cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Smoothed training loss of one run log (rank 0's steps): the mean of each 1/40 of
 * the steps. 1 if a curve was written, 0 if there is no log or no step, -1 on error. */
static int loss_curve(const char *log, FILE *out, dt_error *err) {
    if (access(log, F_OK) != 0) return 0; /* configs without a log (--times, memory stop) */
    dt_runlog_contents c;
    if (dt_runlog_load(log, &c, err)) return -1;
    long steps = 0;
    for (long i = 0; i < c.n_steps; i++) steps += c.steps[i].rank == 0;
    const long window = steps / 40 > 0 ? steps / 40 : 1;
    double sum = 0.0;
    long n = 0, total = 0;
    for (long i = 0; i < c.n_steps; i++) {
        if (c.steps[i].rank != 0) continue;
        sum += c.steps[i].loss;
        n++;
        total++;
        if (n == window) {
            fprintf(out, "%ld %.6g\n", total - window / 2, sum / n);
            sum = 0.0;
            n = 0;
        }
    }
    dt_runlog_contents_free(&c);
    return total > 0;
}

/* gnuplot SCRIPT run in DIR, its stderr to STDERR_PATH (relative to DIR); no shell,
 * so no quoting of the folder's name. 0 if it ran and succeeded. */
int dt_gnuplot_run(const char *dir, const char *script, const char *stderr_path) {
    fflush(NULL); /* or the child's copy of our buffers could be written twice */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) { /* plain descriptors here: no stdio buffers are flushed again */
        int err_fd = chdir(dir) == 0 ? open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
        int null_fd = open("/dev/null", O_RDWR);
        if (err_fd < 0 || null_fd < 0 || dup2(err_fd, STDERR_FILENO) < 0 ||
            dup2(null_fd, STDOUT_FILENO) < 0 || dup2(null_fd, STDIN_FILENO) < 0)
            _exit(127);
        char *const argv[] = {"gnuplot", (char *)script, NULL};
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int dt_plots_write(const dt_scale_study *s, const char *dir, char names[][64], int *n_names,
                   dt_error *err) {
    int procs[64], batch[64];
    int np = values(s, 0, procs), nb = values(s, 1, batch);
    *n_names = 0;
    FILE *gp = open_in(dir, "plots.gp", err);
    if (!gp) return -1;
    fputs("# Made by dtrain; redraw with: gnuplot plots.gp\n"
          "set grid\nset key outside right top box\nset style data linespoints\n"
          "set pointsize 1.2\n",
          gp);
    const char *terms[2][2] = {{"pngcairo size 960,600 font 'Sans,11'", "png"},
                               {"svg size 960,600 dynamic font 'Sans,11'", "svg"}};
    char files[DT_MAX_PLOTS][64];
    int n_files = 0;

    /* 1. strong speed-up vs processes */
    if (np >= 2) {
        for (int b = 0; b < nb; b++) {
            char name[64];
            snprintf(name, sizeof name, "speedup_b%d.dat", batch[b]);
            FILE *d = open_in(dir, name, err);
            if (!d) return fclose(gp), -1;
            for (int p = 0; p < np; p++) {
                const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
                double sp = r ? dt_scale_strong_speedup(s, r) : -1;
                if (sp > 0) fprintf(d, "%d %.6g\n", procs[p], sp);
            }
            fclose(d);
        }
        for (int t = 0; t < 2; t++) {
            fprintf(gp, "set terminal %s\nset output 'speedup.%s'\n", terms[t][0], terms[t][1]);
            fprintf(gp,
                    "set title 'Strong scaling: speed-up T(1)/T(N) of the epoch time'\n"
                    "set xlabel 'processes N (log2 scale)'\nset ylabel 'speed-up'\n"
                    "set logscale x 2\nset xrange [%g:%g]\nset yrange [0:*]\nunset logscale y\n",
                    procs[0] / 1.2, procs[np - 1] * 1.2);
            fputs("plot x with lines dashtype 2 lc rgb 'gray40' title 'ideal (S = N)'", gp);
            for (int b = 0; b < nb; b++)
                fprintf(gp, ", 'speedup_b%d.dat' using 1:2 title 'batch %d per process'", batch[b],
                        batch[b]);
            fputs("\nunset logscale x\nset xrange [*:*]\n", gp);
        }
        snprintf(files[n_files++], 64, "speedup.png");
    }

    /* 2. epoch time vs batch size, one line per process count */
    for (int p = 0; p < np; p++) {
        char name[64];
        snprintf(name, sizeof name, "epoch_p%d.dat", procs[p]);
        FILE *d = open_in(dir, name, err);
        if (!d) return fclose(gp), -1;
        for (int b = 0; b < nb; b++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            if (r) fprintf(d, "%d %.6g\n", batch[b], r->t_epoch > 0 ? r->t_epoch : r->t_train);
        }
        fclose(d);
    }
    for (int t = 0; t < 2; t++) {
        fprintf(gp, "set terminal %s\nset output 'epoch_time.%s'\n", terms[t][0], terms[t][1]);
        fputs("set title 'Epoch time vs batch size per process'\n"
              "set xlabel 'batch size per process (log2 scale)'\nset ylabel 'epoch time (s)'\n"
              "set logscale x 2\nset xrange [*:*]\nset yrange [0:*]\nplot ",
              gp);
        for (int p = 0; p < np; p++)
            fprintf(gp, "%s'epoch_p%d.dat' using 1:2 title '%d process%s'", p ? ", " : "", procs[p],
                    procs[p], procs[p] > 1 ? "es" : "");
        fputs("\nunset logscale x\n", gp);
    }
    snprintf(files[n_files++], 64, "epoch_time.png");

    /* 3. compute / communication / data wait, stacked per config */
    int have_split = 0;
    FILE *d = open_in(dir, "split.dat", err);
    if (!d) return fclose(gp), -1;
    /* no header line: gnuplot would read it as a row for all but the first column */
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            if (!r || r->t_compute < 0) continue;
            fprintf(d, "\"N=%d B=%d\" %.6g %.6g %.6g\n", procs[p], batch[b], r->t_compute,
                    r->t_comm_exposed > 0 ? r->t_comm_exposed : 0, r->t_data > 0 ? r->t_data : 0);
            have_split = 1;
        }
    fclose(d);
    if (have_split) {
        for (int t = 0; t < 2; t++) {
            fprintf(gp, "set terminal %s\nset output 'compute_comm.%s'\n", terms[t][0],
                    terms[t][1]);
            fputs("set title 'Where an epoch goes (means over ranks; N processes, batch B per "
                  "process)'\nset xlabel ''\nset ylabel 'seconds per epoch'\nset yrange [0:*]\n"
                  "set style histogram rowstacked\nset style data histograms\n"
                  "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -30\n"
                  "plot 'split.dat' using 2:xtic(1) title 'compute' lc rgb '#4477aa', '' "
                  "using 3 title 'communication (exposed)' lc rgb '#ee6677', '' using 4 title "
                  "'data wait' lc rgb '#ccbb44'\n"
                  "set style data linespoints\nset xtics norotate\n",
                  gp);
        }
        snprintf(files[n_files++], 64, "compute_comm.png");
    }

    /* 4. loss curves from the run logs, when the study has them */
    int curves = 0;
    char plot_cmd[8192] = "";
    size_t used = 0;
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < np; p++) {
            char log[4200], name[64];
            snprintf(log, sizeof log, "%s/run_p%d_b%d.jsonl", dir, procs[p], batch[b]);
            snprintf(name, sizeof name, "loss_p%d_b%d.dat", procs[p], batch[b]);
            FILE *c = open_in(dir, name, err);
            if (!c) return fclose(gp), -1;
            int ok = loss_curve(log, c, err);
            if (fclose(c) != 0 && ok >= 0)
                ok = dt_error_set(err, "cannot write %s/%s: %s", dir, name, strerror(errno));
            if (ok < 0) return fclose(gp), -1;
            if (!ok) continue;
            used += (size_t)snprintf(plot_cmd + used, sizeof plot_cmd - used,
                                     "%s'%s' using 1:2 with lines lw 2 title 'N=%d, B=%d'",
                                     curves ? ", " : "", name, procs[p], batch[b]);
            curves++;
        }
    if (curves) {
        for (int t = 0; t < 2; t++) {
            fprintf(gp, "set terminal %s\nset output 'loss.%s'\n", terms[t][0], terms[t][1]);
            fprintf(gp,
                    "set title 'Training loss (rank 0, mean over windows of steps)'\n"
                    "set xlabel 'step'\nset ylabel 'cross-entropy loss'\nset logscale y\n"
                    "set xrange [0:*]\nset yrange [*:*]\nplot %s\nunset logscale y\n",
                    plot_cmd);
        }
        snprintf(files[n_files++], 64, "loss.png");
    }
    if (fclose(gp) != 0)
        return dt_error_set(err, "cannot write %s/plots.gp: %s", dir, strerror(errno));

    if (dt_gnuplot_run(dir, "plots.gp", "gnuplot.err") != 0)
        return dt_error_set(
            err, "gnuplot failed or is missing (install gnuplot-nox); see %s/gnuplot.err", dir);
    char errf[4200];
    snprintf(errf, sizeof errf, "%s/gnuplot.err", dir);
    remove(errf);
    for (int i = 0; i < n_files; i++) memcpy(names[i], files[i], 64);
    *n_names = n_files;
    return 0;
}

int dt_plots_predict(const dt_speed_fit *fit, double remaining_steps, double batch, int procs_max,
                     const char *dir, dt_predict_row *rows, int *n_rows, int *drawn,
                     dt_error *err) {
    *n_rows = 0;
    *drawn = 0;
    const int ps = fit->kind == DT_SPEED_PS;
    char path[4200];
    snprintf(path, sizeof path, "%s/predict.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp) return dt_error_set(err, "cannot write %s: %s", path, strerror(errno));
    fputs("set grid\nset key outside right top box\nset xlabel 'workers'\n"
          "set ylabel 'time to convergence (hours)'\nset style data linespoints\n",
          gp);
    char plot[4096] = "";
    size_t used = 0;
    for (int p = ps ? 1 : 0; p <= (ps ? procs_max - 1 : 0); p++) {
        char dat[64];
        snprintf(dat, sizeof dat, "predict_p%d.dat", p);
        snprintf(path, sizeof path, "%s/%s", dir, dat);
        FILE *d = fopen(path, "w");
        if (!d) return fclose(gp), dt_error_set(err, "cannot write %s", path);
        dt_predict_row row = {p, 1, INFINITY};
        for (int w = 1; w + p <= procs_max; w++) {
            double t = remaining_steps * dt_speed_step_time(fit, w, p, batch);
            fprintf(d, "%d %.6g\n", w, t / 3600.0);
            if (t < row.best_seconds) row.best_seconds = t, row.best_workers = w;
        }
        if (fclose(d) != 0) return fclose(gp), dt_error_set(err, "cannot write %s", path);
        rows[(*n_rows)++] = row;
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
    for (int t = 0; t < 2; t++)
        fprintf(gp,
                "set terminal %s\nset output 'predict.%s'\nset title 'Predicted time to "
                "convergence'\nplot %s\n",
                t ? "svg size 900,600" : "pngcairo size 900,600", t ? "svg" : "png", plot);
    if (fclose(gp) != 0)
        return dt_error_set(err, "cannot write %s/predict.gp: %s", dir, strerror(errno));
    *drawn = dt_gnuplot_run(dir, "predict.gp", "/dev/null") == 0;
    return 0;
}
