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

/* The bytes a file says it holds, from its first n bytes (n >= 16, or the whole file
 * if shorter); SIZE_MAX when it cannot tell. */
typedef size_t (*dt_declared_size_fn)(const uint8_t *head, size_t n);
/* An IDX image (label) file's: 16 + count x rows x cols (8 + count); SIZE_MAX for
 * another magic number, which the parser then names. */
size_t dt_idx_images_size(const uint8_t *head, size_t n);
size_t dt_idx_labels_size(const uint8_t *head, size_t n);

/* Reads a whole file, gunzipping it if it is gzip (detected by content). The buffer
 * is malloc'd; a truncated or corrupt gzip stream is an error, and so is content
 * beyond what declared() reads in its header or beyond max_bytes: both are checked
 * while inflating, so a gzip bomb stops within a megabyte of the limit. */
int dt_read_maybe_gz(const char *path, dt_declared_size_fn declared, size_t max_bytes,
                     uint8_t **data, size_t *bytes, dt_error *err);

#endif
