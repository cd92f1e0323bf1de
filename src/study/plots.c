#include "study/plots.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/gnuplot.h"
#include "core/outfile.h"
#include "metrics/runlog.h"
#include "study/sweep.h"
#include "study/tta.h"

/* The plots' data and scripts are written whole or not at all, like every output
 * (outfile.h): a killed or failed study never leaves half a .dat for gnuplot. */
static int open_in(dt_outfile *o, const char *dir, const char *name, dt_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return dt_outfile_open(o, path, err);
}

/* Ends a file opened by open_in: committed if keep (-1 with the error if any write
 * failed), else discarded. */
static int close_in(dt_outfile *o, int keep, dt_error *err) {
    if (!keep) {
        dt_outfile_discard(o);
        return 0;
    }
    return dt_outfile_commit(o, err);
}

/* Smoothed training loss of one run log (tta.h's windows) as "step loss" lines. 1 if a
 * curve was written, 0 if there is no log or no step, -1 on error. */
static int loss_curve(const char *log, FILE *out, dt_error *err) {
    double k[DT_TTA_CURVE_POINTS], l[DT_TTA_CURVE_POINTS], first;
    int n;
    long steps;
    const int got = dt_tta_loss_curve(log, k, l, &n, &first, &steps, err);
    for (int i = 0; got > 0 && i < n; i++) fprintf(out, "%.0f %.6g\n", k[i], l[i]);
    return got;
}

/* gnuplot SCRIPT run in DIR, its stderr to STDERR_PATH (relative to DIR); no shell,
 * so no quoting of the folder's name. 0 if it ran and succeeded. */
/* What every plot needs: the study, the output folder, the gnuplot script being
 * written, and the distinct process counts and batch sizes. */
typedef struct plotter {
    const dt_scale_study *s;
    const char *dir;
    FILE *gp;
    int procs[64], batch[64];
    int np, nb;
    char util[64][64]; /* the utilisation plots written (PNG names) */
    int n_util;
} plotter;

/* PNG and SVG of each plot: the script draws it once per terminal. */
static const char *const terms[2][2] = {{"pngcairo size 960,600 font 'Sans,11'", "png"},
                                        {"svg size 960,600 dynamic font 'Sans,11'", "svg"}};

/* Curve styles: a colour per batch size and a dash pattern per process count, so no
 * two configs' curves look alike. The colours are Paul Tol's qualitative schemes
 * (bright, then muted; colour-blind safe) while the batch sizes fit, else as many
 * evenly spaced hues as there are batch sizes. */
static void batch_colour(const plotter *pl, int b, char out[8]) {
    static const char *const tol[] = {"#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee",
                                      "#aa3377", "#332288", "#999933", "#882255", "#bbbbbb"};
    if (pl->nb <= (int)(sizeof tol / sizeof *tol)) {
        memcpy(out, tol[b], 8);
        return;
    }
    /* hue b/nb at saturation and value 0.8 (HSV to RGB) */
    const double h = 6.0 * b / pl->nb, v = 0.8, c = 0.8 * v, x = c * (1 - fabs(fmod(h, 2) - 1));
    const int sector = (int)h;
    const double r = sector == 0 || sector == 5 ? c : sector == 1 || sector == 4 ? x : 0;
    const double g = sector == 1 || sector == 2 ? c : sector == 0 || sector == 3 ? x : 0;
    const double bl = sector == 3 || sector == 4 ? c : sector == 2 || sector == 5 ? x : 0;
    const double m = v - c;
    snprintf(out, 8, "#%02x%02x%02x", (int)lround(255 * (r + m)), (int)lround(255 * (g + m)),
             (int)lround(255 * (bl + m)));
}

/* gnuplot's dash types 1-5 (solid, dashed, dotted, dash-dot, dash-dot-dot), then a
 * pattern of its own per process count past them. */
static void procs_dash(int p, char *out, size_t size) {
    if (p < 5)
        snprintf(out, size, "%d", p + 1);
    else
        snprintf(out, size, "(%d,6,2,6)", 2 * p);
}

/* " lc rgb '#rrggbb' dt D" of config (batch index b, process index p) */
static void curve_style(const plotter *pl, int b, int p, char *out, size_t size) {
    char colour[8], dash[32];
    batch_colour(pl, b, colour);
    procs_dash(p, dash, sizeof dash);
    snprintf(out, size, " lc rgb '%s' dt %s", colour, dash);
}

/* Busy configs (the tables' "busy", the reading's "re-run") are circled on the plots
 * that show one point per config, one legend entry for them all: name holds "x y"
 * lines of the busy points; without one there is no file (one left by an earlier
 * report of the folder, when configs were busy, goes: it no longer describes it). */
static const char BUSY_STYLE[] =
    "with points pt 6 ps 2.8 lw 2 lc rgb 'black' title 'busy (re-run)'";

static int busy_points(plotter *pl, const char *name, const double (*xy)[2], int n, int *kept,
                       dt_error *err) {
    dt_outfile d;
    if (open_in(&d, pl->dir, name, err)) return -1;
    for (int i = 0; i < n; i++) fprintf(d.f, "%.6g %.6g\n", xy[i][0], xy[i][1]);
    *kept = n > 0;
    if (close_in(&d, n > 0, err)) return -1;
    if (n == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", pl->dir, name);
        if (unlink(path) != 0 && errno != ENOENT)
            return dt_error_set(err, "cannot remove %s: %s", path, strerror(errno));
    }
    return 0;
}

/* 1. Strong speed-up vs processes, one line per batch size. 1 if drawn, 0 if the
 * study has a single process count, -1 on error. */
static int plot_speedup(plotter *pl, dt_error *err) {
    int any_busy;
    if (pl->np < 2) /* no plot: nor the busy points an earlier report drew on one */
        return busy_points(pl, "speedup_busy.dat", NULL, 0, &any_busy, err) ? -1 : 0;
    double busy[64 * 64][2];
    int n_busy = 0;
    int points[64]; /* per batch size; a batch size without a speed-up has no file */
    for (int b = 0; b < pl->nb; b++) {
        char name[64];
        snprintf(name, sizeof name, "speedup_b%d.dat", pl->batch[b]);
        dt_outfile d;
        if (open_in(&d, pl->dir, name, err)) return -1;
        points[b] = 0;
        for (int p = 0; p < pl->np; p++) {
            const dt_scale_row *r = dt_scale_find(pl->s, pl->procs[p], pl->batch[b], 0);
            double sp = r ? dt_scale_strong_speedup(pl->s, r) : -1;
            if (sp > 0) fprintf(d.f, "%d %.6g\n", pl->procs[p], sp), points[b]++;
            if (sp > 0 && dt_scale_speedup_busy(pl->s, r))
                busy[n_busy][0] = pl->procs[p], busy[n_busy++][1] = sp;
        }
        if (close_in(&d, points[b] > 0, err)) return -1;
    }
    if (busy_points(pl, "speedup_busy.dat", (const double(*)[2])busy, n_busy, &any_busy, err))
        return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(pl->gp, "set terminal %s\nset output 'speedup.%s'\n", terms[t][0], terms[t][1]);
        fprintf(pl->gp,
                "set title 'Strong scaling: speed-up T(1)/T(N) of the training time'\n"
                "set xlabel 'processes N (log2 scale)'\nset ylabel 'speed-up'\n"
                "set logscale x 2\nset xrange [%g:%g]\nset yrange [0:*]\nunset logscale y\n",
                pl->procs[0] / 1.2, pl->procs[pl->np - 1] * 1.2);
        fputs("plot x with lines dashtype 2 lc rgb 'gray40' title 'ideal (S = N)'", pl->gp);
        for (int b = 0; b < pl->nb; b++) {
            if (!points[b]) continue;
            char colour[8]; /* the batch size's colour, as in the loss plot */
            batch_colour(pl, b, colour);
            fprintf(pl->gp,
                    ", 'speedup_b%d.dat' using 1:2 lc rgb '%s' title 'batch %d per process'",
                    pl->batch[b], colour, pl->batch[b]);
        }
        if (any_busy) fprintf(pl->gp, ", 'speedup_busy.dat' using 1:2 %s", BUSY_STYLE);
        fputs("\nunset logscale x\nset xrange [*:*]\n", pl->gp);
    }
    return 1;
}

/* 2. Epoch time vs batch size, one line per process count: the running time of the
 * measured epoch (t_epoch: the training loop's wall time, data waits included,
 * evaluation excluded; the slowest rank) when every config has it, else the training
 * time (t_train: without data waits), the one quantity for every point, named on the
 * axis. */
static int plot_epoch_time(plotter *pl, dt_error *err) {
    int running = 1;
    for (int i = 0; i < pl->s->n_rows; i++) running &= pl->s->rows[i].t_epoch > 0;
    /* dtrain simulate's study (data "simulated"): steps x the simulated step time */
    const int simulated = !strcmp(pl->s->data, "simulated");
    double busy[64 * 64][2];
    int n_busy = 0, any_busy;
    for (int p = 0; p < pl->np; p++) {
        char name[64];
        snprintf(name, sizeof name, "epoch_p%d.dat", pl->procs[p]);
        dt_outfile d;
        if (open_in(&d, pl->dir, name, err)) return -1;
        for (int b = 0; b < pl->nb; b++) {
            const dt_scale_row *r = dt_scale_find(pl->s, pl->procs[p], pl->batch[b], 0);
            const double t = !r ? -1 : running ? r->t_epoch : r->t_train;
            if (!(t > 0)) continue; /* unknown: no point */
            fprintf(d.f, "%d %.6g\n", pl->batch[b], t);
            if (r->busy) busy[n_busy][0] = pl->batch[b], busy[n_busy++][1] = t;
        }
        if (close_in(&d, 1, err)) return -1;
    }
    if (busy_points(pl, "epoch_busy.dat", (const double(*)[2])busy, n_busy, &any_busy, err))
        return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(pl->gp, "set terminal %s\nset output 'epoch_time.%s'\n", terms[t][0], terms[t][1]);
        fprintf(pl->gp,
                "set title '%s vs batch size per process'\n"
                "set xlabel 'batch size per process (log2 scale)'\nset ylabel '%s' noenhanced\n"
                "set logscale x 2\nset xrange [*:*]\nset yrange [0:*]\nplot ",
                simulated ? "Simulated time of an epoch"
                : running ? "Running time of the measured epoch"
                          : "Training time of the measured epoch",
                simulated ? "simulated time per epoch (s: steps x simulated step, no data "
                            "loading)"
                : running ? "running time per epoch, t_epoch (s: with data waits, without "
                            "evaluation)"
                          : "training time per epoch, t_train (s: without data waits)");
        for (int p = 0; p < pl->np; p++)
            fprintf(pl->gp, "%s'epoch_p%d.dat' using 1:2 title '%d process%s'", p ? ", " : "",
                    pl->procs[p], pl->procs[p], pl->procs[p] > 1 ? "es" : "");
        if (any_busy) fprintf(pl->gp, ", 'epoch_busy.dat' using 1:2 %s", BUSY_STYLE);
        fputs("\nunset logscale x\n", pl->gp);
    }
    return 1;
}

/* 3. Compute / exposed communication / data wait, stacked per config; 0 without a
 * measured split (a --times CSV of totals). */
static int plot_split(plotter *pl, dt_error *err) {
    int have_split = 0;
    dt_outfile d;
    if (open_in(&d, pl->dir, "split.dat", err)) return -1;
    /* no header line: gnuplot would read it as a row for all but the first column */
    for (int b = 0; b < pl->nb; b++)
        for (int p = 0; p < pl->np; p++) {
            const dt_scale_row *r = dt_scale_find(pl->s, pl->procs[p], pl->batch[b], 0);
            if (!r || r->t_compute < 0) continue;
            fprintf(d.f, "\"N=%d B=%d\" %.6g %.6g %.6g\n", pl->procs[p], pl->batch[b], r->t_compute,
                    r->t_comm_exposed > 0 ? r->t_comm_exposed : 0, r->t_data > 0 ? r->t_data : 0);
            have_split = 1;
        }
    if (close_in(&d, have_split, err)) return -1; /* no empty file */
    if (!have_split) return 0;
    for (int t = 0; t < 2; t++) {
        fprintf(pl->gp, "set terminal %s\nset output 'compute_comm.%s'\n", terms[t][0],
                terms[t][1]);
        fputs("set title 'Where an epoch goes (means over ranks; N processes, batch B per "
              "process)'\nset xlabel ''\nset ylabel 'seconds per epoch'\nset yrange [0:*]\n"
              "set style histogram rowstacked\nset style data histograms\n"
              "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset xtics rotate by -30\n"
              "plot 'split.dat' using 2:xtic(1) title 'compute' lc rgb '#4477aa', '' "
              "using 3 title 'communication (exposed)' lc rgb '#ee6677', '' using 4 title "
              "'data wait' lc rgb '#ccbb44'\n"
              "set style data linespoints\nset xtics norotate\n",
              pl->gp);
    }
    return 1;
}

/* The plot command's list of one curve per config with data: "'NAME' using U STYLE
 * TITLE, ..." for the configs marked in has[b * np + p] (written in full, whatever
 * their number: a 144-config study draws 144 curves), each in its batch size's colour
 * and its process count's dashes (curve_style). */
static void plot_curves(const plotter *pl, const unsigned char *has, const char *prefix,
                        const char *using) {
    int first = 1;
    for (int b = 0; b < pl->nb; b++)
        for (int p = 0; p < pl->np; p++) {
            if (!has[b * pl->np + p]) continue;
            char style[64];
            curve_style(pl, b, p, style, sizeof style);
            fprintf(pl->gp, "%s'%s_p%d_b%d.dat' %s%s title 'N=%d, B=%d'", first ? "" : ", ", prefix,
                    pl->procs[p], pl->batch[b], using, style, pl->procs[p], pl->batch[b]);
            first = 0;
        }
}

/* 4. Loss curves from the run logs, when the study has them. */
static int plot_loss(plotter *pl, dt_error *err) {
    int curves = 0;
    unsigned char has[64 * 64] = {0};
    for (int b = 0; b < pl->nb; b++)
        for (int p = 0; p < pl->np; p++) {
            char log[4200], name[64];
            dt_scale_log_path(log, sizeof log, pl->dir, pl->procs[p], pl->batch[b], 0, 0);
            snprintf(name, sizeof name, "loss_p%d_b%d.dat", pl->procs[p], pl->batch[b]);
            dt_outfile c;
            if (open_in(&c, pl->dir, name, err)) return -1;
            int ok = loss_curve(log, c.f, err); /* kept only with a curve: no empty files */
            if (close_in(&c, ok > 0, err) || ok < 0) return -1;
            has[b * pl->np + p] = ok > 0;
            curves += ok > 0;
        }
    if (!curves) return 0;
    for (int t = 0; t < 2; t++) {
        fprintf(pl->gp, "set terminal %s\nset output 'loss.%s'\n", terms[t][0], terms[t][1]);
        fputs("set title 'Training loss (rank 0, mean over windows of steps)'\n"
              "set xlabel 'step'\nset ylabel 'cross-entropy loss'\nset logscale y\n"
              "set xrange [0:*]\nset yrange [*:*]\nplot ",
              pl->gp);
        plot_curves(pl, has, "loss", "using 1:2 with lines lw 2");
        fputs("\nunset logscale y\n", pl->gp);
    }
    return 1;
}

/* 6. Test accuracy during training (--eval-every's eval records) against training
 * wall time and against steps, one line per config. 0 without eval records. */
static int plot_accuracy(plotter *pl, dt_error *err) {
    int curves = 0;
    unsigned char has[64 * 64] = {0};
    for (int b = 0; b < pl->nb; b++)
        for (int p = 0; p < pl->np; p++) {
            char log[4200], name[64];
            dt_scale_log_path(log, sizeof log, pl->dir, pl->procs[p], pl->batch[b], 0, 0);
            if (access(log, F_OK) != 0) continue;
            dt_runlog_contents c;
            if (dt_runlog_load(log, &c, err)) return -1;
            if (c.n_evals == 0) {
                dt_runlog_contents_free(&c);
                continue;
            }
            snprintf(name, sizeof name, "accuracy_p%d_b%d.dat", pl->procs[p], pl->batch[b]);
            dt_outfile d;
            if (open_in(&d, pl->dir, name, err)) return dt_runlog_contents_free(&c), -1;
            for (long i = 0; i < c.n_evals; i++)
                fprintf(d.f, "%.6g %ld %.6g\n", c.evals[i].t_train, c.evals[i].step,
                        100.0 * c.evals[i].test_acc);
            dt_runlog_contents_free(&c);
            if (close_in(&d, 1, err)) return -1;
            has[b * pl->np + p] = 1;
            curves++;
        }
    if (!curves) return 0;
    for (int t = 0; t < 2; t++) {
        fprintf(pl->gp,
                "set terminal %s\nset output 'accuracy.%s'\nset multiplot layout 2,1 title "
                "'Test accuracy during training (eval records)'\nset yrange [0:100]\n"
                "set ylabel 'test accuracy (%%)'\nset xrange [0:*]\nset title ''\n"
                "set xlabel 'training wall time (s, evaluation excluded)'\nplot ",
                terms[t][0], terms[t][1]);
        plot_curves(pl, has, "accuracy", "using 1:3");
        fputs("\nset xlabel 'step'\nplot ", pl->gp);
        plot_curves(pl, has, "accuracy", "using 2:3");
        fputs("\nunset multiplot\nset xrange [*:*]\nset yrange [*:*]\n", pl->gp);
    }
    return 1;
}

/* The sys records of one log, per rank: t, CPU %, MPI MB/s and network MB/s over the
 * interval before t, into util_p<N>_b<B>_r<rank>.dat. Returns how many ranks had
 * records (0: no log or none), -1 on error; their numbers go to ranks[]. */
static int util_data(const plotter *pl, int procs, int batch, int ranks[64], int servers[64],
                     dt_error *err) {
    char log[4200];
    dt_scale_log_path(log, sizeof log, pl->dir, procs, batch, 0, 0);
    if (access(log, F_OK) != 0) return 0;
    dt_runlog_contents c;
    if (dt_runlog_load(log, &c, err)) return -1;
    int n = 0;
    for (int server = 0; server < 2; server++) /* workers, then servers */
        for (int rank = 0; rank < 32 && n < 64; rank++) {
            double prev_t = 0, prev_mpi = 0, prev_net = 0, prev_rd = 0, prev_wr = 0;
            dt_outfile d = {0};
            char name[96];
            for (long i = 0; i < c.n_sys; i++) {
                const dt_sys_record *x = &c.sys[i];
                if (x->rank != rank || (strcmp(x->role, "server") == 0) != server ||
                    !(x->t > prev_t))
                    continue;
                if (!d.f) {
                    snprintf(name, sizeof name, "util_p%d_b%d_%s%d.dat", procs, batch,
                             server ? "s" : "r", rank);
                    if (open_in(&d, pl->dir, name, err)) return dt_runlog_contents_free(&c), -1;
                    ranks[n] = rank;
                    servers[n++] = server;
                }
                /* -1 is unknown (runlog.h): NaN, which gnuplot leaves out, not a point
                 * at -2% or a rate from a count that was not read */
                const double dt = x->t - prev_t, net = (double)(x->net_rx + x->net_tx);
                const int has_cpu = x->cpu_user >= 0 && x->cpu_sys >= 0;
                const int has_mpi = x->mpi_sent >= 0 && prev_mpi >= 0;
                const int has_net = x->net_rx >= 0 && x->net_tx >= 0 && prev_net >= 0;
                const int has_rd = x->disk_read >= 0 && prev_rd >= 0;
                const int has_wr = x->disk_write >= 0 && prev_wr >= 0;
                fprintf(d.f, "%.3f %.4g %.4g %.4g %.4g %.4g\n", x->t,
                        has_cpu ? x->cpu_user + x->cpu_sys : NAN,
                        has_mpi ? (x->mpi_sent - prev_mpi) / dt / 1e6 : NAN,
                        has_net ? (net - prev_net) / dt / 1e6 : NAN,
                        has_rd ? ((double)x->disk_read - prev_rd) / dt / 1e6 : NAN,
                        has_wr ? ((double)x->disk_write - prev_wr) / dt / 1e6 : NAN);
                prev_t = x->t;
                prev_mpi = x->mpi_sent >= 0 ? (double)x->mpi_sent : -1;
                prev_net = x->net_rx >= 0 && x->net_tx >= 0 ? net : -1;
                prev_rd = x->disk_read >= 0 ? (double)x->disk_read : -1;
                prev_wr = x->disk_write >= 0 ? (double)x->disk_write : -1;
            }
            if (d.f && close_in(&d, 1, err)) return dt_runlog_contents_free(&c), -1;
        }
    dt_runlog_contents_free(&c);
    return n;
}

/* 5. Utilisation over time per config: CPU (top) and MPI / network / disk traffic
 * (bottom), one line per rank. 1 if any was drawn. */
static int plot_util(plotter *pl, dt_error *err) {
    for (int b = 0; b < pl->nb; b++)
        for (int p = 0; p < pl->np && pl->n_util < 64; p++) {
            int ranks[64], servers[64];
            const int n = util_data(pl, pl->procs[p], pl->batch[b], ranks, servers, err);
            if (n < 0) return -1;
            if (n == 0) continue;
            char base[48];
            snprintf(base, sizeof base, "util_p%d_b%d", pl->procs[p], pl->batch[b]);
            for (int t = 0; t < 2; t++) {
                fprintf(pl->gp,
                        "set terminal %s\nset output '%s.%s'\nset multiplot layout 2,1 title "
                        "'Utilisation: %d process%s, batch %d per process (sys records, one "
                        "line per rank and server)'\nset xlabel 'seconds since the rank started'\n"
                        "set xrange [0:*]\nset yrange [0:*]\nset ylabel 'CPU (%% of one core)'\n"
                        "set title ''\nplot ",
                        terms[t][0], base, terms[t][1], pl->procs[p], pl->procs[p] > 1 ? "es" : "",
                        pl->batch[b]);
                for (int k = 0; k < n; k++)
                    fprintf(pl->gp, "%s'%s_%s%d.dat' using 1:2 title '%s %d'", k ? ", " : "", base,
                            servers[k] ? "s" : "r", ranks[k], servers[k] ? "server" : "rank",
                            ranks[k]);
                fputs("\nset ylabel 'MB/s'\nplot ", pl->gp);
                for (int k = 0; k < n; k++) {
                    const char *who = servers[k] ? "server" : "rank";
                    fprintf(pl->gp,
                            "%s'%s_%s%d.dat' using 1:3 title '%s %d MPI sent', '' using 1:4 "
                            "title '%s %d network', '' using 1:5 title '%s %d disk read', '' "
                            "using 1:6 title '%s %d disk written'",
                            k ? ", " : "", base, servers[k] ? "s" : "r", ranks[k], who, ranks[k],
                            who, ranks[k], who, ranks[k], who, ranks[k]);
                }
                fputs("\nunset multiplot\nset xrange [*:*]\n", pl->gp);
            }
            snprintf(pl->util[pl->n_util++], 64, "%s.png", base);
        }
    return pl->n_util > 0;
}

/* 8. Predicted time to the target loss against workers (tta.h), one line per batch
 * per worker: solid where the global batch was measured, dashed where extrapolated;
 * the fastest marked. 0 without those predictions. */
static int plot_tta(plotter *pl, dt_error *err) {
    const dt_scale_tta *t = pl->s->tta;
    if (!t || t->n_points == 0) return 0;
    int drawn[64] = {0};
    for (int b = 0; b < pl->nb; b++) {
        char name[64];
        snprintf(name, sizeof name, "tta_b%d.dat", pl->batch[b]);
        dt_outfile d;
        if (open_in(&d, pl->dir, name, err)) return -1;
        for (int i = 0; i < t->n_points; i++) {
            const dt_tta_point *pt = &t->points[i];
            if (pt->batch != pl->batch[b]) continue;
            fprintf(d.f, "%d %.6g %d\n", pt->workers, pt->time_s, pt->extrapolated);
            drawn[b]++;
        }
        if (close_in(&d, drawn[b] > 0, err)) return -1;
    }
    const dt_tta_point *best = &t->points[t->best];
    for (int k = 0; k < 2; k++) {
        fprintf(pl->gp, "set terminal %s\nset output 'time_to_target.%s'\n", terms[k][0],
                terms[k][1]);
        fprintf(pl->gp,
                "set title 'Predicted time to training loss %.3g (dashed: extrapolated global "
                "batch)'\nset xlabel 'workers (log2 scale)'\nset ylabel 'seconds (log "
                "scale)'\nset logscale x 2\nset logscale y\nset xrange [*:*]\nset yrange "
                "[*:*]\nplot '-' using 1:2 with points pt 6 ps 3 lw 2 lc rgb 'black' title "
                "'fastest'",
                t->target);
        for (int b = 0; b < pl->nb; b++) {
            if (!drawn[b]) continue;
            char colour[8];
            batch_colour(pl, b, colour);
            fprintf(pl->gp,
                    ", 'tta_b%d.dat' using 1:2 with lines dt 2 lc rgb '%s' notitle, '' using "
                    "1:($3 == 0 ? $2 : 1/0) lc rgb '%s' title 'batch %d per worker'",
                    pl->batch[b], colour, colour, pl->batch[b]);
        }
        fprintf(pl->gp, "\n%d %.6g\ne\nunset logscale x\nunset logscale y\n", best->workers,
                best->time_s);
    }
    return 1;
}

int dt_plots_outputs(const dt_scale_study *s, int (*visit)(const char *name, void *ctx),
                     void *ctx) {
    static const char *const fixed[] = {"plots.gp", "gnuplot.err", "split.dat", "speedup_busy.dat",
                                        "epoch_busy.dat"};
    static const char *const pictures[] = {"speedup", "epoch_time", "compute_comm",
                                           "loss",    "accuracy",   "time_to_target"};
    int procs[64], batch[64], rc = 0;
    const int np = dt_scale_distinct(s, 0, procs), nb = dt_scale_distinct(s, 1, batch);
    char name[96];
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed && !rc; i++) rc = visit(fixed[i], ctx);
    for (size_t i = 0; i < sizeof pictures / sizeof *pictures && !rc; i++)
        for (int t = 0; t < 2 && !rc; t++) {
            snprintf(name, sizeof name, "%s.%s", pictures[i], terms[t][1]);
            rc = visit(name, ctx);
        }
    for (int b = 0; b < nb && !rc; b++) {
        snprintf(name, sizeof name, "speedup_b%d.dat", batch[b]);
        if (!(rc = visit(name, ctx))) {
            snprintf(name, sizeof name, "tta_b%d.dat", batch[b]);
            rc = visit(name, ctx);
        }
    }
    for (int p = 0; p < np && !rc; p++) {
        snprintf(name, sizeof name, "epoch_p%d.dat", procs[p]);
        rc = visit(name, ctx);
    }
    for (int b = 0; b < nb && !rc; b++)
        for (int p = 0; p < np && !rc; p++) {
            for (int i = 0; i < 4 && !rc; i++) { /* loss and accuracy data, the util plot */
                if (i < 2)
                    snprintf(name, sizeof name, "%s_p%d_b%d.dat", i ? "accuracy" : "loss", procs[p],
                             batch[b]);
                else
                    snprintf(name, sizeof name, "util_p%d_b%d.%s", procs[p], batch[b],
                             terms[i - 2][1]);
                rc = visit(name, ctx);
            }
            for (int k = 0; k < 2 * 32 && !rc; k++) { /* as util_data: 32 ranks, 32 servers */
                snprintf(name, sizeof name, "util_p%d_b%d_%s%d.dat", procs[p], batch[b],
                         k < 32 ? "r" : "s", k % 32);
                rc = visit(name, ctx);
            }
        }
    return rc;
}

int dt_plots_write(const dt_scale_study *s, const char *dir, char names[][64], int *n_names,
                   dt_error *err) {
    static const struct {
        int (*draw)(plotter *pl, dt_error *err); /* plot_util records its names */
        const char *png;
    } plots[] = {{plot_speedup, "speedup.png"},
                 {plot_epoch_time, "epoch_time.png"},
                 {plot_split, "compute_comm.png"},
                 {plot_loss, "loss.png"},
                 {plot_accuracy, "accuracy.png"},
                 {plot_tta, "time_to_target.png"},
                 {plot_util, NULL}}; /* names in pl.util */
    _Static_assert(sizeof plots / sizeof *plots <= DT_MAX_PLOTS, "DT_MAX_PLOTS too small");
    plotter pl = {.s = s, .dir = dir};
    pl.np = dt_scale_distinct(s, 0, pl.procs);
    pl.nb = dt_scale_distinct(s, 1, pl.batch);
    *n_names = 0;
    dt_outfile gp_file;
    if (open_in(&gp_file, dir, "plots.gp", err)) return -1;
    pl.gp = gp_file.f;
    fputs("# Made by dtrain; redraw with: gnuplot plots.gp\n"
          "set grid\nset key outside right top box\nset style data linespoints\n"
          "set pointsize 1.2\n",
          pl.gp);
    int drawn[sizeof plots / sizeof *plots];
    for (size_t i = 0; i < sizeof plots / sizeof *plots; i++)
        if ((drawn[i] = plots[i].draw(&pl, err)) < 0) return close_in(&gp_file, 0, err), -1;
    if (close_in(&gp_file, 1, err)) return -1;
    if (dt_gnuplot_run(dir, "plots.gp", "gnuplot.err") != 0)
        return dt_error_set(
            err, "gnuplot failed or is missing (install gnuplot-nox); see %s/gnuplot.err", dir);
    char errf[4200];
    snprintf(errf, sizeof errf, "%s/gnuplot.err", dir);
    remove(errf);
    for (size_t i = 0; i < sizeof plots / sizeof *plots; i++)
        if (drawn[i] && plots[i].png) snprintf(names[(*n_names)++], 64, "%s", plots[i].png);
    for (int i = 0; i < pl.n_util && *n_names < DT_MAX_PLOTS; i++)
        snprintf(names[(*n_names)++], 64, "%s", pl.util[i]);
    return 0;
}

int dt_plots_predict(const dt_speed_fit *fit, double remaining_steps, double batch, int procs_max,
                     const char *dir, dt_predict_row *rows, int *n_rows, int *drawn,
                     dt_error *err) {
    *n_rows = 0;
    *drawn = 0;
    const int ps = fit->kind == DT_SPEED_PS;
    dt_outfile gp_file;
    if (open_in(&gp_file, dir, "predict.gp", err)) return -1;
    FILE *gp = gp_file.f;
    fputs("set grid\nset key outside right top box\nset xlabel 'workers'\n"
          "set ylabel 'time to convergence (hours)'\nset style data linespoints\n",
          gp);
    char plot[4096] = "";
    size_t used = 0;
    for (int p = ps ? 1 : 0; p <= (ps ? procs_max - 1 : 0); p++) {
        char dat[64];
        snprintf(dat, sizeof dat, "predict_p%d.dat", p);
        dt_outfile d;
        if (open_in(&d, dir, dat, err)) return close_in(&gp_file, 0, err), -1;
        dt_predict_row row = {p, 1, INFINITY};
        for (int w = 1; w + p <= procs_max; w++) {
            double t = remaining_steps * dt_speed_step_time(fit, w, p, batch);
            fprintf(d.f, "%d %.6g\n", w, t / 3600.0);
            if (t < row.best_seconds) row.best_seconds = t, row.best_workers = w;
        }
        if (close_in(&d, 1, err)) return close_in(&gp_file, 0, err), -1;
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
    if (close_in(&gp_file, 1, err)) return -1;
    *drawn = dt_gnuplot_run(dir, "predict.gp", "/dev/null") == 0;
    return 0;
}

int dt_plots_job_curves(const dt_fit_jobs_result *r, double target, const char *dir, int *drawn,
                        dt_error *err) {
    const dt_job_table *t = &r->table;
    const double *b = r->b;
    *drawn = 0;
    if (dt_make_dirs(dir, err)) return -1;
    double x_max = 0; /* where the slowest job's excess loss is a twentieth of its start */
    for (int i = 0; i < t->n_rows; i++) {
        const double b0 = b[i * 3], b1 = b[i * 3 + 1];
        if (b0 > 0 && b1 > 0 && 19 * b1 / b0 > x_max) x_max = 19 * b1 / b0;
    }
    if (!(x_max > 0) || !isfinite(x_max)) x_max = 1000;
    dt_outfile g;
    if (open_in(&g, dir, "jobs_curves.gp", err)) return -1;
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
            if (!r->ok[i]) continue;
            const int colour = i % 8 + 1;
            const dt_loss_fit *c = &r->curve[i];
            fprintf(gp,
                    "%s1/(%.17g*x + %.17g) + %.17g lw 2 lc %d title '%s', "
                    "1/(%.17g*x + %.17g) + %.17g lw 2 dt 2 lc %d title '%s %s'",
                    n ? ", " : "", b[i * 3], b[i * 3 + 1], b[i * 3 + 2], colour, t->names[i], c->b0,
                    c->b1, c->b2, colour, t->names[i], r->train[i] ? "left out" : "held out");
            n++;
        }
        if (r->has_unseen)
            fprintf(gp, "%s1/(%.17g*x + %.17g) + %.17g lw 3 dt 3 lc rgb 'black' title 'unseen'",
                    n ? ", " : "", r->unseen.b0, r->unseen.b1, r->unseen.b2),
                n++;
        if (target > 0)
            fprintf(gp, "%s%g lc rgb 'gray40' dt 4 title 'target'", n ? ", " : "", target), n++;
        if (!n) fputs("1/0 notitle", gp);
        fputc('\n', gp);
    }
    if (close_in(&g, 1, err)) return -1;
    *drawn = dt_gnuplot_run(dir, "jobs_curves.gp", "/dev/null") == 0;
    return 0;
}

int dt_plots_loss_fit(const dt_loss_points *all, int first, int n_fit, const dt_loss_fit *fit,
                      double pred, const char *dir, int *drawn, dt_error *err) {
    *drawn = 0;
    if (dt_make_dirs(dir, err)) return -1;
    dt_outfile d, g;
    if (open_in(&d, dir, "loss_fit.dat", err)) return -1;
    for (int i = 0; i < all->n; i++)
        fprintf(d.f, "%.9g %.9g %d\n", all->step[i], all->loss[i], i >= first && i < first + n_fit);
    if (close_in(&d, 1, err) || open_in(&g, dir, "loss_fit.gp", err)) return -1;
    double x_max = all->step[all->n - 1];
    if (pred > x_max && pred < 10 * x_max) x_max = pred;
    for (int t = 0; t < 2; t++)
        fprintf(g.f,
                "set terminal %s\nset output 'loss_fit.%s'\nset grid\nset key top right box\n"
                "set xlabel '%s'\nset ylabel 'loss'\nset xrange [0:%g]\nset samples 400\n"
                "set title 'Loss curve fit: l(k) = 1/(%.4g k + %.4g) + %.4g'\n"
                "plot 'loss_fit.dat' using 1:($3 == 1 ? $2 : 1/0) with points pt 7 ps 0.6 "
                "title 'observed (fitted)', '' using 1:($3 == 0 ? $2 : 1/0) with points pt 6 "
                "ps 0.8 title 'observed (left out)', 1/(%.17g*x + %.17g) + %.17g with lines "
                "lw 2 title 'fitted curve'\n",
                t ? "svg size 900,550 dynamic" : "pngcairo size 900,550", t ? "svg" : "png",
                all->unit, x_max, fit->b0, fit->b1, fit->b2, fit->b0, fit->b1, fit->b2);
    if (close_in(&g, 1, err)) return -1;
    *drawn = dt_gnuplot_run(dir, "loss_fit.gp", "/dev/null") == 0;
    return 0;
}

int dt_plots_theta_table(const dt_speed_fit *fit, const int *servers, int n_servers, int w_lo,
                         int w_hi, double batch, double steps, const char *dir, int *drawn,
                         dt_error *err) {
    *drawn = 0;
    if (dt_make_dirs(dir, err)) return -1;
    dt_outfile o, g;
    if (open_in(&o, dir, "predict.csv", err)) return -1;
    FILE *f = o.f;
    fputs("workers", f);
    for (int s = 0; s < n_servers; s++) fprintf(f, ",hours_servers_%d", servers[s]);
    fputc('\n', f);
    for (int w = w_lo; w <= w_hi; w++) {
        fprintf(f, "%d", w);
        for (int s = 0; s < n_servers; s++)
            fprintf(f, ",%.6g", steps * dt_speed_step_time(fit, w, servers[s], batch) / 3600.0);
        fputc('\n', f);
    }
    if (close_in(&o, 1, err) || open_in(&g, dir, "predict.gp", err)) return -1;
    FILE *gp = g.f;
    fputs("set grid\nset key outside right top box\nset xlabel 'workers'\nset ylabel 'time to "
          "convergence (hours)'\nset style data linespoints\nset datafile separator ','\n",
          gp);
    for (int t = 0; t < 2; t++) {
        fprintf(gp,
                "set terminal %s\nset output 'predict.%s'\nset title 'Predicted time to "
                "convergence'\nplot ",
                t ? "svg size 900,600" : "pngcairo size 900,600", t ? "svg" : "png");
        for (int s = 0; s < n_servers; s++)
            fprintf(gp, "%s'predict.csv' using 1:%d skip 1 title '%d server%s'", s ? ", " : "",
                    s + 2, servers[s], servers[s] > 1 ? "s" : "");
        fputc('\n', gp);
    }
    if (close_in(&g, 1, err)) return -1;
    *drawn = dt_gnuplot_run(dir, "predict.gp", "/dev/null") == 0;
    return 0;
}

/* A gnuplot single-quoted string's text: ' doubled, at most size - 1 bytes. */
static void gnuplot_quoted(const char *text, char *out, size_t size) {
    size_t o = 0;
    for (const char *c = text; *c && o + 2 < size; c++) {
        if (*c == '\'') out[o++] = '\'';
        out[o++] = *c;
    }
    out[o] = 0;
}

int dt_plots_models_speedup(const dt_scale_study *studies, const int *batch, int n, const char *dir,
                            int *drawn, dt_error *err) {
    *drawn = 0;
    int lo = 1 << 30, hi = 1, curves = 0, has[64] = {0};
    if (n > 64) return dt_error_set(err, "more than 64 models on one figure");
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "speedup_model_%d.dat", i + 1);
        dt_outfile d;
        if (open_in(&d, dir, name, err)) return -1;
        int procs[64], points = 0;
        const int np = dt_scale_distinct(&studies[i], 0, procs);
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(&studies[i], procs[p], batch[i], 0);
            const double sp = r ? dt_scale_strong_speedup(&studies[i], r) : -1;
            if (sp <= 0) continue;
            fprintf(d.f, "%d %.6g\n", procs[p], sp);
            points++;
            lo = procs[p] < lo ? procs[p] : lo;
            hi = procs[p] > hi ? procs[p] : hi;
        }
        if (close_in(&d, points > 0, err)) return -1; /* data files only with data */
        has[i] = points > 0;
        curves += has[i];
    }
    if (curves == 0) return 0;
    dt_outfile g;
    if (open_in(&g, dir, "speedup_models.gp", err)) return -1;
    for (int t = 0; t < 2; t++) {
        fprintf(g.f,
                "set terminal %s\nset output 'speedup_models.%s'\nset grid\nset key top left "
                "box\nset title 'Strong scaling per model: speed-up T(1)/T(N)'\nset xlabel "
                "'processes N (log2 scale)'\nset ylabel 'speed-up'\nset logscale x 2\nset xrange "
                "[%g:%g]\nset yrange [0:*]\n",
                terms[t][0], terms[t][1], lo / 1.2, hi * 1.2);
        fputs("plot x with lines dashtype 2 lc rgb 'gray40' title 'ideal (S = N)'", g.f);
        for (int i = 0; i < n; i++) {
            if (!has[i]) continue;
            char title[160];
            gnuplot_quoted(studies[i].model, title, sizeof title);
            fprintf(
                g.f,
                ", 'speedup_model_%d.dat' using 1:2 with linespoints lw 2 title '%s (batch %d)'",
                i + 1, title, batch[i]);
        }
        fputc('\n', g.f);
    }
    if (close_in(&g, 1, err)) return -1;
    *drawn = dt_gnuplot_run(dir, "speedup_models.gp", "gnuplot.err") == 0;
    return 0;
}
