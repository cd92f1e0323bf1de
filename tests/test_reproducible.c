/* Same seed and thread count -> bit-identical training: losses and final weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/safetensors.h"
#include "train/trainer.h"

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

/* Keeps the "loss" fields of step lines only (timings differ between runs). */
static void losses_of(const char *log, char *out, size_t size) {
    size_t used = 0;
    for (const char *p = strstr(log, "\"loss\":"); p && used + 40 < size;
         p = strstr(p + 1, "\"loss\":")) {
        const char *end = strchr(p, ',');
        used += (size_t)snprintf(out + used, size - used, "%.*s;", (int)(end - p), p);
    }
}

static void train_once(const char *model, int threads, const char *log, const char *weights) {
    dt_train_config cfg = {.model = model,
                           .width = 4,
                           .data = "synthetic:cifar10",
                           .epochs = 1,
                           .batch_size = 16,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .threads = threads,
                           .seed = 42,
                           .max_steps = 6,
                           .max_samples = 96,
                           .max_test_samples = 64,
                           .log_path = log,
                           .save_path = weights};
    if (strcmp(model, "resnet18")) cfg.data = "synthetic:mnist";
    dt_error err;
    dt_train_result res;
    if (dt_train(&cfg, NULL, NULL, NULL, &res, &err)) fail_msg("%s", err.msg);
    assert_int_equal(res.steps, 6);
}

static void check_model(const char *model, int threads) {
    char log_a[128], log_b[128], w_a[128], w_b[128];
    long pid = (long)getpid();
    snprintf(log_a, sizeof log_a, "/tmp/dtrain_repro_%ld_a.jsonl", pid);
    snprintf(log_b, sizeof log_b, "/tmp/dtrain_repro_%ld_b.jsonl", pid);
    snprintf(w_a, sizeof w_a, "/tmp/dtrain_repro_%ld_a.safetensors", pid);
    snprintf(w_b, sizeof w_b, "/tmp/dtrain_repro_%ld_b.safetensors", pid);
    train_once(model, threads, log_a, w_a);
    train_once(model, threads, log_b, w_b);
    char *a = read_text(log_a), *b = read_text(log_b);
    static char la[8192], lb[8192];
    losses_of(a, la, sizeof la);
    losses_of(b, lb, sizeof lb);
    print_message("%s, %d threads: %s\n", model, threads, la);
    assert_true(strlen(la) > 0);
    assert_string_equal(la, lb);
    dt_safetensors sa, sb;
    dt_error err;
    assert_int_equal(dt_safetensors_read(&sa, w_a, &err), 0);
    assert_int_equal(dt_safetensors_read(&sb, w_b, &err), 0);
    assert_int_equal(sa.file_bytes, sb.file_bytes);
    assert_memory_equal(sa.file, sb.file, sa.file_bytes);
    dt_safetensors_free(&sa);
    dt_safetensors_free(&sb);
    free(a);
    free(b);
    unlink(log_a), unlink(log_b), unlink(w_a), unlink(w_b);
}

static void test_same_seed_same_threads_bit_identical(void **state) {
    (void)state;
    check_model("lenet5", 2);
    check_model("resnet18", 2);
    check_model("mlp", 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_threads_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
