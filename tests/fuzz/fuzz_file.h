/* For the fuzz targets of readers that take a path: the input written to a file of
 * this process (in /tmp), whose path is returned; NULL if it cannot be written. */
#ifndef DTRAIN_FUZZ_FILE_H
#define DTRAIN_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static const char *fuzz_file(const uint8_t *data, size_t size, const char *suffix) {
    static char path[128];
    snprintf(path, sizeof path, "/tmp/dtrain_fuzz_%ld%s", (long)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    const int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok ? path : NULL;
}

#endif
