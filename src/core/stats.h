/* The median of a set of measurements: scale's repeats, the speed fits' errors, the
 * all-reduce chooser's and the bucket chooser's timings. */
#ifndef DTRAIN_STATS_H
#define DTRAIN_STATS_H

/* The median of v[0..n) (sorted in place, so v[n-1] is then the largest; the mean of
 * the two middle values when n is even); -1 when n is 0. */
double dt_median(double *v, int n);

#endif
