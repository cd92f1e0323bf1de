/* Child processes, started and reaped in one place (launch's job, a sweep's runs, the
 * netns setup tools). A child is started from an argument vector (execvp, never a
 * shell), optionally in a process group of its own (so mpirun and every rank it starts
 * can be signalled at once) and with a death signal (PR_SET_PDEATHSIG, set race-free:
 * a parent that died before it was set is noticed), so that a supervisor killed even
 * by SIGKILL takes its child with it. A program that cannot be run is reported by
 * dt_proc_spawn itself ("cannot run X: why"), not by a child exiting 127. */
#ifndef DTRAIN_PROC_H
#define DTRAIN_PROC_H

#include <sys/resource.h>
#include <sys/types.h>

#include "dtrain/error.h"

typedef struct dt_proc_opts {
    int new_group;    /* its own process group (its pid), for dt_proc_kill */
    int death_signal; /* sent to it when this process dies (0: none) */
    /* Redirections: a path is opened here (stdin read-only, stdout/stderr created or
     * truncated), else a descriptor > 0 is put in place, else the stream is inherited. */
    const char *stdin_path, *stdout_path, *stderr_path;
    int stdin_fd, stdout_fd, stderr_fd;
    /* "NAME=VALUE" entries, NULL-terminated, set in its environment where NAME is unset */
    const char *const *env_defaults;
} dt_proc_opts;

typedef struct dt_proc {
    pid_t pid;
    int group; /* it leads a process group of its own */
} dt_proc;

/* Starts argv[0] (searched in PATH) with argv; o may be NULL (all inherited). */
int dt_proc_spawn(dt_proc *p, const char *const *argv, const dt_proc_opts *o, dt_error *err);

/* Reaps p: 1 when it has ended (*status its wait status, *usage its resources and its
 * reaped children's, either may be NULL), 0 while it runs (block = 0 only), -1 on an
 * error (errno). Interrupted waits are retried. */
int dt_proc_wait(dt_proc *p, int block, int *status, struct rusage *usage);

/* Sends sig to p's process group (p alone if it has none): what p started goes too. */
void dt_proc_kill(const dt_proc *p, int sig);

/* "exit status N", "killed by signal N (NAME)" for a wait status. */
void dt_proc_describe(int status, char *out, size_t size);

/* /proc/PID/NAME of a process (pid as /proc lists it) read into buf, NUL-terminated
 * (cut at size - 1 bytes); the bytes read, 0 when it cannot be read (the process
 * ended). */
size_t dt_proc_file(const char *pid, const char *name, char *buf, size_t size);

/* A process's state letter (R, S, D, Z, ...) and process group from /proc/PID/stat;
 * 1, or 0 when it cannot be read (the process ended). */
int dt_proc_stat(const char *pid, char *state, long *pgrp);

/* The calling process's host as a person names it: the host name, and where it runs
 * in a named network namespace (`ip netns add`: an emulated host) that name after a
 * slash, "box/dtrain-812-h2". */
void dt_proc_host_name(char *out, size_t size);

#endif
