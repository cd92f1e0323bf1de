/* dtrain: train neural networks data-parallel and study how training scales. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "dtrain/blas_core.h"
#include "dtrain/netns.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: dtrain <command> [options]\n"
            "\n"
            "commands:\n"
            "  train   train a model, on one process or under mpirun on many\n"
            "  launch  run a training job, restart it from its checkpoint when a rank dies\n"
            "  bench   time training steps on synthetic data, print one JSON line\n"
            "  eval    evaluate saved weights on a test split: accuracy, per class, confusion\n"
            "  quantize  int8 post-training quantization of saved weights (+ per-layer report)\n"
            "  models  list the models: parameters, FLOPs per sample, input shape\n"
            "  scale   the scaling study: sweep batch sizes and process counts, report + plots\n"
            "  report  rebuild a study's report from its logs, or report on a CSV of times\n"
            "  compare put studies side by side: time to accuracy, bytes per role, CPU\n"
            "  fit-loss   fit the Optimus loss curve to a run log, predict convergence\n"
            "  fit-speed  fit the Optimus speed model to measured step times\n"
            "  predict    time to convergence per (workers, servers) from given thetas\n"
            "  fit-jobs   ridge regression of loss-curve parameters on job features\n"
            "  allocate   greedy allocation of a process budget over jobs (Optimus)\n"
            "  simulate   predict step time and speed-up on 1..N workers from a per-op profile\n"
            "  netns-rsh  (internal) mpirun's rsh agent for scale --hosts netns:H\n"
            "\n"
            "dtrain <command> --help describes each command's options.\n");
}

int main(int argc, char **argv) {
    /* Before anything runs: OpenBLAS's generic fallback kernels on a CPU it does not know
     * are 3.5x slower (dtrain/blas_core.h). */
    dt_blas_core_fix(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "launch")) return cmd_launch(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "scale")) return cmd_scale(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "models")) return cmd_models(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return cmd_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "fit-loss")) return cmd_fit_loss(argc - 1, argv + 1);
    if (!strcmp(cmd, "fit-speed")) return cmd_fit_speed(argc - 1, argv + 1);
    if (!strcmp(cmd, "predict")) return cmd_predict(argc - 1, argv + 1);
    if (!strcmp(cmd, "fit-jobs")) return cmd_fit_jobs(argc - 1, argv + 1);
    if (!strcmp(cmd, "allocate")) return cmd_allocate(argc - 1, argv + 1);
    if (!strcmp(cmd, "simulate")) return cmd_simulate(argc - 1, argv + 1);
    if (!strcmp(cmd, "netns-rsh")) return dt_netns_rsh(argc - 2, argv + 2);
    fprintf(stderr, "dtrain: unknown command '%s' (try dtrain --help)\n", cmd);
    return 2;
}
