/* Calibration statistics of one tensor (a layer's activations over the calibration
 * images, or a weight) and the ways of choosing its clipping range from them.
 *
 * Two passes over the data: the first finds min, max, mean and standard deviation; the
 * second, with the range known, fills histograms: DT_CALIB_BINS bins of |x| over
 * [0, max|x|] (the symmetric threshold searches: percentile, entropy; exact zeros, a
 * ReLU's half of the values, counted apart: any scale keeps them exact, and as a spike
 * in the first bin they would pull the entropy search to the smallest threshold it
 * tries), as many of x over
 * [min, max] (the lab's asymmetric percentiles) and DT_CALIB_REPORT_BINS over [min, max]
 * for the report's pictures.
 *
 * Methods: minmax (the whole range), percentile:P (the P-th percentile of |x|, or the
 * (100-P)th..Pth of x for a range), 3sigma (mean +- 3 standard deviations, within the
 * observed range) and entropy (TensorRT's threshold minimising the KL divergence between
 * the histogram of |x| and its quantized copy). */
#ifndef DTRAIN_CALIB_H
#define DTRAIN_CALIB_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"

typedef enum dt_calib_method {
    DT_CALIB_MINMAX,
    DT_CALIB_PERCENTILE,
    DT_CALIB_3SIGMA,
    DT_CALIB_ENTROPY,
} dt_calib_method;

typedef struct dt_calib_choice {
    dt_calib_method method;
    double percentile; /* DT_CALIB_PERCENTILE: in (50, 100] */
} dt_calib_choice;

/* "minmax", "percentile:99.99", "3sigma" or "entropy"; else a one-line error. */
int dt_calib_parse(const char *text, dt_calib_choice *out, dt_error *err);
/* The text dt_calib_parse reads back (percentile with %g). */
void dt_calib_format(const dt_calib_choice *c, char *buf, size_t size);

enum { DT_CALIB_BINS = 2048, DT_CALIB_REPORT_BINS = 30 };

typedef struct dt_calib_stats {
    double min, max, abs_max; /* pass 1 */
    double sum, sumsq;
    uint64_t count;
    int nonfinite; /* a NaN or infinity was seen */
    int have_histograms;
    uint64_t zeros;                      /* values exactly 0 (not in hist_abs) */
    uint64_t hist_abs[DT_CALIB_BINS];    /* |x| over [0, abs_max], zeros left out */
    uint64_t hist_signed[DT_CALIB_BINS]; /* x over [min, max] */
    uint64_t hist_report[DT_CALIB_REPORT_BINS];
} dt_calib_stats;

void dt_calib_init(dt_calib_stats *s);
/* Pass 1: range and moments of n more values. */
void dt_calib_observe_range(dt_calib_stats *s, const float *x, size_t n);
/* Pass 2 (after every pass-1 call): histograms of the same values again. */
void dt_calib_observe_hist(dt_calib_stats *s, const float *x, size_t n);

double dt_calib_mean(const dt_calib_stats *s);
double dt_calib_std(const dt_calib_stats *s);

/* Whether a method needs the pass-2 histograms. */
int dt_calib_needs_histograms(const dt_calib_choice *c);

/* The symmetric threshold T (clip |x| to T) by the chosen method; `levels` is the
 * number of non-negative integer levels the quantized tensor has (128 for s8, 256 for
 * u8), which the entropy search quantizes to. 0 if every value was 0. */
double dt_calib_threshold(const dt_calib_stats *s, const dt_calib_choice *c, int levels);
/* The asymmetric range [*lo, *hi] by the chosen method (the lab's max - min step). */
void dt_calib_range(const dt_calib_stats *s, const dt_calib_choice *c, int levels, double *lo,
                    double *hi);

/* The entropy search itself, on a histogram of |x| with `bins` bins of width
 * bin_width: the threshold (upper edge of the last kept bin, at least `levels` bins)
 * whose clipped distribution P and its `levels`-level quantization Q have the least
 * KL(P || Q). Exposed for tests. */
double dt_calib_kl_threshold(const uint64_t *hist, int bins, double bin_width, int levels);

/* Signal-to-quantization-noise ratio in dB, 10 log10(signal / noise); +inf when the
 * noise is 0 (and the signal is not). */
double dt_sqnr_db(double signal, double noise);

#endif
