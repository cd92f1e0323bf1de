#include "dtrain/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/parse.h"
#include "core/rng.h"
#include "data/cifar.h"
#include "data/idx.h"

static const uint64_t SYNTHETIC_SEED = 20261122;
static const float MNIST_MEAN = 0.1307f, MNIST_STD = 0.3081f;
static const float CIFAR_MEAN[3] = {0.4914f, 0.4822f, 0.4465f};
static const float CIFAR_STD[3] = {0.2023f, 0.1994f, 0.2010f};
static const float IMAGENET_MEAN[3] = {0.485f, 0.456f, 0.406f}; /* torchvision's */
static const float IMAGENET_STD[3] = {0.229f, 0.224f, 0.225f};
/* ILSVRC-2012's train and validation sizes: an epoch costs what ImageNet's would
 * (use --max-samples for less); samples are made on demand, so size costs no memory. */
enum { IMAGENET_TRAIN = 1281167, IMAGENET_TEST = 50000 };

const char *dt_dataset_specs(void) {
    return "fashion-mnist, fashion-mnist:DIR, mnist:DIR, cifar10:DIR, synthetic:mnist, "
           "synthetic:cifar10, synthetic:imagenet, synthetic:CxHxW";
}

/* synthetic:CxHxW: images of any shape for a model that takes no standard one (an
 * imported Inception at 75x75), 10 classes, CIFAR-10's split sizes. The normalisation
 * is the generator's own: 255 * (0.6 t + 0.4 u) for t, u uniform has mean 0.5 and
 * standard deviation sqrt(0.52 / 12) = 0.208. No augmentation (CIFAR's pad-and-crop
 * assumes its images). */
enum { SHAPED_TRAIN = 50000, SHAPED_TEST = 10000, SHAPED_MAX_SIDE = 4096 };
static const float SHAPED_MEAN = 0.5f, SHAPED_STD = 0.208f;

static int parse_shaped(dt_dataset *ds, const char *spec, dt_error *err) {
    const char *dims = spec + strlen("synthetic:");
    char text[3][16];
    const char *at = dims;
    for (int i = 0; i < 3; i++) {
        size_t len = strcspn(at, "x");
        if (len == 0 || len >= sizeof text[i] || (i < 2 ? at[len] != 'x' : at[len] != '\0'))
            return dt_error_set(err,
                                "unknown data spec '%s' (synthetic:CxHxW wants three "
                                "numbers, as synthetic:3x75x75; known: %s)",
                                spec, dt_dataset_specs());
        memcpy(text[i], at, len);
        text[i][len] = '\0';
        at += len + (i < 2);
    }
    static const char *const what[3] = {"channels", "height", "width"};
    const long max[3] = {3, SHAPED_MAX_SIDE, SHAPED_MAX_SIDE};
    long v[3];
    for (int i = 0; i < 3; i++) {
        char flag[96];
        snprintf(flag, sizeof flag, "--data %s: its %s", spec, what[i]);
        if (dt_parse_long(flag, text[i], 1, max[i], &v[i], err)) return -1;
    }
    ds->c = (int)v[0];
    ds->h = (int)v[1];
    ds->w = (int)v[2];
    for (int c = 0; c < ds->c; c++) {
        ds->mean[c] = SHAPED_MEAN;
        ds->std[c] = SHAPED_STD;
    }
    return 0;
}

/* The classes' names, in label order, as the datasets' own documentation gives them. */
static const char *const FASHION_MNIST_CLASSES[] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
static const char *const MNIST_CLASSES[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
static const char *const CIFAR10_CLASSES[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                              "dog",      "frog",       "horse", "ship", "truck"};

static void set_mnist_shape(dt_dataset *ds) {
    ds->c = 1;
    ds->h = ds->w = 28;
    ds->mean[0] = MNIST_MEAN;
    ds->std[0] = MNIST_STD;
}

static void set_cifar_shape(dt_dataset *ds) {
    ds->c = 3;
    ds->h = ds->w = 32;
    memcpy(ds->mean, CIFAR_MEAN, sizeof CIFAR_MEAN);
    memcpy(ds->std, CIFAR_STD, sizeof CIFAR_STD);
}

/* IDX file `base` in dir, raw or with .gz (the raw one wins if both exist). */
static int idx_path(char *out, size_t size, const char *dir, const char *base, dt_error *err) {
    snprintf(out, size, "%s/%s", dir, base);
    if (access(out, F_OK) == 0) return 0;
    snprintf(out, size, "%s/%s.gz", dir, base);
    if (access(out, F_OK) == 0) return 0;
    return dt_error_set(err, "cannot open %s/%s: neither it nor %s.gz exists", dir, base, base);
}

static int open_idx(dt_dataset *ds, const char *dir, int train, dt_error *err) {
    char images[4096], labels[4096];
    if (idx_path(images, sizeof images, dir,
                 train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte", err) ||
        idx_path(labels, sizeof labels, dir,
                 train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte", err))
        return -1;
    uint8_t *data;
    size_t bytes;
    int n_images, n_labels, rows, cols;
    /* 2^32 bytes: far beyond any IDX set; the header's size is the real limit */
    const size_t max = (size_t)1 << 32;
    if (dt_read_maybe_gz(images, dt_idx_images_size, max, &data, &bytes, err)) return -1;
    int rc = dt_idx_parse_images(data, bytes, images, &n_images, &rows, &cols, &ds->pixels, err);
    free(data);
    if (rc) return -1;
    if (dt_read_maybe_gz(labels, dt_idx_labels_size, max, &data, &bytes, err)) return -1;
    rc = dt_idx_parse_labels(data, bytes, labels, ds->classes, &n_labels, &ds->labels, err);
    free(data);
    if (rc) return -1;
    if (n_labels != n_images)
        return dt_error_set(err, "%s has %d labels but %s has %d images", labels, n_labels, images,
                            n_images);
    if (rows != 28 || cols != 28)
        return dt_error_set(err, "%s: images are %dx%d, expected 28x28", images, rows, cols);
    ds->size = n_images;
    return 0;
}

int dt_dataset_open(dt_dataset *ds, const char *spec, int train, dt_error *err) {
    memset(ds, 0, sizeof *ds);
    ds->classes = 10;
    snprintf(ds->name, sizeof ds->name, "%s", spec);
    int rc;
    if (!strcmp(spec, "synthetic:mnist") || !strcmp(spec, "synthetic:cifar10")) {
        int cifar = !strcmp(spec, "synthetic:cifar10");
        if (cifar)
            set_cifar_shape(ds);
        else
            set_mnist_shape(ds);
        ds->size = cifar ? (train ? 50000 : 10000) : (train ? 60000 : 10000);
        ds->augment = cifar && train;
        ds->seed = SYNTHETIC_SEED + (train ? 0 : 1);
        return 0;
    } else if (!strcmp(spec, "synthetic:imagenet")) {
        /* No augmentation by default: the transform's pad-and-crop is CIFAR's, not
         * ImageNet's random-resized crop, and generated samples need none. */
        ds->c = 3;
        ds->h = ds->w = 224;
        ds->classes = 1000;
        memcpy(ds->mean, IMAGENET_MEAN, sizeof IMAGENET_MEAN);
        memcpy(ds->std, IMAGENET_STD, sizeof IMAGENET_STD);
        ds->size = train ? IMAGENET_TRAIN : IMAGENET_TEST;
        ds->seed = SYNTHETIC_SEED + (train ? 2 : 3);
        return 0;
    } else if (!strncmp(spec, "synthetic:", 10) && spec[10] >= '0' && spec[10] <= '9') {
        if (parse_shaped(ds, spec, err)) return -1;
        ds->size = train ? SHAPED_TRAIN : SHAPED_TEST;
        ds->seed = SYNTHETIC_SEED + (train ? 4 : 5);
        return 0;
    } else if (!strcmp(spec, "fashion-mnist")) {
        set_mnist_shape(ds);
        ds->class_names = FASHION_MNIST_CLASSES;
        rc = open_idx(ds, DT_FASHION_MNIST_DIR, train, err);
        if (rc && access(DT_FASHION_MNIST_DIR, F_OK) != 0)
            dt_error_set(err,
                         "fashion-mnist: %s is missing (install Debian's dataset-fashion-mnist, "
                         "or give fashion-mnist:DIR)",
                         DT_FASHION_MNIST_DIR);
    } else if (!strncmp(spec, "fashion-mnist:", 14) || !strncmp(spec, "mnist:", 6)) {
        set_mnist_shape(ds);
        ds->class_names = spec[0] == 'f' ? FASHION_MNIST_CLASSES : MNIST_CLASSES;
        rc = open_idx(ds, strchr(spec, ':') + 1, train, err);
    } else if (!strncmp(spec, "cifar10:", 8)) {
        set_cifar_shape(ds);
        ds->class_names = CIFAR10_CLASSES;
        ds->augment = train;
        rc = dt_cifar_read_split(spec + 8, train, &ds->size, &ds->pixels, &ds->labels, err);
    } else {
        return dt_error_set(err, "unknown data spec '%s' (known: %s)", spec, dt_dataset_specs());
    }
    if (rc) dt_dataset_close(ds);
    return rc;
}

void dt_dataset_each_file(const char *spec, void (*fn)(void *ctx, const char *path), void *ctx) {
    static const char *const idx[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char path[4200];
    const char *dir = !strcmp(spec, "fashion-mnist") ? DT_FASHION_MNIST_DIR
                      : !strncmp(spec, "fashion-mnist:", 14) || !strncmp(spec, "mnist:", 6)
                          ? strchr(spec, ':') + 1
                          : NULL;
    if (dir) {
        for (size_t i = 0; i < sizeof idx / sizeof *idx; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, idx[i]);
            fn(ctx, path);
            snprintf(path, sizeof path, "%s/%s.gz", dir, idx[i]);
            fn(ctx, path);
        }
    } else if (!strncmp(spec, "cifar10:", 8)) {
        for (int i = 0; i <= DT_CIFAR_TRAIN_FILES; i++) {
            dt_cifar_path(path, sizeof path, spec + 8, i < DT_CIFAR_TRAIN_FILES, i);
            fn(ctx, path);
        }
    }
}

void dt_dataset_close(dt_dataset *ds) {
    free(ds->pixels);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

/* A learnable synthetic image: a fixed random template per class (shared by both
 * splits) blended with per-sample noise. */
static int32_t synthetic_sample(const dt_dataset *ds, int index, uint8_t *out) {
    dt_rng rng = dt_rng_make(ds->seed, (uint64_t)index);
    int32_t label = (int32_t)dt_rng_below(&rng, (uint32_t)ds->classes);
    dt_rng tmpl = dt_rng_make(SYNTHETIC_SEED, (1ull << 40) + (uint64_t)label);
    const int count = ds->c * ds->h * ds->w;
    for (int p = 0; p < count; p++) {
        float t = dt_rng_uniform(&tmpl), u = dt_rng_uniform(&rng);
        out[p] = (uint8_t)(255.0f * (0.6f * t + 0.4f * u));
    }
    return label;
}

int32_t dt_dataset_sample(const dt_dataset *ds, int index, uint8_t *out) {
    if (!ds->pixels) return synthetic_sample(ds, index, out);
    const size_t count = (size_t)ds->c * ds->h * ds->w;
    memcpy(out, ds->pixels + (size_t)index * count, count);
    return ds->labels[index];
}
