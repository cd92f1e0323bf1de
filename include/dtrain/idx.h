/* IDX files (MNIST, Fashion-MNIST): big-endian magic 0x00000803 (images: count,
 * rows, cols, then uint8 pixels) or 0x00000801 (labels: count, then uint8 labels).
 * Files may be raw or gzip-compressed (zlib reads both). Every check names the file. */
#ifndef DTRAIN_IDX_H
#define DTRAIN_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"

/* Parses a decompressed IDX image file held in memory. On success *pixels is a
 * malloc'd [count, rows, cols] copy. `name` is used in errors. */
int dt_idx_parse_images(const uint8_t *data, size_t bytes, const char *name, int *count, int *rows,
                        int *cols, uint8_t **pixels, dt_error *err);
/* Parses a decompressed IDX label file; labels must lie in [0, classes). */
int dt_idx_parse_labels(const uint8_t *data, size_t bytes, const char *name, int classes,
                        int *count, int32_t **labels, dt_error *err);

/* Reads a whole file, gunzipping it if it is gzip (detected by content). The buffer
 * is malloc'd; a truncated or corrupt gzip stream is an error. */
int dt_read_maybe_gz(const char *path, uint8_t **data, size_t *bytes, dt_error *err);

#endif
