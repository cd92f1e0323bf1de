#include "dtrain/plots.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* Smoothed training loss of one run log: the mean of each 1/40 of the steps. */
static int loss_curve(const char *log, FILE *out) {
    FILE *f = fopen(log, "r");
    if (!f) return 0;
    char line[1024];
    double sum = 0.0;
    long n = 0, total = 0, steps = 0;
    while (fgets(line, sizeof line, f)) /* count first, to size the windows */
        steps += strstr(line, "\"event\":\"step\"") && strstr(line, "\"rank\":0") ? 1 : 0;
    rewind(f);
    long window = steps / 40 > 0 ? steps / 40 : 1;
    while (fgets(line, sizeof line, f)) {
        const char *l = strstr(line, "\"loss\":");
        if (!strstr(line, "\"event\":\"step\"") || !l) continue;
        sum += atof(l + 7);
        n++;
        total++;
        if (n == window) {
            fprintf(out, "%ld %.6g\n", total - window / 2, sum / n);
            sum = 0.0;
            n = 0;
        }
    }
    fclose(f);
    return total > 0;
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
            int ok = loss_curve(log, c);
            fclose(c);
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
    fclose(gp);

    char cmd[4400];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp 2>gnuplot.err", dir);
    int rc = system(cmd);
    if (rc != 0)
        return dt_error_set(
            err, "gnuplot failed or is missing (install gnuplot-nox); see %s/gnuplot.err", dir);
    char errf[4200];
    snprintf(errf, sizeof errf, "%s/gnuplot.err", dir);
    remove(errf);
    for (int i = 0; i < n_files; i++) memcpy(names[i], files[i], 64);
    *n_names = n_files;
    return 0;
}
