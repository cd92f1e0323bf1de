/* The training flags: one table row per `dtrain train` flag (name, value kind, range,
 * help text and the dt_train_config field it sets). `train`, `scale`, `bench` and
 * `eval` parse their shared flags through it, and a sweep turns a config back into a
 * child's arguments with it, so names, ranges and help text exist once. Adding a
 * training flag = one dt_train_config field + one row in train_flags.c (per_rank if
 * ranks may give it different values; all others must match on every rank). */
#ifndef DTRAIN_TRAIN_FLAGS_H
#define DTRAIN_TRAIN_FLAGS_H

#include <stddef.h>
#include <stdio.h>

#include "core/parse.h"
#include "dtrain/error.h"
#include "train/trainer.h"

typedef enum dt_flag_kind {
    DT_FLAG_INT,    /* an integer in [imin, imax] */
    DT_FLAG_FLOAT,  /* a finite number in [fmin, fmax] */
    DT_FLAG_STRING, /* any text: a name, a path, a data spec */
    DT_FLAG_SWITCH, /* no value: stores switch_value */
    DT_FLAG_CHOICE, /* one of choice_names() */
    DT_FLAG_PAIR,   /* A:B, two integers in [imin, imax] (into field and field2) */
} dt_flag_kind;

/* The C type of the dt_train_config field a row writes. */
typedef enum dt_flag_field {
    DT_FIELD_INT,
    DT_FIELD_LONG,
    DT_FIELD_U64,
    DT_FIELD_FLOAT,
    DT_FIELD_DOUBLE,
    DT_FIELD_STRING
} dt_flag_field;

typedef struct dt_train_flag {
    const char *name; /* "threads" for --threads */
    dt_flag_kind kind;
    const char *value;   /* the value's name in help ("T"); NULL for a switch */
    const char *help;    /* lines separated by '\n'; states the default */
    const char *heading; /* printed (after a blank line) before the row in help; or NULL */
    dt_flag_field field;
    size_t offset, offset2; /* offsetof(dt_train_config, ...); offset2: a pair's 2nd */
    long imin, imax;
    double fmin, fmax;
    /* float rows: a word taken for a value outside [fmin, fmax] ("auto"), or NULL */
    const char *word;
    double word_value;
    int switch_value;
    /* choice rows: the accepted names ("a, b, c"), parse (0, or -1 if unknown) and the
     * current name */
    const char *(*choice_names)(void);
    int (*choice_parse)(dt_train_config *cfg, const char *text);
    const char *(*choice_of)(const dt_train_config *cfg);
    /* may differ between ranks (threads, file names); every other row must match on
     * all ranks, which the rank fingerprint checks (fingerprint.h) */
    int per_rank;
    /* another spelling of a row above (--no-overlap for --overlap off): parsed and in
     * help, but never emitted by to_argv nor fingerprinted */
    int alias;
} dt_train_flag;

/* The table; *count rows. */
const dt_train_flag *dt_train_flags(int *count);
/* The row of --name (without the dashes); NULL if none. */
const dt_train_flag *dt_train_flag_find(const char *name);

/* Whether a command that takes the rows named in `only` (NULL-terminated; NULL: every
 * row) minus those in `except` (NULL-terminated or NULL) takes this row. */
int dt_train_flag_selected(const dt_train_flag *flag, const char *const *only,
                           const char *const *except);

/* Parses text (ignored for a switch) into cfg; on bad input a one-line error
 * ("--threads must be between 1 and 1024, got 2000") and -1. A string row keeps the
 * text pointer itself, so text must outlive cfg (argv does). */
int dt_train_flag_parse(const dt_train_flag *flag, dt_train_config *cfg, const char *text,
                        dt_error *err);

/* The value text of row flag in cfg ("32", "0.1", "ring", "" for a switch that is on),
 * or NULL when cfg has no value for it (a switch that is off, a NULL string). Numbers
 * are formatted into buf[size]. */
const char *dt_train_flag_value(const dt_train_flag *flag, const dt_train_config *cfg, char *buf,
                                size_t size);

/* The selected rows' help, one "  --name VALUE   text" entry each, aligned. */
void dt_train_flags_help(FILE *out, const char *const *only, const char *const *except);

/* Writes cfg as arguments of `dtrain train`: "--name value" for every row whose value
 * differs from dt_train_config_default(). argv gets at most
 * max_args entries plus a NULL; numbers are formatted into text[text_size], strings
 * point into cfg. Returns the number of entries, or -1 with err if storage is short. */
int dt_train_flags_to_argv(const dt_train_config *cfg, const char **argv, int max_args, char *text,
                           size_t text_size, dt_error *err);

#endif
