#include "study/scale_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfmodel/perfmodel.h"
#include "study/predict.h"
#include "study/reading.h"
#include "study/tta.h"

/* The study's figures the report reads (scaling.h). */
static double epoch_time(const dt_scale_row *r) {
    return dt_scale_time(r);
}

static double iterations(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_iterations(s, r);
}

static double split_iterations(double dataset_size, int procs, int batch) {
    return dt_scale_split_iterations(dataset_size, procs, batch);
}

static void cell(FILE *out, double v, const char *fmt) {
    if (v < 0 || !isfinite(v))
        fprintf(out, " n/a |");
    else {
        fputc(' ', out);
        fprintf(out, fmt, v);
        fputs(" |", out);
    }
}

/* What a grid cell may add after its value: the spread, a busy-machine flag. */
typedef void (*cell_note_fn)(FILE *out, const dt_scale_study *s, const dt_scale_row *r);

/* A table with one row per batch size and one column per process count. */
static void grid(FILE *out, const dt_scale_study *s, const int *procs, int np, const int *batch,
                 int nb, const char *fmt,
                 double (*value)(const dt_scale_study *, const dt_scale_row *), cell_note_fn note) {
    fputs("| batch per process |", out);
    for (int p = 0; p < np; p++) fprintf(out, " %d proc%s |", procs[p], procs[p] > 1 ? "s" : "");
    fputs("\n|---|", out);
    for (int p = 0; p < np; p++) fputs("---|", out);
    fputc('\n', out);
    for (int b = 0; b < nb; b++) {
        fprintf(out, "| %d |", batch[b]);
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            const double v = r ? value(s, r) : -1;
            if (v < 0 || !isfinite(v)) {
                fputs(" n/a |", out);
                continue;
            }
            fputc(' ', out);
            fprintf(out, fmt, v);
            if (note) note(out, s, r);
            fputs(" |", out);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
}

/* " [min-max]" of a time over the repeats, " busy" for a busy-machine run. */
static void note_train(FILE *out, const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    if (r->repeats > 1 && r->t_train_min > 0)
        fprintf(out, " [%.2f-%.2f]", r->t_train_min, r->t_train_max);
    if (r->busy) fputs(" busy", out);
}
static void note_epoch(FILE *out, const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    if (r->repeats > 1 && r->t_epoch_min > 0)
        fprintf(out, " [%.2f-%.2f]", r->t_epoch_min, r->t_epoch_max);
    if (r->busy) fputs(" busy", out);
}
static void note_speedup(FILE *out, const dt_scale_study *s, const dt_scale_row *r) {
    double lo, hi;
    if (r->procs > 1 && dt_scale_strong_speedup_range(s, r, &lo, &hi) == 0 && hi > lo)
        fprintf(out, " [%.2f-%.2f]", lo, hi);
    if (dt_scale_speedup_busy(s, r)) fputs(" busy", out);
}
static void note_efficiency(FILE *out, const dt_scale_study *s, const dt_scale_row *r) {
    const double x = dt_scale_strong_speedup(s, r);
    if (r->procs > 1 && x > r->procs) fputs(" suspect", out);
    if (dt_scale_speedup_busy(s, r)) fputs(" busy", out);
}
static void note_busy(FILE *out, const dt_scale_study *s, const dt_scale_row *r) {
    if (dt_scale_speedup_busy(s, r)) fputs(" busy", out);
}

static double v_train(const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    return r->t_train;
}
static double v_epoch(const dt_scale_study *s, const dt_scale_row *r) {
    (void)s;
    return r->t_epoch > 0 ? r->t_epoch : -1;
}
static double v_strong(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_strong_speedup(s, r);
}
static double v_strong_eff(const dt_scale_study *s, const dt_scale_row *r) {
    double x = dt_scale_strong_speedup(s, r);
    return x < 0 ? -1 : 100.0 * x / r->procs;
}
static double v_strong_running(const dt_scale_study *s, const dt_scale_row *r) {
    const dt_scale_row *b = dt_scale_find(s, 1, r->batch, r->lr_scaled);
    return b && b->t_epoch > 0 && r->t_epoch > 0 ? b->t_epoch / r->t_epoch : -1;
}
static double v_n_t1_tn(const dt_scale_study *s, const dt_scale_row *r) {
    const double x = dt_scale_strong_speedup(s, r);
    return x < 0 ? -1 : r->procs * x;
}
static double v_weak(const dt_scale_study *s, const dt_scale_row *r) {
    return dt_scale_weak_speedup(s, r);
}
static double v_weak_eff(const dt_scale_study *s, const dt_scale_row *r) {
    double x = dt_scale_weak_speedup(s, r);
    return x < 0 ? -1 : 100.0 * x / r->procs;
}

/* What every section of the report needs: the study, where to write, and the
 * distinct process counts and batch sizes in ascending order. */
typedef struct report {
    const dt_scale_study *s;
    FILE *out;
    int procs[64], batch[64];
    int np, nb;
} report;

/* The system, as MLPerf's submissions open with it: the machine, the ranks, the hosts
 * and their link, the software; from the runs' own records. */
static void report_system(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    if (!s->sys_cpu[0]) return; /* logs from before the run record said it */
    fputs("## The system\n\n| | |\n|---|---|\n", out);
    fprintf(out, "| CPU | %s, %d CPUs (dtrain's kernels: %s) |\n", s->sys_cpu, s->sys_cpus,
            s->sys_isa[0] ? s->sys_isa : "?");
    if (s->sys_memory_gib > 0) fprintf(out, "| memory | %.1f GiB |\n", s->sys_memory_gib);
    fputs("| ranks |", out);
    for (int p = 0; p < rp->np; p++) fprintf(out, "%s %d", p ? "," : "", rp->procs[p]);
    fprintf(out, " worker process%s", rp->procs[rp->np - 1] > 1 ? "es" : "");
    if (s->servers > 0)
        fprintf(out, " + %d parameter server%s", s->servers, s->servers > 1 ? "s" : "");
    if (s->threads > 0)
        fprintf(out, "; %d compute thread%s each", s->threads, s->threads > 1 ? "s" : "");
    fputs(" |\n", out);
    /* an emulated host is a named network namespace: its name follows a slash */
    const int emulated = strchr(s->sys_host, '/') != NULL;
    if (s->hosts_max > 1)
        fprintf(out, "| hosts | up to %d%s, MPI over TCP between them%s |\n", s->hosts_max,
                emulated ? " emulated hosts (network namespaces of one machine, each with its link "
                           "and CPU share: network.md)"
                         : "",
                emulated ? "" : " (the links as the hosts have them)");
    else
        fprintf(out, "| hosts | one (%s): the ranks share memory |\n",
                s->sys_host[0] ? s->sys_host : "?");
    fprintf(out, "| software | dtrain %s; %s |\n\n", s->sys_version[0] ? s->sys_version : "?",
            s->sys_libraries[0] ? s->sys_libraries : "?");
}

/* Images a second of a row's measured epoch; 0 unknown. */
static double images_per_s(const dt_scale_row *r, double t_train) {
    return r->iterations > 0 && t_train > 0 ? (double)r->procs * r->batch * r->iterations / t_train
                                            : 0.0;
}

/* The scaling efficiency in one sentence: the most processes against one, at the
 * largest batch measured at both, with the repeats' spread. */
static void report_efficiency(const report *rp) {
    const dt_scale_study *s = rp->s;
    const int n = rp->procs[rp->np - 1];
    if (rp->np < 2 || rp->procs[0] != 1) return;
    for (int b = rp->nb - 1; b >= 0; b--) {
        const dt_scale_row *one = dt_scale_find(s, 1, rp->batch[b], 0);
        const dt_scale_row *many = dt_scale_find(s, n, rp->batch[b], 0);
        if (!one || !many) continue;
        const double x1 = images_per_s(one, one->t_train), xn = images_per_s(many, many->t_train);
        if (!(x1 > 0) || !(xn > 0)) continue;
        fprintf(rp->out,
                "**Scaling efficiency:** %d processes at batch %d each trained %.0f images/s, "
                "%.2f times one process's %.0f: %.0f%% of linear scaling",
                n, rp->batch[b], xn, xn / x1, x1, 100.0 * xn / x1 / n);
        if (one->repeats > 1 && many->repeats > 1 && one->t_train_min > 0 && many->t_train_min > 0)
            fprintf(rp->out, " (over the repeats %.0f-%.0f%%)",
                    100.0 * images_per_s(many, many->t_train_max) /
                        images_per_s(one, one->t_train_min) / n,
                    100.0 * images_per_s(many, many->t_train_min) /
                        images_per_s(one, one->t_train_max) / n);
        fprintf(rp->out, "%s (this ratio against processes, with the ideal line: speedup.png).\n\n",
                many->busy || one->busy ? "; a busy machine ran some of these runs" : "");
        return;
    }
}

static void report_header(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fprintf(out, "# Scaling study: %s on %s\n\n", s->model[0] ? s->model : "(model not given)",
            s->data[0] ? s->data : "(data not given)");
    fprintf(out, "%.0f parameters, %.0f training samples; process counts", s->params,
            s->dataset_size);
    for (int p = 0; p < rp->np; p++) fprintf(out, " %d", rp->procs[p]);
    fputs("; batch sizes per process", out);
    for (int b = 0; b < rp->nb; b++) fprintf(out, " %d", rp->batch[b]);
    fputs(".\n\n", out);
    report_system(rp);
    report_efficiency(rp);
    if (s->servers > 0)
        fprintf(out,
                "Mode %s with %d parameter server%s on top of each process count: the "
                "process counts are workers.\n\n",
                s->mode[0] ? s->mode : "(parameter server)", s->servers, s->servers > 1 ? "s" : "");
    for (int i = 0; i < s->n_notes; i++) fprintf(out, "- **Note:** %s\n", s->notes[i]);
    if (s->n_notes) fputc('\n', out);
    fputs("Definitions. Epoch times are of the 2nd epoch (the 1st warms caches). *Training "
          "time* t_train excludes waits for the data loader; *running time* t_epoch is the "
          "whole training loop. Strong speed-up S = T(1)/T(N) (same per-process batch, the "
          "dataset split over N processes); efficiency S/N. Weak speed-up N t(1)/t(N) with t "
          "the time of one iteration (the same work per process per iteration); efficiency "
          "t(1)/t(N). When each process runs 1/N of the dataset, as here, the two coincide up "
          "to the rounding of iteration counts. T = t_train, the training time (loader waits "
          "are not communication); the running time's speed-up is shown beside it where "
          "measured.\n\n",
          out);
    int repeats = 0, measured = 0, busy = 0, quotas = 0, unfaithful = 0;
    for (int i = 0; i < s->n_rows; i++) {
        if (s->rows[i].repeats > repeats) repeats = s->rows[i].repeats;
        measured += s->rows[i].other_cores >= 0;
        busy += s->rows[i].busy && !s->rows[i].unfaithful;
        quotas += s->rows[i].throttled >= 0;
        unfaithful += s->rows[i].unfaithful;
    }
    if (repeats > 1)
        fprintf(out,
                "Each config ran up to %d times, interleaved (every config, then every config "
                "again); figures are medians, [min-max] the spread over the repeats (a "
                "speed-up's spread: T(1) min / T(N) max to T(1) max / T(N) min).\n\n",
                repeats);
    else
        fputs("Each config ran once: there is no spread to judge the noise by (`dtrain scale "
              "--repeats R`).\n\n",
              out);
    if (!measured) return;
    fprintf(out,
            "## Machine load during the runs\n\nCores other processes used on average "
            "during each run (the machine's busy CPU time from /proc/stat less the run's own "
            "processes'; the largest over the repeats). Above %.2f cores a config is flagged "
            "*busy* in every table and in the reading: its times are not the program's "
            "alone.",
            DT_SCALE_BUSY_CORES);
    if (quotas)
        fprintf(out,
                " The emulated hosts ran under a CPU quota (`--host-cpus X`): a config in which "
                "a host ran out of its quota in more than %.0f%% of the quota's periods is "
                "*unfaithful* to hosts of that share (a host out of quota holds the messages it "
                "has received until its next period; docs/scaling.md) and flagged as a busy "
                "one is.",
                100 * DT_SCALE_THROTTLED_MAX);
    fprintf(out,
            "\n\n| procs | batch | lr scaled | repeats | other processes (cores) |%s flag "
            "|\n|---|---|---|---|---|%s---|\n",
            quotas ? " hosts out of quota (periods) |" : "", quotas ? "---|" : "");
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        fprintf(out, "| %d | %d | %s | %d |", r->procs, r->batch, r->lr_scaled ? "yes" : "no",
                r->repeats > 0 ? r->repeats : 1);
        cell(out, r->other_cores, "%.2f");
        if (quotas) {
            if (r->throttled >= 0)
                fprintf(out, " %.0f%% |", 100 * r->throttled);
            else
                fputs(" n/a |", out);
        }
        fprintf(out, " %s |\n",
                r->unfaithful         ? "**unfaithful**"
                : r->busy             ? "**busy**"
                : r->other_cores >= 0 ? "quiet"
                                      : "n/a");
    }
    fputc('\n', out);
    if (unfaithful)
        fprintf(out,
                "**%d config%s ran unfaithfully:** the emulated hosts ran out of their CPU "
                "quota. CPUs of their own (`--host-cpus cpuset`, the default) do not throttle; "
                "a larger quota throttles less.\n\n",
                unfaithful, unfaithful > 1 ? "s" : "");
    if (busy)
        fprintf(out,
                "**%d config%s ran on a busy machine.** Do not trust %s yet: run the same "
                "`dtrain scale` again over this folder, adding `--wait-idle` to wait for a quiet "
                "machine before each run (from make: `make run WAIT_IDLE=1`); it measures the "
                "busy configs again and keeps the others (`--force`, `make run FORCE=1`: all "
                "again).\n\n",
                busy, busy > 1 ? "s" : "", busy > 1 ? "their figures" : "its figures");
}

static void report_grid(const report *rp, const char *fmt,
                        double (*value)(const dt_scale_study *, const dt_scale_row *),
                        cell_note_fn note) {
    grid(rp->out, rp->s, rp->procs, rp->np, rp->batch, rp->nb, fmt, value, note);
}

/* Sections 1 and 2: times, speed-ups and efficiencies as grids. */
static void report_times_and_speedups(const report *rp) {
    FILE *out = rp->out;
    fputs("## 1. Training time and running time per epoch (s)\n\nTraining time t_train:\n\n", out);
    report_grid(rp, "%.2f", v_train, note_train);
    fputs("Running time t_epoch:\n\n", out);
    report_grid(rp, "%.2f", v_epoch, note_epoch);
    fputs("## 2. Speed-up and efficiency\n\nStrong scaling speed-up T(1)/T(N) of the training "
          "time t_train:\n\n",
          out);
    if (rp->np < 2 || rp->procs[0] != 1)
        fputs("Cannot compute: the study needs a 1-process run and at least one more process "
              "count.\n\n",
              out);
    report_grid(rp, "%.2f", v_strong, note_speedup);
    fputs("Strong scaling efficiency (%; *suspect*: above 100%, a superlinear speed-up, "
          "which a CPU job of this kind does not reach without a measurement problem):\n\n",
          out);
    report_grid(rp, "%.0f", v_strong_eff, note_efficiency);
    fputs("Weak scaling speed-up N t(1)/t(N):\n\n", out);
    report_grid(rp, "%.2f", v_weak, note_busy);
    fputs("Weak scaling efficiency (%):\n\n", out);
    report_grid(rp, "%.0f", v_weak_eff, note_busy);
    int have_running = 0;
    for (int i = 0; i < rp->s->n_rows; i++) have_running |= rp->s->rows[i].t_epoch > 0;
    if (have_running) {
        fputs("Strong scaling speed-up of the running time t_epoch (loader waits included; "
              "they are not communication, so the figures above use the training time):\n\n",
              out);
        report_grid(rp, "%.2f", v_strong_running, note_busy);
    }
    fputs("N x T(1)/T(N) of the training time, for readers whose course asks for it: by "
          "definition N times the strong speed-up. It is a weak-scaling speed-up only when "
          "each of the N processes handles as much data as the 1 process did; here each "
          "handles 1/N of it, so it does not measure weak scaling (the weak speed-up above "
          "does, per iteration):\n\n",
          out);
    report_grid(rp, "%.2f", v_n_t1_tn, note_busy);
}

/* The unscaled row of (batch b, procs p) by index, or NULL. */
static const dt_scale_row *report_row(const report *rp, int b, int p) {
    return dt_scale_find(rp->s, rp->procs[p], rp->batch[b], 0);
}

static void report_compute_vs_comm(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("## 3. Compute vs communication (s per epoch)\n\nMeasured per step and summed "
          "(means over ranks): compute (forward, backward, update), communication exposed "
          "(the step waited for it) and hidden (overlapped with backward); derived as in the "
          "classic analysis from the training time T: T_comp = T(1)/N, T_comm = T(N) - T(1)/N.\n\n"
          "| procs | batch | measured compute | measured comm exposed | measured comm hidden | "
          "derived T_comp | derived T_comm |\n|---|---|---|---|---|---|---|\n",
          out);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r) continue;
            const dt_scale_row *base = dt_scale_find(s, 1, rp->batch[b], 0);
            fprintf(out, "| %d | %d |", r->procs, r->batch);
            cell(out, r->t_compute, "%.2f");
            cell(out, r->t_comm_exposed, "%.2f");
            cell(out, r->t_comm >= 0 && r->t_comm_exposed >= 0 ? r->t_comm - r->t_comm_exposed : -1,
                 "%.2f");
            cell(out, base ? epoch_time(base) / r->procs : -1, "%.2f");
            double dc = dt_scale_derived_comm(s, r);
            if (dc < 0 && base)
                fputs(" < 0 (faster than ideal) |", out);
            else
                cell(out, dc, "%.2f");
            fputc('\n', out);
        }
    fputc('\n', out);
}

/* Bytes a gradient element takes on the wire (the study's --comm-dtype). */
static double push_bytes_per_param(const dt_scale_study *s) {
    return !strcmp(s->comm_dtype, "bf16") || !strcmp(s->comm_dtype, "fp16") ? 2.0 : 4.0;
}

/* Section 4 for the parameter-server modes: the formula that fits them (every
 * iteration each worker pulls the parameters and pushes its gradient; the servers
 * carry all workers' traffic), measured beside it, then the per-role accounting. */
static void report_ps_traffic(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    const double push = push_bytes_per_param(s);
    fprintf(out,
            "## 4. Parameter-server traffic\n\nMode %s: the ring all-reduce formula does "
            "not describe it. Per iteration each worker pulls the parameters (4 x params "
            "bytes) and pushes its gradient (%.0f x params bytes, %s on the wire), so per "
            "worker per epoch: iterations x (4 + %.0f) x params; the servers together carry "
            "every worker's: N times that. Measured beside it: per worker, the bytes its "
            "steps sent and received (worker records; mean over the workers); the servers' "
            "bytes in + out (ps_server records, all servers), per epoch (whole run / "
            "epochs). Rates: the formula's bytes over the measured communication time "
            "(t_comm, mean over the workers).\n\n| workers | batch | iterations | formula "
            "per worker (MB/epoch) | measured per worker (MB/epoch) | formula servers "
            "(MB/epoch) | measured servers (MB/epoch) | formula rate per worker (MB/s) "
            "|\n|---|---|---|---|---|---|---|---|\n",
            s->mode[0] ? s->mode : "parameter server", push,
            s->comm_dtype[0] ? s->comm_dtype : "fp32", push);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r) continue;
            const double it = iterations(s, r);
            const double per_worker = it > 0 && s->params > 0 ? it * (4.0 + push) * s->params : -1;
            double w_bytes = 0, sv_bytes = 0;
            int n_w = 0, n_sv = 0, epochs = 1;
            for (int i = 0; i < s->n_roles; i++) {
                const dt_scale_role *x = &s->roles[i];
                if (x->procs != r->procs || x->batch != r->batch || x->lr_scaled || x->repeat)
                    continue;
                epochs = x->epochs > 0 ? x->epochs : 1;
                if (x->is_server)
                    sv_bytes += x->bytes_in + x->bytes_out, n_sv++;
                else
                    w_bytes += x->bytes_in + x->bytes_out, n_w++;
            }
            fprintf(out, "| %d | %d |", r->procs, r->batch);
            cell(out, it, "%.0f");
            cell(out, per_worker / 1e6, "%.3f");
            cell(out, n_w ? w_bytes / n_w / epochs / 1e6 : -1, "%.3f");
            cell(out, per_worker > 0 ? per_worker * r->procs / 1e6 : -1, "%.3f");
            cell(out, n_sv ? sv_bytes / epochs / 1e6 : -1, "%.3f");
            cell(out, per_worker > 0 && r->t_comm > 0 ? per_worker / r->t_comm / 1e6 : -1, "%.1f");
            fputc('\n', out);
        }
    fputs("\nPer role over the whole run (first repeat of each config): bytes in and out as "
          "each role's own counters have them (a worker's: its steps' pulls and pushes; a "
          "server's also holds the final pull each worker makes after training, which no "
          "step counts), updates (servers: parameter versions made; workers: steps), "
          "gradients applied and dropped, the mean staleness of applied gradients (server "
          "version minus the version the worker computed on) with the non-empty bins of its "
          "histogram, and the servers' busy fraction (time serving / the training "
          "loops' time).\n\n| workers | batch | role | bytes in | bytes out | updates | "
          "applied | dropped | mean staleness | staleness histogram | busy |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < s->n_roles; i++) {
        const dt_scale_role *x = &s->roles[i];
        if (x->lr_scaled || x->repeat) continue;
        fprintf(out, "| %d | %d | %s %d | %.0f | %.0f | %ld |", x->procs, x->batch,
                x->is_server ? "server" : "worker", x->index, x->bytes_in, x->bytes_out,
                x->updates);
        cell(out, (double)x->applied, "%.0f");
        cell(out, (double)x->dropped, "%.0f");
        cell(out, x->staleness_mean, "%.2f");
        if (x->is_server) {
            int any = 0;
            for (int b = 0; b < 16; b++)
                if (x->staleness_hist[b]) {
                    fprintf(out, "%s%s%d: %ld", any ? ", " : " ", b == 15 ? ">=" : "", b,
                            x->staleness_hist[b]);
                    any = 1;
                }
            fputs(any ? " |" : " n/a |", out);
        } else {
            fputs(" n/a |", out);
        }
        cell(out, x->busy_frac >= 0 ? 100.0 * x->busy_frac : -1, "%.0f%%");
        fputc('\n', out);
    }
    fputc('\n', out);
}

static void report_bandwidth(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    if (s->servers > 0 || s->n_roles > 0) {
        report_ps_traffic(rp);
        return;
    }
    fputs("## 4. All-reduce bandwidth utilisation\n\nMode all-reduce (ring): by the formula "
          "iterations x 2(P-1)/P x 4 x params / T_comm with the derived T_comm, per process and "
          "aggregate (P times); "
          "beside it the measured bytes sent per process / measured all-reduce time.\n\n"
          "| procs | batch | iterations | formula per process (MB/s) | formula aggregate (MB/s) "
          "| measured bytes/time per process (MB/s) |\n|---|---|---|---|---|---|\n",
          out);
    for (int b = 0; b < rp->nb; b++)
        for (int p = 0; p < rp->np; p++) {
            const dt_scale_row *r = report_row(rp, b, p);
            if (!r || r->procs < 2) continue;
            double dc = dt_scale_derived_comm(s, r);
            double bw = dc > 0 ? dt_scale_bandwidth(s, r, dc) : -1;
            fprintf(out, "| %d | %d |", r->procs, r->batch);
            cell(out, iterations(s, r), "%.0f");
            cell(out, bw < 0 ? -1 : bw / 1e6, "%.1f");
            cell(out, bw < 0 ? -1 : bw * r->procs / 1e6, "%.1f");
            cell(out, r->bytes_sent > 0 && r->t_comm > 0 ? r->bytes_sent / r->t_comm / 1e6 : -1,
                 "%.1f");
            fputc('\n', out);
        }
    fputs("\n(n/a: no multi-process run, no derived communication time because the run was "
          "at or below the ideal T(1)/N, or no measured split in the input.)\n\n",
          out);
}

static void report_accuracy(const report *rp) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("## 5. Accuracy and loss vs batch size (large-batch effect)\n\n| procs | batch per "
          "process | global batch | linear LR scaling | final train loss | test accuracy "
          "|\n|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        fprintf(out, "| %d | %d | %lld | %s |", r->procs, r->batch, (long long)r->procs * r->batch,
                r->lr_scaled ? "yes" : "no");
        cell(out, r->final_loss, "%.4f");
        cell(out, r->test_acc >= 0 ? 100.0 * r->test_acc : -1, "%.2f%%");
        fputc('\n', out);
    }
    fputc('\n', out);
}

/* Compute units of N processes: threads x N, at most the cores (0 cores = unknown:
 * one unit per process, as measured elsewhere). */
static double compute_units(const dt_scale_study *s, int N) {
    const double t = s->threads > 0 ? s->threads : 1;
    if (s->cores <= 0) return N;
    return N * t < s->cores ? N * t : s->cores;
}

/* The model's point of a config: the compute term th0 M/N becomes th0 M/units(N), by
 * handing the fit M N / units(N) as the batch. */
static dt_speed_point model_point(const dt_scale_study *s, int N, double global_batch,
                                  double step_time) {
    return (dt_speed_point){N, 0, global_batch * N / compute_units(s, N), step_time};
}

/* Optimus's all-reduce terms depend on the process count alone. In dtrain's studies the
 * measured all-reduce time per iteration grows with the batch size: most of it is
 * waiting for the slower rank, whose lag grows with the compute per step. Fits the
 * model with that term, th4 (N-1)/N M/U, leaves one out, and names the term with the
 * numbers: the multi-process runs' all-reduce time per iteration at the smallest and
 * the largest batch, and both leave-one-out errors. 1 with *fit when that form fits
 * (worst leave-one-out error <= 20%), 0 when not or not possible. */
static int report_sync_term(const report *rp, const dt_loo_summary *plain,
                            const dt_speed_point *pts, int n, double *loo_pred, double *loo_err,
                            dt_speed_fit *fit) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    dt_error err;
    dt_loo_summary loo = {0, -1, -1};
    if (dt_speed_fit_points(DT_SPEED_ALLREDUCE_SYNC, pts, n, fit, &err) ||
        dt_speed_leave_one_out(DT_SPEED_ALLREDUCE_SYNC, pts, n, loo_pred, loo_err, &loo, &err) ||
        loo.n == 0)
        return 0;
    /* the largest process count's runs: all-reduce time per iteration, by batch size */
    const dt_scale_row *lo = NULL, *hi = NULL;
    int top = 1;
    for (int i = 0; i < s->n_rows; i++) top = s->rows[i].procs > top ? s->rows[i].procs : top;
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        if (r->procs != top || r->lr_scaled || r->t_comm < 0 || iterations(s, r) <= 0) continue;
        if (!lo || r->batch < lo->batch) lo = r;
        if (!hi || r->batch > hi->batch) hi = r;
    }
    fputs("**Which term fails.** ", out);
    if (lo && hi && lo != hi) {
        fprintf(out,
                "The all-reduce terms (th1 + th2 2(N-1)/N + th3 (N-1)) do not depend on the "
                "batch size, but the %d-process runs' all-reduce took %.3g ms an iteration at "
                "batch %d and %.3g ms at batch %d (measured, means over ranks)",
                top, 1e3 * lo->t_comm / iterations(s, lo), lo->batch,
                1e3 * hi->t_comm / iterations(s, hi), hi->batch);
        double simulated = -1; /* the transfer alone, by scale's simulation */
        for (int i = 0; i < s->n_predicted; i++)
            if (!s->predicted[i].beyond && s->predicted[i].procs == top &&
                s->predicted[i].batch == hi->batch)
                simulated = s->predicted[i].comm_s;
        if (simulated > 0)
            fprintf(out, ", where the transfer itself takes %.3g ms (simulated before the runs)",
                    1e3 * simulated);
        fputs(": the rest is waiting for the slower rank, whose lag grows with the compute "
              "per step. ",
              out);
    }
    fprintf(out,
            "With a term for that wait, time per iteration = %.4g M/U + %.4g + %.4g 2(N-1)/N + "
            "%.4g (N-1) + %.4g (N-1)/N M/U seconds: leave-one-out error median %.1f%%, worst "
            "%.1f%% (Optimus's form: %.1f%%, %.1f%%).%s\n\n",
            fit->theta[0], fit->theta[1], fit->theta[2], fit->theta[3], fit->theta[4],
            100 * loo.median, 100 * loo.worst, 100 * plain->median, 100 * plain->worst,
            loo.worst <= 0.20 ? " The recommendation below uses this form."
                              : " It does not fit either.");
    return loo.worst <= 0.20;
}

/* The all-reduce speed model fitted to every measured config (time per iteration
 * against global batch, process count and the cores they get), its leave-one-out
 * check, each config's time predicted, and - only where the model fits - the process
 * count it would pick, within the hardware unless told it grows. */
static void report_model_in(const report *rp, dt_speed_point *pts, double *loo_pred,
                            double *loo_err);

static void report_model(const report *rp) {
    const size_t rows = (size_t)(rp->s->n_rows > 0 ? rp->s->n_rows : 1);
    dt_speed_point *pts = malloc(sizeof *pts * rows);
    double *loo_pred = malloc(sizeof(double) * rows), *loo_err = malloc(sizeof(double) * rows);
    if (pts && loo_pred && loo_err)
        report_model_in(rp, pts, loo_pred, loo_err);
    else
        fputs("\n## 7. Model vs measurement\n\nNo model: out of memory.\n", rp->out);
    free(pts);
    free(loo_pred);
    free(loo_err);
}

/* pts, loo_pred and loo_err: room for every row of the study. */
static void report_model_in(const report *rp, dt_speed_point *pts, double *loo_pred,
                            double *loo_err) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    fputs("\n## 7. Model vs measurement\n\n", out);
    int n = 0, max_measured = 1;
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        double it = iterations(s, r);
        if (r->lr_scaled || it <= 0 || !(epoch_time(r) > 0)) continue;
        pts[n++] = model_point(s, r->procs, (double)r->procs * r->batch, epoch_time(r) / it);
        if (r->procs > max_measured) max_measured = r->procs;
    }
    dt_speed_fit fit;
    dt_error err;
    if (dt_speed_fit_points(DT_SPEED_ALLREDUCE, pts, n, &fit, &err)) {
        fprintf(out, "No model: %s.\n", err.msg);
        return;
    }
    dt_loo_summary loo = {0, -1, -1};
    if (dt_speed_leave_one_out(DT_SPEED_ALLREDUCE, pts, n, loo_pred, loo_err, &loo, &err))
        loo.n = 0;
    if (s->cores > 0)
        fprintf(out,
                "All-reduce speed model fitted by NNLS (relative residuals) to the %d configs, "
                "compute divided over the cores the processes get (U = min(N x %d thread%s, "
                "%d cores)): time per iteration = %.4g M/U + %.4g + %.4g 2(N-1)/N + %.4g (N-1) "
                "seconds (M global batch, N processes; training time).\n\n",
                n, s->threads > 0 ? s->threads : 1, s->threads > 1 ? "s" : "", s->cores,
                fit.theta[0], fit.theta[1], fit.theta[2], fit.theta[3]);
    else
        fprintf(out,
                "All-reduce speed model fitted by NNLS (relative residuals) to the %d configs "
                "(cores unknown: compute per process, M/N; give --cores): time per iteration "
                "= %.4g M/N + %.4g + %.4g 2(N-1)/N + %.4g (N-1) seconds (M global batch, N "
                "processes; training time).\n\n",
                n, fit.theta[0], fit.theta[1], fit.theta[2], fit.theta[3]);
    fputs("| procs | batch | measured (s) | model (s) | error | leave-one-out error (size) |\n"
          "|---|---|---|---|---|---|\n",
          out);
    int k = 0;
    for (int i = 0; i < s->n_rows && k < n; i++) {
        const dt_scale_row *r = &s->rows[i];
        const double it = iterations(s, r);
        if (r->lr_scaled || it <= 0 || !(epoch_time(r) > 0)) continue;
        const double pred = it * dt_speed_step_time(&fit, pts[k].w, 0, pts[k].batch);
        fprintf(out, "| %d | %d | %.2f | %.2f | %+.1f%% |", r->procs, r->batch, epoch_time(r), pred,
                100.0 * (pred - epoch_time(r)) / epoch_time(r));
        if (loo.n > 0 && loo_pred[k] >= 0)
            fprintf(out, " %.1f%% |\n", 100.0 * loo_err[k]);
        else
            fputs(" n/a |\n", out);
        k++;
    }
    fputc('\n', out);
    if (loo.n == 0) {
        fputs("**No leave-one-out check** (too few configs to fit without one): the model is "
              "not validated, so it recommends nothing.\n",
              out);
        return;
    }
    fprintf(out,
            "Leave-one-out error (each config predicted by the fit of the others): median "
            "%.1f%%, worst %.1f%%.\n\n",
            100.0 * loo.median, 100.0 * loo.worst);
    /* where Optimus's form fails, the same with a wait that grows with compute (the LOO
     * arrays are reused): the one that fits recommends */
    dt_speed_fit sync;
    const int use_sync =
        loo.worst > 0.20 && report_sync_term(rp, &loo, pts, n, loo_pred, loo_err, &sync);
    if (loo.worst > 0.20 && !use_sync) {
        fputs("**The model does not fit** these measurements (a leave-one-out error above "
              "20%): no process count is recommended from it.\n",
              out);
        return;
    }
    /* the hardware's process count: cores / threads (or what --cores says) */
    int hw = max_measured;
    if (s->cores > 0) {
        const int t = s->threads > 0 ? s->threads : 1;
        if (s->cores / t > hw) hw = s->cores / t;
    }
    fprintf(out,
            "Predicted best process count per batch size, from 1 to %d processes (%s); "
            "measured up to %d:\n\n",
            hw,
            s->cores_given ? "the hardware --cores describes"
            : s->cores > 0 ? "what this machine's cores hold"
                           : "the measured range: cores unknown",
            max_measured);
    for (int b = 0; b < rp->nb; b++) {
        int best = 1;
        double best_t = INFINITY;
        for (int N = 1; N <= hw; N++) {
            double it = split_iterations(s->dataset_size, N, rp->batch[b]);
            if (it <= 0) break;
            const dt_speed_point q = model_point(s, N, (double)N * rp->batch[b], 0);
            double t = it * dt_speed_step_time(use_sync ? &sync : &fit, q.w, 0, q.batch);
            if (t < best_t) best_t = t, best = N;
        }
        if (!isfinite(best_t)) continue;
        fprintf(out, "- batch %d per process: %d processes (%.2f s per epoch)", rp->batch[b], best,
                best_t);
        if (best > max_measured)
            fprintf(out, " - extrapolated %d process%s beyond the largest measured count",
                    best - max_measured, best - max_measured > 1 ? "es" : "");
        fputs("\n", out);
    }
}

/* Means of the runs' sys records (dtrain's built-in dstat) and the per-config plots. */
static void report_utilisation(const report *rp, const char *const *plots, int n_plots) {
    const dt_scale_study *s = rp->s;
    FILE *out = rp->out;
    int any = 0;
    for (int i = 0; i < s->n_rows; i++) any |= s->rows[i].sys_samples > 0;
    if (!any) return;
    fputs("\n## 8. Utilisation (the runs' sys records)\n\nEvery training rank and "
          "parameter server samples /proc once a second (--sys-interval). CPU per rank in % of one "
          "core (user + system; 100 "
          "= one busy "
          "core), the machine's other processes in cores (the job's other ranks count as "
          "other here), the largest resident memory of a rank, MPI bytes dtrain sent and "
          "network bytes (interfaces other than loopback, both directions) per rank per "
          "second, and the bytes each rank read from and wrote to storage (/proc/self/io's "
          "read_bytes and write_bytes: what reached the disk, page-cache hits not counted) "
          "per second. Medians over the repeats of each run's means; runs shorter than a "
          "second have no samples.\n\n| procs | batch | samples | CPU per rank (%) | other "
          "processes (cores) | RSS max (MB) | MPI sent (MB/s per rank) | network (MB/s per "
          "rank) | disk read (MB/s per rank) | disk written (MB/s per rank) "
          "|\n|---|---|---|---|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < s->n_rows; i++) {
        const dt_scale_row *r = &s->rows[i];
        if (r->lr_scaled) continue;
        fprintf(out, "| %d | %d | %ld |", r->procs, r->batch, r->sys_samples);
        cell(out, r->cpu_pct, "%.0f");
        cell(out, r->sys_other_cores, "%.2f");
        cell(out, r->rss_mb, "%.0f");
        cell(out, r->mpi_mbs, "%.2f");
        cell(out, r->net_mbs, "%.3f");
        cell(out, r->disk_read_mbs, "%.3f");
        cell(out, r->disk_write_mbs, "%.3f");
        fputc('\n', out);
    }
    int listed = 0;
    for (int i = 0; i < n_plots; i++)
        if (!strncmp(plots[i], "util_", 5)) {
            fprintf(out, "%s`%s`",
                    listed ? ", "
                           : "\nCPU and MPI traffic over time, one line "
                             "per rank (first repeat of each config): ",
                    plots[i]);
            listed = 1;
        }
    if (listed) fputs(".\n", out);
}

void dt_scale_write_report(const dt_scale_study *s, FILE *out, const char *const *plots,
                           int n_plots) {
    report rp = {.s = s, .out = out};
    rp.np = dt_scale_distinct(s, 0, rp.procs);
    rp.nb = dt_scale_distinct(s, 1, rp.batch);
    report_header(&rp);
    report_times_and_speedups(&rp);
    report_compute_vs_comm(&rp);
    report_bandwidth(&rp);
    report_accuracy(&rp);
    dt_reading_write(s, out);
    dt_scale_write_predictions(s, out);
    dt_scale_tta_write(s->tta, out);
    report_model(&rp);
    report_utilisation(&rp, plots, n_plots);
    if (n_plots > 0) {
        fputs("\n## Plots\n\n", out);
        for (int i = 0; i < n_plots; i++) fprintf(out, "![%s](%s)\n\n", plots[i], plots[i]);
    }
}
