#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dtrain %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max,
                  long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end)
        return cli_fail(cmd, "%s expects an integer, got '%s'", flag, text);
    if (v < min || v > max)
        return cli_fail(cmd, "%s must be between %ld and %ld, got %ld", flag, min, max, v);
    *out = v;
    return 0;
}

int cli_parse_float(const char *cmd, const char *flag, const char *text, double min, double max,
                    double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v))
        return cli_fail(cmd, "%s expects a number, got '%s'", flag, text);
    if (v < min || v > max)
        return cli_fail(cmd, "%s must be between %g and %g, got %g", flag, min, max, v);
    *out = v;
    return 0;
}

int cli_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cli_bad_option(const char *cmd, char **argv, int optind_now) {
    cli_fail(cmd, "unknown or incomplete option '%s' (see dtrain %s --help)", argv[optind_now - 1],
             cmd);
    return 2;
}

int cli_no_extra_args(const char *cmd, int argc, char **argv, int optind_now) {
    if (optind_now >= argc) return 0;
    cli_fail(cmd, "unexpected argument '%s' (see dtrain %s --help)", argv[optind_now], cmd);
    return 2;
}

int cli_model_spec(const char *cmd, const char *model, dt_model_spec *spec) {
    if (dt_zoo_default_spec(spec, model) == 0) return 0;
    cli_fail(cmd, "unknown model '%s' (known: %s)", model, dt_zoo_names());
    return 2;
}

int cli_check_mode(const char *cmd, const char *mode) {
    if (!strcmp(mode, "allreduce") || !strcmp(mode, "ps-sync") || !strcmp(mode, "ps-async") ||
        !strcmp(mode, "ssp"))
        return 0;
    cli_fail(cmd, "--mode must be allreduce, ps-sync, ps-async or ssp, got '%s'", mode);
    return 2;
}

int cli_parse_lr_scaling(const char *cmd, const char *text, int *linear) {
    if (!strcmp(text, "linear") || !strcmp(text, "none")) {
        *linear = !strcmp(text, "linear");
        return 0;
    }
    cli_fail(cmd, "--lr-scaling must be linear or none, got '%s'", text);
    return 2;
}
