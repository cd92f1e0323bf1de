/* Plots of a scaling study, drawn by gnuplot (Debian's gnuplot-nox) as PNG and SVG:
 * speed-up vs processes (log2 axis, ideal line), epoch time vs batch size per process
 * count, compute / communication / data-wait stacked bars, and loss curves (from the
 * run logs in dir, when there are any). The data and the gnuplot script are written
 * next to the pictures so they can be redrawn or restyled by hand. */
#ifndef DTRAIN_PLOTS_H
#define DTRAIN_PLOTS_H

#include "dtrain/error.h"
#include "dtrain/scaling.h"

enum { DT_MAX_PLOTS = 8 };

/* Writes the plots into dir; names (relative to dir) of the PNGs made go to
 * names[0..*n). Returns -1 if gnuplot is missing or fails (err says which). */
int dt_plots_write(const dt_scale_study *s, const char *dir, char names[][64], int *n,
                   dt_error *err);

#endif
