#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "dtrain/safetensors.h"
#include "dtrain/world.h"
#include "dtrain/zoo.h"
#include "train/trainer.h"

void fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi) {
    dt_rng rng = dt_rng_make(seed, 77);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * dt_rng_uniform(&rng);
}

double rel_error(const float *a, const float *b, size_t n) {
    double diff = 0.0, ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        diff += d * d;
        ref += (double)b[i] * b[i];
    }
    return sqrt(diff) / fmax(sqrt(ref), 1e-30);
}

void fixture_model_spec(struct dt_model_spec *spec, const char *fixture_path, const char *model,
                        char *onnx_path, size_t size) {
    if (!model) fail_msg("%s: no model in its metadata", fixture_path);
    const size_t len = strlen(model);
    if (len > 5 && !strcmp(model + len - 5, ".onnx")) {
        const char *slash = strrchr(fixture_path, '/');
        snprintf(onnx_path, size, "%.*s%s", slash ? (int)(slash - fixture_path + 1) : 0,
                 fixture_path, model);
        dt_error err;
        if (dt_zoo_spec_of(spec, onnx_path, &err)) fail_msg("%s", err.msg);
    } else if (dt_zoo_default_spec(spec, model)) {
        fail_msg("%s: unknown model '%s'", fixture_path, model);
    }
}

int family_rows(family_row *rows, int max) {
    const char *dir = getenv("DT_FIXTURES");
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/onnx/families.txt", dir ? dir : "tests/fixtures");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    int n = 0, lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char name[64], status[16], ops[256];
        /* a comment, a blank line, or an indented one: the row's description goes on */
        if (line[0] == '#' || line[0] == '\n' || line[0] == ' ' || line[0] == '\t') continue;
        const int got = sscanf(line, "%63s %15s %255s", name, status, ops);
        if (got < 2 || n == max)
            fail_msg("%s:%d: a malformed row (or too many rows)", path, lineno);
        family_row *r = &rows[n++];
        snprintf(r->name, sizeof r->name, "%s", name);
        r->parity = !strcmp(status, "parity");
        r->ops[0] = '\0';
        if (!r->parity) {
            if (strcmp(status, "refused") || got < 3)
                fail_msg("%s:%d: the status is 'parity' or 'refused OP[,OP...]'", path, lineno);
            snprintf(r->ops, sizeof r->ops, "%s", ops);
        }
    }
    fclose(f);
    return n;
}

void *test_alloc(size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

double safetensors_rel_error(const char *a, const char *b) {
    dt_safetensors sa, sb;
    dt_error err;
    if (dt_safetensors_read(&sa, a, &err) || dt_safetensors_read(&sb, b, &err))
        fail_msg("%s", err.msg);
    double diff = 0.0, ref = 0.0;
    assert_int_equal(sa.n_tensors, sb.n_tensors);
    for (int i = 0; i < sa.n_tensors; i++) {
        const dt_st_tensor *x = &sa.tensors[i], *y = dt_safetensors_find(&sb, x->name);
        assert_non_null(y);
        if (strcmp(x->dtype, "F32")) continue;
        const float *p = (const float *)x->data, *q = (const float *)y->data;
        for (size_t k = 0; k < x->numel; k++) {
            diff += ((double)p[k] - q[k]) * ((double)p[k] - q[k]);
            ref += (double)q[k] * q[k];
        }
    }
    dt_safetensors_free(&sa);
    dt_safetensors_free(&sb);
    return sqrt(diff / ref);
}

dt_train_config equivalence_config(const char *model, int batch) {
    dt_train_config cfg = {.model = model,
                           .data = "synthetic:mnist",
                           .epochs = 1,
                           .batch_size = batch,
                           .lr = 0.05f,
                           .momentum = 0.9f,
                           .weight_decay = 5e-4f,
                           .threads = 1,
                           .seed = 9,
                           .max_steps = 6,
                           .max_samples = 4096,
                           .max_test_samples = 64,
                           .loader_workers = 1,
                           .augment = -1,
                           .bucket_mb = 25};
    return cfg;
}

int run_mpi_tests(dt_world *world, const struct CMUnitTest *tests, size_t count, int *argc,
                  char ***argv) {
    dt_error err;
    if (dt_world_init(world, argc, argv, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (world->rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    /* DT_TEST_ONLY=PATTERN: the tests whose names match (a shell test runs one such
     * test where the others do not apply, e.g. on emulated hosts) */
    const char *only = getenv("DT_TEST_ONLY");
    if (only && *only) cmocka_set_test_filter(only);
    int failed = _cmocka_run_group_tests("mpi", tests, count, NULL, NULL);
    dt_world_allreduce(world, &failed, 1, DT_S32, DT_REDUCE_MAX, "the test results");
    dt_world_finalize(world);
    return failed;
}
