/* One run per file or folder: a POSIX write lock (fcntl F_SETLK) on an open file,
 * which the kernel releases however the holder ends (even by SIGKILL). `train` locks
 * its --log file itself, through the descriptor it writes with, so no lock file sits
 * beside a log; `scale` its --out DIR (DIR/.scale.lock). A second process is refused in
 * one line naming the holder's pid and command ("--log a.jsonl is in use by another
 * dtrain train (pid 4242): one run per log; wait for it to end or stop it").
 *
 * A checkpoint folder's lock (DIR/.launch.lock) has two bytes: byte 0 is the
 * supervisor's (`launch`), byte 1 the writer's (`train`). launch takes both at once
 * (refused by any holder of either), writes who it is in the file (pid, host, start
 * time), then lets byte 1 go and hands that identity to its job in DTRAIN_LAUNCH_LOCK.
 * train takes byte 1 (so two trains on one DIR collide, even under one launch), then
 * accepts a holder of byte 0 only when the file names the launch of its environment
 * (srun's and mpirun's local ranks inherit it; they are not launch's descendants under
 * Slurm), or, without the variable, when the holder is its ancestor on this host.
 * POSIX locks are per process: any close of another descriptor of the same file in the
 * holder drops them, so a holder keeps the file open and does not open it elsewhere. */
#ifndef DTRAIN_RUNLOCK_H
#define DTRAIN_RUNLOCK_H

#include <stddef.h>

#include "dtrain/error.h"

#define DT_RUNLOCK_ENV "DTRAIN_LAUNCH_LOCK"

typedef struct dt_runlock {
    int fd;        /* the lock file's descriptor; -1: none held */
    char who[160]; /* supervisor locks: "PID HOST START", the value of DT_RUNLOCK_ENV */
} dt_runlock;

/* Locks fd (open for writing) whole. what: the thing named in the refusal ("--log
 * L.jsonl"), policy: why it is refused ("one run per log"). 0 when locked; -1 with the
 * one-line refusal. */
int dt_runlock_fd(int fd, const char *what, const char *policy, dt_error *err);

/* Creates (if need be) and locks the lock file path whole, writing our identity in it
 * for people; l->fd stays open until dt_runlock_release. As dt_runlock_fd otherwise. */
int dt_runlock_file(dt_runlock *l, const char *path, const char *what, const char *policy,
                    dt_error *err);

/* A checkpoint folder's supervisor (launch): bytes 0 and 1 of path at once, our
 * identity written into the file and l->who, then byte 1 released for the job. */
int dt_runlock_supervise(dt_runlock *l, const char *path, const char *what, const char *policy,
                         dt_error *err);

/* A checkpoint folder's writer (train): byte 1 of path; byte 0 may be held only by the
 * supervisor named in DT_RUNLOCK_ENV (or an ancestor of ours, on this host). */
int dt_runlock_job(dt_runlock *l, const char *path, const char *what, const char *policy,
                   dt_error *err);

/* Releases the lock (the file stays: removing it would race a new holder). */
void dt_runlock_release(dt_runlock *l);

#endif
