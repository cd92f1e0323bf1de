#include "data/cifar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/idx.h"

int dt_cifar_parse(const uint8_t *data, size_t bytes, const char *name, int *count,
                   uint8_t **pixels, int32_t **labels, dt_error *err) {
    if (bytes == 0 || bytes % DT_CIFAR_RECORD != 0)
        return dt_error_set(err,
                            "%s: %zu bytes is not a whole number of CIFAR-10 records (%d bytes "
                            "each; truncated?)",
                            name, bytes, DT_CIFAR_RECORD);
    size_t n = bytes / DT_CIFAR_RECORD, total = (size_t)*count + n;
    if (total > (1u << 30)) return dt_error_set(err, "%s: too many records", name);
    for (size_t i = 0; i < n; i++)
        if (data[i * DT_CIFAR_RECORD] > 9)
            return dt_error_set(err, "%s: label %u of record %zu is outside 0..9", name,
                                data[i * DT_CIFAR_RECORD], i);
    uint8_t *p = realloc(*pixels, total * DT_CIFAR_PIXELS);
    if (!p) return dt_error_set(err, "%s: out of memory", name);
    *pixels = p;
    int32_t *l = realloc(*labels, total * sizeof(int32_t));
    if (!l) return dt_error_set(err, "%s: out of memory", name);
    *labels = l;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = data + i * DT_CIFAR_RECORD;
        l[*count + i] = rec[0];
        memcpy(p + ((size_t)*count + i) * DT_CIFAR_PIXELS, rec + 1, DT_CIFAR_PIXELS);
    }
    *count = (int)total;
    return 0;
}

void dt_cifar_path(char *out, size_t size, const char *dir, int train, int i) {
    if (train)
        snprintf(out, size, "%s/data_batch_%d.bin", dir, i + 1);
    else
        snprintf(out, size, "%s/test_batch.bin", dir);
}

int dt_cifar_read_split(const char *dir, int train, int *count, uint8_t **pixels, int32_t **labels,
                        dt_error *err) {
    *count = 0;
    *pixels = NULL;
    *labels = NULL;
    const int files = train ? DT_CIFAR_TRAIN_FILES : 1;
    for (int i = 0; i < files; i++) {
        char path[4096];
        dt_cifar_path(path, sizeof path, dir, train, i);
        uint8_t *data = NULL;
        size_t bytes;
        /* an official batch holds 10000 records; a whole dataset's worth is the most */
        int rc = dt_read_maybe_gz(path, NULL, (size_t)60000 * DT_CIFAR_RECORD, &data, &bytes, err);
        if (rc == 0) rc = dt_cifar_parse(data, bytes, path, count, pixels, labels, err);
        free(data);
        if (rc) {
            free(*pixels);
            free(*labels);
            *pixels = NULL;
            *labels = NULL;
            return -1;
        }
    }
    return 0;
}
