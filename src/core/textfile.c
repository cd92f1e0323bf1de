#define _GNU_SOURCE /* getc_unlocked, O_CLOEXEC with -std=c11 */
#include "core/textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a path that is not a regular file is, for the message. */
static const char *kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder, not a regular file";
    if (S_ISFIFO(mode)) return "a FIFO, not a regular file";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device, not a regular file";
    if (S_ISSOCK(mode)) return "a socket, not a regular file";
    return "not a regular file";
}

FILE *dt_text_open(const char *path, const char *what, size_t max_bytes, dt_error *err) {
    const char *space = *what ? " " : "";
    /* O_NONBLOCK: opening a FIFO without a writer returns at once, and is refused below */
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        dt_error_set(err, "cannot open %s%s%s: %s", what, space, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *why = fstat(fd, &st) != 0    ? strerror(errno)
                      : !S_ISREG(st.st_mode) ? kind_of(st.st_mode)
                                             : NULL;
    if (why) {
        dt_error_set(err, "cannot read %s%s%s: %s", what, space, path, why);
        close(fd);
        return NULL;
    }
    if ((unsigned long long)st.st_size > (unsigned long long)max_bytes) {
        dt_error_set(err, "cannot read %s%s%s: larger than %zu MiB", what, space, path,
                     max_bytes >> 20);
        close(fd);
        return NULL;
    }
    const int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        dt_error_set(err, "cannot open %s%s%s: %s", what, space, path, strerror(errno));
        close(fd);
    }
    return f;
}

char *dt_text_file_read(const char *path, const char *what, size_t max_bytes, dt_error *err) {
    return dt_file_read(path, what, max_bytes, NULL, err);
}

char *dt_file_read(const char *path, const char *what, size_t max_bytes, size_t *len,
                   dt_error *err) {
    const char *space = *what ? " " : "";
    FILE *f = dt_text_open(path, what, max_bytes, err);
    if (!f) return NULL;
    size_t used = 0, cap = 4096;
    char *text = malloc(cap);
    while (text) {
        used += fread(text + used, 1, cap - 1 - used, f);
        if (used < cap - 1 || cap > max_bytes) break;
        char *grown = realloc(text, cap * 2);
        if (!grown) free(text);
        text = grown;
        cap *= 2;
    }
    /* the file may have grown since dt_text_open looked at its size */
    const int failed = ferror(f),
              too_big = text && (used > max_bytes || (used == cap - 1 && !feof(f)));
    fclose(f);
    if (!text || failed || too_big) {
        free(text);
        if (!text || failed)
            dt_error_set(err, "cannot read %s%s%s: %s", what, space, path,
                         !text ? "out of memory" : "read error");
        else
            dt_error_set(err, "cannot read %s%s%s: larger than %zu MiB", what, space, path,
                         max_bytes >> 20);
        return NULL;
    }
    text[used] = 0;
    if (len) *len = used;
    return text;
}

int dt_text_lines_open(dt_text_lines *r, const char *path, const char *what, size_t max_bytes,
                       dt_error *err) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->what = what;
    r->max_line = DT_TEXT_MAX_LINE;
    r->max_bytes = max_bytes;
    r->f = dt_text_open(path, what, max_bytes, err);
    return r->f ? 0 : -1;
}

void dt_text_lines_close(dt_text_lines *r) {
    if (r->f) fclose(r->f);
    free(r->line);
    r->f = NULL;
    r->line = NULL;
    r->len = r->cap = 0;
}

int dt_text_lines_next(dt_text_lines *r, dt_error *err) {
    const char *space = *r->what ? " " : "";
    r->len = 0;
    int c = EOF;
    /* room for the line, its end ('\r' before '\n' too) and the NUL */
    while ((c = getc_unlocked(r->f)) != EOF) {
        if (++r->total > r->max_bytes)
            return dt_error_set(err, "cannot read %s%s%s: larger than %zu MiB", r->what, space,
                                r->path, r->max_bytes >> 20);
        if (c == 0) {
            /* NUL bytes to the end of the file, no line end among them: the tail of a
             * file cut by a crash (the size grew, the data never came), read as a last
             * line cut short; anywhere else they are not text */
            int d;
            while ((d = getc_unlocked(r->f)) != EOF && d != '\n' && ++r->total <= r->max_bytes)
                ;
            if (r->total > r->max_bytes)
                return dt_error_set(err, "cannot read %s%s%s: larger than %zu MiB", r->what, space,
                                    r->path, r->max_bytes >> 20);
            if (d != EOF || ferror(r->f))
                return dt_error_set(err, "%s line %ld: a NUL byte (not a text file)", r->path,
                                    r->lineno + 1);
            break;
        }
        if (r->len + 2 > r->cap) {
            if (r->cap >= r->max_line + 4) /* more than max_line bytes before "\r\n" */
                return dt_error_set(err, "%s line %ld: longer than %zu bytes", r->path,
                                    r->lineno + 1, r->max_line);
            size_t grown = r->cap ? 2 * r->cap : 256;
            if (grown > r->max_line + 4) grown = r->max_line + 4;
            char *p = realloc(r->line, grown);
            if (!p) return dt_error_set(err, "out of memory reading %s", r->path);
            r->line = p;
            r->cap = grown;
        }
        r->line[r->len++] = (char)c;
        if (c == '\n') break;
    }
    if (ferror(r->f))
        return dt_error_set(err, "cannot read %s%s%s: %s", r->what, space, r->path,
                            strerror(errno));
    if (r->len == 0) return 0;
    r->line[r->len] = 0;
    r->lineno++;
    const size_t end = r->line[r->len - 1] != '\n'                  ? 0
                       : r->len >= 2 && r->line[r->len - 2] == '\r' ? 2
                                                                    : 1;
    if (r->len - end > r->max_line)
        return dt_error_set(err, "%s line %ld: longer than %zu bytes", r->path, r->lineno,
                            r->max_line);
    return 1;
}

/* ---- CSV ---- */

int dt_csv_open(dt_csv *c, const char *path, dt_error *err) {
    memset(c, 0, sizeof *c);
    return dt_text_lines_open(&c->in, path, "", DT_CSV_MAX_BYTES, err);
}

void dt_csv_close(dt_csv *c) {
    dt_text_lines_close(&c->in);
    c->n = 0;
}

static int blank_char(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* t without its leading and trailing blanks (cut in place). */
static char *trim(char *t) {
    while (blank_char(*t)) t++;
    size_t n = strlen(t);
    while (n && blank_char(t[n - 1])) t[--n] = 0;
    return t;
}

int dt_csv_next(dt_csv *c, dt_error *err) {
    for (;;) {
        c->n = 0;
        const int got = dt_text_lines_next(&c->in, err);
        if (got <= 0) return got;
        char *line = trim(c->in.line);
        if (!*line || *line == '#') continue;
        for (char *p = line;;) {
            char *comma = strchr(p, ',');
            if (comma) *comma = 0;
            if (c->n == DT_CSV_MAX_FIELDS)
                return dt_error_set(err, "%s line %ld: more than %d fields", c->in.path,
                                    c->in.lineno, DT_CSV_MAX_FIELDS);
            c->field[c->n++] = trim(p);
            if (!comma) return 1;
            p = comma + 1;
        }
    }
}

int dt_csv_number(const char *text, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    const double v = strtod(text, &end);
    if (!*text || end == text || *end) return DT_CSV_NOT_A_NUMBER;
    if (isnan(v) || (isinf(v) && errno != ERANGE)) return DT_CSV_NOT_A_NUMBER; /* "nan", "inf" */
    if (isinf(v) || v < lo || v > hi) return DT_CSV_OUT_OF_RANGE;              /* 1e999 included */
    *out = v; /* an underflow (1e-999) is the nearest double, as for any other number */
    return 0;
}

int dt_csv_field_number(const dt_csv *c, const char *name, const char *text, double lo, double hi,
                        double *out, dt_error *err) {
    const int rc = dt_csv_number(text, lo, hi, out);
    if (rc == DT_CSV_NOT_A_NUMBER)
        return dt_error_set(err, "%s line %ld: %s is not a number: '%s'", c->in.path, c->in.lineno,
                            name, text);
    if (rc == DT_CSV_OUT_OF_RANGE)
        return dt_error_set(err, "%s line %ld: %s is out of range: '%s' (from %g to %g)",
                            c->in.path, c->in.lineno, name, text, lo, hi);
    return 0;
}
