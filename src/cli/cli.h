/* Shared pieces of the command-line front end: flag parsing with one-line errors. */
#ifndef DTRAIN_CLI_H
#define DTRAIN_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "dtrain/zoo.h"
#include "study/scaling.h"
#include "train/trainer.h"

/* Each parser prints "dtrain <cmd>: <flag> ..." to stderr and returns -1 on bad input
 * (the strict parsers of train_flags.h). */
int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max,
                  long *out);
int cli_parse_float(const char *cmd, const char *flag, const char *text, double min, double max,
                    double *out);
/* cli_fail prints on the launcher's rank 0 only (or without a launcher): every rank
 * of a job finds the same error in its flags; cli_say prints on any rank. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_say(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* --threads as asked, or 0: the cores this process may use (placement.h); prints the
 * warning line, if any, on the launcher's rank 0. */
int cli_threads(const char *cmd, int asked);
/* The error for getopt_long's '?' (unknown flag or missing value); returns 2. */
int cli_bad_option(const char *cmd, char **argv, int optind_now);
/* 0 if every argument was a flag, else prints the first stray one and returns 2. */
int cli_no_extra_args(const char *cmd, int argc, char **argv, int optind_now);

/* A command's flags: the rows of the training flag table it takes (`only`, NULL-
 * terminated, NULL = all; minus `except`) and its own getopt options (val < 1000). */
enum { CLI_MAX_OPTIONS = 64, CLI_SHARED_BASE = 1000 };
enum { CLI_FLAGS_DONE = -1, CLI_FLAGS_ERROR = -2, CLI_FLAGS_SHARED = -3 };
typedef struct cli_flags {
    const char *cmd;
    const char *const *only, *const *except;
    struct option options[CLI_MAX_OPTIONS];
    int max_samples_given; /* --max-samples was on the command line (wins over the variable) */
} cli_flags;

void cli_flags_init(cli_flags *flags, const char *cmd, const char *const *only,
                    const char *const *except, const struct option *own);
/* The next flag: a shared one is parsed into cfg (CLI_FLAGS_SHARED); an own one returns
 * its val with optarg set; CLI_FLAGS_DONE after the last (stray arguments are an
 * error); CLI_FLAGS_ERROR after printing the one-line error. At the end, a command
 * taking --max-samples without it on the command line takes DTRAIN_MAX_SAMPLES from the
 * environment if set (README: quick tries of every example; the README test). */
int cli_flags_next(cli_flags *flags, int argc, char **argv, dt_train_config *cfg);
/* The shared rows' help, then "Defaults that differ from dtrain train: <overrides>"
 * if overrides is not NULL. */
void cli_flags_help(const cli_flags *flags, FILE *out, const char *overrides);

/* The zoo's default spec of cfg->model, and cfg->data's default when unset (the
 * dataset matching the model's input shape); prints the error and returns 2 if the
 * model is unknown. */
int cli_model_and_data(const char *cmd, dt_train_config *cfg, dt_model_spec *spec);

int cmd_train(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_fit_loss(int argc, char **argv);
int cmd_fit_speed(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_fit_jobs(int argc, char **argv);
int cmd_allocate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_simulate(int argc, char **argv);

/* Writes runs.csv, the plots and report.md of a study into dir (and the tables to
 * stdout if asked); returns 0 or -1 after printing the error. */
int cli_publish_study(dt_scale_study *s, const char *dir, int print_tables);

#endif
