/* gnuplot (Debian's gnuplot-nox) run on a script written beside the data it plots:
 * the scaling study's plots, predictions, comparisons and the quantization report's
 * histograms all draw their pictures through it. */
#ifndef DTRAIN_GNUPLOT_H
#define DTRAIN_GNUPLOT_H

/* Runs `gnuplot script` in dir (no shell), its stderr going to stderr_path (relative
 * to dir). 0 if gnuplot ran and succeeded. */
int dt_gnuplot_run(const char *dir, const char *script, const char *stderr_path);

#endif
