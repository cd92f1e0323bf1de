/* safetensors: round trip, PyTorch names, and every kind of bad file gives one clear
 * error naming the file and the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/safetensors.h"
#include "dtrain/zoo.h"
#include "testutil.h"

static void tmp_path(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "/tmp/dtrain_test_%ld_%s", (long)getpid(), name);
}

static void build_lenet(dt_model *m, uint64_t seed) {
    dt_model_spec spec;
    dt_error err;
    assert_int_equal(dt_zoo_default_spec(&spec, "lenet5"), 0);
    if (dt_zoo_build(m, &spec, &err) || dt_model_alloc(m, 2, &err)) fail_msg("%s", err.msg);
    dt_model_init_params(m, seed);
}

static void test_checkpoint_round_trip_keeps_every_tensor(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, sizeof path, "rt.safetensors");
    dt_model a, b;
    dt_sgd opt_a, opt_b;
    dt_error err;
    build_lenet(&a, 1);
    build_lenet(&b, 2);
    assert_int_equal(dt_sgd_init(&opt_a, a.n_params, 0.1f, 0.9f, 0.0f, &err), 0);
    assert_int_equal(dt_sgd_init(&opt_b, b.n_params, 0.1f, 0.9f, 0.0f, &err), 0);
    fill_uniform(opt_a.velocity, a.n_params, 5, -1, 1);
    opt_a.steps = 3;
    dt_st_meta meta[1] = {{"model", "lenet5"}};
    assert_int_equal(dt_checkpoint_save(&a, &opt_a, meta, 1, path, &err), 0);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1); /* the temporary file was renamed away */
    assert_int_equal(dt_checkpoint_load(&b, &opt_b, path, &err), 0);
    assert_memory_equal(a.params, b.params, sizeof(float) * a.n_params);
    assert_memory_equal(opt_a.velocity, opt_b.velocity, sizeof(float) * a.n_params);

    dt_safetensors st;
    assert_int_equal(dt_safetensors_read(&st, path, &err), 0);
    const dt_st_tensor *t = dt_safetensors_find(&st, "conv1.weight");
    assert_non_null(t);
    assert_int_equal(t->ndim, 4);
    assert_int_equal(t->shape[0], 6);
    assert_int_equal(t->shape[1], 1);
    assert_int_equal(t->shape[2], 5);
    assert_non_null(dt_safetensors_find(&st, "fc3.bias"));
    assert_string_equal(dt_safetensors_meta(&st, "model"), "lenet5");
    dt_safetensors_free(&st);
    unlink(path);
    dt_sgd_free(&opt_a);
    dt_sgd_free(&opt_b);
    dt_model_free(&a);
    dt_model_free(&b);
}

/* A checkpoint of many tensors (3,000 linear layers: 12,000 tensors with momentum, 30
 * checksum values) beside a resume's ~40 metadata entries: more than the 64 entries
 * the reader once took, so such a model failed at its first checkpoint, mid-run. */
static void test_checkpoint_of_many_tensors_round_trips(void **state) {
    (void)state;
    enum { LAYERS = 3000, META = 40 };
    char path[256];
    tmp_path(path, sizeof path, "many.safetensors");
    dt_model a, b;
    dt_sgd opt_a, opt_b;
    dt_error err;
    dt_model *models[2] = {&a, &b};
    for (int k = 0; k < 2; k++) {
        dt_model *m = models[k];
        dt_model_init_empty(m, "chain", 1);
        int v = dt_model_input(m, 1, 1, 1);
        for (int i = 0; i < LAYERS && v >= 0; i++) {
            char name[32];
            snprintf(name, sizeof name, "fc%d", i);
            v = dt_model_linear(m, name, v, 1);
        }
        assert_true(v >= 0);
        if (dt_model_alloc(m, 1, &err)) fail_msg("%s", err.msg);
        dt_model_init_params(m, (uint64_t)k + 1);
    }
    assert_int_equal(dt_sgd_init(&opt_a, a.n_params, 0.1f, 0.9f, 0.0f, &err), 0);
    assert_int_equal(dt_sgd_init(&opt_b, b.n_params, 0.1f, 0.9f, 0.0f, &err), 0);
    fill_uniform(opt_a.velocity, a.n_params, 5, -1, 1);
    dt_st_meta meta[META];
    for (int i = 0; i < META; i++) {
        snprintf(meta[i].key, sizeof meta[i].key, "flag.k%d", i);
        snprintf(meta[i].value, sizeof meta[i].value, "%d", i);
    }
    if (dt_checkpoint_save(&a, &opt_a, meta, META, path, &err)) fail_msg("%s", err.msg);
    if (dt_checkpoint_load(&b, &opt_b, path, &err)) fail_msg("%s", err.msg);
    assert_memory_equal(a.params, b.params, sizeof(float) * a.n_params);
    assert_memory_equal(opt_a.velocity, opt_b.velocity, sizeof(float) * a.n_params);
    unlink(path);
    dt_sgd_free(&opt_a);
    dt_sgd_free(&opt_b);
    dt_model_free(&a);
    dt_model_free(&b);
}

/* Writes a model's weights, then a damaged copy, and expects `fragment` in the error. */
static void expect_load_error(const char *name, void (*damage)(const char *path),
                              const char *fragment) {
    char path[256];
    tmp_path(path, sizeof path, name);
    dt_model m;
    dt_error err;
    build_lenet(&m, 1);
    assert_int_equal(dt_checkpoint_save(&m, NULL, NULL, 0, path, &err), 0);
    damage(path);
    memset(err.msg, 0, sizeof err.msg);
    assert_int_equal(dt_checkpoint_load(&m, NULL, path, &err), -1);
    print_message("  %s -> %s\n", name, err.msg);
    assert_non_null(strstr(err.msg, fragment));
    assert_non_null(strstr(err.msg, path));
    assert_null(strchr(err.msg, '\n'));
    unlink(path);
    dt_model_free(&m);
}

static void truncate_half(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    assert_int_equal(truncate(path, size / 2), 0);
}

static void truncate_to_4(const char *path) {
    assert_int_equal(truncate(path, 4), 0);
}

/* Rewrites the file with one tensor renamed or reshaped, via the writer itself. */
static void rewrite(const char *path, const char *drop, const char *reshape) {
    dt_safetensors st;
    dt_error err;
    assert_int_equal(dt_safetensors_read(&st, path, &err), 0);
    dt_st_entry *e = test_alloc(sizeof(dt_st_entry) * st.n_tensors);
    int n = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const dt_st_tensor *t = &st.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        e[n].name = t->name;
        e[n].dtype = t->dtype;
        e[n].ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) e[n].shape[d] = t->shape[d];
        if (reshape && !strcmp(t->name, reshape)) { /* same bytes, transposed shape */
            e[n].shape[0] = t->shape[1];
            e[n].shape[1] = t->shape[0];
        }
        e[n].data = t->data;
        n++;
    }
    assert_int_equal(dt_safetensors_write(path, e, n, NULL, 0, &err), 0);
    free(e);
    dt_safetensors_free(&st);
}

static void drop_fc2_weight(const char *path) {
    rewrite(path, "fc2.weight", NULL);
}

static void transpose_fc1_weight(const char *path) {
    rewrite(path, NULL, "fc1.weight");
}

static void garble_header(const char *path) {
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 8, SEEK_SET);
    fputs("{\"x\": [", f);
    fclose(f);
}

static void remove_file(const char *path) {
    unlink(path);
}

static void test_truncated_file_is_rejected(void **state) {
    (void)state;
    expect_load_error("trunc.safetensors", truncate_half, "truncated");
    expect_load_error("tiny.safetensors", truncate_to_4, "truncated");
}

static void test_missing_tensor_is_named(void **state) {
    (void)state;
    expect_load_error("missing.safetensors", drop_fc2_weight, "fc2.weight is missing");
}

static void test_misshaped_tensor_is_named(void **state) {
    (void)state;
    expect_load_error("shape.safetensors", transpose_fc1_weight,
                      "fc1.weight has shape [400, 120], expected [120, 400]");
}

static void test_bad_header_and_missing_file_are_rejected(void **state) {
    (void)state;
    expect_load_error("garbled.safetensors", garble_header, "header");
    expect_load_error("gone.safetensors", remove_file, "cannot open");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_round_trip_keeps_every_tensor),
        cmocka_unit_test(test_truncated_file_is_rejected),
        cmocka_unit_test(test_missing_tensor_is_named),
        cmocka_unit_test(test_misshaped_tensor_is_named),
        cmocka_unit_test(test_bad_header_and_missing_file_are_rejected),
        cmocka_unit_test(test_checkpoint_of_many_tensors_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
