/* dtrain: train neural networks data-parallel and study how training scales. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "core/blas_core.h"
#include "core/placement.h"
#include "dtrain/version.h"
#include "study/netns.h"

static int cmd_netns_rsh(int argc, char **argv) {
    return dt_netns_rsh(argc - 1, argv + 1);
}

static int cmd_netns_exec(int argc, char **argv) {
    return dt_netns_exec(argc - 1, argv + 1);
}

/* One table: dispatch and `dtrain --help` cannot disagree. A NULL summary hides an
 * internal command from the usage text. */
typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command COMMANDS[] = {
    {"train", cmd_train, "train a model, on one process or under mpirun/srun on many"},
    {"launch", cmd_launch, "run a training job, restart it from its checkpoint when a rank dies"},
    {"bench", cmd_bench, "time training steps on synthetic data, print one JSON line"},
    {"eval", cmd_eval, "evaluate saved weights on a test split: accuracy, per class, confusion"},
    {"quantize", cmd_quantize, "int8 post-training quantization of saved weights (+ report)"},
    {"models", cmd_models, "list the models: parameters, FLOPs, input shape, default recipe"},
    {"scale", cmd_scale, "the scaling study: sweep batch sizes and process counts, report + plots"},
    {"report", cmd_report, "rebuild a study's report from its logs, or report on a CSV of times"},
    {"compare", cmd_compare, "put studies side by side: time to accuracy, bytes per role, CPU"},
    {"fit-loss", cmd_fit_loss, "fit the Optimus loss curve to a run log, predict convergence"},
    {"fit-speed", cmd_fit_speed, "fit the Optimus speed model to measured step times"},
    {"predict", cmd_predict, "time to convergence per (workers, servers) from given thetas"},
    {"fit-jobs", cmd_fit_jobs, "ridge regression of loss-curve parameters on job features"},
    {"allocate", cmd_allocate, "greedy allocation of a process budget over jobs (Optimus)"},
    {"simulate", cmd_simulate, "predict step time and speed-up on 1..N workers from a profile"},
    {"netns-rsh", cmd_netns_rsh, NULL},   /* mpirun's rsh agent for scale --hosts netns:H */
    {"netns-exec", cmd_netns_exec, NULL}, /* ... and its mpirun inside host 1 */
};
enum { N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static void usage(FILE *out) {
    fprintf(out, "usage: dtrain <command> [options]\n"
                 "       dtrain --version\n"
                 "\n"
                 "commands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        if (COMMANDS[i].summary)
            fprintf(out, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(out, "\n"
                 "dtrain <command> --help describes each command's options.\n");
}

int main(int argc, char **argv) {
    /* Before anything runs: OpenBLAS's generic fallback kernels on a CPU it does not know
     * are 3.5x slower (core/blas_core.h). */
    dt_blas_core_fix(argv);
    /* A write past `ulimit -f` would kill dtrain by SIGXFSZ, leaving a half-written
     * temporary file and no word; ignored, the write fails with EFBIG and core/outfile
     * says so in one line and removes the file. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("dtrain %s (%s)\n", dt_version(), dt_version_commit());
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    /* under a launcher every rank finds it: the first says it */
    if (dt_placement_rank_here() <= 0)
        fprintf(stderr, "dtrain: unknown command '%s' (try dtrain --help)\n", cmd);
    return 2;
}
