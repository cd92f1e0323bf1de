#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/dataset.h"
#include "dtrain/sweep.h"
#include "dtrain/zoo.h"

static void scale_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain scale [options]\n"
            "\n"
            "The scaling study in one command: trains every (batch size per process, process\n"
            "count) configuration with mpirun for --epochs epochs (the 1st warms up, the 2nd is\n"
            "measured), then writes DIR/runs.csv, DIR/report.md (times, strong and weak\n"
            "speed-up, compute vs communication, all-reduce bandwidth, accuracy vs batch size,\n"
            "a plain reading) and plots. Re-running skips finished configs (their logs are in\n"
            "DIR) unless --force.\n"
            "\n"
            "  --model M           logreg | mlp | lenet5 | resnet18 (default lenet5)\n"
            "  --data SPEC         dataset (default fashion-mnist; see dtrain train --help)\n"
            "  --batch-sizes LIST  per process, e.g. 32,128,512 (default: 32, then x4 up to the\n"
            "                      per-process share of the data, stopping at the first that\n"
            "                      does not fit in memory)\n"
            "  --procs LIST        process counts, e.g. 1,2 (default 1,2); with a parameter-\n"
            "                      server mode, worker counts (servers come on top)\n"
            "  --mode M            allreduce (default) | ps-sync | ps-async | ssp\n"
            "  --servers P         parameter servers for the ps modes (default 1)\n"
            "  --epochs E          epochs per config (default 2)\n"
            "  --threads T         compute threads per process (default 1)\n"
            "  --lr X              learning rate (default 0.05)\n"
            "  --lr-schedule S     as dtrain train (default constant)\n"
            "  --lr-scaling linear also run each multi-process config with the linear scaling\n"
            "                      rule (lr x processes) and --warmup-epochs\n"
            "  --warmup-epochs K   warm-up for --lr-scaling (default 1)\n"
            "  --max-samples N     train on the first N samples only (quick sweeps)\n"
            "  --test-samples N    evaluate on the first N test samples only\n"
            "  --out DIR           where logs, report and plots go (default runs/scale)\n"
            "  --force             run every config again\n"
            "  --quiet             no progress\n"
            "  --help              this text\n");
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

int cmd_scale(int argc, char **argv) {
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"data", required_argument, 0, 'd'},
                                         {"batch-sizes", required_argument, 0, 'b'},
                                         {"procs", required_argument, 0, 'p'},
                                         {"epochs", required_argument, 0, 'e'},
                                         {"threads", required_argument, 0, 't'},
                                         {"lr", required_argument, 0, 'l'},
                                         {"lr-schedule", required_argument, 0, 'S'},
                                         {"lr-scaling", required_argument, 0, 'X'},
                                         {"warmup-epochs", required_argument, 0, 'U'},
                                         {"out", required_argument, 0, 'o'},
                                         {"force", no_argument, 0, 'f'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"mode", required_argument, 0, 'D'},
                                         {"max-samples", required_argument, 0, 'N'},
                                         {"servers", required_argument, 0, 'P'},
                                         {"test-samples", required_argument, 0, 'T'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "scale";
    int batches[32], procs[32] = {1, 2};
    dt_sweep_config cfg = {.model = "lenet5",
                           .data = "fashion-mnist",
                           .out_dir = "runs/scale",
                           .procs = procs,
                           .n_procs = 2,
                           .epochs = 2,
                           .threads = 1,
                           .loader_workers = 1,
                           .lr = 0.05,
                           .warmup_epochs = 1,
                           .servers = 1};
    long v;
    double x;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 'm':
            cfg.model = optarg;
            break;
        case 'd':
            cfg.data = optarg;
            break;
        case 'b':
            if ((cfg.n_batches = parse_list(cmd, "--batch-sizes", optarg, batches, 32)) < 0)
                return 2;
            break;
        case 'p':
            if ((cfg.n_procs = parse_list(cmd, "--procs", optarg, procs, 32)) < 0) return 2;
            break;
        case 'e':
            if (cli_parse_int(cmd, "--epochs", optarg, 1, 1000, &v)) return 2;
            cfg.epochs = (int)v;
            break;
        case 't':
            if (cli_parse_int(cmd, "--threads", optarg, 1, 256, &v)) return 2;
            cfg.threads = (int)v;
            break;
        case 'l':
            if (cli_parse_float(cmd, "--lr", optarg, 1e-12, 1e6, &x)) return 2;
            cfg.lr = x;
            break;
        case 'S':
            cfg.lr_schedule = optarg;
            break;
        case 'X':
            if (cli_parse_lr_scaling(cmd, optarg, &cfg.lr_scaling)) return 2;
            break;
        case 'U':
            if (cli_parse_float(cmd, "--warmup-epochs", optarg, 0, 1000, &x)) return 2;
            cfg.warmup_epochs = x;
            break;
        case 'o':
            cfg.out_dir = optarg;
            break;
        case 'P':
            if (cli_parse_int(cmd, "--servers", optarg, 1, 63, &v)) return 2;
            cfg.servers = (int)v;
            break;
        case 'N':
            if (cli_parse_int(cmd, "--max-samples", optarg, 1, 0x7fffffffL, &v)) return 2;
            cfg.max_samples = v;
            break;
        case 'T':
            if (cli_parse_int(cmd, "--test-samples", optarg, 1, 0x7fffffffL, &v)) return 2;
            cfg.test_samples = v;
            break;
        case 'f':
            cfg.force = 1;
            break;
        case 'q':
            cfg.quiet = 1;
            break;
        case 'D':
            if (cli_check_mode(cmd, optarg)) return 2;
            cfg.mode = optarg;
            break;
        case 'h':
            scale_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (cli_no_extra_args(cmd, argc, argv, optind)) return 2;
    dt_model_spec spec;
    if (cli_model_spec(cmd, cfg.model, &spec)) return 2;
    dt_error err;
    if (cfg.n_batches == 0) { /* 32, x4, up to the per-process share of the data */
        dt_dataset ds;
        if (dt_dataset_open(&ds, cfg.data, 1, &err)) {
            cli_fail(cmd, "%s", err.msg);
            return 1;
        }
        int size =
            cfg.max_samples > 0 && cfg.max_samples < ds.size ? (int)cfg.max_samples : ds.size;
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
    dt_scale_study study;
    memset(&study, 0, sizeof study);
    if (dt_sweep_run(&cfg, &study, &err)) {
        cli_fail(cmd, "%s", err.msg);
        dt_scale_free(&study);
        return 1;
    }
    int rc = cli_publish_study(&study, cfg.out_dir, 0);
    dt_scale_free(&study);
    return rc ? 1 : 0;
}
