#include "data/idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/textfile.h"

enum { IDX_IMAGES = 0x00000803, IDX_LABELS = 0x00000801 };

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int dt_idx_parse_images(const uint8_t *data, size_t bytes, const char *name, int *count, int *rows,
                        int *cols, uint8_t **pixels, dt_error *err) {
    if (bytes < 16)
        return dt_error_set(err, "%s: %zu bytes is too short for an IDX image header", name, bytes);
    uint32_t magic = be32(data);
    if (magic != IDX_IMAGES)
        return dt_error_set(err, "%s: wrong magic number 0x%08x (IDX images have 0x%08x)", name,
                            magic, IDX_IMAGES);
    uint32_t n = be32(data + 4), h = be32(data + 8), w = be32(data + 12);
    if (n == 0 || h == 0 || w == 0 || n > (1u << 30) || h > 4096 || w > 4096)
        return dt_error_set(err, "%s: implausible header: %u images of %ux%u", name, n, h, w);
    uint64_t want = (uint64_t)n * h * w;
    if (bytes - 16 != want)
        return dt_error_set(err,
                            "%s: header says %u images of %ux%u (%llu bytes of pixels) but the "
                            "file holds %zu",
                            name, n, h, w, (unsigned long long)want, bytes - 16);
    *pixels = malloc(want);
    if (!*pixels)
        return dt_error_set(err, "%s: out of memory for %llu bytes", name,
                            (unsigned long long)want);
    memcpy(*pixels, data + 16, want);
    *count = (int)n;
    *rows = (int)h;
    *cols = (int)w;
    return 0;
}

int dt_idx_parse_labels(const uint8_t *data, size_t bytes, const char *name, int classes,
                        int *count, int32_t **labels, dt_error *err) {
    if (bytes < 8)
        return dt_error_set(err, "%s: %zu bytes is too short for an IDX label header", name, bytes);
    uint32_t magic = be32(data);
    if (magic != IDX_LABELS)
        return dt_error_set(err, "%s: wrong magic number 0x%08x (IDX labels have 0x%08x)", name,
                            magic, IDX_LABELS);
    uint32_t n = be32(data + 4);
    if (n == 0 || n > (1u << 30))
        return dt_error_set(err, "%s: implausible label count %u", name, n);
    if (bytes - 8 != n)
        return dt_error_set(err, "%s: header says %u labels but the file holds %zu", name, n,
                            bytes - 8);
    for (uint32_t i = 0; i < n; i++)
        if (data[8 + i] >= classes)
            return dt_error_set(err, "%s: label %u of sample %u is outside 0..%d", name,
                                data[8 + i], i, classes - 1);
    *labels = malloc(sizeof(int32_t) * n);
    if (!*labels) return dt_error_set(err, "%s: out of memory for %u labels", name, n);
    for (uint32_t i = 0; i < n; i++) (*labels)[i] = data[8 + i];
    *count = (int)n;
    return 0;
}

size_t dt_idx_images_size(const uint8_t *head, size_t n) {
    if (n < 16 || be32(head) != IDX_IMAGES || be32(head + 8) > 4096 || be32(head + 12) > 4096)
        return SIZE_MAX; /* the parser names an implausible header */
    return (size_t)(16 + (uint64_t)be32(head + 4) * be32(head + 8) * be32(head + 12));
}

size_t dt_idx_labels_size(const uint8_t *head, size_t n) {
    if (n < 8 || be32(head) != IDX_LABELS) return SIZE_MAX;
    return (size_t)(8 + (uint64_t)be32(head + 4));
}

/* zlib's message without the "<fd:N>: " it puts first for a stream opened by gzdopen
 * (the error already names the file). */
static const char *gz_why(gzFile f, int *code) {
    const char *why = gzerror(f, code);
    const char *past = !strncmp(why, "<fd:", 4) ? strstr(why, ">: ") : NULL;
    return past ? past + 3 : why;
}

int dt_read_maybe_gz(const char *path, dt_declared_size_fn declared, size_t max_bytes,
                     uint8_t **data, size_t *bytes, dt_error *err) {
    /* a regular file only, opened without blocking (textfile.h): a FIFO in place of a
     * data file is refused at once instead of waiting for a writer forever */
    FILE *probe = dt_text_open(path, "", max_bytes, err);
    if (!probe) return -1;
    const int fd = fcntl(fileno(probe), F_DUPFD_CLOEXEC, 0); /* dup() drops close-on-exec */
    fclose(probe);
    gzFile f = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!f) {
        const int why = errno;
        if (fd >= 0) close(fd);
        return dt_error_set(err, "cannot open %s: %s", path, strerror(why));
    }
    size_t cap = 1 << 20, used = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        gzclose(f);
        return dt_error_set(err, "%s: out of memory", path);
    }
    size_t limit = max_bytes; /* lowered to the header's size once it is read */
    int header_seen = 0;
    for (;;) {
        if (used > limit) {
            free(buf);
            gzclose(f);
            return dt_error_set(err,
                                "%s: holds more than the %zu bytes %s (a gzip bomb or a corrupt "
                                "file); stopped while inflating",
                                path, limit, header_seen ? "its header declares" : "allowed");
        }
        if (used == cap) {
            uint8_t *bigger = cap < ((size_t)1 << 34) ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                free(buf);
                gzclose(f);
                return dt_error_set(err, "%s: out of memory (or file over 16 GiB)", path);
            }
            buf = bigger;
            cap *= 2;
        }
        size_t want = cap - used > (1u << 20) ? (1u << 20) : cap - used;
        int got = gzread(f, buf + used, (unsigned)want);
        if (got < 0) {
            int code;
            const char *why = gz_why(f, &code);
            dt_error_set(err, "%s: corrupt gzip data (%s)", path, why);
            free(buf);
            gzclose(f);
            return -1;
        }
        if (got == 0) break;
        used += (size_t)got;
        if (declared && !header_seen && used >= 16) {
            const size_t d = declared(buf, used);
            if (d < limit) limit = d;
            header_seen = 1;
        }
    }
    /* zlib reports a stream cut short only as an error at the end. */
    int code;
    const char *why = gz_why(f, &code);
    if (code != Z_OK && code != Z_STREAM_END) {
        dt_error_set(err, "%s: truncated or corrupt gzip stream (%s)", path, why);
        free(buf);
        gzclose(f);
        return -1;
    }
    if (gzclose(f) != Z_OK) {
        free(buf);
        return dt_error_set(err, "%s: truncated or corrupt gzip stream", path);
    }
    *data = buf;
    *bytes = used;
    return 0;
}
