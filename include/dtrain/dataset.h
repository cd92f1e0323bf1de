/* Datasets: labelled uint8 images addressed by index. Real sources (IDX, CIFAR-10
 * binary) are read whole into memory at open; synthetic sources generate a sample
 * from (seed, index) on demand. Decoding to floats and augmentation live in
 * transform.h; order and sharding in sampler.h; background batching in loader.h.
 *
 * Specs: fashion-mnist (Debian's dataset-fashion-mnist), fashion-mnist:DIR, mnist:DIR
 * (IDX files train-images-idx3-ubyte[.gz] etc.), cifar10:DIR (data_batch_1..5.bin,
 * test_batch.bin), synthetic:mnist (60,000/10,000 of 1x28x28), synthetic:cifar10
 * (50,000/10,000 of 3x32x32), synthetic:imagenet (1,281,167/50,000 of 3x224x224 in 1000
 * classes, ILSVRC-2012's sizes; ImageNet's normalisation; no augmentation by default),
 * synthetic:CxHxW (50,000/10,000 of that shape, C 1-3, in 10 classes; no augmentation). */
#ifndef DTRAIN_DATASET_H
#define DTRAIN_DATASET_H

#include <stdint.h>

#include "dtrain/error.h"

/* Where Debian's dataset-fashion-mnist package puts its files. */
#define DT_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct dt_dataset {
    char name[64];
    int size; /* number of samples */
    int c, h, w;
    int classes;
    float mean[3], std[3]; /* Normalize((x/255 - mean) / std) per channel */
    int augment;           /* whether training on it uses crop + flip by default */
    uint8_t *pixels;       /* [size, c, h, w], owned; NULL for synthetic */
    int32_t *labels;       /* [size], owned; NULL for synthetic */
    uint64_t seed;         /* synthetic only */
    /* [classes] names (Fashion-MNIST's "T-shirt/top", CIFAR-10's "airplane", MNIST's
     * digits); NULL for synthetic data, whose classes are only numbers */
    const char *const *class_names;
} dt_dataset;

/* Opens the train (train = 1) or test split named by spec. */
int dt_dataset_open(dt_dataset *ds, const char *spec, int train, dt_error *err);
void dt_dataset_close(dt_dataset *ds);

/* Copies sample `index`'s pixels (c*h*w bytes) into out and returns its label. */
int32_t dt_dataset_sample(const dt_dataset *ds, int index, uint8_t *out);

/* Calls fn with each file spec reads, both splits: for IDX data both names of each
 * file, raw and .gz (the raw one is read when both exist, so a file written under
 * either name changes the data); nothing for synthetic data or an unknown spec. For
 * the checks that no output of a command replaces its data. */
void dt_dataset_each_file(const char *spec, void (*fn)(void *ctx, const char *path), void *ctx);

/* The spec list for help texts and errors. */
const char *dt_dataset_specs(void);

#endif
