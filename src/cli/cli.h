/* Shared pieces of the command-line front end: flag parsing with one-line errors. */
#ifndef DTRAIN_CLI_H
#define DTRAIN_CLI_H

#include <stdint.h>

/* Each parser prints "dtrain <cmd>: <flag> ..." to stderr and returns -1 on bad input. */
int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max,
                  long *out);
int cli_parse_float(const char *cmd, const char *flag, const char *text, double min,
                    double max, double *out);
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_default_threads(void);

int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
