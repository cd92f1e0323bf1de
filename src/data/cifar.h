/* CIFAR-10 binary batches: records of 1 label byte then 3072 pixel bytes (1024 R,
 * 1024 G, 1024 B, row-major 32x32). Training split: data_batch_1.bin ..
 * data_batch_5.bin; test split: test_batch.bin (the official "binary version"). */
#ifndef DTRAIN_CIFAR_H
#define DTRAIN_CIFAR_H

#include <stddef.h>
#include <stdint.h>

#include "dtrain/error.h"

enum { DT_CIFAR_RECORD = 3073, DT_CIFAR_PIXELS = 3072, DT_CIFAR_TRAIN_FILES = 5 };

/* The path of the split's i-th file in dir (i from 0; the test split has one). */
void dt_cifar_path(char *out, size_t size, const char *dir, int train, int i);

/* Appends the records of one file's bytes to *pixels and *labels (realloc'd; *count
 * grows). `name` is used in errors. */
int dt_cifar_parse(const uint8_t *data, size_t bytes, const char *name, int *count,
                   uint8_t **pixels, int32_t **labels, dt_error *err);

/* Reads the training (train = 1) or test split from dir. */
int dt_cifar_read_split(const char *dir, int train, int *count, uint8_t **pixels, int32_t **labels,
                        dt_error *err);

#endif
