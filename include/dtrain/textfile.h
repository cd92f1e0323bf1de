/* A small text file read whole (JSON fit files, profiles), with a size limit so a
 * wrong path (a device, a huge file) is refused instead of filling memory. */
#ifndef DTRAIN_TEXTFILE_H
#define DTRAIN_TEXTFILE_H

#include <stddef.h>

#include "dtrain/error.h"

/* The file's bytes with a terminating NUL (the caller frees), or NULL with err set:
 * "cannot open WHAT PATH: ...", "cannot read WHAT PATH: read error | out of memory |
 * larger than N MiB". what: a word naming the file's kind ("profile"), or "" for
 * none. */
char *dt_text_file_read(const char *path, const char *what, size_t max_bytes, dt_error *err);

#endif
