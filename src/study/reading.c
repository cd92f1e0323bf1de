#include "study/reading.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Seconds as the report's tables give them: 2 decimals from 1 s up, else 3. */
typedef struct seconds {
    char text[32];
} seconds;
static seconds secs(double v) {
    seconds x;
    snprintf(x.text, sizeof x.text, fabs(v) >= 1 ? "%.2f" : "%.3f", v);
    return x;
}

const char *dt_loss_term_name(dt_loss_term t) {
    static const char *const names[DT_LOSS_TERMS] = {"compute", "exposed communication", "other"};
    return t >= 0 && t < DT_LOSS_TERMS ? names[t] : "?";
}

int dt_reading_split_of(const dt_scale_study *s, const dt_scale_row *r, dt_reading_split *out) {
    memset(out, 0, sizeof *out);
    out->largest = -1;
    out->compute = out->comm = out->data_wait = -1;
    const dt_scale_row *b = dt_scale_find(s, 1, r->batch, r->lr_scaled);
    if (!b || r->procs < 2) return -1;
    out->t1 = dt_scale_time(b);
    out->tn = dt_scale_time(r);
    if (!(out->t1 > 0) || !(out->tn > 0)) return -1;
    out->ideal = out->t1 / r->procs; /* section 3's derived T_comp */
    out->lost = out->tn - out->ideal;
    if (r->t_compute >= 0 && isfinite(r->t_compute)) out->compute = r->t_compute;
    if (r->t_comm_exposed >= 0 && isfinite(r->t_comm_exposed)) out->comm = r->t_comm_exposed;
    if (r->t_data >= 0 && isfinite(r->t_data)) out->data_wait = r->t_data;
    out->measured = out->compute >= 0 && out->comm >= 0;
    if (!out->measured) return 0;
    out->term[DT_LOSS_COMPUTE] = out->compute - out->ideal;
    out->term[DT_LOSS_COMM] = out->comm;
    out->term[DT_LOSS_OTHER] = out->tn - out->compute - out->comm;
    double best = 0;
    for (int t = 0; t < DT_LOSS_TERMS; t++)
        if (out->term[t] > best) best = out->term[t], out->largest = t;
    return 0;
}

/* Why r's speed-up is not to be trusted - a busy machine during its run or its
 * 1-process run, or a speed-up above N - as its whole line, saying nothing of causes;
 * returns 0 (and writes nothing) when it is to be trusted. */
static int write_untrusted(const dt_scale_study *s, const dt_scale_row *r, FILE *out) {
    const dt_scale_row *b = dt_scale_find(s, 1, r->batch, r->lr_scaled);
    const double sp = dt_scale_strong_speedup(s, r);
    if (r->unfaithful) {
        fprintf(out,
                "- Batch %d per process, %d processes: re-run (unfaithful: an emulated host ran "
                "out of its CPU quota in %.0f%% of periods).\n",
                r->batch, r->procs, 100 * r->throttled);
        return 1;
    }
    if (dt_scale_speedup_busy(s, r)) {
        fprintf(out,
                "- Batch %d per process, %d processes: re-run (machine busy: other processes "
                "used ",
                r->batch, r->procs);
        if (r->busy) fprintf(out, "%.2f cores", r->other_cores);
        if (r->busy && b && b->busy) fputs(", and ", out);
        if (b && b->busy) fprintf(out, "%.2f cores during the 1-process run", b->other_cores);
        fputs(").\n", out);
        return 1;
    }
    if (sp > r->procs) {
        double lo, hi;
        if (dt_scale_strong_speedup_range(s, r, &lo, &hi)) lo = hi = sp;
        fprintf(out, "- Batch %d per process, %d processes: speed-up %.2f", r->batch, r->procs, sp);
        if (hi > lo) fprintf(out, " [%.2f-%.2f]", lo, hi);
        fprintf(out,
                " (efficiency %.0f%%): %s: suspect; re-run (a CPU job does not get faster than "
                "%d times on %d processes).\n",
                100.0 * sp / r->procs,
                lo > r->procs ? "superlinear beyond the spread"
                              : "above 100% efficiency within the spread",
                r->procs, r->procs);
        return 1;
    }
    return 0;
}

/* The cause the numbers support when compute is the largest loss: processes sharing
 * cores (more threads than cores), ranks that did not run all the time (CPU per rank
 * well under their threads), all cores taken (shared cores not ruled out), or - only
 * with none of these, and exposed communication small beside the compute slowdown -
 * memory-bandwidth contention. */
static void write_compute_cause(const dt_scale_study *s, const dt_scale_row *r,
                                const dt_reading_split *x, FILE *out) {
    const double slow = x->compute / x->ideal;
    if (slow < 1.1) return; /* largest, but within 10% of the ideal: nothing to explain */
    fprintf(out, " Compute per process slowed from %s to %s s (x%.2f)", secs(x->ideal).text,
            secs(x->compute).text, slow);
    const int threads = r->threads, cores = s->cores, n = r->procs;
    const char *plural = threads > 1 ? "s" : "";
    if (threads <= 0 || cores <= 0) {
        fputs("; the cores or the threads per process were not recorded, so whether the "
              "processes shared cores is not known.",
              out);
    } else if (n * threads > cores) {
        fprintf(out, ": %d processes x %d thread%s exceed the %d cores, so they shared cores.", n,
                threads, plural, cores);
    } else if (r->cpu_pct >= 0 && r->cpu_pct < 80.0 * threads) {
        fprintf(out,
                " while each rank used %.0f%% of a core with %d thread%s: the ranks did not run "
                "all the time.",
                r->cpu_pct, threads, plural);
    } else if (n * threads == cores) {
        fprintf(out,
                ": %d processes x %d thread%s take all %d cores, none spare for the loader "
                "threads and MPI, so shared cores are not ruled out.",
                n, threads, plural, cores);
    } else if (x->comm < 0.5 * x->term[DT_LOSS_COMPUTE]) {
        fprintf(out,
                " while exposed communication was %s s, consistent with memory-bandwidth "
                "contention between processes; cores/bandwidth measured: %d processes x %d "
                "thread%s on %d cores (none shared), CPU per rank ",
                secs(x->comm).text, n, threads, plural, cores);
        if (r->cpu_pct >= 0)
            fprintf(out, "%.0f%% of a core", r->cpu_pct);
        else
            fputs("not sampled (runs under a second)", out);
        fputs(", memory bandwidth not measured.", out);
    } else {
        fputc('.', out);
    }
}

/* One trusted config: speed-up, T(N) against T(1)/N, the loss split with each term's
 * seconds and share, the largest named, loader waits beside, and the cause the
 * numbers support. */
static void write_config(const dt_scale_study *s, const dt_scale_row *r, FILE *out) {
    const double sp = dt_scale_strong_speedup(s, r);
    double lo, hi;
    if (dt_scale_strong_speedup_range(s, r, &lo, &hi)) lo = hi = sp;
    fprintf(out, "- Batch %d per process, %d processes: speed-up %.2f", r->batch, r->procs, sp);
    if (hi > lo) fprintf(out, " [%.2f-%.2f]", lo, hi);
    fprintf(out, " (efficiency %.0f%%%s).", 100.0 * sp / r->procs,
            sp / r->procs >= 0.8 ? ": scales well" : "");
    dt_reading_split x;
    if (dt_reading_split_of(s, r, &x)) {
        fputc('\n', out);
        return;
    }
    fprintf(out, " T(%d) = %s s against T(1)/%d = %s s", r->procs, secs(x.tn).text, r->procs,
            secs(x.ideal).text);
    if (x.lost <= 0) {
        fputs(": nothing lost to split.\n", out);
        return;
    }
    fprintf(out, ": %s s lost", secs(x.lost).text);
    if (!x.measured) {
        fputs("; no measured split of the time (compute, exposed communication) in the data to "
              "say where.\n",
              out);
        return;
    }
    /* the terms, largest first; each with its seconds and share of the loss */
    int order[DT_LOSS_TERMS] = {DT_LOSS_COMPUTE, DT_LOSS_COMM, DT_LOSS_OTHER};
    for (int i = 1; i < DT_LOSS_TERMS; i++)
        for (int k = i; k > 0 && x.term[order[k]] > x.term[order[k - 1]]; k--) {
            const int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    for (int i = 0; i < DT_LOSS_TERMS; i++) {
        const int t = order[i];
        fprintf(out, "%s%s, %s s (", i == 0 ? "; the largest is " : ", then ",
                dt_loss_term_name((dt_loss_term)t), secs(x.term[t]).text);
        if (x.term[t] > 0)
            fprintf(out, "%.0f%%%s", 100.0 * x.term[t] / x.lost, i == 0 ? " of the loss" : "");
        else
            fputs("a gain", out);
        if (t == DT_LOSS_COMPUTE)
            fprintf(out, "; %s s per process against %s)", secs(x.compute).text,
                    secs(x.ideal).text);
        else if (t == DT_LOSS_OTHER)
            fputs("; step overheads, the slowest rank's lag)", out);
        else
            fputc(')', out);
    }
    fputc('.', out);
    if (x.data_wait >= 0)
        fprintf(out, " Loader waits %s s per process (outside T).", secs(x.data_wait).text);
    if (x.largest == DT_LOSS_COMPUTE) write_compute_cause(s, r, &x, out);
    fputc('\n', out);
}

/* Whether r is a multi-process row with a speed-up to read. */
static int readable(const dt_scale_study *s, const dt_scale_row *r) {
    return r && r->procs >= 2 && dt_scale_strong_speedup(s, r) >= 0;
}

static int trusted(const dt_scale_study *s, const dt_scale_row *r) {
    return readable(s, r) && !dt_scale_speedup_busy(s, r) &&
           dt_scale_strong_speedup(s, r) <= r->procs;
}

/* Where scaling stops paying: the first added process count gaining under 5%, per
 * batch, over trusted figures only. */
static void write_where_scaling_stops(const dt_scale_study *s, const int *procs, int np,
                                      const int *batch, int nb, FILE *out) {
    for (int b = 0; b < nb; b++) {
        double prev = 1.0;
        int prev_p = 1;
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            if (!readable(s, r)) continue;
            if (!trusted(s, r)) break;
            const double sp = dt_scale_strong_speedup(s, r);
            if (sp < prev * 1.05) {
                fprintf(out,
                        "- At batch %d, going from %d to %d processes gains less than 5%% "
                        "(speed-up %.2f -> %.2f): scaling stops paying there.\n",
                        batch[b], prev_p, r->procs, prev, sp);
                break;
            }
            prev = sp;
            prev_p = r->procs;
        }
    }
}

/* One end of the batch comparison: the loss and its largest term. */
static void write_loss_brief(const dt_reading_split *x, FILE *out) {
    fprintf(out, "%s s", secs(x->lost).text);
    if (x->lost > 0 && x->largest >= 0)
        fprintf(out, " (largest: %s, %s s)", dt_loss_term_name((dt_loss_term)x->largest),
                secs(x->term[x->largest]).text);
}

/* The speed-up at the largest process count, smallest vs largest batch, with how the
 * measured split moved between them (both trusted). */
static void write_batch_effect(const dt_scale_study *s, const int *procs, int np, const int *batch,
                               int nb, FILE *out) {
    if (nb < 2 || np < 1 || procs[np - 1] < 2) return;
    const dt_scale_row *a = dt_scale_find(s, procs[np - 1], batch[0], 0);
    const dt_scale_row *c = dt_scale_find(s, procs[np - 1], batch[nb - 1], 0);
    if (!trusted(s, a) || !trusted(s, c)) return;
    dt_reading_split xa, xc;
    if (dt_reading_split_of(s, a, &xa) || dt_reading_split_of(s, c, &xc)) return;
    fprintf(out, "- With %d processes, the speed-up goes from %.2f at batch %d to %.2f at batch %d",
            procs[np - 1], dt_scale_strong_speedup(s, a), batch[0], dt_scale_strong_speedup(s, c),
            batch[nb - 1]);
    if (!xa.measured || !xc.measured) {
        fputs(" (no measured split of the time to say why).\n", out);
        return;
    }
    fputs("; the time lost against T(1)/N goes from ", out);
    write_loss_brief(&xa, out);
    fputs(" to ", out);
    write_loss_brief(&xc, out);
    fprintf(out,
            ", exposed communication from %s to %s s, compute per process from %s to %s s "
            "(ideal %s and %s).\n",
            secs(xa.comm).text, secs(xc.comm).text, secs(xa.compute).text, secs(xc.compute).text,
            secs(xa.ideal).text, secs(xc.ideal).text);
}

void dt_reading_write(const dt_scale_study *s, FILE *out) {
    int procs[64], batch[64];
    const int np = dt_scale_distinct(s, 0, procs), nb = dt_scale_distinct(s, 1, batch);
    fputs("## 6. Reading\n\n", out);
    int n_readable = 0, n_trusted = 0;
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            n_readable += readable(s, r);
            n_trusted += trusted(s, r);
        }
    if (n_readable == 0) {
        fputs("Nothing to read: speed-ups need a 1-process run and at least one multi-process "
              "run of the same batch size.\n",
              out);
        return;
    }
    if (n_trusted == 0)
        fputs("Nothing to read: no multi-process config is to be trusted (measured on a busy "
              "machine, or faster than N times on N processes). Run the same `dtrain scale` "
              "again over this folder (`--wait-idle` waits for a quiet machine; from make: `make "
              "run WAIT_IDLE=1`): it measures the busy configs again.\n\n",
              out);
    else
        fputs("T(N) against the ideal T(1)/N, the time lost split with section 3's figures: "
              "compute (measured compute per process less T(1)/N), exposed communication, and "
              "other (the rest).\n\n",
              out);
    for (int b = 0; b < nb; b++)
        for (int p = 0; p < np; p++) {
            const dt_scale_row *r = dt_scale_find(s, procs[p], batch[b], 0);
            if (!readable(s, r) || write_untrusted(s, r, out)) continue;
            write_config(s, r, out);
        }
    if (n_trusted == 0) return;
    write_where_scaling_stops(s, procs, np, batch, nb, out);
    write_batch_effect(s, procs, np, batch, nb, out);
}
