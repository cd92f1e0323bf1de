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
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "dtrain/proc.h"
#include "dtrain/resume.h"
#include "dtrain/safetensors.h"
#include "dtrain/timer.h"

/* The signal handler's view (the only state it may touch): the child's process group
 * and the signal that asked us to stop. */
static volatile sig_atomic_t child_group;
static volatile sig_atomic_t stop_signal;

static void forward(int sig) {
    stop_signal = sig;
    if (child_group > 0) kill(-(pid_t)child_group, sig);
}

enum { DELAY_CAP_S = 30 };

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
            "runs: a second launch on it refuses at once, naming the first one's pid.\n"
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
            DELAY_CAP_S, DELAY_CAP_S);
}

/* Whether the job's arguments hold --resume (or --resume=DIR). */
static int has_resume(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9)) return 1;
    return 0;
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

/* Locks dir (creating it as train would) with a POSIX write lock on DIR/.launch.lock,
 * which the kernel releases however launch ends; the file also holds our pid, for
 * people. Returns the descriptor to keep open, or -1 after printing the error. */
static int lock_dir(const char *cmd, const char *dir) {
    dt_error err;
    if (dt_resume_check_dir(dir, &err)) return cli_fail(cmd, "%s", err.msg), -1;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/.launch.lock", dir) >= sizeof path)
        return cli_fail(cmd, "checkpoint directory name too long: %.100s...", dir), -1;
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return cli_fail(cmd, "cannot open %s: %s", path, strerror(errno)), -1;
    struct stat st; /* rewritten below: never another file's name for it */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        cli_fail(cmd, "cannot use %s as the lock: not a regular file of its own (a link?)", path);
        close(fd);
        return -1;
    }
    for (int tries = 0;; tries++) {
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &lock) == 0) break;
        if ((errno != EACCES && errno != EAGAIN) || tries == 10) {
            cli_fail(cmd, "cannot lock %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK) {
            cli_fail(cmd,
                     "%s is in use by another dtrain launch (pid %ld): one supervisor per "
                     "checkpoint directory; wait for it to end or stop it",
                     dir, (long)who.l_pid);
            close(fd);
            return -1;
        } /* released in between: try again */
    }
    char text[32];
    const int n = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)n, 0) != n) {
        cli_fail(cmd, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Runs argv in a new process group that dies with launch; its wait status, or -1 if
 * it could not start. */
static int run_child(const char *cmd, char **argv) {
    const dt_proc_opts opts = {.new_group = 1, .death_signal = SIGTERM};
    dt_proc job;
    dt_error err;
    if (dt_proc_spawn(&job, (const char *const *)argv, &opts, &err)) {
        cli_fail(cmd, "%s", err.msg);
        return -1;
    }
    child_group = job.pid;
    if (stop_signal) dt_proc_kill(&job, stop_signal); /* a signal that came before the group */
    int status = 0;
    if (dt_proc_wait(&job, 1, &status, NULL) != 1) {
        cli_fail(cmd, "cannot wait for %s: %s", argv[0], strerror(errno));
        status = -1;
    }
    /* ranks the job left behind in its group go with it */
    dt_proc_kill(&job, SIGKILL);
    child_group = 0;
    return status;
}

/* Sleeps seconds, or less when a signal asks launch to stop. */
static void pause_for(double seconds) {
    const double until = dt_now() + seconds;
    for (double left = seconds; left > 0 && !stop_signal; left = until - dt_now()) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
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
    const int job_argc = argc - optind;
    char **job = argv + optind;
    const char *dir = checkpoint_dir(job_argc, job);
    const int lock = dir ? lock_dir(cmd, dir) : -1;
    if (dir && lock < 0) return 1;
    /* the job's arguments, then --resume DIR on a restart */
    char **child = calloc((size_t)job_argc + 3, sizeof *child);
    if (!child) {
        if (lock >= 0) close(lock);
        return cli_fail(cmd, "out of memory"), 1;
    }
    memcpy(child, job, sizeof *child * (size_t)job_argc);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, NULL);

    const double cap = base_delay > DELAY_CAP_S ? base_delay : DELAY_CAP_S;
    double delay = base_delay;
    long step_before = checkpoint_step(dir), last_step = 0;
    /* DIR holds a checkpoint already (this launch run again after it was stopped): the
     * job continues it, as a restart would (train refuses to start afresh over it) */
    if (step_before >= 0 && !has_resume(job_argc, job)) {
        child[job_argc] = "--resume";
        child[job_argc + 1] = (char *)dir;
        if (!quiet)
            fprintf(stderr,
                    "dtrain launch: %s holds a checkpoint at step %ld; the job continues "
                    "it (--resume %s)\n",
                    dir, step_before, dir);
    }
    int status = 0, last_status = -1; /* the previous failure's, -1: none to compare */
    for (long attempt = 0;; attempt++) {
        const double started = dt_now();
        status = run_child(cmd, child);
        if (status == -1) break;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
        char what[128];
        dt_proc_describe(status, what, sizeof what);
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
        if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
            cli_fail(cmd, "the job exited with status 2, a usage error that a restart would "
                          "repeat; not restarting");
            break;
        }
        const long step = checkpoint_step(dir);
        /* an exit status of 128 + N is mpirun's (or a shell's) for a process killed by
         * signal N: something from outside, which a restart need not meet again */
        const int plain_exit = WIFEXITED(status) && WEXITSTATUS(status) < 128;
        if (dir && plain_exit && status == last_status && step == last_step) {
            char at[64] = "before the first checkpoint";
            if (step >= 0) snprintf(at, sizeof at, "at checkpoint step %ld", step);
            cli_fail(cmd,
                     "the job failed twice in a row %s with %s, a failure that a restart "
                     "would repeat; not restarting",
                     at, what);
            break;
        }
        last_status = plain_exit ? status : -1;
        last_step = step;
        /* back to the base delay once the job gets somewhere */
        if (step > step_before || dt_now() - started >= DELAY_CAP_S) delay = base_delay;
        step_before = step;
        child[job_argc] = step >= 0 ? "--resume" : NULL;
        child[job_argc + 1] = step >= 0 ? (char *)dir : NULL;
        if (!quiet) {
            if (step >= 0)
                fprintf(stderr,
                        "dtrain launch: the job failed (%s); restart %ld of %ld from %s at "
                        "step %ld in %g s\n",
                        what, attempt + 1, restarts, dir, step, delay);
            else
                fprintf(stderr,
                        "dtrain launch: the job failed (%s); restart %ld of %ld from the start "
                        "(%s) in %g s\n",
                        what, attempt + 1, restarts,
                        dir ? "no checkpoint yet" : "no --checkpoint DIR in its arguments", delay);
            fflush(stderr);
        }
        pause_for(delay);
        if (stop_signal) {
            if (!quiet)
                fprintf(stderr, "dtrain launch: stopped by signal %d before restart %ld\n",
                        (int)stop_signal, attempt + 1);
            break;
        }
        delay = delay * 2 < cap ? delay * 2 : cap;
    }
    free(child);
    if (lock >= 0) close(lock);
    if (status == -1) return 1;
    if (stop_signal) return 128 + stop_signal;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
