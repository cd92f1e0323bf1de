#include "study/tta.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/stats.h"
#include "metrics/runlog.h"
#include "perfmodel/nnls.h"
#include "study/predict.h"

int dt_tta_loss_curve(const char *log, double *k, double *l, int *n, double *first, long *steps,
                      dt_error *err) {
    *n = 0;
    *steps = 0;
    if (access(log, F_OK) != 0) return 0; /* configs without a log (--times, memory stop) */
    dt_runlog_contents c;
    if (dt_runlog_load(log, &c, err)) return -1;
    long total = 0;
    for (long i = 0; i < c.n_steps; i++) total += c.steps[i].rank == 0;
    const long window = total / 40 > 0 ? total / 40 : 1;
    double sum = 0.0;
    long in_window = 0, seen = 0;
    *first = NAN;
    for (long i = 0; i < c.n_steps && *n < DT_TTA_CURVE_POINTS; i++) {
        if (c.steps[i].rank != 0) continue;
        if (seen == 0) *first = c.steps[i].loss;
        sum += c.steps[i].loss;
        in_window++;
        seen++;
        if (in_window == window) {
            if (!isfinite(sum)) break; /* diverged: the curve ends at its last finite window */
            k[*n] = (double)(seen - window / 2);
            l[(*n)++] = sum / (double)in_window;
            sum = 0.0;
            in_window = 0;
        }
    }
    dt_runlog_contents_free(&c);
    *steps = total;
    return total > 0;
}

/* The config's loss curve over its repeats, each run with a seed of its own (sweep.h):
 * the window means averaged over the repeats whose run took as many steps as the
 * first's, up to the shortest of their curves (a diverged run's ends early); *first
 * the mean of their first losses (repeats: the study's count for the config; their
 * logs as dt_scale_log_path names them). Returns as
 * dt_tta_loss_curve, with *seeds the curves averaged. */
static int mean_curve(const char *dir, int procs, int batch, int repeats, double *k, double *l,
                      int *n, double *first, long *steps, int *seeds, dt_error *err) {
    char log[4200];
    dt_scale_log_path(log, sizeof log, dir, procs, batch, 0, 0);
    *seeds = 0;
    const int got = dt_tta_loss_curve(log, k, l, n, first, steps, err);
    if (got <= 0 || *n == 0) return got;
    *seeds = 1;
    for (int r = 1; r < repeats; r++) {
        double kr[DT_TTA_CURVE_POINTS], lr[DT_TTA_CURVE_POINTS], first_r;
        long steps_r;
        int nr;
        dt_scale_log_path(log, sizeof log, dir, procs, batch, 0, r);
        const int got_r = dt_tta_loss_curve(log, kr, lr, &nr, &first_r, &steps_r, err);
        if (got_r < 0) return -1;
        if (got_r == 0 || nr == 0 || steps_r != *steps || !isfinite(first_r)) continue;
        if (nr < *n) *n = nr;
        /* l holds the mean of the curves so far: mean += (x - mean) / count */
        (*seeds)++;
        for (int i = 0; i < *n; i++) l[i] += (lr[i] - l[i]) / *seeds;
        *first += (first_r - *first) / *seeds;
    }
    return 1;
}

/* S(G) = s_min + e_min / G by NNLS on relative residuals over the runs that reached
 * the target, run `skip` left out (-1: none). 0, or -1 with fewer than 2 points. */
static int fit_steps(const dt_scale_tta *t, int skip, double *s_min, double *e_min) {
    double a[2 * DT_TTA_MAX_RUNS], b[DT_TTA_MAX_RUNS];
    int m = 0;
    for (int i = 0; i < t->n_runs; i++) {
        const dt_tta_run *r = &t->runs[i];
        if (i == skip || r->observed <= 0) continue;
        a[2 * m] = 1.0 / r->observed;
        a[2 * m + 1] = 1.0 / (r->global_batch * r->observed);
        b[m++] = 1.0;
    }
    double x[2];
    if (m < 2 || dt_nnls(a, b, m, 2, x, NULL) || (x[0] <= 0 && x[1] <= 0)) return -1;
    *s_min = x[0];
    *e_min = x[1];
    return 0;
}

/* Windows on each side of the first window at or below the target that the crossing's
 * local fit takes (7 windows in all, 7/40 of the run). */
enum { CROSSING_HALF_WIDTH = 3 };

/* The step where the loss curve reaches target: near the first window whose mean is at
 * or below it, the curve's local power law, log l = a + b log k, fitted by least
 * squares to the windows around it, solved for the target (and kept within them). A
 * single window's mean carries that window's noise: on make run's study, where the
 * loss flattens, one window's bump moved a config's crossing by 20% against its twin at
 * the same global batch; the trend of 7 windows holds it (docs/scaling.md). Where no
 * power law fits (too few windows, a loss <= 0, a curve that does not fall there), the
 * linear interpolation between that window and the one before. -1 if never reached. */
static double crossing(const double *k, const double *l, int n, double target) {
    int i = 0;
    while (i < n && l[i] > target) i++;
    if (i == n) return -1;
    const int a = i > CROSSING_HALF_WIDTH ? i - CROSSING_HALF_WIDTH : 0;
    const int b = i + CROSSING_HALF_WIDTH + 1 < n ? i + CROSSING_HALF_WIDTH + 1 : n;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int usable = b - a >= 3 && target > 0;
    for (int j = a; j < b && usable; j++) {
        if (!(k[j] > 0 && l[j] > 0)) {
            usable = 0;
            break;
        }
        const double x = log(k[j]), y = log(l[j]);
        sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double m = b - a, det = m * sxx - sx * sx;
    if (usable && det > 0) {
        const double slope = (m * sxy - sx * sy) / det, icept = (sy - slope * sx) / m;
        if (slope < 0) {
            const double step = exp((log(target) - icept) / slope);
            return step < k[a] ? k[a] : step > k[b - 1] ? k[b - 1] : step;
        }
    }
    if (i == 0 || !(l[i - 1] > l[i])) return k[i];
    return k[i - 1] + (l[i - 1] - target) / (l[i - 1] - l[i]) * (k[i] - k[i - 1]);
}

/* The default target, the runs' steps to it, their own curves' steps. */
static void read_targets(dt_scale_tta *t, double target, const double (*k)[DT_TTA_CURVE_POINTS],
                         const double (*l)[DT_TTA_CURVE_POINTS], const int *n, double *firsts) {
    int finite = 0;
    for (int i = 0; i < t->n_runs; i++)
        if (isfinite(firsts[i])) firsts[finite++] = firsts[i];
    t->first_loss = finite ? dt_median(firsts, finite) : NAN;
    t->lowest_final = INFINITY;
    for (int i = 0; i < t->n_runs; i++)
        if (t->runs[i].final_loss < t->lowest_final) t->lowest_final = t->runs[i].final_loss;
    t->target_given = target > 0;
    t->target = target > 0 ? target
                           : t->lowest_final +
                                 (1 - DT_TTA_DEFAULT_PROGRESS) * (t->first_loss - t->lowest_final);
    for (int i = 0; i < t->n_runs; i++) {
        dt_tta_run *r = &t->runs[i];
        r->observed = crossing(k[i], l[i], n[i], t->target);
        t->n_reached += r->observed > 0;
        dt_loss_fit fit;
        dt_error ferr;
        r->curve = dt_loss_fit_points(k[i], l[i], n[i], &fit, &ferr)
                       ? -1
                       : dt_loss_step_for_target(&fit, t->target);
    }
}

/* S(G) for every run; the model's error: leave-one-out over the runs that reached the
 * target, and how much sooner than their steps it says the others would have. */
static void check_steps(dt_scale_tta *t) {
    double errors[DT_TTA_MAX_RUNS];
    t->n_errors = t->n_early = 0;
    t->worst_early = 0;
    t->g_lo = INFINITY;
    t->g_hi = 0;
    for (int i = 0; i < t->n_runs; i++) {
        dt_tta_run *r = &t->runs[i];
        double s_min, e_min;
        r->model = r->error = -1;
        if (r->observed > 0) {
            if (r->global_batch < t->g_lo) t->g_lo = r->global_batch;
            if (r->global_batch > t->g_hi) t->g_hi = r->global_batch;
            if (fit_steps(t, i, &s_min, &e_min)) continue; /* fewer than 2 others */
            r->model = s_min + e_min / r->global_batch;
            r->error = (r->model - r->observed) / r->observed;
            errors[t->n_errors++] = fabs(r->error);
        } else {
            r->model = t->s_min + t->e_min / r->global_batch;
            /* not reached in r->steps: the model errs only if it says it would have */
            r->error = r->model < (double)r->steps ? (r->steps - r->model) / (double)r->steps : 0;
            t->n_early += r->error > 0;
            if (r->error > t->worst_early) t->worst_early = r->error;
        }
    }
    t->median = t->worst = -1;
    if (t->n_errors > 0) {
        t->median = dt_median(errors, t->n_errors);
        t->worst = errors[t->n_errors - 1];
    }
}

/* Steps x the simulated step past the machine, per batch size and worker count. */
static void predict_points(dt_scale_tta *t, const dt_scale_study *s) {
    t->best = t->best_in_range = -1;
    for (int i = 0; i < s->n_predicted && t->n_points < DT_TTA_MAX_POINTS; i++) {
        const dt_scale_predicted *p = &s->predicted[i];
        if (!p->beyond || p->step_s <= 0) continue;
        const double g = (double)p->procs * p->batch, steps = t->s_min + t->e_min / g;
        dt_tta_point *pt = &t->points[t->n_points];
        *pt = (dt_tta_point){p->procs,  p->batch,          steps,
                             p->step_s, steps * p->step_s, g < t->g_lo || g > t->g_hi};
        if (t->best < 0 || pt->time_s < t->points[t->best].time_s) t->best = t->n_points;
        if (!pt->extrapolated &&
            (t->best_in_range < 0 || pt->time_s < t->points[t->best_in_range].time_s))
            t->best_in_range = t->n_points;
        t->n_points++;
    }
}

int dt_scale_tta_compute(const dt_scale_study *s, const char *dir, double target,
                         dt_scale_tta **out, dt_error *err) {
    *out = NULL;
    if (!strcmp(s->mode, "ps-async") || !strcmp(s->mode, "ssp"))
        return dt_error_set(err,
                            "%s: workers update the model one at a time, so a global batch "
                            "does not set the steps (the model is for synchronous training)",
                            s->mode);
    int procs[64], batch[64];
    const int np = dt_scale_distinct(s, 0, procs), nb = dt_scale_distinct(s, 1, batch);
    dt_scale_tta *t = calloc(1, sizeof *t);
    double(*k)[DT_TTA_CURVE_POINTS] = malloc(sizeof *k * DT_TTA_MAX_RUNS);
    double(*l)[DT_TTA_CURVE_POINTS] = malloc(sizeof *l * DT_TTA_MAX_RUNS);
    int n[DT_TTA_MAX_RUNS];
    double firsts[DT_TTA_MAX_RUNS];
    int rc = 0;
    if (!t || !k || !l) {
        rc = dt_error_set(err, "out of memory for the time-to-target curves");
        goto done;
    }
    for (int b = 0; b < nb && !rc; b++)
        for (int p = 0; p < np && !rc && t->n_runs < DT_TTA_MAX_RUNS; p++) {
            const dt_scale_row *row = dt_scale_find(s, procs[p], batch[b], 0);
            if (!row) continue;
            const int i = t->n_runs;
            dt_tta_run *r = &t->runs[i];
            const int got = mean_curve(dir, procs[p], batch[b], row->repeats, k[i], l[i], &n[i],
                                       &firsts[i], &r->steps, &r->seeds, err);
            if (got < 0) rc = -1;
            if (got <= 0 || n[i] == 0) continue;
            r->procs = procs[p];
            r->batch = batch[b];
            r->global_batch = (double)procs[p] * batch[b];
            r->final_loss = l[i][n[i] - 1];
            r->step_s = dt_scale_measured_step(s, row);
            r->predicted_step_s = -1;
            for (int j = 0; j < s->n_predicted; j++)
                if (!s->predicted[j].beyond && s->predicted[j].procs == procs[p] &&
                    s->predicted[j].batch == batch[b])
                    r->predicted_step_s = s->predicted[j].step_s;
            t->n_runs++;
        }
    if (rc || t->n_runs == 0) goto done;
    read_targets(t, target, (const double(*)[DT_TTA_CURVE_POINTS])k,
                 (const double(*)[DT_TTA_CURVE_POINTS])l, n, firsts);
    if (!isfinite(t->target) || t->target <= 0) {
        rc = dt_error_set(err, "the runs' first losses are not finite: no target to reach");
        goto done;
    }
    t->fitted = fit_steps(t, -1, &t->s_min, &t->e_min) == 0;
    if (t->fitted) {
        check_steps(t);
        predict_points(t, s);
    } else {
        t->median = t->worst = -1;
        t->best = t->best_in_range = -1;
    }
    dt_scale_prediction_error(s, &t->speed_median, NULL, NULL, NULL, NULL);
    t->recommend = t->fitted && t->best_in_range >= 0 && t->median >= 0 &&
                   t->median <= DT_TTA_STEPS_ERROR && t->worst_early <= DT_TTA_STEPS_ERROR &&
                   t->speed_median >= 0 && t->speed_median <= DT_TTA_SPEED_ERROR;
    *out = t;
    t = NULL;
done:
    free(t);
    free(k);
    free(l);
    return rc ? -1 : 0;
}

static void number_or_blank(FILE *out, double v, const char *fmt) {
    fputs(" ", out);
    if (v >= 0) fprintf(out, fmt, v);
    fputs(" |", out);
}

static void write_runs(const dt_scale_tta *t, FILE *out) {
    fputs("\n| procs | batch | global batch | steps run | final loss | steps to target "
          "(observed) | own curve (Optimus) | S(G) | error | time to target, measured (s) | "
          "predicted (s) |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < t->n_runs; i++) {
        const dt_tta_run *r = &t->runs[i];
        fprintf(out, "| %d | %d | %.0f | %ld | %.3f |", r->procs, r->batch, r->global_batch,
                r->steps, r->final_loss);
        if (r->observed > 0)
            fprintf(out, " %.0f |", r->observed);
        else
            fprintf(out, " not reached |");
        number_or_blank(out, r->curve, "%.0f");
        number_or_blank(out, r->model, "%.0f");
        if (r->observed > 0 && r->model > 0)
            fprintf(out, " %+.1f%% |", 100 * r->error);
        else if (r->observed <= 0 && r->error > 0)
            fprintf(out, " said %.0f%% sooner |", 100 * r->error);
        else if (r->observed <= 0)
            fputs(" ok: after its steps |", out);
        else
            fputs(" |", out);
        const double measured = r->observed > 0 && r->step_s > 0 ? r->observed * r->step_s : -1;
        const double predicted =
            r->model > 0 && r->predicted_step_s > 0 ? r->model * r->predicted_step_s : -1;
        number_or_blank(out, measured, "%.3g");
        number_or_blank(out, predicted, "%.3g");
        fputc('\n', out);
    }
}

/* Per batch size a row, per worker count a column: predicted seconds to target. */
static void write_points(const dt_scale_tta *t, FILE *out) {
    int workers[32], nw = 0, batches[64], nbat = 0;
    for (int i = 0; i < t->n_points; i++) {
        int w = 0, b = 0;
        while (w < nw && workers[w] != t->points[i].workers) w++;
        if (w == nw && nw < 32) workers[nw++] = t->points[i].workers;
        while (b < nbat && batches[b] != t->points[i].batch) b++;
        if (b == nbat && nbat < 64) batches[nbat++] = t->points[i].batch;
    }
    fputs("\n| batch per worker |", out);
    for (int w = 0; w < nw; w++) fprintf(out, " %d |", workers[w]);
    fputs("\n|---|", out);
    for (int w = 0; w < nw; w++) fputs("---|", out);
    fputc('\n', out);
    for (int b = 0; b < nbat; b++) {
        fprintf(out, "| %d |", batches[b]);
        for (int w = 0; w < nw; w++) {
            const dt_tta_point *pt = NULL;
            for (int i = 0; i < t->n_points && !pt; i++)
                if (t->points[i].batch == batches[b] && t->points[i].workers == workers[w])
                    pt = &t->points[i];
            if (!pt)
                fputs(" |", out);
            else
                fprintf(out, " %.3g%s%s |", pt->time_s, pt->extrapolated ? "*" : "",
                        pt == &t->points[t->best] ? " **fastest**" : "");
        }
        fputc('\n', out);
    }
}

void dt_scale_tta_write(const dt_scale_tta *t, FILE *out) {
    if (!t) return;
    /* "one run each", "2 runs each, seeds --seed and --seed + 1", "1 to 2 runs ..." */
    int lo = 0, hi = 0;
    for (int i = 0; i < t->n_runs; i++) {
        if (!lo || t->runs[i].seeds < lo) lo = t->runs[i].seeds;
        if (t->runs[i].seeds > hi) hi = t->runs[i].seeds;
    }
    char seeds_text[160];
    if (hi <= 1)
        snprintf(seeds_text, sizeof seeds_text,
                 "one run each: `--repeats` 2 or more averages "
                 "runs of seeds --seed, --seed + 1, ...");
    else if (lo == hi)
        snprintf(seeds_text, sizeof seeds_text, "%d runs each, seeds --seed to --seed + %d", hi,
                 hi - 1);
    else
        snprintf(seeds_text, sizeof seeds_text, "%d to %d runs each, seeds from --seed on", lo, hi);
    fprintf(out, "\n## Time to a target loss\n\nTarget: training loss **%.3f**", t->target);
    if (t->target_given)
        fputs(" (`--target-loss`)", out);
    else
        fprintf(out,
                " (`--target-loss`; default: %.0f%% of the way from the first step's loss, "
                "%.3f, to the lowest final loss of any run, %.3f)",
                100 * DT_TTA_DEFAULT_PROGRESS, t->first_loss, t->lowest_final);
    fprintf(out,
            ". A config's loss curve is its training loss over windows of 1/40 of its steps, "
            "averaged over its repeats (%s); it reaches the target where the power law "
            "fitted to the 7 windows around its first window at or below the target says "
            "(docs/scaling.md); %d of %d configs did. Steps to target against the "
            "global batch G (workers x batch per worker): S(G) = S_min + E_min / G "
            "(McCandlish et al. 2018: past the gradient noise scale, more samples per step "
            "stop saving steps), fitted to the configs that reached it; S(G) of a config that "
            "reached it is leave-one-out. A run's own Optimus curve (1/(b0 k + b1) + b2 "
            "fitted to its loss) is shown beside it. Time: steps x step (measured; "
            "predicted: the simulated step of `predicted.csv`).\n",
            seeds_text, t->n_reached, t->n_runs);
    write_runs(t, out);
    if (!t->fitted) {
        fputs("\nFewer than two configs reached the target: no steps-to-target model (give a "
              "higher `--target-loss`, or more epochs).\n",
              out);
        return;
    }
    fprintf(out,
            "\nFit: S_min = %.3g steps, E_min = %.3g samples (noise scale E_min / S_min = "
            "%.3g). ",
            t->s_min, t->e_min, t->s_min > 0 ? t->e_min / t->s_min : INFINITY);
    if (t->median >= 0) {
        fprintf(out,
                "Its leave-one-out error over the %d configs that reached the target: **median "
                "%.1f%%**, worst %.1f%%.",
                t->n_errors, 100 * t->median, 100 * t->worst);
        if (t->n_early > 0)
            fprintf(out,
                    " Of the %d that did not, it says %d would have (up to %.0f%% of their "
                    "steps sooner).\n",
                    t->n_runs - t->n_reached, t->n_early, 100 * t->worst_early);
        else if (t->n_runs > t->n_reached)
            fputs(" It puts every config that did not reach the target past its last step.\n", out);
        else
            fputc('\n', out);
    } else
        fputs("Too few runs to check it (leave-one-out needs three that reached the target).\n",
              out);
    if (t->n_points == 0) {
        fputs("\nNo past-the-machine predictions (`predicted.csv`): no time against "
              "workers.\n",
              out);
        return;
    }
    fputs("\n### Predicted time to target (s) against workers\n\nSteps S(G) x the simulated "
          "step past the machine (the network of \"Past the machine\" above; no data "
          "loading). * : the global batch lies outside those that reached the target "
          "(extrapolated).\n",
          out);
    write_points(t, out);
    const dt_tta_point *best = &t->points[t->best];
    fprintf(out, "\nFastest: %d workers x batch %d, %.3g s (%.0f steps of %.3g ms)%s.\n",
            best->workers, best->batch, best->time_s, best->steps, best->step_s * 1e3,
            best->extrapolated ? ", extrapolated" : "");
    if (t->recommend) {
        const dt_tta_point *in = &t->points[t->best_in_range];
        fprintf(out,
                "\n**Recommendation**: %d workers x batch %d per worker (%.3g s to the "
                "target): both models are within their stated error on this study (simulated "
                "step %.1f%% <= %.0f%%, steps to target %.1f%% <= %.0f%%), and its global "
                "batch was measured.\n",
                in->workers, in->batch, in->time_s, 100 * t->speed_median, 100 * DT_TTA_SPEED_ERROR,
                100 * t->median, 100 * DT_TTA_STEPS_ERROR);
    } else {
        fputs("\n**No recommendation**: ", out);
        if (t->speed_median < 0)
            fputs("the simulated step has no error on this study (no quiet measured config)", out);
        else if (t->speed_median > DT_TTA_SPEED_ERROR)
            fprintf(out, "the simulated step's median error, %.1f%%, is above %.0f%%",
                    100 * t->speed_median, 100 * DT_TTA_SPEED_ERROR);
        else if (t->median < 0)
            fputs("the steps-to-target model could not be checked", out);
        else if (t->median > DT_TTA_STEPS_ERROR)
            fprintf(out, "the steps-to-target model's median error, %.1f%%, is above %.0f%%",
                    100 * t->median, 100 * DT_TTA_STEPS_ERROR);
        else if (t->worst_early > DT_TTA_STEPS_ERROR)
            fprintf(out,
                    "the steps-to-target model says a run would have reached the target "
                    "%.0f%% of its steps sooner than it ran, and it did not",
                    100 * t->worst_early);
        else
            fputs("no worker count keeps the global batch within those measured", out);
        fputs(".\n", out);
    }
}
