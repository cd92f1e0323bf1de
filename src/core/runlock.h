/* One run per file or folder: a POSIX write lock (fcntl F_SETLK) on an open file,
 * which the kernel releases however the holder ends (even by SIGKILL). `launch`, and
 * `train` on its --checkpoint DIR, lock DIR/.launch.lock; `scale` its --out DIR
 * (DIR/.scale.lock); `train` its --log file itself, through the descriptor it writes
 * with, so no lock file sits beside a log. A second process is refused in one line
 * naming the holder's pid and command ("ck is in use by another dtrain launch (pid
 * 4242): one run per checkpoint directory; wait for it to end or stop it"). A lock
 * held by an ancestor of this process counts as this process's own: launch holds its
 * job's DIR for the job's train, which must not refuse its own supervisor. POSIX locks
 * are per process: any close of another descriptor of the same file in the holder
 * drops them, so a holder keeps the file open and does not open it elsewhere. */
#ifndef DTRAIN_RUNLOCK_H
#define DTRAIN_RUNLOCK_H

#include "dtrain/error.h"

typedef struct dt_runlock {
    int fd; /* the lock file's descriptor; -1: none held here (none taken, or an ancestor's) */
} dt_runlock;

/* Locks fd (open for writing). what: the thing named in the refusal ("--log L.jsonl"),
 * policy: why it is refused ("one run per log"). 0 when locked here or held by an
 * ancestor (*by_ancestor set, if not NULL); -1 with the one-line refusal. */
int dt_runlock_fd(int fd, const char *what, const char *policy, int *by_ancestor, dt_error *err);

/* Creates (if need be) and locks the lock file path, writing our pid in it for people;
 * l->fd stays open until dt_runlock_release. As dt_runlock_fd otherwise. */
int dt_runlock_file(dt_runlock *l, const char *path, const char *what, const char *policy,
                    dt_error *err);
/* Releases the lock (the file stays: removing it would race a new holder). */
void dt_runlock_release(dt_runlock *l);

#endif
