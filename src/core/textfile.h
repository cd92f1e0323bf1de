/* Every text file dtrain reads (fit files, profiles, CSV inputs, run logs) goes
 * through here, with one set of limits: only regular files (a FIFO is refused at
 * once, never waited on; a device such as /dev/zero is refused before any read), a
 * bound on the file's size and on a line's length, so a wrong path is refused
 * instead of filling memory. Three ways to read: a small file whole, a file line by
 * line, a CSV file row by row. */
#ifndef DTRAIN_TEXTFILE_H
#define DTRAIN_TEXTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "dtrain/error.h"

/* The limits of line-by-line reading: a line's bytes (its end not counted), a CSV
 * file's size and a row's fields (a run log's size: DT_RUNLOG_MAX_BYTES, runlog.h). */
enum { DT_TEXT_MAX_LINE = 1 << 20, DT_CSV_MAX_FIELDS = 256 };
#define DT_CSV_MAX_BYTES ((size_t)64 << 20)

/* path opened for reading if it is a regular file of at most max_bytes, or NULL with
 * err: "cannot open WHAT PATH: <errno text>", "cannot read WHAT PATH: not a regular
 * file (a FIFO | a device | a folder ...)", "cannot read WHAT PATH: larger than N
 * MiB". what: a word naming the file's kind ("profile"), or "" for none. */
FILE *dt_text_open(const char *path, const char *what, size_t max_bytes, dt_error *err);

/* The file's bytes with a terminating NUL (the caller frees), or NULL with err set as
 * dt_text_open's, or "cannot read WHAT PATH: read error | out of memory". */
char *dt_text_file_read(const char *path, const char *what, size_t max_bytes, dt_error *err);
/* The same for any file, binary too: its bytes (NUL-terminated all the same) and, if
 * len is not NULL, their count. */
char *dt_file_read(const char *path, const char *what, size_t max_bytes, size_t *len,
                   dt_error *err);

/* A file read line by line; line holds the current line and its end ('\n', absent
 * only on a last line cut short), NUL-terminated. */
typedef struct dt_text_lines {
    FILE *f;
    const char *path, *what; /* as given to open: must outlive the reader */
    char *line;
    size_t len, cap;  /* the line's bytes, the buffer's size */
    size_t max_line;  /* DT_TEXT_MAX_LINE unless set otherwise after open */
    size_t max_bytes; /* the whole file's */
    size_t total;     /* bytes read so far */
    long lineno;      /* the current line's number, from 1 */
} dt_text_lines;

int dt_text_lines_open(dt_text_lines *r, const char *path, const char *what, size_t max_bytes,
                       dt_error *err);
/* 1 with the next line, 0 at the end of the file, -1 with err: "PATH line N: longer
 * than M bytes", "PATH line N: a NUL byte (not a text file)", "cannot read WHAT
 * PATH: larger than N MiB | <errno text>". */
int dt_text_lines_next(dt_text_lines *r, dt_error *err);
void dt_text_lines_close(dt_text_lines *r);

/* A CSV file (at most DT_CSV_MAX_BYTES) row by row: the fields of a row split at
 * every comma (no quoting; empty fields kept), each trimmed of spaces, tabs and the
 * line end ("\n" or "\r\n"). Blank lines and comment lines (their first non-blank
 * character '#') are skipped. */
typedef struct dt_csv {
    dt_text_lines in; /* in.lineno: the current row's line */
    char *field[DT_CSV_MAX_FIELDS];
    int n; /* fields in the current row */
} dt_csv;

int dt_csv_open(dt_csv *c, const char *path, dt_error *err);
/* 1 with the next row in field[0..n), 0 at the end, -1 with err (as
 * dt_text_lines_next, or "PATH line N: more than 256 fields"). */
int dt_csv_next(dt_csv *c, dt_error *err);
void dt_csv_close(dt_csv *c);

/* A CSV field as a number: the whole field, finite, within [lo, hi]. 0 with *out;
 * DT_CSV_NOT_A_NUMBER (empty, other text after the number, nan, inf) or
 * DT_CSV_OUT_OF_RANGE (a number outside [lo, hi], beyond a double's range included). */
enum { DT_CSV_NOT_A_NUMBER = -1, DT_CSV_OUT_OF_RANGE = -2 };
int dt_csv_number(const char *text, double lo, double hi, double *out);
/* dt_csv_number with the row's one-line error: "PATH line N: NAME is not a number:
 * 'TEXT'" or "PATH line N: NAME is out of range: 'TEXT' (from LO to HI)". */
int dt_csv_field_number(const dt_csv *c, const char *name, const char *text, double lo, double hi,
                        double *out, dt_error *err);

#endif
