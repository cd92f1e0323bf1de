/* The files one command reads and writes, checked together before any work, so that
 * no output can replace an input or another output. Every output must pass
 * dt_outfile_check (absent or a regular file, not a symlink, device, FIFO or folder,
 * in a writable folder); no output may be the same file as an input (same device and
 * inode, hard links included) or as another output (same inode, or the same name in
 * the same folder when it does not exist yet). A refusal is one line naming both
 * flags and paths: "--log w.st would overwrite --init w.st (the same file)".
 * Entries keep copies of the paths; dt_fileset_free releases them. */
#ifndef DTRAIN_FILESET_H
#define DTRAIN_FILESET_H

#include "dtrain/error.h"

typedef struct dt_fileset_entry {
    const char *what; /* the flag or role, e.g. "--init" (a static string) */
    char *path;       /* owned copy */
    int output;
} dt_fileset_entry;

typedef struct dt_fileset {
    dt_fileset_entry *e; /* n of them, room for cap */
    int n, cap;
    int overflow; /* an add found no memory: dt_fileset_check fails */
} dt_fileset;

void dt_fileset_init(dt_fileset *s);
/* Adds a file read (path NULL or "": nothing). A missing input is not an error here:
 * its reader says so. */
void dt_fileset_input(dt_fileset *s, const char *what, const char *path);
/* Adds a file written (path NULL or "": nothing). */
void dt_fileset_output(dt_fileset *s, const char *what, const char *path);
/* Adds DIR/NAME as an input or output (a checkpoint directory's file). */
void dt_fileset_add_in(dt_fileset *s, const char *what, const char *dir, const char *name,
                       int output);
/* 0 when every output may be written and none is an input or another output; else -1
 * with one line in err. */
int dt_fileset_check(const dt_fileset *s, dt_error *err);
/* The input that the file at path is (the same file as dt_fileset_check means it), or
 * NULL: for a command that names its own outputs (a report's many files in a folder)
 * and words the refusal itself. */
const char *dt_fileset_same_input(const dt_fileset *s, const char *path);
void dt_fileset_free(dt_fileset *s);

#endif
