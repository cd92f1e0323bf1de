#define _GNU_SOURCE /* fmemopen */
#include "study/compare.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/gnuplot.h"
#include "core/outfile.h"
#include "metrics/runlog.h"
#include "study/scaling.h"
#include "study/sweep.h"

/* The accuracy curve of one log into dat (training seconds, steps, accuracy %), and
 * the first point at or above target. Eval records when there are any, else the
 * epoch records (training loop time summed over epochs). */
static int curve(const char *log, FILE *dat, double target, dt_compare_run *r, dt_error *err) {
    r->target_time = -1;
    r->target_step = -1;
    r->from_evals = 0;
    r->eval_samples = -1;
    if (access(log, F_OK) != 0) return 0;
    dt_runlog_contents c;
    if (dt_runlog_load(log, &c, err)) return -1;
    r->from_evals = c.n_evals > 0;
    r->eval_samples = c.n_evals > 0 ? c.evals[0].samples : -1;
    const long n = r->from_evals ? c.n_evals : c.n_epochs;
    double t_sum = 0;
    for (long i = 0; i < n; i++) {
        double t, acc;
        long step;
        if (r->from_evals) {
            t = c.evals[i].t_train;
            acc = c.evals[i].test_acc;
            step = c.evals[i].step;
        } else {
            if (isfinite(c.epochs[i].t_epoch)) t_sum += c.epochs[i].t_epoch;
            t = t_sum;
            acc = c.epochs[i].test_acc;
            step = c.run.steps_per_epoch > 0 ? (i + 1) * c.run.steps_per_epoch : -1;
        }
        if (!isfinite(t) || !isfinite(acc)) continue;
        fprintf(dat, "%.6g %ld %.6g\n", t, step, 100.0 * acc);
        if (r->target_time < 0 && acc >= target) r->target_time = t, r->target_step = step;
    }
    dt_runlog_contents_free(&c);
    return 1;
}

/* Bytes per epoch of the first repeat's roles of a config: the workers' received
 * (mean) and the servers' in + out (sum); -1 where the log has none. */
static void role_bytes(const dt_scale_study *s, const dt_scale_row *row, double *w_in, double *sv) {
    double w = 0, v = 0;
    int n_w = 0, n_v = 0, epochs = 1;
    for (int i = 0; i < s->n_roles; i++) {
        const dt_scale_role *x = &s->roles[i];
        if (x->procs != row->procs || x->batch != row->batch || x->lr_scaled || x->repeat) continue;
        epochs = x->epochs > 0 ? x->epochs : 1;
        if (x->is_server)
            v += x->bytes_in + x->bytes_out, n_v++;
        else
            w += x->bytes_in, n_w++;
    }
    *w_in = n_w ? w / n_w / epochs : -1;
    *sv = n_v ? v / epochs : -1;
}

static void cell(FILE *out, double v, const char *fmt) {
    if (v < 0 || !isfinite(v)) {
        fputs(" n/a |", out);
        return;
    }
    fputc(' ', out);
    fprintf(out, fmt, v);
    fputs(" |", out);
}

static int write_report(const dt_compare_run *runs, int n, double target, const char *out_dir,
                        int drawn, dt_error *err) {
    char path[4200];
    dt_outfile o;
    snprintf(path, sizeof path, "%s/compare.md", out_dir);
    if (dt_outfile_open(&o, path, err)) return -1;
    FILE *f = o.f;
    fprintf(f,
            "# Comparison of %d runs\n\nPer run (a study's config; figures of the measured "
            "epoch are medians over its repeats): the training time to %.1f%% test accuracy "
            "(the training loops' wall time, evaluation excluded, at the first evaluation "
            "reaching it: an eval record with --eval-every, on the test samples it names, else "
            "an epoch's end, which only bounds it), the steps done then, the last epoch's test "
            "accuracy, the "
            "training time of an epoch, the MPI bytes a worker sent and received and the "
            "servers moved (in + out) per epoch, and the mean CPU per rank (%% of one core; "
            "sys records). Received bytes are counted only by the parameter-server workers "
            "(pulls); an all-reduce rank receives as much as it sends.\n\n"
            "| run | workers | servers | batch | time to %.1f%% (s) | steps to %.1f%% | "
            "measured at | final accuracy | epoch time (s) | worker sent (MB/epoch) | worker "
            "received (MB/epoch) | servers in+out (MB/epoch) | CPU per rank (%%) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            n, 100.0 * target, 100.0 * target, 100.0 * target);
    for (int i = 0; i < n; i++) {
        const dt_compare_run *r = &runs[i];
        fprintf(f, "| %s | %d | %d | %d |", r->label, r->workers, r->servers, r->batch);
        if (r->target_time >= 0)
            fprintf(f, " %.2f | %ld |", r->target_time, r->target_step);
        else
            fputs(" not reached | n/a |", f);
        if (r->from_evals && r->eval_samples > 0)
            fprintf(f, " eval records (%ld test samples) |", r->eval_samples);
        else
            fprintf(f, " %s |", r->from_evals ? "eval records" : "epoch ends");
        cell(f, r->final_acc >= 0 ? 100.0 * r->final_acc : -1, "%.2f%%");
        cell(f, r->t_train, "%.3f");
        cell(f, r->worker_mb, "%.3f");
        cell(f, r->worker_in_mb, "%.3f");
        cell(f, r->server_mb, "%.3f");
        cell(f, r->cpu_pct, "%.0f");
        fputc('\n', f);
    }
    if (drawn)
        fputs("\nTest accuracy against training time, a line per run: `accuracy_time.png` "
              "(and .svg).\n\n![accuracy_time.png](accuracy_time.png)\n",
              f);
    else
        fputs("\n(No accuracy plot: gnuplot failed or is missing, or no run has accuracy "
              "figures.)\n",
              f);
    if (dt_outfile_commit(&o, err)) return -1;
    snprintf(path, sizeof path, "%s/compare.csv", out_dir);
    if (dt_outfile_open(&o, path, err)) return -1;
    f = o.f;
    fprintf(f, "run,workers,servers,batch_size,target_acc,time_to_target,steps_to_target,"
               "from_evals,final_acc,t_train,worker_sent_mb,worker_received_mb,servers_mb,"
               "cpu_pct\n");
    for (int i = 0; i < n; i++) {
        const dt_compare_run *r = &runs[i];
        fprintf(f, "%s,%d,%d,%d,%.6g,%.6g,%ld,%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g\n", r->label,
                r->workers, r->servers, r->batch, target, r->target_time, r->target_step,
                r->from_evals, r->final_acc, r->t_train, r->worker_mb, r->worker_in_mb,
                r->server_mb, r->cpu_pct);
    }
    return dt_outfile_commit(&o, err);
}

/* One study folder's runs (configs without LR scaling), their curves written as
 * out_dir/accuracy_<k>.dat with k counting from *k. */
static int add_study(const char *dir, double target, const char *out_dir, FILE *gp_plot,
                     dt_compare_run *runs, int max, int *n, int *curves, dt_error *err) {
    dt_scale_study s;
    memset(&s, 0, sizeof s);
    if (dt_scale_read_dir(dir, &s, err)) {
        dt_scale_free(&s);
        return -1;
    }
    const char *base = strrchr(dir, '/');
    char name[64];
    snprintf(name, sizeof name, "%s", s.mode[0] ? s.mode : base && base[1] ? base + 1 : dir);
    int rc = 0;
    for (int i = 0; i < s.n_rows && rc == 0; i++) {
        const dt_scale_row *row = &s.rows[i];
        if (row->lr_scaled) continue;
        if (*n == max) {
            rc = dt_error_set(err, "more than %d runs to compare", max);
            break;
        }
        dt_compare_run *r = &runs[(*n)++];
        memset(r, 0, sizeof *r);
        snprintf(r->label, sizeof r->label, "%s", name);
        r->workers = row->procs;
        r->servers = s.servers;
        r->batch = row->batch;
        r->final_acc = row->test_acc;
        r->t_train = row->t_train > 0 ? row->t_train : -1;
        r->worker_mb = row->bytes_sent >= 0 ? row->bytes_sent / 1e6 : -1;
        double w_in, sv;
        role_bytes(&s, row, &w_in, &sv);
        r->worker_in_mb = w_in >= 0 ? w_in / 1e6 : -1;
        r->server_mb = sv >= 0 ? sv / 1e6 : -1;
        r->cpu_pct = row->cpu_pct;
        char log[4200], dat[64], path[4200];
        dt_scale_log_path(log, sizeof log, dir, row->procs, row->batch, 0, 0);
        snprintf(dat, sizeof dat, "accuracy_%d.dat", *curves);
        snprintf(path, sizeof path, "%s/%s", out_dir, dat);
        dt_outfile o;
        if (dt_outfile_open(&o, path, err)) {
            rc = -1;
            break;
        }
        const int got = curve(log, o.f, target, r, err);
        if (got < 0) {
            dt_outfile_discard(&o);
            rc = -1;
        } else if (dt_outfile_commit(&o, err)) {
            rc = -1;
        }
        if (rc || got == 0) continue;
        char servers[32] = ""; /* the parameter-server modes' server count */
        if (r->servers > 0)
            snprintf(servers, sizeof servers, " + %d server%s", r->servers,
                     r->servers > 1 ? "s" : "");
        fprintf(gp_plot, "%s'%s' using 1:3 title '%s, %d worker%s%s, batch %d'",
                *curves ? ", " : "", dat, r->label, r->workers, r->workers > 1 ? "s" : "", servers,
                r->batch);
        (*curves)++;
    }
    dt_scale_free(&s);
    return rc;
}

int dt_compare_studies(const char *const *dirs, int n_dirs, double target, const char *out_dir,
                       dt_compare_run *runs, int max, int *n, dt_error *err) {
    *n = 0;
    if (dt_make_dirs(out_dir, err)) return -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/accuracy_time.gp", out_dir);
    dt_outfile gp_out;
    if (dt_outfile_open(&gp_out, path, err)) return -1;
    FILE *gp = gp_out.f;
    /* the plot command is collected first, then written once per terminal */
    char plot[16384] = "";
    FILE *cmd = fmemopen(plot, sizeof plot - 1, "w");
    if (!cmd) {
        dt_outfile_discard(&gp_out);
        return dt_error_set(err, "out of memory for the plot command");
    }
    int curves = 0, rc = 0;
    for (int d = 0; d < n_dirs && rc == 0; d++)
        rc = add_study(dirs[d], target, out_dir, cmd, runs, max, n, &curves, err);
    if (fclose(cmd) != 0 && rc == 0) rc = dt_error_set(err, "too many curves to plot");
    if (rc) {
        dt_outfile_discard(&gp_out);
        return -1;
    }
    fprintf(gp, "# Made by dtrain compare; redraw with: gnuplot accuracy_time.gp\nset grid\n"
                "set key outside right top box\nset style data linespoints\n"
                "set xlabel 'training time (s, evaluation excluded)'\n"
                "set ylabel 'test accuracy (%%)'\nset yrange [0:100]\n");
    for (int t = 0; t < 2 && curves; t++)
        fprintf(gp,
                "set terminal %s\nset output 'accuracy_time.%s'\nset title 'Test accuracy "
                "against training time (target %.1f%%)'\nplot %s, %g with lines dashtype 2 lc "
                "rgb 'gray40' title 'target'\n",
                t ? "svg size 1000,600 dynamic font 'Sans,11'"
                  : "pngcairo size 1000,600 font 'Sans,11'",
                t ? "svg" : "png", 100.0 * target, plot, 100.0 * target);
    if (dt_outfile_commit(&gp_out, err)) return -1;
    const int drawn = curves > 0 && dt_gnuplot_run(out_dir, "accuracy_time.gp", "/dev/null") == 0;
    return write_report(runs, *n, target, out_dir, drawn, err);
}
