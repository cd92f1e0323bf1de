#include "core/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int dt_parse_long(const char *flag, const char *text, long min, long max, long *out,
                  dt_error *err) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || (errno && errno != ERANGE))
        return dt_error_set(err, "%s expects an integer, got '%s'", flag, text);
    if (errno == ERANGE) /* an integer beyond a long: out of range, not "not a number" */
        return dt_error_set(err, "%s is out of range: '%s' (from %ld to %ld)", flag, text, min,
                            max);
    if (v < min || v > max)
        return dt_error_set(err, "%s must be between %ld and %ld, got %ld", flag, min, max, v);
    *out = v;
    return 0;
}

int dt_parse_double(const char *flag, const char *text, double min, double max, double *out,
                    dt_error *err) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || isnan(v) || (isinf(v) && errno != ERANGE))
        return dt_error_set(err, "%s expects a number, got '%s'", flag, text);
    if (isinf(v)) /* beyond a double (1e999): out of range; an underflow is its nearest double */
        return dt_error_set(err, "%s is out of range: '%s' (from %g to %g)", flag, text, min, max);
    if (v < min || v > max)
        return dt_error_set(err, "%s must be between %g and %g, got %g", flag, min, max, v);
    *out = v;
    return 0;
}
