/* Strict number parsing shared by every flag and every number read from metadata: the
 * whole text, in range, else a one-line error naming what was read ("--budget expects
 * an integer, got 'x'"). */
#ifndef DTRAIN_PARSE_H
#define DTRAIN_PARSE_H

#include "dtrain/error.h"

int dt_parse_long(const char *flag, const char *text, long min, long max, long *out, dt_error *err);
int dt_parse_double(const char *flag, const char *text, double min, double max, double *out,
                    dt_error *err);

#endif
