/* dtrain launch: supervises a training job as torchrun --max-restarts does. The job
 * (usually `mpirun ... dtrain train ... --checkpoint DIR`) runs as a child in its own
 * process group, started from an argument vector (posix_spawnp, no shell). When it
 * fails (a rank died: mpirun ends the job and exits non-zero) it is started again with
 * `--resume DIR` appended, from the last checkpoint, up to R times. SIGINT, SIGTERM
 * and SIGHUP are forwarded to the child's process group and end the supervision. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/resume.h"
#include "dtrain/safetensors.h"

extern char **environ;

/* The signal handler's view (the only state it may touch): the child's process group
 * and the signal that asked us to stop. */
static volatile sig_atomic_t child_group;
static volatile sig_atomic_t stop_signal;

static void forward(int sig) {
    stop_signal = sig;
    if (child_group > 0) kill(-(pid_t)child_group, sig);
}

static void launch_usage(FILE *out) {
    fprintf(out,
            "usage: dtrain launch [--restarts R] [--quiet] -- COMMAND [ARGS...]\n"
            "\n"
            "Runs COMMAND (e.g. mpirun -np 4 dtrain train ... --checkpoint DIR) and, when\n"
            "it fails (a rank died), runs it again with --resume DIR appended, from the\n"
            "last checkpoint, up to R times; one line per restart on stderr. COMMAND runs\n"
            "without a shell in its own process group; SIGINT, SIGTERM and SIGHUP are\n"
            "forwarded to it and end the supervision. Exit status: COMMAND's last.\n"
            "\n"
            "  --restarts R         restarts allowed (default 0; as torchrun's --max-restarts)\n"
            "  --quiet              no restart lines (errors are still printed)\n"
            "  --help               this text\n"
            "\n"
            "Without --checkpoint DIR among ARGS a restart runs COMMAND from the start.\n"
            "docs/checkpoints.md describes what a resumed run continues.\n");
}

/* DIR of the job's --checkpoint DIR (or --checkpoint=DIR), or NULL. */
static const char *checkpoint_dir(int argc, char **argv) {
    const char *dir = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc)
            dir = argv[++i];
        else if (!strncmp(argv[i], "--checkpoint=", 13))
            dir = argv[i] + 13;
    }
    return dir;
}

/* The step of dir's checkpoint, or -1 if there is none (yet) or it cannot be read. */
static long checkpoint_step(const char *dir) {
    char path[4096];
    dt_error err;
    struct stat st;
    if (!dir || dt_resume_file(path, sizeof path, dir, &err) || stat(path, &st) != 0) return -1;
    dt_safetensors f;
    if (dt_safetensors_read(&f, path, &err)) return -1;
    const char *v = dt_safetensors_meta(&f, "step");
    char *end = NULL;
    long step = v ? strtol(v, &end, 10) : -1;
    if (!v || end == v || *end) step = -1;
    dt_safetensors_free(&f);
    return step;
}

static void describe(int status, char *out, size_t size) {
    if (WIFEXITED(status))
        snprintf(out, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(out, size, "wait status %d", status);
}

/* Runs argv in a new process group; its wait status, or -1 if it could not start. */
static int run_child(char **argv) {
    posix_spawnattr_t attr;
    pid_t pid;
    int rc = posix_spawnattr_init(&attr);
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    if (rc == 0) rc = posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        cli_fail("launch", "cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    child_group = pid;
    if (stop_signal) kill(-pid, stop_signal); /* a signal that came before the group */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            cli_fail("launch", "cannot wait for %s: %s", argv[0], strerror(errno));
            status = -1;
            break;
        }
    }
    /* ranks the job left behind in its group go with it */
    kill(-pid, SIGKILL);
    child_group = 0;
    return status;
}

int cmd_launch(int argc, char **argv) {
    static const struct option opts[] = {{"restarts", required_argument, 0, 'r'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = "launch";
    long restarts = 0;
    int quiet = 0;
    optind = 1;
    for (int opt; (opt = getopt_long(argc, argv, "+", opts, NULL)) != -1;) {
        if (opt == 'r' && cli_parse_int(cmd, "--restarts", optarg, 0, 1000000, &restarts)) return 2;
        if (opt == 'q') quiet = 1;
        if (opt == 'h') {
            launch_usage(stdout);
            return 0;
        }
        if (opt == '?') return cli_bad_option(cmd, argv, optind);
    }
    if (optind >= argc) return cli_fail(cmd, "no command to run (dtrain launch -- COMMAND ...)"), 2;
    const int job_argc = argc - optind;
    char **job = argv + optind;
    const char *dir = checkpoint_dir(job_argc, job);
    /* the job's arguments, then --resume DIR on a restart */
    char **child = calloc((size_t)job_argc + 3, sizeof *child);
    if (!child) return cli_fail(cmd, "out of memory"), 1;
    memcpy(child, job, sizeof *child * (size_t)job_argc);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, NULL);

    int status = 0;
    for (long attempt = 0;; attempt++) {
        status = run_child(child);
        if (status == -1) break;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
        char what[128];
        describe(status, what, sizeof what);
        if (stop_signal) {
            if (!quiet)
                fprintf(stderr, "dtrain launch: stopped by signal %d; the job ended with %s\n",
                        (int)stop_signal, what);
            break;
        }
        if (attempt >= restarts) {
            cli_fail(cmd, "the job failed (%s)%s", what,
                     restarts ? "; no restarts left" : " (--restarts 0)");
            break;
        }
        const long step = checkpoint_step(dir);
        child[job_argc] = step >= 0 ? "--resume" : NULL;
        child[job_argc + 1] = step >= 0 ? (char *)dir : NULL;
        if (!quiet) {
            if (step >= 0)
                fprintf(stderr,
                        "dtrain launch: the job failed (%s); restart %ld of %ld from %s at "
                        "step %ld\n",
                        what, attempt + 1, restarts, dir, step);
            else
                fprintf(stderr,
                        "dtrain launch: the job failed (%s); restart %ld of %ld from the start "
                        "(%s)\n",
                        what, attempt + 1, restarts,
                        dir ? "no checkpoint yet" : "no --checkpoint DIR in its arguments");
            fflush(stderr);
        }
    }
    free(child);
    if (status == -1) return 1;
    if (stop_signal) return 128 + stop_signal;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
