/* Output files written whole or not at all: the data goes to a temporary file beside
 * the target (same folder, so the rename is atomic), which is flushed, checked,
 * fsync'd and renamed over the target only when every write succeeded. A reader never
 * sees half a file, a full disk is an error rather than an empty file, and a symlink,
 * device or folder at the target is refused instead of replaced. Temporary names are
 * bounded (a prefix of the target's name, a hash of its whole path, the pid), so a
 * long path is never cut into another file's name; those of a save killed by a
 * signal are removed by the next save to the same path. A write past `ulimit -f`
 * fails with EFBIG only where SIGXFSZ is ignored (dtrain's CLI ignores it); a library
 * user who keeps its default action is killed by it instead. */
#ifndef DTRAIN_OUTFILE_H
#define DTRAIN_OUTFILE_H

#include <stdio.h>

#include "dtrain/error.h"

typedef struct dt_outfile {
    FILE *f;    /* write here */
    char *path; /* the target */
    char *tmp;  /* the temporary file */
} dt_outfile;

/* Whether path can be written: its folder exists and is writable, and the target is
 * absent or a regular file. For checks before long work (--save before training). */
int dt_outfile_check(const char *path, dt_error *err);

/* Creates the temporary file for path (after dt_outfile_check's checks). */
int dt_outfile_open(dt_outfile *o, const char *path, dt_error *err);
/* Flushes, checks every write, fsyncs and renames over the target; on any failure the
 * temporary file is removed, the target left as it was, and -1 returned naming path
 * and the cause. o is closed either way. */
int dt_outfile_commit(dt_outfile *o, dt_error *err);
/* Closes and removes the temporary file (an error on the writer's side). */
void dt_outfile_discard(dt_outfile *o);

#endif
