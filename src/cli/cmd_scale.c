#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/compare.h"
#include "dtrain/dataset.h"
#include "dtrain/sweep.h"
#include "dtrain/train_mode.h"
#include "dtrain/zoo.h"

/* Each run sets these itself: its batch size, its log in DIR, no weights. */
static const char *const scale_not_shared[] = {"batch-size",       "log",    "save", "checkpoint",
                                               "checkpoint-every", "resume", NULL};

static void scale_usage(const cli_flags *flags, FILE *out) {
    fprintf(out,
            "usage: dtrain scale [options]\n"
            "\n"
            "The scaling study in one command: trains every (batch size per process, process\n"
            "count) configuration with mpirun for --epochs epochs (the 1st warms up, the 2nd is\n"
            "measured), then writes DIR/runs.csv, DIR/report.md (times, strong and weak\n"
            "speed-up, compute vs communication, all-reduce bandwidth, accuracy vs batch size,\n"
            "a plain reading) and plots. Re-running skips finished configs (their logs are in\n"
            "DIR) made with the same settings, unless --force; a rerun replaces a log only\n"
            "when it succeeds. Ctrl-C ends the running config's processes too.\n"
            "\n"
            "  --batch-sizes LIST   per process, e.g. 32,128,512 (default: 32, then x4 up to the\n"
            "                       per-process share of the data, stopping at the first that\n"
            "                       does not fit in memory)\n"
            "  --procs LIST         process counts, e.g. 1,2 (default 1,2); with a parameter-\n"
            "                       server mode, worker counts (servers come on top)\n"
            "  --out DIR            where logs, report and plots go (default runs/scale)\n"
            "  --repeats R          run every config R times, interleaved (all configs, then\n"
            "                       all again); the report gives medians with min-max\n"
            "                       (default 1)\n"
            "  --wait-idle          before each run, wait (up to 5 minutes) until other\n"
            "                       processes use under 0.25 cores for 2 s. Whether or not,\n"
            "                       each run's log records the cores other processes used\n"
            "                       during it; above 0.25 the report flags the config busy\n"
            "  --cores N            the report's speed model may recommend up to N cores'\n"
            "                       worth of processes (default: this machine's cores)\n"
            "  --modes LIST         sweep each training mode on the same grid, e.g.\n"
            "                       allreduce,ps-sync,ps-async: one study per mode in\n"
            "                       DIR/<mode>, then DIR/compare.md (dtrain compare: time to\n"
            "                       --target accuracy, bytes per role, CPU) and\n"
            "                       DIR/accuracy_time.png. --servers applies to the\n"
            "                       parameter-server modes\n"
            "  --target ACC         the comparison's target test accuracy (default 0.85)\n"
            "  --force              run every config again\n"
            "  --quiet              no progress\n"
            "  --help               this text\n"
            "\n"
            "  Every run gets the training flags below (as dtrain train). --lr-scaling linear\n"
            "  also runs each multi-process config with the linear scaling rule and\n"
            "  --warmup-epochs (warm-up applies to those runs only).\n"
            "\n");
    cli_flags_help(flags, out,
                   "--threads 1, --lr 0.05, --epochs 2, --warmup-epochs 1; with\n"
                   "  --max-samples, --test-samples takes the same share of the test split");
}

/* "32,128,512" -> ascending positive ints; -1 on a bad list. */
static int parse_list(const char *cmd, const char *flag, const char *text, int *out, int max) {
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > (1 << 24) || (*end && *end != ',') || n == max ||
            (n > 0 && v <= out[n - 1]))
            return cli_fail(cmd, "%s expects ascending positive integers like 1,2,4, got '%s'",
                            flag, text);
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n > 0 ? n : cli_fail(cmd, "%s is empty", flag);
}

/* --max-samples without --test-samples: each run evaluates on the same share of the
 * test split (at least one image), not all of it. A study about training time over
 * 512 of synthetic:imagenet's 1.28 M training images would otherwise evaluate its
 * 50,000 test images after every epoch: hours of alexnet forward per run. */
static void default_test_share(dt_train_config *train) {
    if (train->max_samples <= 0 || train->max_test_samples > 0) return;
    dt_dataset tr, te;
    if (dt_dataset_open(&tr, train->data, 1, NULL)) return; /* the runs will say why */
    if (dt_dataset_open(&te, train->data, 0, NULL) == 0) {
        if (train->max_samples < tr.size) {
            long share = (train->max_samples * (long)te.size + tr.size - 1) / tr.size;
            train->max_test_samples = share < 1 ? 1 : share;
        }
        dt_dataset_close(&te);
    }
    dt_dataset_close(&tr);
}

/* One study: the sweep, then its report, plots and runs.csv. 0 or 1. */
static int sweep_and_report(const dt_sweep_config *cfg, int cores) {
    dt_scale_study study;
    memset(&study, 0, sizeof study);
    study.cores = cores;
    study.cores_given = cores > 0;
    dt_error err;
    if (dt_sweep_run(cfg, &study, &err)) {
        cli_fail("scale", "%s", err.msg);
        dt_scale_free(&study);
        return 1;
    }
    int rc = cli_publish_study(&study, cfg->out_dir, 0);
    dt_scale_free(&study);
    return rc ? 1 : 0;
}

/* "allreduce,ps-sync" -> the modes, each a training mode (at most 8); -1 on a bad list. */
static int parse_modes(const char *cmd, const char *text, char modes[8][32]) {
    int n = 0;
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32 || n == 8)
            return cli_fail(cmd, "--modes expects up to 8 modes like allreduce,ps-sync, got '%s'",
                            text);
        memcpy(modes[n], p, len);
        modes[n][len] = 0;
        dt_train_config probe = dt_train_config_default();
        probe.mode = modes[n];
        const dt_train_mode *mode;
        dt_error err;
        if (dt_train_mode_of(&probe, &mode, &err)) return cli_fail(cmd, "--modes: %s", err.msg);
        for (int k = 0; k < n; k++)
            if (!strcmp(modes[k], modes[n]))
                return cli_fail(cmd, "--modes names %s twice", modes[n]);
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n > 0 ? n : cli_fail(cmd, "--modes is empty");
}

int cmd_scale(int argc, char **argv) {
    static const struct option own[] = {{"batch-sizes", required_argument, 0, 'b'},
                                        {"procs", required_argument, 0, 'p'},
                                        {"out", required_argument, 0, 'o'},
                                        {"force", no_argument, 0, 'f'},
                                        {"repeats", required_argument, 0, 'r'},
                                        {"wait-idle", no_argument, 0, 'w'},
                                        {"cores", required_argument, 0, 'c'},
                                        {"modes", required_argument, 0, 'M'},
                                        {"target", required_argument, 0, 'T'},
                                        {"quiet", no_argument, 0, 'q'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
    const char *cmd = "scale";
    long cores = 0;
    char modes[8][32];
    int n_modes = 0;
    double compare_target = 0.85;
    int batches[32], procs[32] = {1, 2};
    dt_sweep_config cfg = {.out_dir = "runs/scale",
                           .procs = procs,
                           .n_procs = 2,
                           .repeats = 1,
                           .wait_idle_max_s = 300};
    /* a sweep runs many processes side by side: one thread each, short runs */
    cfg.train = dt_train_config_default();
    cfg.train.threads = 1;
    cfg.train.lr = 0.05f;
    cfg.train.epochs = 2;
    cfg.train.warmup_epochs = 1;
    cli_flags flags;
    cli_flags_init(&flags, cmd, NULL, scale_not_shared, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg.train)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'b':
            if ((cfg.n_batches = parse_list(cmd, "--batch-sizes", optarg, batches, 32)) < 0)
                return 2;
            break;
        case 'p':
            if ((cfg.n_procs = parse_list(cmd, "--procs", optarg, procs, 32)) < 0) return 2;
            break;
        case 'o':
            cfg.out_dir = optarg;
            break;
        case 'f':
            cfg.force = 1;
            break;
        case 'r': {
            long r;
            if (cli_parse_int(cmd, "--repeats", optarg, 1, 100, &r)) return 2;
            cfg.repeats = (int)r;
            break;
        }
        case 'w':
            cfg.wait_idle = 1;
            break;
        case 'c':
            if (cli_parse_int(cmd, "--cores", optarg, 1, 1 << 20, &cores)) return 2;
            break;
        case 'M':
            if ((n_modes = parse_modes(cmd, optarg, modes)) < 0) return 2;
            break;
        case 'T':
            if (cli_parse_float(cmd, "--target", optarg, 1e-6, 1.0, &compare_target)) return 2;
            break;
        case 'q':
            cfg.quiet = 1;
            break;
        case 'h':
            scale_usage(&flags, stdout);
            return 0;
        }
    }
    /* here --lr-scaling linear asks for extra runs; the sweep scales those itself */
    cfg.lr_scaling = cfg.train.lr_scaling_linear;
    cfg.train.lr_scaling_linear = 0;
    dt_model_spec spec;
    if (cli_model_and_data(cmd, &cfg.train, &spec)) return 2;
    default_test_share(&cfg.train);
    dt_error err;
    if (cfg.n_batches == 0) { /* 32, x4, up to the per-process share of the data */
        dt_dataset ds;
        if (dt_dataset_open(&ds, cfg.train.data, 1, &err)) {
            cli_fail(cmd, "%s", err.msg);
            return 1;
        }
        const long max = cfg.train.max_samples;
        int size = max > 0 && max < ds.size ? (int)max : ds.size;
        int share = size / procs[cfg.n_procs - 1];
        dt_dataset_close(&ds);
        for (int b = 32; b <= share && cfg.n_batches < 32; b *= 4) batches[cfg.n_batches++] = b;
        if (cfg.n_batches == 0) batches[cfg.n_batches++] = share > 0 ? share : 1;
    }
    cfg.batches = batches;
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        cli_fail(cmd, "cannot find the dtrain binary to run");
        return 1;
    }
    self[len] = 0;
    cfg.dtrain = self;
    if (n_modes == 0) return sweep_and_report(&cfg, (int)cores);
    /* --modes: one study per mode in OUT/<mode>, on the same grid, then compared */
    char dirs[8][4200];
    const char *dir_ptrs[8];
    for (int m = 0; m < n_modes; m++) {
        dt_sweep_config one = cfg;
        one.train.mode = modes[m];
        snprintf(dirs[m], sizeof dirs[m], "%s/%s", cfg.out_dir, modes[m]);
        one.out_dir = dirs[m];
        dir_ptrs[m] = dirs[m];
        if (!cfg.quiet) fprintf(stderr, "mode %s (%d of %d):\n", modes[m], m + 1, n_modes);
        if (sweep_and_report(&one, (int)cores)) return 1;
    }
    dt_compare_run *runs = malloc(sizeof *runs * 512);
    int n_runs = 0;
    if (!runs) return cli_fail(cmd, "out of memory"), 1;
    const int rc = dt_compare_studies(dir_ptrs, n_modes, compare_target, cfg.out_dir, runs, 512,
                                      &n_runs, &err);
    free(runs);
    if (rc) return cli_fail(cmd, "%s", err.msg), 1;
    fprintf(stderr, "compare: %s/compare.md, compare.csv, accuracy_time.png\n", cfg.out_dir);
    return 0;
}
