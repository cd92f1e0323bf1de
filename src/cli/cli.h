/* Shared pieces of the command-line front end: flag parsing with one-line errors. */
#ifndef DTRAIN_CLI_H
#define DTRAIN_CLI_H

#include <stdint.h>

#include "dtrain/scaling.h"
#include "dtrain/zoo.h"

/* Each parser prints "dtrain <cmd>: <flag> ..." to stderr and returns -1 on bad input. */
int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max,
                  long *out);
int cli_parse_float(const char *cmd, const char *flag, const char *text, double min, double max,
                    double *out);
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_default_threads(void);
/* The error for getopt_long's '?' (unknown flag or missing value); returns 2. */
int cli_bad_option(const char *cmd, char **argv, int optind_now);
/* 0 if every argument was a flag, else prints the first stray one and returns 2. */
int cli_no_extra_args(const char *cmd, int argc, char **argv, int optind_now);

/* The zoo's default spec of a model; prints the error and returns 2 if unknown. */
int cli_model_spec(const char *cmd, const char *model, dt_model_spec *spec);
/* Checks --mode (only allreduce is built); 0 or 2 after printing why. */
int cli_check_mode(const char *cmd, const char *mode);
/* Parses --lr-scaling linear|none into *linear; 0 or 2 after printing why. */
int cli_parse_lr_scaling(const char *cmd, const char *text, int *linear);

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_fit_loss(int argc, char **argv);
int cmd_fit_speed(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_fit_jobs(int argc, char **argv);
int cmd_allocate(int argc, char **argv);

/* Writes runs.csv, the plots and report.md of a study into dir (and the tables to
 * stdout if asked); returns 0 or -1 after printing the error. */
int cli_publish_study(dt_scale_study *s, const char *dir, int print_tables);

#endif
