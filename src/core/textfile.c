#include "dtrain/textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *dt_text_file_read(const char *path, const char *what, size_t max_bytes, dt_error *err) {
    const char *space = *what ? " " : "";
    FILE *f = fopen(path, "rb");
    if (!f) {
        dt_error_set(err, "cannot open %s%s%s: %s", what, space, path, strerror(errno));
        return NULL;
    }
    size_t used = 0, cap = 4096;
    char *text = malloc(cap);
    while (text) {
        used += fread(text + used, 1, cap - 1 - used, f);
        if (used < cap - 1 || cap >= max_bytes) break;
        char *grown = realloc(text, cap * 2);
        if (!grown) free(text);
        text = grown;
        cap *= 2;
    }
    const int failed = ferror(f), too_big = text && used == cap - 1 && !feof(f);
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
    return text;
}
