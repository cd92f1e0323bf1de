/* Models learn what they should: a short Fashion-MNIST run beats 80% test accuracy
 * within CI's minute, and resnet18 (narrow, for CI's time) trains end to end on
 * synthetic CIFAR-10 with the full augmentation on and its loss goes down, as
 * resnet20's does in a few steps (also on 1x28x28 data, at the data's shape), and
 * the ImageNet models' do on a small synthetic task. The
 * documented full runs (5 epochs, >= 83/87/89%) are in docs/learning.md.
 * Every run here is deterministic (fixed seeds, thread counts and data order): the
 * values printed were identical alone and beside a busy loop (2026-11-25, AMD EPYC, 2
 * cores, Release), so load cannot move them; the bars keep a margin for other CPUs'
 * kernels and other builds, which do change them (see each bar).
 * Under the sanitizers (DT_SANITIZED, tests/CMakeLists.txt) the two longest runs are
 * left out, as families_cli runs a subset there: resnet18's 200 steps (its ops are
 * resnet20's and resnet50's, its augmentation test_data's) and vgg16's 700 (its ops are
 * vgg16_bn's and alexnet's): 50 of this test's 71 s under ASan, for no path the others
 * do not take. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/rng.h"
#include "core/threads.h"
#include "dtrain/backend.h"
#include "dtrain/model.h"
#include "dtrain/sgd.h"
#include "dtrain/zoo.h"
#include "train/trainer.h"

static double mean_loss(const char *log, long from, long to) {
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[1024];
    double sum = 0.0;
    long n = 0;
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":"), *l = strstr(line, "\"loss\":");
        if (!strstr(line, "\"event\":\"step\"") || !s || !l) continue;
        long step = atol(s + 7);
        if (step >= from && step < to) {
            sum += atof(l + 7);
            n++;
        }
    }
    fclose(f);
    assert_true(n > 0);
    return sum / n;
}

static void test_lenet5_beats_80_percent_on_fashion_mnist_subset(void **state) {
    (void)state;
    dt_train_config cfg = {.model = "lenet5",
                           .data = "fashion-mnist",
                           .epochs = 2,
                           .batch_size = 64,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .lr_schedule = DT_LR_COSINE,
                           .threads = 2,
                           .seed = 1,
                           .max_samples = 12000,
                           .max_test_samples = 2000,
                           .loader_workers = 1,
                           .augment = -1};
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, NULL, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    print_message("lenet5, 12,000 Fashion-MNIST samples, 2 epochs: test accuracy %.2f%%\n",
                  100.0 * res.test_acc);
    assert_true(res.test_acc > 0.80); /* 85.00% (2026-11-25, see the top) */
}

/* The sanitized build's subset (see the top). */
static int sanitized(void) {
    return getenv("DT_SANITIZED") != NULL;
}

static void test_resnet18_trains_on_synthetic_cifar_with_augmentation(void **state) {
    (void)state;
    if (sanitized()) {
        print_message("resnet18: left out under the sanitizers (resnet20's and resnet50's ops, "
                      "test_data's augmentation)\n");
        skip();
    }
    char log[128];
    snprintf(log, sizeof log, "/tmp/dtrain_learning_%ld.jsonl", (long)getpid());
    dt_train_config cfg = {.model = "resnet18",
                           .width = 8,
                           .data = "synthetic:cifar10",
                           .epochs = 1,
                           .batch_size = 32,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .threads = 2,
                           .seed = 3,
                           .max_steps = 200,
                           .max_test_samples = 256,
                           .loader_workers = 1,
                           .augment = 1,
                           .log_path = log};
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, NULL, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 200);
    double first = mean_loss(log, 0, 20), last = mean_loss(log, 180, 200);
    print_message("resnet18 width 8: mean loss of steps 0-19 %.3f, of steps 180-199 %.3f\n", first,
                  last);
    assert_true(last < 0.5 * first); /* 2.444 -> 0.474, ratio 0.19 (2026-11-25) */
    unlink(log);
}

/* A few steps of resnet20 (full width) on synthetic data: the loss goes down. On the
 * 1x28x28 data it takes the data's shape (global pooling), so the same holds there. */
static void check_resnet20_learns(const char *data, int width, long steps, double ratio) {
    char log[128];
    snprintf(log, sizeof log, "/tmp/dtrain_learning_r20_%ld.jsonl", (long)getpid());
    dt_train_config cfg = {.model = "resnet20",
                           .width = width,
                           .data = data,
                           .epochs = 1,
                           .batch_size = 32,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .threads = 2,
                           .seed = 5,
                           .max_steps = steps,
                           .max_test_samples = 64,
                           .loader_workers = 1,
                           .augment = 0,
                           .log_path = log};
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, NULL, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, steps);
    double first = mean_loss(log, 0, 10), last = mean_loss(log, steps - 10, steps);
    print_message("resnet20 width %d on %s: mean loss of the first 10 steps %.3f, of the last "
                  "10 %.3f\n",
                  width, data, first, last);
    assert_true(last < ratio * first);
    unlink(log);
}

static void test_resnet20_loss_goes_down_on_synthetic_data(void **state) {
    (void)state;
    /* 2026-11-25: 1.909 -> 0.018 and 2.308 -> 0.351 (ratios 0.01, 0.15) */
    check_resnet20_learns("synthetic:cifar10", 16, 40, 0.5);
    check_resnet20_learns("synthetic:mnist", 4, 40, 0.5);
}

/* torchvision's ImageNet models, narrow and at small inputs (alexnet's smallest,
 * 63x63; 32x32), learn a learnable synthetic task in a few steps: 10 classes, each a
 * fixed random image plus noise, 64 samples seen in batches of 16, dropout on. The mean loss of the
 * last 5 steps must be below `ratio` times that of the first 5. */
static void check_imagenet_model_learns(const char *name, int width, int side, float lr, int steps,
                                        double ratio) {
    enum { SAMPLES = 64, BATCH = 16, CLASSES = 10, AVG = 5 };
    dt_model_spec spec;
    dt_model m;
    dt_sgd opt;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, name), 0);
    spec.width = width;
    spec.in_h = spec.in_w = side;
    spec.classes = CLASSES;
    if (dt_zoo_build(&m, &spec, &err) || dt_model_alloc(&m, BATCH, &err) ||
        dt_sgd_init(&opt, m.n_params, lr, 0.9f, 5e-4f, &err))
        fail_msg("%s", err.msg);
    dt_model_init_params(&m, 1);
    m.dropout_seed = 2;
    const size_t per = dt_model_input_floats_per_sample(&m);
    float *templates = malloc(sizeof(float) * per * CLASSES);
    float *x = malloc(sizeof(float) * per * SAMPLES);
    int32_t labels[SAMPLES];
    assert_non_null(templates);
    assert_non_null(x);
    dt_rng rng = dt_rng_make(3, 4);
    for (size_t i = 0; i < per * CLASSES; i++) templates[i] = dt_rng_normal(&rng);
    for (int k = 0; k < SAMPLES; k++) {
        labels[k] = k % CLASSES;
        for (size_t i = 0; i < per; i++)
            x[k * per + i] = templates[labels[k] * per + i] + 0.5f * dt_rng_normal(&rng);
    }
    double first = 0.0, last = 0.0;
    for (int step = 0; step < steps; step++) {
        const int at = (step * BATCH) % SAMPLES;
        memcpy(dt_model_input_data(&m), x + at * per, sizeof(float) * per * BATCH);
        dt_model_zero_grad(&m);
        dt_model_forward(&m, BATCH);
        const double loss = dt_model_loss(&m, labels + at, BATCH, NULL);
        dt_model_backward(&m, labels + at, BATCH);
        dt_sgd_step(&opt, m.params, m.grads);
        if (step < AVG) first += loss / AVG;
        if (step >= steps - AVG) last += loss / AVG;
    }
    print_message("%s width %d at %dx%d: mean loss of the first %d steps %.3f, of the last %d "
                  "%.3f\n",
                  name, width, side, side, (int)AVG, first, (int)AVG, last);
    assert_true(last < ratio * first);
    free(templates);
    free(x);
    dt_sgd_free(&opt);
    dt_model_free(&m);
}

static void test_imagenet_models_loss_goes_down_on_synthetic_data(void **state) {
    (void)state;
    /* One thread: layers this small make thousands of short parallel regions per step,
     * and on a loaded machine two threads' hand-offs cost more than they save (these
     * steps took 292 s with two threads on a busy 2-core machine, 4.4 s with one). */
    const int threads = dt_threads_get();
    dt_threads_set(1);
    /* Plain deep nets leave the ln(10) plateau slowly (alexnet: PyTorch's default
     * initialisation, as torchvision's; vgg16: even with torchvision's kaiming-normal
     * one): more steps, and a smaller drop asked of them (alexnet at lr 0.03 diverged
     * with OpenBLAS's Cooper Lake kernels: 0.02). Measured: alexnet 2.30 ->
     * 1.77, vgg16 (width 8) 2.30 -> 1.72 after 300 steps on an Intel Cooper Lake (1.68
     * in the sanitizer build; at width 4 the plateau lasted 300-500 steps, by build),
     * but on an AMD EPYC (other OpenBLAS kernels, other roundings) still 2.23 after 300
     * and 1.06 after 500, 0.23 after 800: 700 steps, vgg16_bn 2.30 -> 1.43,
     * resnet50 2.54 -> 0.79, googlenet 2.29 -> 1.02. On 2026-11-25 (AMD EPYC, Release,
     * the same alone and under load), ratios: alexnet 0.77, vgg16 0.20, vgg16_bn 0.64,
     * resnet50 0.41, googlenet 0.41. */
    check_imagenet_model_learns("alexnet", 8, 63, 0.02f, 160, 0.85);
    if (sanitized())
        print_message("vgg16: left out under the sanitizers (vgg16_bn's and alexnet's ops)\n");
    else
        check_imagenet_model_learns("vgg16", 8, 32, 0.01f, 700, 0.9);
    check_imagenet_model_learns("vgg16_bn", 4, 32, 0.01f, 100, 0.8);
    check_imagenet_model_learns("resnet50", 4, 32, 0.01f, 30, 0.5);
    check_imagenet_model_learns("googlenet", 8, 32, 0.01f, 30, 0.6);
    dt_threads_set(threads);
}

int main(void) {
    if (getenv("DT_ONLY_IMAGENET")) { /* for quick runs by hand */
        test_imagenet_models_loss_goes_down_on_synthetic_data(NULL);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lenet5_beats_80_percent_on_fashion_mnist_subset),
        cmocka_unit_test(test_resnet18_trains_on_synthetic_cifar_with_augmentation),
        cmocka_unit_test(test_resnet20_loss_goes_down_on_synthetic_data),
        cmocka_unit_test(test_imagenet_models_loss_goes_down_on_synthetic_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
