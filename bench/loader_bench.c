/* Input pipeline throughput: images/s that the loader decodes and augments
 * (RandomCrop + flip + normalise) with W worker threads, consumed as fast as
 * possible. CIFAR-shaped data in the official binary format is written first (random
 * pixels, 50,000 training records) so the real reader path is measured.
 *   bench_loader [WORKERS...]   (default 1 2)  -> one JSON line per worker count */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/rng.h"
#include "core/timer.h"
#include "data/cifar.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dtrain/dataset.h"
#include "dtrain/transform.h"

static int write_cifar(const char *dir) {
    uint8_t *rec = malloc((size_t)10000 * DT_CIFAR_RECORD);
    if (!rec) return -1;
    dt_rng rng = dt_rng_make(1, 2);
    for (int f = 1; f <= 6; f++) {
        char path[512];
        if (f <= 5)
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, f);
        else
            snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        for (size_t i = 0; i < (size_t)10000 * DT_CIFAR_RECORD; i++)
            rec[i] = (uint8_t)dt_rng_next_u64(&rng);
        for (int r = 0; r < 10000; r++) rec[(size_t)r * DT_CIFAR_RECORD] %= 10;
        FILE *out = fopen(path, "wb");
        if (!out || fwrite(rec, DT_CIFAR_RECORD, 10000, out) != 10000) {
            if (out) fclose(out);
            free(rec);
            return -1;
        }
        fclose(out);
    }
    free(rec);
    return 0;
}

int main(int argc, char **argv) {
    char dir[256], spec[300];
    snprintf(dir, sizeof dir, "/tmp/dtrain_bench_cifar_%ld", (long)getpid());
    mkdir(dir, 0755);
    if (write_cifar(dir)) {
        fprintf(stderr, "bench_loader: cannot write CIFAR files to %s\n", dir);
        return 1;
    }
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    dt_dataset ds;
    dt_error err;
    if (dt_dataset_open(&ds, spec, 1, &err)) {
        fprintf(stderr, "bench_loader: %s\n", err.msg);
        return 1;
    }
    dt_transform t;
    dt_transform_init(&t, &ds, 1, 0);
    dt_sampler s;
    if (dt_sampler_init(&s, ds.size, 0, 1, 1, 0, &err)) return 1;
    int counts[8] = {1, 2}, n_counts = 2;
    if (argc > 1) {
        n_counts = 0;
        for (int i = 1; i < argc && n_counts < 8; i++) counts[n_counts++] = atoi(argv[i]);
    }
    for (int c = 0; c < n_counts; c++) {
        dt_loader *l;
        if (dt_loader_create(&l, &ds, &t, 128, counts[c], 0, &err)) {
            fprintf(stderr, "bench_loader: %s\n", err.msg);
            return 1;
        }
        double best = 0.0;
        for (int epoch = 0; epoch < 3; epoch++) { /* the first warms the caches */
            dt_loader_start_epoch(l, dt_sampler_epoch(&s, epoch), s.num_samples, epoch);
            double t0 = dt_now();
            long images = 0;
            const float *x;
            const int32_t *y;
            int n;
            while ((n = dt_loader_next(l, &x, &y)) > 0) {
                images += n;
                dt_loader_release(l);
            }
            double rate = images / (dt_now() - t0);
            if (epoch > 0 && rate > best) best = rate;
        }
        printf("{\"bench\":\"loader\",\"data\":\"cifar10 format, 50000 x 3x32x32\",\"augment\":"
               "\"crop+flip+normalize\",\"workers\":%d,\"images_per_s\":%.0f}\n",
               counts[c], best);
        dt_loader_destroy(l);
    }
    dt_sampler_free(&s);
    dt_dataset_close(&ds);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
