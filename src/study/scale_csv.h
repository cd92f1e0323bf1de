/* The scaling study's CSV files: `report --times` reads measured times (any framework's),
 * `scale` and `report` write runs.csv. One reader, core/textfile's, for every row. */
#ifndef DTRAIN_SCALE_CSV_H
#define DTRAIN_SCALE_CSV_H

#include "dtrain/error.h"
#include "study/scaling.h"

/* Reads a CSV of measured times: header with at least procs, batch_size, t_train
 * (optional t_epoch, iterations, and any run-log column). */
int dt_scale_read_csv(dt_scale_study *s, const char *path, dt_error *err);
/* The distinct values of a times CSV's model column, in order of first appearance
 * (at most max; more is an error); *n = 0 without the column. */
int dt_scale_csv_models(const char *path, char (*names)[64], int max, int *n, dt_error *err);
/* Writes runs.csv (one row per config, all columns). */
int dt_scale_write_csv(const dt_scale_study *s, const char *path, dt_error *err);

#endif
