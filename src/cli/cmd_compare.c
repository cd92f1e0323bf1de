#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "study/compare.h"

static void compare_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain compare DIR... [--target ACC] [--out DIR]\n"
            "\n"
            "Puts scaling studies (folders written by dtrain scale, e.g. one per training\n"
            "mode: dtrain scale --modes allreduce,ps-sync,ps-async) side by side: per run the\n"
            "training time to a target test accuracy, the final accuracy, the epoch time, the\n"
            "bytes each role moved per epoch and the CPU use, in OUT/compare.md and\n"
            "compare.csv, and test accuracy against training time in accuracy_time.png (and\n"
            ".svg). Runs with --eval-every give accuracy curves within epochs; others, one\n"
            "point per epoch. The tables are also printed.\n"
            "\n"
            "  --target ACC  test accuracy to reach, a fraction (default 0.85)\n"
            "  --out DIR     where to write (default runs/compare)\n"
            "  --help        this text\n");
}

int cmd_compare(int argc, char **argv) {
    static const struct option opts[] = {{"target", required_argument, 0, 't'},
                                         {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "compare", *out = "runs/compare";
    double target = 0.85;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 't':
            if (cli_parse_float(cmd, "--target", optarg, 1e-6, 1.0, &target)) return 2;
            break;
        case 'o':
            out = optarg;
            break;
        case 'h':
            compare_usage(stdout);
            return 0;
        default:
            return cli_bad_option(cmd, argv, optind);
        }
    }
    if (optind >= argc) {
        cli_fail(cmd, "give one or more study folders (dtrain compare DIR...)");
        return 2;
    }
    enum { MAX_RUNS = 512 };
    dt_compare_run *runs = malloc(sizeof *runs * MAX_RUNS);
    if (!runs) return cli_fail(cmd, "out of memory"), 1;
    int n = 0;
    dt_error err;
    if (dt_compare_studies((const char *const *)argv + optind, argc - optind, target, out, runs,
                           MAX_RUNS, &n, &err)) {
        free(runs);
        cli_fail(cmd, "%s", err.msg);
        return 1;
    }
    free(runs);
    char path[4200];
    snprintf(path, sizeof path, "%s/compare.md", out);
    FILE *f = fopen(path, "r");
    if (f) { /* print what was written: one source for screen and file */
        char line[4096];
        while (fgets(line, sizeof line, f)) fputs(line, stdout);
        fclose(f);
    }
    fprintf(stderr, "compare: %s/compare.md, compare.csv, accuracy_time.png\n", out);
    return 0;
}
