#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/threads.h"
#include "dtrain/train_state.h"
#include "dtrain/zoo.h"
#include "train/bench.h"

/* The training flags bench takes from the shared table. --model is its own: its
 * default differs from train's (resnet18, the model the performance docs time). */
static const char *const bench_shared[] = {"data", "width",     "batch-size",     "threads",
                                           "init", "precision", "loader-workers", NULL};

static void bench_usage(const cli_flags *flags, FILE *out) {
    fprintf(out, "usage: dtrain bench [options]\n"
                 "\n"
                 "Times full training steps (forward, backward, SGD update) on random data and\n"
                 "prints one JSON line: model, batch_size, threads, steps, images_per_s,\n"
                 "ms_per_step (median), gflops (achieved, conv and linear multiply-adds x2).\n"
                 "With --data, the model takes that data's input shape and classes where it\n"
                 "can (the data is only opened for its shape; the samples stay random unless\n"
                 "--feed).\n"
                 "\n");
    fprintf(out,
            "  --model M            a zoo model: resnet18 (default), lenet5, resnet20, alexnet,\n"
            "                       ... (dtrain models lists them all); the SGD update\n"
            "                       uses the model's recipe (momentum, weight decay);\n"
            "                       or FILE.onnx (docs/onnx.md)\n");
    cli_flags_help(flags, out, NULL);
    fprintf(out,
            "\n"
            "  --steps N            timed steps (default 20, after 3 warm-up steps)\n"
            "  --conv B             conv2d backend: dnnl (oneDNN, default) | im2col (OpenBLAS)\n"
            "  --layouts L          activations between oneDNN convs: blocked (default: nChw16c\n"
            "                       through BatchNorm, ReLU and adds where channels allow) |\n"
            "                       nchw (every activation NCHW, reordered at each conv)\n"
            "  --profile            also print time per layer kind (forward, backward) to stderr\n"
            "  --profile-out FILE   write each op's forward and backward time (means scaled to\n"
            "                       the median step) in execution order with the gradient range\n"
            "                       it writes, as JSON: the input of dtrain simulate\n"
            "  --infer              time inference instead: forward passes only, in eval mode;\n"
            "                       one JSON line: model, dtype, batch_size, threads, steps,\n"
            "                       images_per_s, ms_per_batch (median), gops (conv and linear\n"
            "                       multiply-adds x2 per second). --init gives the weights\n"
            "  --int8               with --infer: the int8 network of --init (a dtrain quantize\n"
            "                       file), or, without --init, random weights quantized on one\n"
            "                       batch of random images (symmetric, per-channel, minmax)\n"
            "  --int8-engine E      dnnl (default) | emulate\n"
            "  --feed               with --data: each timed step takes its batch from the data\n"
            "                       through train's loader (--loader-workers threads), as a\n"
            "                       training step does\n"
            "  --load               run training steps until killed: prints 'load: warm' on\n"
            "                       stdout once the warm-up steps are done, and for each\n"
            "                       byte read on stdin 'load: S', the median seconds of the\n"
            "                       steps since the last (up to --steps of them); one more\n"
            "                       rank's load (scale profiles beside such loads)\n"
            "  --help               this text\n");
}

int cmd_bench(int argc, char **argv) {
    static const struct option own[] = {{"steps", required_argument, 0, 'n'},
                                        {"help", no_argument, 0, 'h'},
                                        {"profile", no_argument, 0, 'p'},
                                        {"profile-out", required_argument, 0, 'o'},
                                        {"conv", required_argument, 0, 'c'},
                                        {"infer", no_argument, 0, 'i'},
                                        {"int8", no_argument, 0, '8'},
                                        {"int8-engine", required_argument, 0, 'e'},
                                        {"layouts", required_argument, 0, 'l'},
                                        {"model", required_argument, 0, 'M'},
                                        {"load", no_argument, 0, 'L'},
                                        {"feed", no_argument, 0, 'F'},
                                        {0, 0, 0, 0}};
    const char *cmd = "bench";
    dt_train_config cfg = dt_train_config_default();
    cfg.model = "resnet18";
    long steps = 20;
    int profile = 0, infer = 0, int8 = 0, plain_layouts = 0, load = 0, feed = 0;
    const char *profile_out = NULL;
    dt_conv_backend backend = DT_CONV_DNNL;
    dt_int8_engine engine = DT_INT8_DNNL;
    cli_flags flags;
    cli_flags_init(&flags, cmd, bench_shared, NULL, own);
    for (int opt; (opt = cli_flags_next(&flags, argc, argv, &cfg)) != CLI_FLAGS_DONE;) {
        switch (opt) {
        case CLI_FLAGS_ERROR:
            return 2;
        case 'M':
            cfg.model = optarg;
            break;
        case 'n':
            if (cli_parse_int(cmd, "--steps", optarg, 1, 1000000, &steps)) return 2;
            break;
        case 'p':
            profile = 1;
            break;
        case 'o':
            profile_out = optarg;
            break;
        case 'c':
            if (!strcmp(optarg, "dnnl"))
                backend = DT_CONV_DNNL;
            else if (!strcmp(optarg, "im2col"))
                backend = DT_CONV_IM2COL;
            else {
                cli_fail(cmd, "--conv must be dnnl or im2col, got '%s'", optarg);
                return 2;
            }
            break;
        case 'l':
            if (!strcmp(optarg, "blocked") || !strcmp(optarg, "nchw"))
                plain_layouts = !strcmp(optarg, "nchw");
            else {
                cli_fail(cmd, "--layouts must be blocked or nchw, got '%s'", optarg);
                return 2;
            }
            break;
        case 'i':
            infer = 1;
            break;
        case 'L':
            load = 1;
            break;
        case 'F':
            feed = 1;
            break;
        case '8':
            int8 = 1;
            break;
        case 'e':
            if (dt_int8_engine_parse(optarg, &engine)) {
                cli_fail(cmd, "--int8-engine must be dnnl or emulate, got '%s'", optarg);
                return 2;
            }
            break;
        case 'h':
            bench_usage(&flags, stdout);
            return 0;
        }
    }
    dt_bench_options o = {.model = cfg.model,
                          .data = cfg.data,
                          .init = cfg.init_path,
                          .infer = infer,
                          .int8 = int8,
                          .plain_layouts = plain_layouts,
                          .engine = engine,
                          .backend = backend,
                          .precision = cfg.precision,
                          .batch = (int)cfg.batch_size,
                          .span = {.steps = steps},
                          .profile = profile,
                          .profile_out = profile_out,
                          .load = load,
                          .feed = feed,
                          .loader_workers = cfg.loader_workers};
    dt_error err;
    if (dt_bench_check(&o, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    o.threads = cli_threads(cmd, cfg.threads);
    if (cli_model_and_data(cmd, &cfg, &o.spec)) return 2;
    if (dt_train_config_resolve(&cfg, &err)) return cli_fail(cmd, "%s", err.msg), 2;
    if (cfg.width > 0) o.spec.width = cfg.width;
    o.width = cfg.width;
    o.momentum = cfg.momentum;
    o.weight_decay = cfg.weight_decay;
    dt_threads_set(o.threads);
    if (dt_bench_run(&o, stdout, stderr, &err)) return cli_fail(cmd, "%s", err.msg), 1;
    return 0;
}
