#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/placement.h"
#include "train/train_flags.h"

/* One write, so that lines of processes sharing the terminal do not interleave. */
static void say(const char *cmd, const char *fmt, va_list ap) {
    char line[4096];
    const int n = snprintf(line, sizeof line, "dtrain %s: ", cmd);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

int cli_fail(const char *cmd, const char *fmt, ...) {
    /* under a launcher every rank finds the same error: the first says it */
    if (dt_placement_rank_here() > 0) return -1;
    va_list ap;
    va_start(ap, fmt);
    say(cmd, fmt, ap);
    va_end(ap);
    return -1;
}

void cli_say(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    say(cmd, fmt, ap);
    va_end(ap);
}

int cli_threads(const char *cmd, int asked) {
    dt_threads_choice c;
    dt_threads_choose_here(asked, &c);
    if (c.warning[0] && dt_placement_rank_here() <= 0) cli_say(cmd, "warning: %s", c.warning);
    return c.threads;
}

int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max,
                  long *out) {
    dt_error err;
    if (dt_parse_long(flag, text, min, max, out, &err) == 0) return 0;
    return cli_fail(cmd, "%s", err.msg);
}

int cli_parse_float(const char *cmd, const char *flag, const char *text, double min, double max,
                    double *out) {
    dt_error err;
    if (dt_parse_double(flag, text, min, max, out, &err) == 0) return 0;
    return cli_fail(cmd, "%s", err.msg);
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

void cli_flags_init(cli_flags *flags, const char *cmd, const char *const *only,
                    const char *const *except, const struct option *own) {
    memset(flags, 0, sizeof *flags);
    flags->cmd = cmd;
    flags->only = only;
    flags->except = except;
    int count, n = 0;
    const dt_train_flag *rows = dt_train_flags(&count);
    /* the table and a command's own flags are fixed at build time: more than fit (one
     * slot stays for the closing zero row) is a programming error that any test
     * running the command catches */
    for (int i = 0; i < count; i++) {
        if (!dt_train_flag_selected(&rows[i], only, except)) continue;
        if (n == CLI_MAX_OPTIONS - 1) abort();
        flags->options[n++] = (struct option){
            rows[i].name, rows[i].kind == DT_FLAG_SWITCH ? no_argument : required_argument, NULL,
            CLI_SHARED_BASE + i};
    }
    for (; own && own->name; own++) {
        if (n == CLI_MAX_OPTIONS - 1) abort();
        flags->options[n++] = *own;
    }
    optind = 1;
    opterr = 0;
}

/* DTRAIN_MAX_SAMPLES=N stands for --max-samples N where a command takes it and the
 * command line does not give it; a bad value is an error (a typo must not quietly
 * train on the whole dataset). */
static int max_samples_from_env(const cli_flags *flags, dt_train_config *cfg) {
    const char *text = getenv("DTRAIN_MAX_SAMPLES");
    if (!text || flags->max_samples_given) return 0;
    int count;
    const dt_train_flag *rows = dt_train_flags(&count);
    for (int i = 0; i < count; i++) {
        if (strcmp(rows[i].name, "max-samples") ||
            !dt_train_flag_selected(&rows[i], flags->only, flags->except))
            continue;
        dt_error err;
        if (dt_train_flag_parse(&rows[i], cfg, text, &err)) {
            cli_fail(flags->cmd, "DTRAIN_MAX_SAMPLES (for --max-samples): %s", err.msg);
            return -1;
        }
    }
    return 0;
}

int cli_flags_next(cli_flags *flags, int argc, char **argv, dt_train_config *cfg) {
    const int opt = getopt_long(argc, argv, "", flags->options, NULL);
    if (opt == -1)
        return cli_no_extra_args(flags->cmd, argc, argv, optind) || max_samples_from_env(flags, cfg)
                   ? CLI_FLAGS_ERROR
                   : CLI_FLAGS_DONE;
    if (opt == '?' || opt == ':') {
        cli_bad_option(flags->cmd, argv, optind);
        return CLI_FLAGS_ERROR;
    }
    if (opt < CLI_SHARED_BASE) return opt;
    int count;
    const dt_train_flag *rows = dt_train_flags(&count);
    if (!strcmp(rows[opt - CLI_SHARED_BASE].name, "max-samples")) flags->max_samples_given = 1;
    dt_error err;
    if (dt_train_flag_parse(&rows[opt - CLI_SHARED_BASE], cfg, optarg, &err)) {
        cli_fail(flags->cmd, "%s", err.msg);
        return CLI_FLAGS_ERROR;
    }
    return CLI_FLAGS_SHARED;
}

void cli_flags_help(const cli_flags *flags, FILE *out, const char *overrides) {
    dt_train_flags_help(out, flags->only, flags->except);
    if (overrides) fprintf(out, "\n  Defaults that differ from dtrain train: %s\n", overrides);
}

int cli_model_and_data(const char *cmd, dt_train_config *cfg, dt_model_spec *spec) {
    dt_error err;
    if (dt_zoo_spec_of(spec, cfg->model, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return 2;
    }
    /* CIFAR-10 and ImageNet are not on this machine (no download here): a model takes
     * real Fashion-MNIST at MNIST's shape, else synthetic data of its own shape. The
     * spec outlives this call (the config keeps a pointer to it): one buffer, as the
     * CLI parses one model per process. */
    static char own_shape[48];
    if (!cfg->data) {
        if (spec->in_c == 1 && spec->in_h == 28 && spec->in_w == 28)
            cfg->data = "fashion-mnist";
        else if (spec->in_c == 3 && spec->in_h == 32 && spec->in_w == 32)
            cfg->data = "synthetic:cifar10";
        else if (spec->in_c == 3 && spec->in_h == 224 && spec->in_w == 224)
            cfg->data = "synthetic:imagenet";
        else {
            snprintf(own_shape, sizeof own_shape, "synthetic:%dx%dx%d", spec->in_c, spec->in_h,
                     spec->in_w);
            cfg->data = own_shape;
        }
    }
    return 0;
}
