/* The training flag table: a config written as arguments parses back to the same
 * config (what a sweep's children rely on), and bad values fail with one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "train/fingerprint.h"
#include "train/train_flags.h"

/* Parses "--name value" pairs (and switches) from argv into cfg, as the CLI does. */
static void parse_args(const char **argv, int n, dt_train_config *cfg) {
    dt_error err;
    for (int i = 0; i < n; i++) {
        assert_true(!strncmp(argv[i], "--", 2));
        const dt_train_flag *f = dt_train_flag_find(argv[i] + 2);
        assert_non_null(f);
        const char *value = f->kind == DT_FLAG_SWITCH ? NULL : argv[++i];
        assert_int_equal(dt_train_flag_parse(f, cfg, value, &err), 0);
    }
}

static void test_to_argv_round_trips_every_changed_field(void **state) {
    (void)state;
    dt_train_config cfg = dt_train_config_default();
    cfg.model = "resnet18";
    cfg.width = 8;
    cfg.data = "synthetic:cifar10";
    cfg.epochs = 3;
    cfg.batch_size = 64;
    cfg.lr = 0.05f;
    cfg.momentum = 0.8f;
    cfg.weight_decay = 1e-4f;
    cfg.lr_schedule = DT_LR_COSINE;
    cfg.warmup_epochs = 0.5;
    cfg.lr_scaling_linear = 1;
    cfg.threads = 3;
    cfg.seed = 7;
    cfg.max_steps = 100;
    cfg.max_samples = 640;
    cfg.max_test_samples = 64;
    cfg.loader_workers = 0;
    cfg.augment = 0;
    cfg.mode = "ps-sync";
    cfg.allreduce = DT_ALLREDUCE_RING;
    cfg.bucket_mb = 0.25;
    cfg.overlap = DT_OVERLAP_OFF;
    cfg.ps.servers = 2;
    cfg.ps.replicas = 3;
    cfg.ps.staleness = 5;
    cfg.delay_worker = 1;
    cfg.delay_ms = 150;
    cfg.log_path = "run.jsonl";
    cfg.save_path = "w.safetensors";
    cfg.init_path = "init.safetensors";

    const char *argv[80];
    char text[1024];
    dt_error err;
    const int n = dt_train_flags_to_argv(&cfg, argv, 79, text, sizeof text, &err);
    assert_true(n > 0);
    assert_null(argv[n]);
    dt_train_config back = dt_train_config_default();
    parse_args(argv, n, &back);
    /* every field of the table came back (strings compared by text) */
    assert_string_equal(back.model, cfg.model);
    assert_string_equal(back.data, cfg.data);
    assert_string_equal(back.mode, cfg.mode);
    assert_string_equal(back.log_path, cfg.log_path);
    assert_string_equal(back.save_path, cfg.save_path);
    assert_string_equal(back.init_path, cfg.init_path);
    assert_int_equal(back.width, cfg.width);
    assert_int_equal(back.epochs, cfg.epochs);
    assert_int_equal(back.batch_size, cfg.batch_size);
    assert_true(back.lr == cfg.lr && back.momentum == cfg.momentum);
    assert_true(back.weight_decay == cfg.weight_decay);
    assert_int_equal(back.lr_schedule, cfg.lr_schedule);
    assert_true(back.warmup_epochs == cfg.warmup_epochs && back.bucket_mb == cfg.bucket_mb);
    assert_int_equal(back.lr_scaling_linear, cfg.lr_scaling_linear);
    assert_int_equal(back.threads, cfg.threads);
    assert_int_equal(back.seed, cfg.seed);
    assert_int_equal(back.max_steps, cfg.max_steps);
    assert_int_equal(back.max_samples, cfg.max_samples);
    assert_int_equal(back.max_test_samples, cfg.max_test_samples);
    assert_int_equal(back.loader_workers, cfg.loader_workers);
    assert_int_equal(back.augment, cfg.augment);
    assert_int_equal(back.allreduce, cfg.allreduce);
    assert_int_equal(back.overlap, cfg.overlap);
    assert_int_equal(back.ps.servers, cfg.ps.servers);
    assert_int_equal(back.ps.replicas, cfg.ps.replicas);
    assert_int_equal(back.ps.staleness, cfg.ps.staleness);
    assert_int_equal(back.delay_worker, cfg.delay_worker);
    assert_int_equal(back.delay_ms, cfg.delay_ms);
}

static void test_to_argv_of_the_defaults_is_empty(void **state) {
    (void)state;
    const dt_train_config cfg = dt_train_config_default();
    const char *argv[8];
    char text[64];
    dt_error err;
    /* threads' default (0) is chosen by the child where it runs: not passed on */
    assert_int_equal(dt_train_flags_to_argv(&cfg, argv, 7, text, sizeof text, &err), 0);
    assert_null(argv[0]);
}

static void test_to_argv_refuses_short_storage(void **state) {
    (void)state;
    dt_train_config cfg = dt_train_config_default();
    cfg.lr = 0.05f;
    cfg.epochs = 9;
    const char *argv[4];
    char text[256];
    dt_error err;
    assert_int_equal(dt_train_flags_to_argv(&cfg, argv, 3, text, sizeof text, &err), -1);
    assert_non_null(strstr(err.msg, "too little room"));
    assert_int_equal(dt_train_flags_to_argv(&cfg, argv, 3, text, 8, &err), -1);
}

static void test_bad_values_name_the_flag_and_range(void **state) {
    (void)state;
    dt_train_config cfg = dt_train_config_default();
    dt_error err;
    assert_int_equal(dt_train_flag_parse(dt_train_flag_find("threads"), &cfg, "300x", &err), -1);
    assert_string_equal(err.msg, "--threads expects an integer, got '300x'");
    assert_int_equal(dt_train_flag_parse(dt_train_flag_find("threads"), &cfg, "2000", &err), -1);
    assert_string_equal(err.msg, "--threads must be between 1 and 1024, got 2000");
    const dt_train_flag *delay = dt_train_flag_find("test-delay");
    assert_int_equal(dt_train_flag_parse(delay, &cfg, "2x", &err), -1);
    assert_int_equal(dt_train_flag_parse(delay, &cfg, "2:5x", &err), -1);
    assert_int_equal(dt_train_flag_parse(delay, &cfg, "-1:5", &err), -1);
    assert_int_equal(dt_train_flag_parse(delay, &cfg, "2:150", &err), 0);
    assert_int_equal(cfg.delay_worker, 2);
    assert_int_equal(cfg.delay_ms, 150);
    assert_int_equal(dt_train_flag_parse(dt_train_flag_find("mode"), &cfg, "gossip", &err), -1);
    assert_string_equal(err.msg,
                        "--mode must be allreduce, ps-sync, ps-async or ssp, got 'gossip'");
}

/* Ranks compare every row not marked per_rank: a flag added later (--comm-dtype) is
 * covered without touching the fingerprint, and the per-rank ones (threads, paths)
 * and aliases (--no-overlap, which --overlap covers) are left out. */
static void test_fingerprint_covers_every_shared_flag(void **state) {
    (void)state;
    dt_train_config cfg = dt_train_config_default();
    dt_fingerprint fp;
    dt_error err;
    dt_fingerprint_init(&fp);
    assert_int_equal(dt_fingerprint_config(&fp, &cfg, &err), 0);
    int count, shared = 0;
    const dt_train_flag *flags = dt_train_flags(&count);
    for (int i = 0; i < count; i++) shared += !flags[i].per_rank && !flags[i].alias;
    assert_int_equal(fp.n, shared);
    int comm_dtype = -1, threads = -1, save = -1, no_overlap = -1;
    for (int i = 0; i < fp.n; i++) {
        if (!strcmp(fp.names[i], "--no-overlap")) no_overlap = i;
        if (!strcmp(fp.names[i], "--comm-dtype")) comm_dtype = i;
        if (!strcmp(fp.names[i], "--threads")) threads = i;
        if (!strcmp(fp.names[i], "--save")) save = i;
    }
    assert_true(comm_dtype >= 0);
    assert_string_equal(fp.values[comm_dtype], "fp32");
    assert_int_equal(threads, -1);
    assert_int_equal(save, -1);
    assert_int_equal(no_overlap, -1);
    dt_fingerprint_free(&fp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_to_argv_round_trips_every_changed_field),
        cmocka_unit_test(test_to_argv_of_the_defaults_is_empty),
        cmocka_unit_test(test_to_argv_refuses_short_storage),
        cmocka_unit_test(test_bad_values_name_the_flag_and_range),
        cmocka_unit_test(test_fingerprint_covers_every_shared_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
