#include "quant/calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parse.h"

int dt_calib_parse(const char *text, dt_calib_choice *out, dt_error *err) {
    memset(out, 0, sizeof *out);
    if (!strcmp(text, "minmax")) {
        out->method = DT_CALIB_MINMAX;
    } else if (!strcmp(text, "3sigma")) {
        out->method = DT_CALIB_3SIGMA;
    } else if (!strcmp(text, "entropy")) {
        out->method = DT_CALIB_ENTROPY;
    } else if (!strncmp(text, "percentile:", 11)) {
        out->method = DT_CALIB_PERCENTILE;
        /* below 50 the "range" would hold less than half of the values */
        if (dt_parse_double("--calib-method percentile:P", text + 11, 50.0, 100.0, &out->percentile,
                            err))
            return -1;
        if (out->percentile <= 50.0)
            return dt_error_set(err, "--calib-method percentile:P needs P above 50, got '%s'",
                                text + 11);
    } else {
        return dt_error_set(err,
                            "--calib-method must be minmax, percentile:P, 3sigma or entropy, got "
                            "'%s'",
                            text);
    }
    return 0;
}

void dt_calib_format(const dt_calib_choice *c, char *buf, size_t size) {
    switch (c->method) {
    case DT_CALIB_MINMAX:
        snprintf(buf, size, "minmax");
        break;
    case DT_CALIB_PERCENTILE:
        snprintf(buf, size, "percentile:%g", c->percentile);
        break;
    case DT_CALIB_3SIGMA:
        snprintf(buf, size, "3sigma");
        break;
    case DT_CALIB_ENTROPY:
        snprintf(buf, size, "entropy");
        break;
    }
}

void dt_calib_init(dt_calib_stats *s) {
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
}

void dt_calib_observe_range(dt_calib_stats *s, const float *x, size_t n) {
    double lo = s->min, hi = s->max, sum = 0.0, sumsq = 0.0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (!isfinite(v)) {
            bad = 1;
            continue;
        }
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sumsq += v * v;
    }
    s->min = lo;
    s->max = hi;
    s->abs_max = fmax(fabs(lo), fabs(hi));
    s->sum += sum;
    s->sumsq += sumsq;
    s->count += n;
    s->nonfinite |= bad;
}

/* The bin of v in [lo, lo + width * bins), edges clamped in. */
static int bin_of(double v, double lo, double width, int bins) {
    if (!(width > 0.0)) return 0;
    double b = (v - lo) / width;
    if (b < 0.0) return 0;
    return b >= bins ? bins - 1 : (int)b;
}

void dt_calib_observe_hist(dt_calib_stats *s, const float *x, size_t n) {
    const double w_abs = s->abs_max / DT_CALIB_BINS, w_sig = (s->max - s->min) / DT_CALIB_BINS;
    const double w_rep = (s->max - s->min) / DT_CALIB_REPORT_BINS;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        if (!isfinite(v)) continue;
        if (v == 0.0)
            s->zeros++;
        else
            s->hist_abs[bin_of(fabs(v), 0.0, w_abs, DT_CALIB_BINS)]++;
        s->hist_signed[bin_of(v, s->min, w_sig, DT_CALIB_BINS)]++;
        s->hist_report[bin_of(v, s->min, w_rep, DT_CALIB_REPORT_BINS)]++;
    }
    s->have_histograms = 1;
}

double dt_calib_mean(const dt_calib_stats *s) {
    return s->count ? s->sum / (double)s->count : 0.0;
}

double dt_calib_std(const dt_calib_stats *s) {
    if (!s->count) return 0.0;
    double mean = dt_calib_mean(s), var = s->sumsq / (double)s->count - mean * mean;
    return var > 0.0 ? sqrt(var) : 0.0;
}

int dt_calib_needs_histograms(const dt_calib_choice *c) {
    return c->method == DT_CALIB_PERCENTILE || c->method == DT_CALIB_ENTROPY;
}

/* The value below which a fraction q of a histogram's counts lie, interpolated
 * linearly within its bin. */
static double quantile(const uint64_t *hist, int bins, double lo, double width, double q) {
    uint64_t total = 0;
    for (int b = 0; b < bins; b++) total += hist[b];
    if (total == 0) return lo;
    const double target = q * (double)total;
    double cum = 0.0;
    for (int b = 0; b < bins; b++) {
        if (hist[b] && cum + (double)hist[b] >= target) {
            double frac = (target - cum) / (double)hist[b];
            return lo + width * (b + (frac < 0.0 ? 0.0 : frac));
        }
        cum += (double)hist[b];
    }
    return lo + width * bins;
}

/* KL(p || q) over the bins where p > 0, both normalised to sum 1 first; q's empty
 * bins (where only the clipped outliers put mass into p) get a small floor so the
 * divergence stays finite, as the reference implementations smooth them. */
static double kl_divergence(const double *p, double *q, int n) {
    double sp = 0.0, sq = 0.0;
    for (int k = 0; k < n; k++) {
        sp += p[k];
        sq += q[k];
    }
    if (!(sp > 0.0) || !(sq > 0.0)) return INFINITY;
    const double floor_q = 1e-6;
    double renorm = 0.0;
    for (int k = 0; k < n; k++) {
        q[k] = q[k] / sq;
        if (q[k] == 0.0) q[k] = floor_q;
        renorm += q[k];
    }
    double kl = 0.0;
    for (int k = 0; k < n; k++)
        if (p[k] > 0.0) {
            double pk = p[k] / sp;
            kl += pk * log(pk / (q[k] / renorm));
        }
    return kl;
}

double dt_calib_kl_threshold(const uint64_t *hist, int bins, double bin_width, int levels) {
    if (bins <= levels) return bin_width * bins;
    double *p = malloc(sizeof(double) * (size_t)bins), *q = malloc(sizeof(double) * (size_t)bins);
    if (!p || !q) { /* out of memory: fall back to the whole range */
        free(p);
        free(q);
        return bin_width * bins;
    }
    double outliers = 0.0;
    for (int b = levels; b < bins; b++) outliers += (double)hist[b];
    double best_kl = INFINITY;
    int best = bins;
    for (int i = levels; i <= bins; i++) {
        /* P: the first i bins, everything beyond folded into the last one */
        for (int k = 0; k < i; k++) p[k] = (double)hist[k];
        p[i - 1] += outliers;
        /* Q: the first i bins merged into `levels` groups, each group's mass spread
         * evenly over its non-empty bins */
        const int merged = i / levels;
        for (int j = 0; j < levels; j++) {
            const int start = j * merged, stop = j == levels - 1 ? i : start + merged;
            double mass = 0.0;
            int nonzero = 0;
            for (int k = start; k < stop; k++) {
                mass += (double)hist[k];
                nonzero += hist[k] != 0;
            }
            for (int k = start; k < stop; k++)
                q[k] = hist[k] != 0 && nonzero ? mass / nonzero : 0.0;
        }
        const double kl = kl_divergence(p, q, i);
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
        if (i < bins) outliers -= (double)hist[i];
    }
    free(p);
    free(q);
    return bin_width * best;
}

double dt_calib_threshold(const dt_calib_stats *s, const dt_calib_choice *c, int levels) {
    const double amax = s->abs_max;
    if (!(amax > 0.0)) return 0.0;
    const double width = amax / DT_CALIB_BINS;
    double t = amax;
    switch (c->method) {
    case DT_CALIB_MINMAX:
        break;
    case DT_CALIB_PERCENTILE: {
        uint64_t *h = malloc(sizeof s->hist_abs);
        if (!h) break; /* out of memory: the whole range */
        memcpy(h, s->hist_abs, sizeof s->hist_abs);
        h[0] += s->zeros; /* zeros are values too: the percentile counts them */
        t = quantile(h, DT_CALIB_BINS, 0.0, width, c->percentile / 100.0);
        free(h);
        break;
    }
    case DT_CALIB_3SIGMA: {
        const double mean = dt_calib_mean(s), sd = dt_calib_std(s);
        t = fmax(fabs(mean - 3.0 * sd), fabs(mean + 3.0 * sd));
        break;
    }
    case DT_CALIB_ENTROPY:
        t = dt_calib_kl_threshold(s->hist_abs, DT_CALIB_BINS, width, levels);
        break;
    }
    /* never beyond what was seen, never 0 while something was not 0 */
    if (t > amax) t = amax;
    if (!(t > 0.0)) t = width;
    return t;
}

void dt_calib_range(const dt_calib_stats *s, const dt_calib_choice *c, int levels, double *lo,
                    double *hi) {
    *lo = s->min;
    *hi = s->max;
    switch (c->method) {
    case DT_CALIB_MINMAX:
        break;
    case DT_CALIB_PERCENTILE: {
        const double width = (s->max - s->min) / DT_CALIB_BINS;
        *lo = quantile(s->hist_signed, DT_CALIB_BINS, s->min, width, 1.0 - c->percentile / 100.0);
        *hi = quantile(s->hist_signed, DT_CALIB_BINS, s->min, width, c->percentile / 100.0);
        break;
    }
    case DT_CALIB_3SIGMA: {
        const double mean = dt_calib_mean(s), sd = dt_calib_std(s);
        *lo = fmax(s->min, mean - 3.0 * sd);
        *hi = fmin(s->max, mean + 3.0 * sd);
        break;
    }
    case DT_CALIB_ENTROPY: {
        const double t = dt_calib_threshold(s, c, levels);
        *lo = fmax(s->min, -t);
        *hi = fmin(s->max, t);
        break;
    }
    }
}

double dt_sqnr_db(double signal, double noise) {
    if (noise <= 0.0) return signal > 0.0 ? INFINITY : NAN;
    return 10.0 * log10(signal / noise);
}
