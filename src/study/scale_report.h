/* The scaling study's report.md: times, speed-ups, compute vs communication, traffic,
 * accuracy, the reading (reading.h), the predictions made before measuring
 * (predict.h), the speed model against the measurements, utilisation and plots. */
#ifndef DTRAIN_SCALE_REPORT_H
#define DTRAIN_SCALE_REPORT_H

#include <stdio.h>

#include "study/scaling.h"

/* Writes the markdown report (tables + reading, the reading by dt_reading_write in
 * reading.h); `plots` lists the plot files made. */
void dt_scale_write_report(const dt_scale_study *s, FILE *out, const char *const *plots,
                           int n_plots);

#endif
