/* The data layer: IDX and CIFAR-10 readers on small files written here in the exact
 * official formats, every bad-file case with its one-line error, torchvision
 * transform semantics, DistributedSampler semantics and the loader's ordering. */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "data/cifar.h"
#include "data/idx.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dtrain/dataset.h"
#include "dtrain/transform.h"
#include "testutil.h"

static char dir[256];

static void write_file(const char *name, const void *data, size_t bytes, int gz) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, data, (unsigned)bytes), (int)bytes);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(data, 1, bytes, f), bytes);
        fclose(f);
    }
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8),
    p[3] = (uint8_t)v;
}

/* An IDX image file of n 28x28 images whose pixel (i, p) is (i + p) % 256. */
static size_t make_idx_images(uint8_t *buf, int n) {
    put_be32(buf, 0x803), put_be32(buf + 4, (uint32_t)n), put_be32(buf + 8, 28),
        put_be32(buf + 12, 28);
    for (int i = 0; i < n; i++)
        for (int p = 0; p < 784; p++) buf[16 + i * 784 + p] = (uint8_t)((i + p) % 256);
    return 16 + (size_t)n * 784;
}

static size_t make_idx_labels(uint8_t *buf, int n) {
    put_be32(buf, 0x801), put_be32(buf + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) buf[8 + i] = (uint8_t)(i % 10);
    return 8 + (size_t)n;
}

static void write_mnist_dir(int n_train, int n_labels, int gz) {
    uint8_t *buf = test_alloc(16 + 784 * 64);
    size_t bytes = make_idx_images(buf, n_train);
    write_file(gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte", buf, bytes, gz);
    bytes = make_idx_labels(buf, n_labels);
    write_file(gz ? "train-labels-idx1-ubyte.gz" : "train-labels-idx1-ubyte", buf, bytes, gz);
    free(buf);
}

static void clean_dir(void) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/dtrain_test_data_%ld", (long)getpid());
    mkdir(dir, 0755);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    clean_dir();
    rmdir(dir);
    return 0;
}

static void expect_open_error(const char *spec_prefix, const char *fragment) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s%s", spec_prefix, dir);
    dt_dataset ds;
    dt_error err;
    memset(err.msg, 0, sizeof err.msg);
    assert_int_equal(dt_dataset_open(&ds, spec, 1, &err), -1);
    print_message("  -> %s\n", err.msg);
    assert_non_null(strstr(err.msg, fragment));
    assert_null(strchr(err.msg, '\n'));
}

static void test_idx_raw_and_gz_read_back(void **state) {
    (void)state;
    for (int gz = 0; gz <= 1; gz++) {
        clean_dir();
        write_mnist_dir(37, 37, gz);
        char spec[512];
        snprintf(spec, sizeof spec, "fashion-mnist:%s", dir);
        dt_dataset ds;
        dt_error err;
        if (dt_dataset_open(&ds, spec, 1, &err)) fail_msg("%s", err.msg);
        assert_int_equal(ds.size, 37);
        uint8_t px[784];
        assert_int_equal(dt_dataset_sample(&ds, 13, px), 3);
        assert_int_equal(px[0], 13);
        assert_int_equal(px[783], (13 + 783) % 256);
        dt_dataset_close(&ds);
    }
}

/* The descriptors open on the file being read, seen from inside the read (the
 * declared-size callback runs with it open): how many, and how many close-on-exec.
 * The callback has no context argument, hence file-scope counters. */
static char reading[600];
static int open_on_reading, cloexec_on_reading;

static size_t declared_and_check_fds(const uint8_t *head, size_t n) {
    for (int fd = 0; fd < 1024; fd++) {
        char link[64], target[600];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        const ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = 0;
        if (strcmp(target, reading)) continue;
        open_on_reading++;
        const int flags = fcntl(fd, F_GETFD);
        cloexec_on_reading += flags >= 0 && (flags & FD_CLOEXEC);
    }
    return dt_idx_images_size(head, n);
}

/* A data file is read through a close-on-exec descriptor (dup() dropped the flag): a
 * child started meanwhile (launch's, a sweep's) does not inherit it. */
static void test_idx_reader_fd_is_close_on_exec(void **state) {
    (void)state;
    clean_dir();
    write_mnist_dir(5, 5, 1);
    snprintf(reading, sizeof reading, "%s/train-images-idx3-ubyte.gz", dir);
    open_on_reading = cloexec_on_reading = 0;
    uint8_t *data = NULL;
    size_t bytes = 0;
    dt_error err;
    if (dt_read_maybe_gz(reading, declared_and_check_fds, 1 << 20, &data, &bytes, &err))
        fail_msg("%s", err.msg);
    free(data);
    assert_true(open_on_reading >= 1);
    assert_int_equal(cloexec_on_reading, open_on_reading);
}

static void test_idx_bad_files_are_named(void **state) {
    (void)state;
    clean_dir();
    expect_open_error("mnist:", "cannot open");
    /* wrong magic */
    uint8_t *buf = test_alloc(16 + 784 * 64);
    size_t bytes = make_idx_images(buf, 10);
    put_be32(buf, 0x801);
    write_file("train-images-idx3-ubyte", buf, bytes, 0);
    bytes = make_idx_labels(buf + 9000, 10);
    write_file("train-labels-idx1-ubyte", buf + 9000, bytes, 0);
    expect_open_error("mnist:", "wrong magic number 0x00000801");
    /* header count disagrees with the file size */
    bytes = make_idx_images(buf, 10);
    write_file("train-images-idx3-ubyte", buf, bytes - 100, 0);
    expect_open_error("mnist:", "header says 10 images of 28x28");
    /* truncated gzip stream */
    clean_dir();
    write_mnist_dir(20, 20, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
    expect_open_error("mnist:", "truncated or corrupt gzip");
    /* labels count != images count */
    clean_dir();
    write_mnist_dir(20, 19, 0);
    expect_open_error("mnist:", "has 19 labels but");
    /* a label outside 0..9 */
    clean_dir();
    write_mnist_dir(20, 20, 0);
    bytes = make_idx_labels(buf, 20);
    buf[8 + 7] = 12;
    write_file("train-labels-idx1-ubyte", buf, bytes, 0);
    expect_open_error("mnist:", "label 12 of sample 7 is outside 0..9");
    free(buf);
}

/* CIFAR-10 record r of file f: label (f + r) % 10, R plane = r, G = f, B = 255 - r. */
static void write_cifar_file(const char *name, int file, int records, size_t cut) {
    size_t bytes = (size_t)records * DT_CIFAR_RECORD;
    uint8_t *buf = test_alloc(bytes);
    for (int r = 0; r < records; r++) {
        uint8_t *rec = buf + (size_t)r * DT_CIFAR_RECORD;
        rec[0] = (uint8_t)((file + r) % 10);
        memset(rec + 1, r, 1024);
        memset(rec + 1 + 1024, file, 1024);
        memset(rec + 1 + 2048, 255 - r, 1024);
    }
    write_file(name, buf, bytes - cut, 0);
    free(buf);
}

static void test_cifar_official_format_reads_back(void **state) {
    (void)state;
    clean_dir();
    for (int f = 1; f <= 5; f++) {
        char name[64];
        snprintf(name, sizeof name, "data_batch_%d.bin", f);
        write_cifar_file(name, f, 6, 0);
    }
    write_cifar_file("test_batch.bin", 0, 4, 0);
    char spec[512];
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    dt_dataset train, test;
    dt_error err;
    if (dt_dataset_open(&train, spec, 1, &err) || dt_dataset_open(&test, spec, 0, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(train.size, 30);
    assert_int_equal(test.size, 4);
    assert_int_equal(train.c, 3);
    assert_true(train.augment && !test.augment);
    uint8_t px[3072];
    /* sample 14 = file 3, record 2 */
    assert_int_equal(dt_dataset_sample(&train, 14, px), (3 + 2) % 10);
    assert_int_equal(px[0], 2);
    assert_int_equal(px[1024 + 500], 3);
    assert_int_equal(px[3071], 253);
    dt_dataset_close(&train);
    dt_dataset_close(&test);
}

static void test_cifar_bad_files_are_named(void **state) {
    (void)state;
    clean_dir();
    expect_open_error("cifar10:", "data_batch_1.bin");
    for (int f = 1; f <= 5; f++) {
        char name[64];
        snprintf(name, sizeof name, "data_batch_%d.bin", f);
        write_cifar_file(name, f, 3, f == 4 ? 100 : 0);
    }
    expect_open_error("cifar10:", "data_batch_4.bin: 9119 bytes is not a whole number");
    write_cifar_file("data_batch_4.bin", 4, 3, 0);
    uint8_t bad[DT_CIFAR_RECORD] = {10};
    write_file("data_batch_5.bin", bad, sizeof bad, 0);
    expect_open_error("cifar10:", "label 10 of record 0 is outside 0..9");
}

static void test_transform_without_augmentation_normalises(void **state) {
    (void)state;
    dt_dataset ds;
    dt_error err;
    assert_int_equal(dt_dataset_open(&ds, "synthetic:cifar10", 0, &err), 0);
    dt_transform t;
    dt_transform_init(&t, &ds, 0, 1);
    uint8_t px[3072];
    float out[3072];
    dt_dataset_sample(&ds, 5, px);
    dt_transform_apply(&t, px, 0, 5, out);
    for (int c = 0; c < 3; c++) {
        int p = c * 1024 + 77;
        assert_float_equal(out[p], (px[p] / 255.0f - ds.mean[c]) / ds.std[c], 1e-5);
    }
}

/* synthetic:CxHxW: the shape asked for, CIFAR-10's split sizes, and a normalisation
 * that is the generator's own (checked against the pixels it makes); a malformed shape
 * is refused with the part named. */
static void test_synthetic_any_shape(void **state) {
    (void)state;
    dt_dataset ds;
    dt_error err;
    assert_int_equal(dt_dataset_open(&ds, "synthetic:3x75x61", 1, &err), 0);
    assert_int_equal(ds.c * 1000000 + ds.h * 1000 + ds.w, 3075061);
    assert_int_equal(ds.size, 50000);
    assert_int_equal(ds.classes, 10);
    assert_int_equal(ds.augment, 0);
    enum { SAMPLES = 40, PX = 3 * 75 * 61 };
    uint8_t *px = test_alloc(PX);
    double sum = 0, sq = 0;
    for (int i = 0; i < SAMPLES; i++) {
        dt_dataset_sample(&ds, i * 1231, px);
        for (int p = 0; p < PX; p++) {
            const double v = px[p] / 255.0;
            sum += v;
            sq += v * v;
        }
    }
    const double n = (double)SAMPLES * PX, mean = sum / n, sd = sqrt(sq / n - mean * mean);
    /* the truncation to uint8 lowers the mean by half a level: 0.002 */
    assert_true(fabs(mean - ds.mean[0]) < 0.01 && fabs(sd - ds.std[2]) < 0.01);
    free(px);
    dt_dataset_close(&ds);
    assert_int_equal(dt_dataset_open(&ds, "synthetic:1x9x9", 0, &err), 0);
    assert_int_equal(ds.c * 100 + ds.h * 10 + ds.w, 199);
    assert_int_equal(ds.size, 10000);
    dt_dataset_close(&ds);
    static const char *const bad[][2] = {
        {"synthetic:3x75", "wants three numbers"},
        {"synthetic:3x75x75x1", "wants three numbers"},
        {"synthetic:3xx75", "wants three numbers"},
        {"synthetic:4x32x32", "channels must be between 1 and 3, got 4"},
        {"synthetic:3x0x32", "height must be between 1 and 4096, got 0"},
        {"synthetic:3x32xw", "width expects an integer, got 'w'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(dt_dataset_open(&ds, bad[i][0], 1, &err), -1);
        if (!strstr(err.msg, bad[i][1])) fail_msg("%s: %s", bad[i][0], err.msg);
    }
    assert_non_null(strstr(dt_dataset_specs(), "synthetic:CxHxW"));
}

/* synthetic:imagenet: ImageNet's shape, classes, sizes and normalisation; samples
 * are a function of (split, index) alone, so any reader sees the same data. */
static void test_synthetic_imagenet_is_deterministic(void **state) {
    (void)state;
    enum { PX = 3 * 224 * 224 };
    dt_dataset train, test;
    dt_error err;
    assert_int_equal(dt_dataset_open(&train, "synthetic:imagenet", 1, &err), 0);
    assert_int_equal(dt_dataset_open(&test, "synthetic:imagenet", 0, &err), 0);
    assert_int_equal(train.c * 1000000 + train.h * 1000 + train.w, 3224224);
    assert_int_equal(train.classes, 1000);
    assert_int_equal(train.size, 1281167);
    assert_int_equal(test.size, 50000);
    assert_int_equal(train.augment, 0);
    assert_float_equal(train.mean[0], 0.485f, 1e-7);
    assert_float_equal(test.std[2], 0.225f, 1e-7);
    assert_non_null(strstr(dt_dataset_specs(), "synthetic:imagenet"));
    uint8_t *a = test_alloc(PX), *b = test_alloc(PX);
    int labels_seen = 0, last = -1;
    for (int i = 0; i < 50; i++) {
        const int index = i * 25621; /* spread over the whole split */
        int32_t la = dt_dataset_sample(&train, index, a), lb = dt_dataset_sample(&train, index, b);
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, PX);
        assert_true(la >= 0 && la < 1000);
        labels_seen += la != last;
        last = la;
    }
    assert_true(labels_seen > 40); /* labels vary over 1000 classes */
    dt_dataset_sample(&train, 7, a);
    dt_dataset_sample(&test, 7, b);
    assert_memory_not_equal(a, b, PX); /* the splits are different samples */
    free(a);
    free(b);
    dt_dataset_close(&train);
    dt_dataset_close(&test);
}

/* Every augmented output must equal one of the 9 x 9 crops of the zero-padded image,
 * flipped or not; over many samples all offsets and both flips occur. */
static void test_transform_crop_and_flip_semantics(void **state) {
    (void)state;
    dt_dataset ds;
    dt_error err;
    assert_int_equal(dt_dataset_open(&ds, "synthetic:cifar10", 1, &err), 0);
    dt_transform t;
    dt_transform_init(&t, &ds, 1, 7);
    uint8_t px[3072];
    float out[3072], again[3072];
    int seen[9][9][2];
    memset(seen, 0, sizeof seen);
    const int samples = 600;
    for (int s = 0; s < samples; s++) {
        dt_dataset_sample(&ds, s, px);
        dt_transform_apply(&t, px, 3, s, out);
        dt_transform_apply(&t, px, 3, s, again);
        assert_memory_equal(out, again, sizeof out); /* same (seed, epoch, index) */
        int matches = 0;
        for (int top = 0; top < 9; top++)
            for (int left = 0; left < 9; left++)
                for (int flip = 0; flip < 2; flip++) {
                    int ok = 1;
                    for (int c = 0; c < 3 && ok; c++)
                        for (int y = 0; y < 32 && ok; y++)
                            for (int x = 0; x < 32 && ok; x++) {
                                int cx = flip ? 31 - x : x, sy = y + top - 4, sx = cx + left - 4;
                                float v = (sy < 0 || sy > 31 || sx < 0 || sx > 31)
                                              ? 0.0f
                                              : px[c * 1024 + sy * 32 + sx] / 255.0f;
                                ok = fabsf(out[c * 1024 + y * 32 + x] -
                                           (v - ds.mean[c]) / ds.std[c]) < 1e-5f;
                            }
                    if (ok) {
                        matches++;
                        seen[top][left][flip]++;
                    }
                }
        assert_true(matches >= 1);
    }
    int offsets = 0, flips = 0, total = 0;
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 9; b++) {
            offsets += (seen[a][b][0] + seen[a][b][1]) > 0;
            flips += seen[a][b][1];
            total += seen[a][b][0] + seen[a][b][1];
        }
    print_message("  %d of 81 crop offsets seen, %d of %d flipped\n", offsets, flips, total);
    assert_true(offsets >= 75);
    assert_true(flips > total / 2 - total / 8 && flips < total / 2 + total / 8);
}

static void test_sampler_has_distributed_sampler_semantics(void **state) {
    (void)state;
    const int size = 10, world = 3;
    dt_sampler s[3];
    dt_error err;
    int count[10] = {0};
    for (int r = 0; r < world; r++) {
        assert_int_equal(dt_sampler_init(&s[r], size, r, world, 1, 5, &err), 0);
        assert_int_equal(s[r].num_samples, 4); /* ceil(10 / 3) */
        const int *idx = dt_sampler_epoch(&s[r], 2);
        for (int i = 0; i < 4; i++) count[idx[i]]++;
    }
    int total = 0;
    for (int i = 0; i < size; i++) {
        assert_true(count[i] >= 1); /* every sample is seen ... */
        total += count[i];
    }
    assert_int_equal(total, 12); /* ... padded by 2 repeats */
    /* rank r takes positions r, r + 3, ... of the shared permutation */
    const int *r1 = dt_sampler_epoch(&s[1], 2);
    assert_int_equal(r1[1], s[1].perm[4]);
    /* another epoch, another order; the same epoch, the same order */
    int first[4];
    memcpy(first, dt_sampler_epoch(&s[0], 2), sizeof first);
    assert_memory_equal(first, dt_sampler_epoch(&s[0], 2), sizeof first);
    int differs = 0;
    for (int e = 3; e < 8; e++) differs |= memcmp(first, dt_sampler_epoch(&s[0], e), sizeof first);
    assert_true(differs);
    for (int r = 0; r < world; r++) dt_sampler_free(&s[r]);
}

/* Resuming: the rest of an epoch after k batches of every rank is what each rank would
 * have taken next; on another process count the rest is split once, nothing twice. */
static void test_sampler_rest_of_epoch_resplits_what_is_left(void **state) {
    (void)state;
    dt_error err;
    const int size = 103, batch = 4, k = 5;
    dt_sampler two[2], three[3];
    int seen[103] = {0};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(dt_sampler_init(&two[r], size, r, 2, 1, 9, &err), 0);
        int full[52], count;
        memcpy(full, dt_sampler_epoch(&two[r], 3), sizeof(int) * 52);
        const int *rest = dt_sampler_epoch_from(&two[r], 3, (long)k * batch * 2, &count);
        assert_int_equal(count, 52 - k * batch);
        assert_memory_equal(rest, full + k * batch, sizeof(int) * (size_t)count);
        for (int i = 0; i < k * batch; i++) seen[full[i]]++;
    }
    int taken = 0;
    for (int r = 0; r < 3; r++) {
        assert_int_equal(dt_sampler_init(&three[r], size, r, 3, 1, 9, &err), 0);
        int count;
        const int *rest = dt_sampler_epoch_from(&three[r], 3, (long)k * batch * 2, &count);
        assert_int_equal(count, (size - k * batch * 2 + 2) / 3);
        for (int i = 0; i < count; i++) seen[rest[i]]++, taken++;
    }
    /* 63 left over 3 ranks: no padding, each sample exactly once over both runs */
    assert_int_equal(taken, size - k * batch * 2);
    for (int i = 0; i < size; i++) assert_int_equal(seen[i], 1);
    for (int r = 0; r < 2; r++) dt_sampler_free(&two[r]);
    for (int r = 0; r < 3; r++) dt_sampler_free(&three[r]);
}

static void test_loader_workers_give_identical_batches(void **state) {
    (void)state;
    dt_dataset ds;
    dt_error err;
    assert_int_equal(dt_dataset_open(&ds, "synthetic:cifar10", 1, &err), 0);
    dt_transform t;
    dt_transform_init(&t, &ds, 1, 11);
    int indices[203];
    for (int i = 0; i < 203; i++) indices[i] = (i * 37) % 500;
    const int batch = 16, floats = 16 * 3072;
    float *ref = test_alloc(sizeof(float) * 13 * floats);
    int32_t ref_y[13 * 16];
    for (int workers = 0; workers <= 3; workers++) {
        dt_loader *l;
        if (dt_loader_create(&l, &ds, &t, batch, workers, 0, &err)) fail_msg("%s", err.msg);
        for (int epoch = 0; epoch < 2; epoch++) {
            dt_loader_start_epoch(l, indices, 203, epoch);
            const float *x;
            const int32_t *y;
            int n, b = 0, seen = 0;
            while ((n = dt_loader_next(l, &x, &y)) > 0) {
                assert_int_equal(n, b < 12 ? 16 : 203 - 12 * 16);
                if (workers == 0 && epoch == 1) {
                    memcpy(ref + (size_t)b * floats, x, sizeof(float) * n * 3072);
                    memcpy(ref_y + b * 16, y, sizeof(int32_t) * n);
                } else if (epoch == 1) {
                    assert_memory_equal(ref + (size_t)b * floats, x, sizeof(float) * n * 3072);
                    assert_memory_equal(ref_y + b * 16, y, sizeof(int32_t) * n);
                }
                dt_loader_release(l);
                seen += n;
                b++;
            }
            assert_int_equal(seen, 203);
        }
        /* Stop in the middle of an epoch: destroying must not hang. */
        dt_loader_start_epoch(l, indices, 203, 2);
        const float *x;
        const int32_t *y;
        assert_true(dt_loader_next(l, &x, &y) > 0);
        dt_loader_release(l);
        dt_loader_destroy(l);
    }
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_raw_and_gz_read_back),
        cmocka_unit_test(test_idx_bad_files_are_named),
        cmocka_unit_test(test_idx_reader_fd_is_close_on_exec),
        cmocka_unit_test(test_cifar_official_format_reads_back),
        cmocka_unit_test(test_cifar_bad_files_are_named),
        cmocka_unit_test(test_transform_without_augmentation_normalises),
        cmocka_unit_test(test_transform_crop_and_flip_semantics),
        cmocka_unit_test(test_synthetic_imagenet_is_deterministic),
        cmocka_unit_test(test_synthetic_any_shape),
        cmocka_unit_test(test_sampler_has_distributed_sampler_semantics),
        cmocka_unit_test(test_sampler_rest_of_epoch_resplits_what_is_left),
        cmocka_unit_test(test_loader_workers_give_identical_batches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
