/* libFuzzer target for the dataset readers: every input is parsed as an IDX image
 * file, an IDX label file and a CIFAR-10 batch, and also written to a file and read
 * back through the gzip-aware reader (so corrupt .gz streams are covered too).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/cifar.h"
#include "data/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    dt_error err;
    int count, rows, cols;
    uint8_t *pixels = NULL;
    int32_t *labels = NULL;
    if (dt_idx_parse_images(data, size, "fuzz", &count, &rows, &cols, &pixels, &err) == 0)
        free(pixels);
    if (dt_idx_parse_labels(data, size, "fuzz", 10, &count, &labels, &err) == 0) free(labels);
    count = 0;
    pixels = NULL;
    labels = NULL;
    dt_cifar_parse(data, size, "fuzz", &count, &pixels, &labels, &err);
    free(pixels);
    free(labels);

    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/dtrain_fuzz_%ld.gz", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    uint8_t *out;
    size_t bytes;
    if (dt_read_maybe_gz(path, dt_idx_images_size, (size_t)1 << 26, &out, &bytes, &err) == 0)
        free(out);
    return 0;
}
