/* dtrain launch: supervises a training job as torchrun --max-restarts does. The job
 * (usually `mpirun ... dtrain train ... --checkpoint DIR`) runs as a child in its own
 * process group (core/proc: an argument vector, no shell), with SIGTERM as its death
 * signal, so that launch killed even by SIGKILL takes the job with it. When it fails
 * (a rank died: mpirun ends the job and exits non-zero) it is started again with
 * `--resume DIR` appended, from the last checkpoint, up to R times, after a delay that
 * doubles while the job makes no progress; a usage error (exit 2) and the same failure
 * twice at the same checkpoint are not restarted. DIR is locked for the whole
 * supervision. SIGINT, SIGTERM and SIGHUP are forwarded to the child's process group
 * and end the supervision. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "train/launch.h"

/* The signal handler's view (the only state it may touch): the child's process group
 * and the signal that asked us to stop. */
static volatile sig_atomic_t child_group;
static volatile sig_atomic_t stop_signal;

static void forward(int sig) {
    stop_signal = sig;
    if (child_group > 0) kill(-(pid_t)child_group, sig);
}

/* launch's lines: errors on the launcher's rank 0 (cli_fail), restart lines on stderr. */
static void say(int error, const char *line) {
    if (error)
        cli_fail("launch", "%s", line);
    else
        fprintf(stderr, "dtrain launch: %s\n", line), fflush(stderr);
}

static void launch_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain launch [--restarts R] [--restart-delay S] [--quiet] -- COMMAND "
            "[ARGS...]\n"
            "\n"
            "Runs COMMAND (e.g. mpirun -np 4 dtrain train ... --checkpoint DIR) and, when\n"
            "it fails (a rank died), runs it again with --resume DIR appended, from the\n"
            "last checkpoint, up to R times; one line per restart on stderr. COMMAND runs\n"
            "without a shell in its own process group; SIGINT, SIGTERM and SIGHUP are\n"
            "forwarded to it and end the supervision. COMMAND is sent SIGTERM when launch\n"
            "dies, even by SIGKILL (mpirun then ends its ranks). Exit status: COMMAND's\n"
            "last; 128 + N when signal N stopped launch; 1 when COMMAND cannot run or DIR\n"
            "is locked.\n"
            "\n"
            "Restarts wait S seconds, doubling after each failure up to %d s (or S if\n"
            "larger); back to S once an attempt saved a newer checkpoint or ran %d s.\n"
            "No restart when COMMAND exits with status 2 (a usage error), nor when it\n"
            "fails twice in a row with the same exit status (below 128: not a signal) at\n"
            "the same checkpoint step (or both times before the first checkpoint): a\n"
            "restart would fail the same way; one line says so.\n"
            "DIR is locked (DIR/.launch.lock, created with DIR if need be) while launch\n"
            "runs: a second launch on it, or a train --checkpoint DIR of its own, refuses\n"
            "at once, naming the first one's pid (the job's train takes it as its own).\n"
            "\n"
            "  --restarts R         restarts allowed (default 0; as torchrun's --max-restarts)\n"
            "  --restart-delay S    seconds before the first restart (default 1; 0 to 3600)\n"
            "  --quiet              no restart lines (errors are still printed)\n"
            "  --help               this text\n"
            "\n"
            "When DIR already holds a checkpoint (launch run again after it was stopped)\n"
            "the first attempt continues it too (--resume DIR appended).\n"
            "Without --checkpoint DIR among ARGS a restart runs COMMAND from the start\n"
            "(nothing is locked, and only exit status 2 stops the restarts early).\n"
            "docs/checkpoints.md describes what a resumed run continues.\n",
            DT_LAUNCH_DELAY_CAP_S, DT_LAUNCH_DELAY_CAP_S);
}

int cmd_launch(int argc, char **argv) {
    static const struct option opts[] = {{"restarts", required_argument, 0, 'r'},
                                         {"restart-delay", required_argument, 0, 'd'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "launch";
    long restarts = 0;
    double base_delay = 1;
    int quiet = 0;
    optind = 1;
    for (int opt; (opt = getopt_long(argc, argv, "+", opts, NULL)) != -1;) {
        if (opt == 'r' && cli_parse_int(cmd, "--restarts", optarg, 0, 1000000, &restarts)) return 2;
        if (opt == 'd' && cli_parse_float(cmd, "--restart-delay", optarg, 0, 3600, &base_delay))
            return 2;
        if (opt == 'q') quiet = 1;
        if (opt == 'h') {
            launch_usage(stdout);
            return 0;
        }
        if (opt == '?') return cli_bad_option(cmd, argv, optind);
    }
    if (optind >= argc) return cli_fail(cmd, "no command to run (dtrain launch -- COMMAND ...)"), 2;
    const dt_launch_opts o = {.job = argv + optind,
                              .job_argc = argc - optind,
                              .restarts = restarts,
                              .base_delay = base_delay,
                              .quiet = quiet,
                              .child_group = &child_group,
                              .stop_signal = &stop_signal,
                              .say = say};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, NULL);
    return dt_launch_run(&o);
}
