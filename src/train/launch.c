#define _GNU_SOURCE
#include "train/launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/proc.h"
#include "core/runlock.h"
#include "core/timer.h"
#include "dtrain/safetensors.h"
#include "train/resume.h"

static void say(const dt_launch_opts *o, int error, const char *fmt, va_list ap) {
    char line[8800]; /* a line names DIR at most twice */
    vsnprintf(line, sizeof line, fmt, ap);
    o->say(error, line);
}

/* An error line; returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(const dt_launch_opts *o, const char *fmt,
                                                      ...) {
    va_list ap;
    va_start(ap, fmt);
    say(o, 1, fmt, ap);
    va_end(ap);
    return -1;
}

/* A restart line. */
__attribute__((format(printf, 2, 3))) static void note(const dt_launch_opts *o, const char *fmt,
                                                       ...) {
    va_list ap;
    va_start(ap, fmt);
    say(o, 0, fmt, ap);
    va_end(ap);
}

/* Whether the job's arguments hold --resume (or --resume=DIR). */
static int has_resume(int argc, char *const *argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--resume") || !strncmp(argv[i], "--resume=", 9)) return 1;
    return 0;
}

/* DIR of the job's --checkpoint DIR (or --checkpoint=DIR), or NULL. */
static const char *checkpoint_dir(int argc, char *const *argv) {
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

/* Locks dir (creating it as train would) as its supervisor (core/runlock: byte 0 of
 * DIR/.launch.lock, which the kernel releases however launch ends) and names the lock
 * in DTRAIN_LAUNCH_LOCK for the job, whose train takes byte 1 beside it: its ranks
 * inherit the variable from mpirun or srun, and Slurm's tasks are not launch's
 * descendants. Returns the descriptor to keep open, or -1 after saying why. */
static int lock_dir(const dt_launch_opts *o, const char *dir) {
    dt_error err;
    char path[4200];
    if (dt_resume_check_dir(dir, &err) || dt_resume_lock_path(path, sizeof path, dir, &err))
        return fail(o, "%s", err.msg), -1;
    dt_runlock lock;
    if (dt_runlock_supervise(&lock, path, dir, DT_RESUME_LOCK_POLICY, &err))
        return fail(o, "%s", err.msg), -1;
    if (setenv(DT_RUNLOCK_ENV, lock.who, 1) != 0) {
        dt_runlock_release(&lock);
        return fail(o, "cannot set %s: %s", DT_RUNLOCK_ENV, strerror(errno)), -1;
    }
    return lock.fd;
}

/* Whether a process of group pgid still runs: kill(-pgid, 0) also finds zombies, which
 * an init that does not reap (a container's shell) keeps forever, and a zombie holds
 * no lock; /proc says which are only that. */
static int group_alive(pid_t pgid) {
    if (kill(-pgid, 0) != 0) return 0;
    DIR *proc = opendir("/proc");
    if (!proc) return 1;
    int alive = 0;
    for (struct dirent *d; !alive && (d = readdir(proc));) {
        if (d->d_name[0] < '1' || d->d_name[0] > '9') continue;
        char state;
        long pgrp;
        if (dt_proc_stat(d->d_name, &state, &pgrp) && pgrp == (long)pgid && state != 'Z' &&
            state != 'X')
            alive = 1;
    }
    closedir(proc);
    return alive;
}

/* Runs argv in a new process group that dies with launch; its wait status, or -1 if
 * it could not start. */
static int run_child(const dt_launch_opts *o, char **argv) {
    const dt_proc_opts opts = {.new_group = 1, .death_signal = SIGTERM};
    dt_proc job;
    dt_error err;
    if (dt_proc_spawn(&job, (const char *const *)argv, &opts, &err)) {
        fail(o, "%s", err.msg);
        return -1;
    }
    *o->child_group = job.pid;
    if (*o->stop_signal)
        dt_proc_kill(&job, *o->stop_signal); /* a signal that came before the group */
    int status = 0;
    if (dt_proc_wait(&job, 1, &status, NULL) != 1) {
        fail(o, "cannot wait for %s: %s", argv[0], strerror(errno));
        status = -1;
    }
    /* ranks the job left behind in its group go with it, and are gone before a restart:
     * a dying rank 0 still holds its --log's and DIR's locks, which the next one takes.
     * Bounded: one stuck in the kernel (D state) must not stop the supervision. */
    dt_proc_kill(&job, SIGKILL);
    for (const double until = dt_now() + 5; group_alive(job.pid) && dt_now() < until;) {
        while (waitpid(-job.pid, NULL, WNOHANG) > 0) {
        } /* ours to reap when launch is a container's first process */
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    *o->child_group = 0;
    return status;
}

/* Sleeps seconds, or less when a signal asks launch to stop. */
static void pause_for(const dt_launch_opts *o, double seconds) {
    const double until = dt_now() + seconds;
    for (double left = seconds; left > 0 && !*o->stop_signal; left = until - dt_now()) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

int dt_launch_run(const dt_launch_opts *o) {
    const int job_argc = o->job_argc, quiet = o->quiet;
    char *const *job = o->job;
    const long restarts = o->restarts;
    const double base_delay = o->base_delay;
    volatile sig_atomic_t *const stop_signal = o->stop_signal;
    const char *dir = checkpoint_dir(job_argc, job);
    const int lock = dir ? lock_dir(o, dir) : -1;
    if (dir && lock < 0) return 1;
    /* the job's arguments, then --resume DIR on a restart */
    char **child = calloc((size_t)job_argc + 3, sizeof *child);
    if (!child) {
        if (lock >= 0) close(lock);
        return fail(o, "out of memory"), 1;
    }
    memcpy(child, job, sizeof *child * (size_t)job_argc);

    const double cap = base_delay > DT_LAUNCH_DELAY_CAP_S ? base_delay : DT_LAUNCH_DELAY_CAP_S;
    double delay = base_delay;
    long step_before = checkpoint_step(dir), last_step = 0;
    /* DIR holds a checkpoint already (this launch run again after it was stopped): the
     * job continues it, as a restart would (train refuses to start afresh over it) */
    if (step_before >= 0 && !has_resume(job_argc, job)) {
        child[job_argc] = "--resume";
        child[job_argc + 1] = (char *)dir;
        if (!quiet)
            note(o,
                 "%s holds a checkpoint at step %ld; the job continues "
                 "it (--resume %s)",
                 dir, step_before, dir);
    }
    int status = 0, last_status = -1; /* the previous failure's, -1: none to compare */
    for (long attempt = 0;; attempt++) {
        const double started = dt_now();
        status = run_child(o, child);
        if (status == -1) break;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
        char what[128];
        dt_proc_describe(status, what, sizeof what);
        if (*stop_signal) {
            if (!quiet)
                note(o, "stopped by signal %d; the job ended with %s", (int)*stop_signal, what);
            break;
        }
        if (attempt >= restarts) {
            fail(o, "the job failed (%s)%s", what,
                 restarts ? "; no restarts left" : " (--restarts 0)");
            break;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
            fail(o, "the job exited with status 2, a usage error that a restart would "
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
            fail(o,
                 "the job failed twice in a row %s with %s, a failure that a restart "
                 "would repeat; not restarting",
                 at, what);
            break;
        }
        last_status = plain_exit ? status : -1;
        last_step = step;
        /* back to the base delay once the job gets somewhere */
        if (step > step_before || dt_now() - started >= DT_LAUNCH_DELAY_CAP_S) delay = base_delay;
        step_before = step;
        child[job_argc] = step >= 0 ? "--resume" : NULL;
        child[job_argc + 1] = step >= 0 ? (char *)dir : NULL;
        if (!quiet) {
            if (step >= 0)
                note(o,
                     "the job failed (%s); restart %ld of %ld from %s at "
                     "step %ld in %g s",
                     what, attempt + 1, restarts, dir, step, delay);
            else
                note(o,
                     "the job failed (%s); restart %ld of %ld from the start "
                     "(%s) in %g s",
                     what, attempt + 1, restarts,
                     dir ? "no checkpoint yet" : "no --checkpoint DIR in its arguments", delay);
        }
        pause_for(o, delay);
        if (*stop_signal) {
            if (!quiet)
                note(o, "stopped by signal %d before restart %ld", (int)*stop_signal, attempt + 1);
            break;
        }
        delay = delay * 2 < cap ? delay * 2 : cap;
    }
    free(child);
    if (lock >= 0) close(lock);
    if (status == -1) return 1;
    if (*stop_signal) return 128 + *stop_signal;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}
