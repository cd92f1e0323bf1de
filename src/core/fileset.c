#define _GNU_SOURCE /* strdup, strndup with -std=c11 */
#include "core/fileset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/outfile.h"

void dt_fileset_init(dt_fileset *s) {
    memset(s, 0, sizeof *s);
}

static void add(dt_fileset *s, const char *what, char *path, int output) {
    if (path && s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 16;
        dt_fileset_entry *e = realloc(s->e, sizeof *e * (size_t)cap);
        if (e) s->e = e, s->cap = cap;
    }
    if (!path || s->n == s->cap) {
        s->overflow = 1;
        free(path);
        return;
    }
    s->e[s->n++] = (dt_fileset_entry){.what = what, .path = path, .output = output};
}

void dt_fileset_input(dt_fileset *s, const char *what, const char *path) {
    if (path && *path) add(s, what, strdup(path), 0);
}

void dt_fileset_output(dt_fileset *s, const char *what, const char *path) {
    if (path && *path) add(s, what, strdup(path), 1);
}

void dt_fileset_add_in(dt_fileset *s, const char *what, const char *dir, const char *name,
                       int output) {
    if (!dir || !*dir) return;
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    if (path) sprintf(path, "%s/%s", dir, name);
    add(s, what, path, output);
}

void dt_fileset_free(dt_fileset *s) {
    for (int i = 0; i < s->n; i++) free(s->e[i].path);
    free(s->e);
    dt_fileset_init(s);
}

/* What tells two paths apart: the file's device and inode when it exists, and its
 * folder's device and inode with its name (which is all a file not yet written has). */
typedef struct identity {
    int exists, folder_known;
    dev_t dev, folder_dev;
    ino_t ino, folder_ino;
    const char *name;
} identity;

static identity identify(const char *path) {
    identity id = {0};
    struct stat st;
    if (stat(path, &st) == 0) { /* follows symlinks: a link to an input is the input */
        id.exists = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
    }
    const char *slash = strrchr(path, '/');
    id.name = slash ? slash + 1 : path;
    char *dir =
        slash ? (slash == path ? strdup("/") : strndup(path, (size_t)(slash - path))) : strdup(".");
    if (dir && stat(dir, &st) == 0) {
        id.folder_known = 1;
        id.folder_dev = st.st_dev;
        id.folder_ino = st.st_ino;
    }
    free(dir);
    return id;
}

static int same_file(const identity *a, const identity *b) {
    if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
    return a->folder_known && b->folder_known && a->folder_dev == b->folder_dev &&
           a->folder_ino == b->folder_ino && *a->name && !strcmp(a->name, b->name);
}

int dt_fileset_check(const dt_fileset *s, dt_error *err) {
    if (s->overflow) return dt_error_set(err, "out of memory checking the command's files");
    for (int i = 0; i < s->n; i++)
        if (s->e[i].output && dt_outfile_check(s->e[i].path, err)) {
            if (strncmp(s->e[i].what, "--", 2)) return -1;
            char why[sizeof err->msg]; /* a flag first: which output it was */
            snprintf(why, sizeof why, "%s", err->msg);
            return dt_error_set(err, "%s: %s", s->e[i].what, why);
        }
    identity *id = malloc(sizeof *id * (size_t)(s->n ? s->n : 1));
    if (!id) return dt_error_set(err, "out of memory checking the command's files");
    for (int i = 0; i < s->n; i++) id[i] = identify(s->e[i].path);
    int rc = 0;
    for (int i = 0; i < s->n && !rc; i++) {
        const dt_fileset_entry *out = &s->e[i];
        if (!out->output) continue;
        for (int j = 0; j < s->n && !rc; j++) {
            const dt_fileset_entry *other = &s->e[j];
            if (j == i || !same_file(&id[i], &id[j])) continue;
            if (!other->output)
                rc = dt_error_set(err, "%s %s would overwrite %s %s (the same file)", out->what,
                                  out->path, other->what, other->path);
            else if (j > i)
                rc = dt_error_set(err, "%s %s and %s %s are the same file (give each its own)",
                                  out->what, out->path, other->what, other->path);
        }
    }
    free(id);
    return rc;
}

const char *dt_fileset_same_input(const dt_fileset *s, const char *path) {
    const identity at = identify(path);
    for (int i = 0; i < s->n; i++)
        if (!s->e[i].output) {
            const identity in = identify(s->e[i].path);
            if (same_file(&at, &in)) return s->e[i].path;
        }
    return NULL;
}
